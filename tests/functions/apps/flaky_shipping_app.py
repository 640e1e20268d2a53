"""Busbar's function app whose shipping "database" fails as a test tells it (``test_retry_path``).

The test's failure is injected where a real handler would meet it: in the journal the sample handlers note
each event in, inside the worker process. For an order the test names in ``<BUSBAR_TEST_FLAKY_DIR>/<order>
.failures`` (a count), each shipping attempt is appended to ``<order>.attempts`` (its delivery count) and the
first ``count`` attempts raise ``ConnectionError``, as a database that is down would. Other orders and
endpoints are noted as by the app itself.
"""

from __future__ import annotations

import os
from pathlib import Path

from app.endpoints.sample import JOURNAL
from app.probe import append_line
from function_app import app
from shared.handlers import HandlerContext

FLAKY_DIR = "BUSBAR_TEST_FLAKY_DIR"  # set by tests/functions/test_retry_path.py

_note = JOURNAL.note


def _flaky_note(endpoint: str, contract: str, key: str, context: HandlerContext) -> None:
    failures = Path(os.environ[FLAKY_DIR]) / f"{key}.failures"
    if endpoint == "shipping" and failures.exists():
        attempts = failures.with_suffix(".attempts")
        append_line(attempts, f"{context.incoming.delivery_count}\n")
        if len(attempts.read_text().splitlines()) <= int(failures.read_text()):
            raise ConnectionError("the shipping database is unavailable")
    _note(endpoint, contract, key, context)


setattr(JOURNAL, "note", _flaky_note)  # noqa: B010 (mypy refuses assigning to a method)

__all__ = ["app"]
