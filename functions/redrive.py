"""The dead-letter re-drive timer function (issue 9): thin, all logic is in :mod:`shared.redrive`.

Registered by ``function_app.py`` with ``app.register_functions(redrive.bp)``. The schedule is the app
setting ``BUSBAR_REDRIVE_SCHEDULE`` (NCronTab, default every 5 minutes). The Functions host runs a timer
function as a singleton and never retries it, so each run is bounded (message and time budgets) and
resumable: whatever it does not finish stays in the dead-letter queues for the next run.
"""

from __future__ import annotations

import json
import logging

import azure.functions as func

from shared.redrive.job import RunInProgress, run_redrive

FUNCTION_NAME = "redrive_dead_letters"

bp = func.Blueprint()  # type: ignore[no-untyped-call]
log = logging.getLogger(__name__)


@bp.function_name(FUNCTION_NAME)
@bp.timer_trigger(
    arg_name="timer", schedule="%BUSBAR_REDRIVE_SCHEDULE%", run_on_startup=False, use_monitor=True
)
def redrive_dead_letters(timer: func.TimerRequest) -> None:
    """Run one re-drive over every configured dead-letter queue and log its summary."""
    if timer.past_due:
        log.info("re-drive timer is past due; running now")
    try:
        summary = run_redrive()
    except RunInProgress as busy:  # the console's retry or archive is working the queues right now
        log.info("re-drive skipped: %s", busy)
        return
    totals = summary.totals()
    log.info("re-drive run %s: %s", summary.run_id, json.dumps(summary.to_dict(), sort_keys=True))
    if summary.errors or totals["failed"]:
        # Nothing is lost (failed messages stay dead-lettered), but an operator should look.
        log.warning(
            "re-drive run %s: %d failed, errors: %s", summary.run_id, totals["failed"], summary.errors
        )
