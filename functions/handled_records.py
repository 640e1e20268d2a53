"""The daily purge of handled-message records past their retention (``BUSBAR_HANDLED_RETENTION_DAYS``).

Thin: :meth:`shared.idempotency.records.HandledRecords.purge` does the work. Once a day (03:30 UTC) is
enough: a record outliving its retention by a day costs a few hundred bytes, and each purge scans the table.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import azure.functions as func

from app import runtime
from shared.idempotency.records import retention

bp = func.Blueprint()  # type: ignore[no-untyped-call]
log = logging.getLogger(__name__)


@bp.function_name("purge_handled_records")
@bp.timer_trigger(arg_name="timer", schedule="0 30 3 * * *", run_on_startup=False, use_monitor=True)
def purge_handled_records(timer: func.TimerRequest) -> None:
    """Delete the records of messages handled longer ago than the retention."""
    env = runtime.environment()
    cutoff = datetime.now(UTC) - retention(env)
    count = runtime.handled_records(env).purge(cutoff)
    log.info("purged %d handled-message record(s) older than %s", count, cutoff.isoformat())
