"""The audit of one re-drive run: counts per entity, reason and outcome, plus errors and archive files."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared.redrive.decision import Outcome

NO_REASON = "(none)"


@dataclass(slots=True)
class RunSummary:
    """What a run did. ``counts[entity][reason][outcome]`` and ``decisions[entity][decision]`` are numbers
    of messages; ``stop_reason`` is ``drained``, ``max-messages`` or ``time-budget``."""

    run_id: str
    started_at: datetime
    dry_run: bool = False
    finished_at: datetime | None = None
    stop_reason: str = "drained"
    counts: dict[str, dict[str, Counter[str]]] = field(default_factory=dict)
    decisions: dict[str, Counter[str]] = field(default_factory=dict)
    errors: list[dict[str, str]] = field(default_factory=list)
    archive_files: list[str] = field(default_factory=list)
    archived_bytes: int = 0
    summary_path: str | None = None

    def record(
        self, entity: str, reason: str | None, outcome: Outcome, decision: str, count: int = 1
    ) -> None:
        """Count ``count`` messages of ``entity`` dead-lettered for ``reason`` that ended in ``outcome``."""
        by_reason = self.counts.setdefault(entity, {})
        by_reason.setdefault(reason or NO_REASON, Counter())[outcome.value] += count
        self.decisions.setdefault(entity, Counter())[decision] += count

    def error(self, entity: str, message: str) -> None:
        """Note an error that kept messages of ``entity`` in its dead-letter queue."""
        self.errors.append({"entity": entity, "error": message})

    def totals(self) -> dict[str, int]:
        """Messages per outcome over the whole run (every outcome present, zero if none)."""
        total: Counter[str] = Counter({outcome.value: 0 for outcome in Outcome})
        for by_reason in self.counts.values():
            for counter in by_reason.values():
                total.update(counter)
        return dict(total)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what the CLI prints and the run writes next to the archive)."""
        return {
            "run_id": self.run_id,
            "dry_run": self.dry_run,
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "stop_reason": self.stop_reason,
            "totals": self.totals(),
            "entities": {
                entity: {reason: dict(counter) for reason, counter in sorted(by_reason.items())}
                for entity, by_reason in sorted(self.counts.items())
            },
            "decisions": {entity: dict(counter) for entity, counter in sorted(self.decisions.items())},
            "errors": list(self.errors),
            "archive_files": list(self.archive_files),
            "archived_bytes": self.archived_bytes,
        }
