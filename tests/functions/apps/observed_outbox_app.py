"""Busbar's function app, observed and faulted at the outbox's edges (``test_no_duplicate_side_effects``).

Everything happens in the worker process, where the handlers run, and is steered through files in
``<BUSBAR_TEST_OUTBOX_DIR>``; orders and message ids the test does not name are handled as by the app itself.

- **Deliveries.** Every message an endpoint takes through :func:`~shared.idempotency.once.handle_once` is
  appended to ``deliveries.jsonl`` (endpoint, message id, delivery count, whether its handlers ran now, the
  outcome): a test sees a copy the broker delivered even when its handlers did not run.
- **Dies after dispatch.** ``<message id>.die-after-dispatch``: when the endpoint has dispatched that
  message's outgoing messages and is about to mark its record dispatched, the worker process exits at once
  (``os._exit``), as a process killed there would; the file is removed first, so the restarted worker lives.
- **Storage fails after dispatch.** ``<message id>.fail-mark``: marking that record dispatched raises the
  error the Tables SDK raises when the storage account cannot be reached, once.
- **Gate.** ``<order>.gate``: billing's handler, for that order, notes each entry in ``<order>.entered``
  and then waits until ``<order>.release`` exists, so two copies can be held inside the handler together.
Each point reached is noted in ``<message id>.marks`` (one line per call of ``mark_dispatched``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from azure.core.exceptions import ServiceRequestError

import shared.handlers.subscriber as subscriber
from app.endpoints.sample import JOURNAL
from app.probe import append_line
from function_app import app
from shared.handlers import HandlerContext
from shared.handlers.dispatch import Outcome
from shared.handlers.endpoints import Endpoint
from shared.idempotency.once import Dispatch, handle_once
from shared.idempotency.records import HandledRecord, HandledRecords
from shared.messages import IncomingMessage

OUTBOX_DIR = "BUSBAR_TEST_OUTBOX_DIR"  # set by tests/functions/test_no_duplicate_side_effects.py
GATE_SECONDS = 120.0  # a gate the test never opens lets the handler go rather than hang the worker

_handle_once = handle_once
_mark_dispatched = HandledRecords.mark_dispatched
_note = JOURNAL.note


def _dir() -> Path:
    return Path(os.environ[OUTBOX_DIR])


def _observed_handle_once(
    endpoint: Endpoint, message: IncomingMessage, records: HandledRecords, dispatch: Dispatch
) -> tuple[Outcome, bool]:
    entry = {"endpoint": endpoint.name, "message_id": message.message_id, "delivery": message.delivery_count}
    try:
        outcome, ran = _handle_once(endpoint, message, records, dispatch)
    except BaseException as error:
        append_line(_dir() / "deliveries.jsonl", json.dumps({**entry, "raised": type(error).__name__}) + "\n")
        raise
    line = {**entry, "ran": ran, "outcome": type(outcome).__name__}
    append_line(_dir() / "deliveries.jsonl", json.dumps(line) + "\n")
    return outcome, ran


def _faulty_mark_dispatched(self: HandledRecords, record: HandledRecord) -> None:
    append_line(_dir() / f"{record.message_id}.marks", f"{record.endpoint}\n")
    die = _dir() / f"{record.message_id}.die-after-dispatch"
    if die.exists():
        die.unlink()
        os._exit(1)  # the process dies between the dispatch and the mark, as under kill -9
    fail = _dir() / f"{record.message_id}.fail-mark"
    if fail.exists():
        fail.unlink()
        raise ServiceRequestError("the storage account cannot be reached (injected by the test)")
    _mark_dispatched(self, record)


def _gated_note(endpoint: str, contract: str, key: str, context: HandlerContext, detail: str = "") -> None:
    gate = _dir() / f"{key}.gate"
    if endpoint == "billing" and gate.exists():
        append_line(gate.with_suffix(".entered"), f"{context.message_id} {context.incoming.delivery_count}\n")
        deadline = time.monotonic() + GATE_SECONDS
        while not gate.with_suffix(".release").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    _note(endpoint, contract, key, context, detail)


setattr(subscriber, "handle_once", _observed_handle_once)  # noqa: B010 (the subscriber's own name for it)
setattr(HandledRecords, "mark_dispatched", _faulty_mark_dispatched)  # noqa: B010
setattr(JOURNAL, "note", _gated_note)  # noqa: B010 (mypy refuses assigning to a method)

__all__ = ["app"]
