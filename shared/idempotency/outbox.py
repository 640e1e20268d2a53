"""A handled message's outcome as the record keeps it: what to dispatch, without the handlers.

The record holds the outgoing events as contract name and JSON body (and a send's destination) with the
correlation carried over, so dispatching it later (after a crash between commit and dispatch, or for a copy
whose twin committed first) sends exactly what the handlers produced the first time.
"""

from __future__ import annotations

import json
from typing import Any

from shared.contracts import ContractRegistry
from shared.handlers.context import Outgoing, OutgoingPublish, OutgoingSend
from shared.handlers.dispatch import Complete


def outbox_json(outcome: Complete, contracts: ContractRegistry) -> bytes:
    """``outcome``'s dispatchable part as JSON; every outgoing contract is registered in ``contracts`` (so
    :func:`outcome_from_json` can read it back in this process or another with the same code)."""
    items: list[dict[str, Any]] = []
    for item in outcome.outgoing:
        event = item.event if isinstance(item, OutgoingPublish) else item.message
        contracts.register(type(event))
        entry: dict[str, Any] = {
            "contract": type(event).contract_name,
            "body": event.model_dump(mode="json", by_alias=True),
        }
        if isinstance(item, OutgoingSend):
            entry["destination"] = item.destination
        items.append(entry)
    document = {
        "eventType": outcome.event_type,
        "handlers": list(outcome.handlers),
        "outgoing": items,
        "correlationId": outcome.correlation_id,
        "conversationId": outcome.conversation_id,
        "headers": dict(outcome.headers),
    }
    return json.dumps(document, separators=(",", ":")).encode("utf-8")


def outcome_from_json(raw: bytes, contracts: ContractRegistry) -> Complete:
    """The :class:`Complete` an :func:`outbox_json` document describes (no rows: they are committed)."""
    document = json.loads(raw)
    outgoing: list[Outgoing] = []
    for entry in document["outgoing"]:
        event = contracts.resolve(entry["contract"]).model_validate(entry["body"])
        destination = entry.get("destination")
        outgoing.append(OutgoingSend(destination, event) if destination else OutgoingPublish(event))
    return Complete(
        document["eventType"],
        tuple(document["handlers"]),
        tuple(outgoing),
        document.get("correlationId"),
        document.get("conversationId"),
        dict(document.get("headers") or {}),
    )
