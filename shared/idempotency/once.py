"""Handling a message once per endpoint: the record decides, the handlers' effects commit with it.

1. The endpoint's record of the message id is read. Found: the message was handled; its outgoing messages
   are dispatched if the record says they were not yet (a crash between commit and dispatch), and the
   message is completed without running the handlers.
2. Not found: the handlers run against their rows (``context.store``, read through to the table); on
   success the record (with the outgoing messages) and the rows they wrote commit in one transaction.
3. Committed: the outgoing messages are dispatched, then the record is marked dispatched. The commit
   failing because the record exists means another copy of the message committed first: this copy's
   effects are discarded, and the record's outgoing messages are dispatched if they were not yet.

Storage unreachable (any error talking to it, marking the record dispatched included): the message is
retried (abandoned), never completed unhandled; the log says so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from azure.core.exceptions import AzureError

from shared.handlers.dispatch import Complete, Outcome, Retry
from shared.handlers.endpoints import Endpoint
from shared.handlers.store import HandlerStore
from shared.idempotency.outbox import outbox_json, outcome_from_json
from shared.idempotency.records import HandledRecord, HandledRecords, RowChanged, partition_of
from shared.messages import IncomingMessage

log = logging.getLogger(__name__)

STORAGE = "busbar.handled-records"
"""The "handler" a storage failure is reported as (the message is retried)."""

Dispatch = Callable[[Complete], None]
"""Sends a completed outcome's outgoing messages (:func:`shared.handlers.outgoing.dispatch_outgoing`)."""


def handle_once(
    endpoint: Endpoint, message: IncomingMessage, records: HandledRecords, dispatch: Dispatch
) -> tuple[Outcome, bool]:
    """``message``'s outcome at ``endpoint`` and whether its handlers ran now (False: handled before)."""
    if not message.message_id:  # nothing to recognise a copy by: handled as it comes
        outcome = endpoint.dispatcher().dispatch(message)
        if isinstance(outcome, Complete) and outcome.outgoing:
            dispatch(outcome)
        return outcome, True
    partition = partition_of(endpoint.name, message)
    try:
        found = records.get(partition, message.message_id)
        if found is not None:
            return _handled_before(endpoint, found, records, dispatch), False
        store = HandlerStore(lambda name: records.read_versioned(partition, name))
        outcome = endpoint.dispatcher().dispatch(message, store)
        if not isinstance(outcome, Complete):
            return outcome, True
        record = HandledRecord(
            endpoint.name, partition, message.message_id, outbox_json(outcome, endpoint.contracts)
        )
        if not records.commit(record, outcome.writes, outcome.read_versions):
            log.warning(
                "%s: another copy of message %s committed first; this copy's effects are discarded",
                endpoint.name,
                message.message_id,
            )
            twin = records.get(partition, message.message_id)
            assert twin is not None
            return _handled_before(endpoint, twin, records, dispatch), False
    except RowChanged as conflict:
        # Another message of the partition changed a row these handlers read: their effects are discarded
        # and the message is retried, its handlers then seeing the row as it is now.
        log.warning("%s: message %s will be retried: %s", endpoint.name, message.message_id, conflict)
        return Retry(conflict, STORAGE), True
    except AzureError as error:
        return _unreachable(endpoint, message, error), False
    if outcome.outgoing:
        dispatch(outcome)
    try:
        records.mark_dispatched(record)
    except AzureError as error:
        # Committed and dispatched, not marked: the retry finds the record and dispatches again, the same
        # ids (the broker drops them inside its window; past it the receivers' records do).
        return _unreachable(endpoint, message, error), True
    return outcome, True


def _unreachable(endpoint: Endpoint, message: IncomingMessage, error: AzureError) -> Retry:
    log.error(
        "%s: storage unreachable for message %s, which will be retried: %s: %s",
        endpoint.name,
        message.message_id,
        type(error).__name__,
        error,
    )
    return Retry(error, STORAGE)


def _handled_before(
    endpoint: Endpoint, record: HandledRecord, records: HandledRecords, dispatch: Dispatch
) -> Complete:
    outcome = outcome_from_json(record.outbox, endpoint.contracts)
    if not record.dispatched:
        if outcome.outgoing:
            dispatch(outcome)
        records.mark_dispatched(record)
    return Complete(outcome.event_type, ())
