"""What the failure archive holds, for the console: archived messages by day, endpoint and reason, and the
command lines that replay a selection with the Spark job (dry run first). Reads the Parquet files with
pyarrow (:func:`shared.archive.reader.read_archive`); an archive that does not exist yet is empty."""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Mapping
from typing import Any

from shared.archive.reader import read_archive

# pyspark is installed in the checkout's virtualenv only; a bare `python` has no Spark.
REPLAY_PYTHON = ".venv/bin/python"
# The job parameters naming the namespace whose duplicate detection the job reads, and their app settings.
NAMESPACE_PARAMETERS = (
    ("--subscription_id", "BUSBAR_SUBSCRIPTION_ID"),
    ("--resource_group", "BUSBAR_RESOURCE_GROUP"),
    ("--namespace", "BUSBAR_NAMESPACE"),
)


def replay_commands(
    archive_url: str, reason: str | None, entity: str | None, settings: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The replay job's command lines for one selection: a dry run, then the real run, to run from the
    checkout. They name the app's namespace (from ``settings``, the app's) because the job requires it; the
    connection and the management endpoint come from local.settings.json and the running ``make run``."""
    parts = [REPLAY_PYTHON, "-m", "spark.replay", "--archive_path", archive_url]
    parts += ["--ledger_path", ".data/replay/ledger", "--report_path", ".data/replay/reports"]
    for option, name in NAMESPACE_PARAMETERS:
        value = (settings or {}).get(name, "").strip()
        if value:
            parts += [option, value]
    if entity:
        parts += ["--source_entities", entity]
    if reason:
        parts += ["--reasons", reason]
    command = shlex.join(parts)
    return {"dryRun": f"{command} --dry_run", "run": command}


def archive_view(
    url: str, storage_options: Mapping[str, Any] | None = None, settings: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Counts by (day, source entity, endpoint, reason), newest day first, with the replay command lines
    (``settings``: the app's, which name its namespace)."""
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
            "replay": replay_commands(url, reason or None, entity, settings),
        }
        for (day, entity, endpoint, reason), count in ordered
    ]
    return {
        "url": url,
        "total": len(rows),
        "groups": entries,
        "replayAll": replay_commands(url, None, None, settings),
    }
