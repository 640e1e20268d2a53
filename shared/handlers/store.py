"""What a handler keeps: rows of its own, written together with the record that the message was handled.

``context.store`` reads and writes named rows (JSON objects) in the handled message's partition: the
partition of its ordering key (its ``SessionId``; the message id when it has none). Reads see the table as it
is plus what the handlers wrote so far; writes are staged and committed in one transaction with the
endpoint's record of the message id and its outgoing messages (:mod:`shared.idempotency`), so a message's
effects are committed once or not at all, however often it is delivered::

    @billing.handles(OrderAccepted)
    def invoice(event: OrderAccepted, context: HandlerContext) -> None:
        if context.store.get("invoice") is None:
            context.store.put("invoice", {"order_id": event.order_id, "amount": event.amount})
            context.publish(InvoiceIssued(...))
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

MAX_ROW_NAME = 200
"""Row names become part of a table row key (at most 1 KiB), with room for Busbar's prefix."""

Reader = Callable[[str], dict[str, Any] | None]


class StoreError(ValueError):
    """A row name or value the store cannot keep."""


class HandlerStore:
    """The handled message's partition, as its handlers see it (staged writes over ``read``)."""

    def __init__(self, read: Reader | None = None) -> None:
        self._read = read
        self._writes: dict[str, dict[str, Any]] = {}

    def get(self, name: str) -> dict[str, Any] | None:
        """The row ``name`` as the handlers left it, else as stored, else None."""
        _check_name(name)
        if name in self._writes:
            return dict(self._writes[name])
        return None if self._read is None else self._read(name)

    def put(self, name: str, data: Mapping[str, Any]) -> None:
        """Write the row ``name`` (replacing it) when the message's handling commits."""
        _check_name(name)
        try:
            json.dumps(dict(data), allow_nan=False)
        except (TypeError, ValueError) as error:
            raise StoreError(f"row {name!r} is not a JSON object: {error}") from None
        self._writes[name] = dict(data)

    @property
    def writes(self) -> dict[str, dict[str, Any]]:
        """The rows the handlers wrote, by name."""
        return dict(self._writes)


def _check_name(name: str) -> None:
    if not name or len(name) > MAX_ROW_NAME or not name.isprintable():
        raise StoreError(f"a row name must be 1-{MAX_ROW_NAME} printable characters, got {name!r}")
