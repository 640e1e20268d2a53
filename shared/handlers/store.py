"""What a handler keeps: rows of its own, written together with the record that the message was handled.

``context.store`` reads and writes named rows (JSON objects) in the handled message's partition: the
partition of its ordering key (its ``SessionId``; the message id when it has none). Reads see the table as it
is plus what the handlers wrote so far; writes are staged and committed in one transaction with the
endpoint's record of the message id and its outgoing messages (:mod:`shared.idempotency`), so a message's
effects are committed once or not at all, however often it is delivered. A row read and then written
commits only if no other message changed it meanwhile (else the message is retried and its handlers see
the new row)::

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

RowVersion = tuple[dict[str, Any] | None, str | None]
"""A row as read: its data (None: absent) and its version (the table's ETag; None: absent)."""
Reader = Callable[[str], RowVersion]


class StoreError(ValueError):
    """A row name or value the store cannot keep."""


class HandlerStore:
    """The handled message's partition, as its handlers see it (staged writes over ``read``)."""

    def __init__(self, read: Reader | None = None) -> None:
        self._read = read
        self._writes: dict[str, dict[str, Any]] = {}
        self._versions: dict[str, str | None] = {}

    def get(self, name: str) -> dict[str, Any] | None:
        """The row ``name`` as the handlers left it, else as stored, else None."""
        _check_name(name)
        if name in self._writes:
            return dict(self._writes[name])
        if self._read is None:
            return None
        data, version = self._read(name)
        self._versions.setdefault(name, version)
        return data

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

    @property
    def versions(self) -> dict[str, str | None]:
        """The version of each row as the handlers first read it (None: it was absent). A row written after
        it was read commits only if it is still at that version (optimistic concurrency: two messages of
        one partition handled at once cannot both act on "no invoice yet"); the other is retried."""
        return dict(self._versions)


def _check_name(name: str) -> None:
    if not name or len(name) > MAX_ROW_NAME or not name.isprintable():
        raise StoreError(f"a row name must be 1-{MAX_ROW_NAME} printable characters, got {name!r}")
