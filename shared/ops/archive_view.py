"""What the failure archive holds, for the console: archived messages by day, endpoint and reason, and the
command lines that replay a selection with the Spark job (dry run first). Reads the Parquet files with
pyarrow (:func:`shared.archive.reader.read_archive`); an archive that does not exist yet is empty."""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Mapping
from typing import Any

from shared.archive.reader import read_archive


def replay_commands(archive_url: str, reason: str | None, entity: str | None) -> dict[str, str]:
    """The replay job's command lines for one selection: a dry run, then the real run."""
    parts = ["python", "-m", "spark.replay", "--archive_path", archive_url]
    parts += ["--ledger_path", ".data/replay/ledger", "--report_path", ".data/replay/reports"]
    if entity:
        parts += ["--source_entities", entity]
    if reason:
        parts += ["--reasons", reason]
    command = shlex.join(parts)
    return {"dryRun": f"{command} --dry_run", "run": command}


def archive_view(url: str, storage_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Counts by (day, source entity, endpoint, reason), newest day first."""
    table = read_archive(url, storage_options)
    columns = ["archived_date", "source_entity", "target_entity", "dead_letter_reason"]
    rows = table.select(columns).to_pylist()
    counted: Counter[tuple[str, str, str, str]] = Counter(
        (
            row["archived_date"],
            row["source_entity"],
            row["target_entity"] or row["source_entity"],
            row["dead_letter_reason"] or "",
        )
        for row in rows
    )
    ordered = sorted(counted.items(), key=lambda item: (item[0][0], -item[1], item[0][1]))
    ordered.sort(key=lambda item: item[0][0], reverse=True)  # newest day first, stable within a day
    entries = [
        {
            "day": day,
            "entity": entity,
            "endpoint": endpoint,
            "reason": reason or None,
            "count": count,
            "replay": replay_commands(url, reason or None, entity),
        }
        for (day, entity, endpoint, reason), count in ordered
    ]
    return {
        "url": url,
        "total": len(rows),
        "groups": entries,
        "replayAll": replay_commands(url, None, None),
    }
