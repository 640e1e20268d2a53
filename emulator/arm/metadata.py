"""What ARM reports about an entity that the broker does not keep: creation and update times, and the
partitioning / express flags (accepted, reported and kept immutable, but without effect on the broker).

Kept per entity path next to the broker's store when the emulator has a data directory, in memory
otherwise, as a journal, ``arm-metadata.jsonl``: one JSON line appended per change, compacted (rewritten
atomically) when the emulator starts. Rewriting one whole file after every change made provisioning N entities
over ARM quadratic (3,000 queues: 20 s). A line cut short by a kill is ignored. The older single-document
``arm-metadata.json`` is read once and folded into the journal. Entities the management plane has not seen
(config-file entities, or entities from before the file existed) report the emulator's start time and no
partitioning.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from emulator.arm.models import Extras

log = logging.getLogger("emulator.arm")

FILE_NAME = "arm-metadata.jsonl"
LEGACY_FILE_NAME = "arm-metadata.json"  # one JSON document, rewritten after every change (before the journal)


@dataclass(frozen=True, slots=True)
class EntityMeta:
    created_at: datetime
    updated_at: datetime
    extras: Extras


def utc_now() -> datetime:
    return datetime.now(UTC)


class Metadata:
    """Entity metadata keyed by entity path (case-insensitive)."""

    def __init__(self, directory: Path | None, clock: Callable[[], datetime] = utc_now) -> None:
        self._clock = clock
        self.started_at = clock()
        self._directory = directory
        self._path = None if directory is None else directory / FILE_NAME
        self._entries: dict[str, EntityMeta] = self._load()
        self._compact()

    def get(self, path: str) -> EntityMeta:
        found = self._entries.get(path.lower())
        return found or EntityMeta(self.started_at, self.started_at, Extras())

    def record(self, path: str, extras: Extras, created: bool) -> EntityMeta:
        """Note that ``path`` was just created (or updated) with ``extras``."""
        now = self._clock()
        before = self.get(path)
        entry = EntityMeta(now if created else before.created_at, now, extras)
        self._entries[path.lower()] = entry
        self._append([_line(path.lower(), entry)])
        return entry

    def forget(self, path: str, with_children: bool = False) -> None:
        key = path.lower()
        prefix = key + "/"
        doomed = [k for k in self._entries if k == key or (with_children and k.startswith(prefix))]
        for k in doomed:
            del self._entries[k]
        self._append([{"path": k, "forgotten": True} for k in doomed])

    # ------------------------------------------------------------------------------------------ file

    def _load(self) -> dict[str, EntityMeta]:
        if self._directory is None or self._path is None:
            return {}
        entries = self._load_legacy(self._directory / LEGACY_FILE_NAME)
        try:
            with open(self._path, encoding="utf-8") as journal:
                lines = list(journal)
        except FileNotFoundError:
            return entries
        except OSError as exc:
            log.warning("ignoring unreadable %s: %s", self._path, exc)
            return entries
        for number, text in enumerate(lines, 1):
            try:
                item = json.loads(text)
                key = item["path"]
                if item.get("forgotten"):
                    entries.pop(key, None)
                else:
                    entries[key] = _entry(item)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                # A kill mid-append leaves a partial last line; anything else unreadable is skipped too.
                log.warning("ignoring line %d of %s: %s", number, self._path, exc)
        return entries

    @staticmethod
    def _load_legacy(path: Path) -> dict[str, EntityMeta]:
        if not path.exists():
            return {}
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            return {key: _entry(item) for key, item in raw.items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("ignoring unreadable %s: %s", path, exc)
            return {}

    def _compact(self) -> None:
        """Rewrite the journal as one line per entity (atomically), then drop the legacy file."""
        if self._directory is None or self._path is None:
            return
        self._path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self._path.with_suffix(".tmp")
        with open(temporary, "w", encoding="utf-8") as out:
            out.writelines(_text(_line(key, entry)) for key, entry in sorted(self._entries.items()))
        os.replace(temporary, self._path)
        (self._directory / LEGACY_FILE_NAME).unlink(missing_ok=True)

    def _append(self, lines: list[dict[str, object]]) -> None:
        if self._path is None or not lines:
            return
        with open(self._path, "a", encoding="utf-8") as journal:
            journal.writelines(_text(line) for line in lines)


def _line(key: str, entry: EntityMeta) -> dict[str, object]:
    return {
        "path": key,
        "createdAt": entry.created_at.isoformat(),
        "updatedAt": entry.updated_at.isoformat(),
        "enablePartitioning": entry.extras.enable_partitioning,
        "enableExpress": entry.extras.enable_express,
        "authorizationRules": entry.extras.authorization_rules,
    }


def _text(line: dict[str, object]) -> str:
    return json.dumps(line, separators=(",", ":")) + "\n"


def _entry(item: dict[str, object]) -> EntityMeta:
    return EntityMeta(
        datetime.fromisoformat(str(item["createdAt"])),
        datetime.fromisoformat(str(item["updatedAt"])),
        Extras(
            bool(item.get("enablePartitioning")),
            bool(item.get("enableExpress")),
            str(item.get("authorizationRules") or ""),
        ),
    )
