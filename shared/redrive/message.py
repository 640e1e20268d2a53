"""A dead-lettered message as the re-drive sees it: an :class:`~shared.envelope.Envelope` with typed
application properties and the entity it came from. Pure: read from the SDK by
:func:`shared.redrive.received.from_received`, archived by :func:`shared.redrive.received.archive_row`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from shared.archive.properties import PropertyValue
from shared.contracts import ENCLOSED_MESSAGE_TYPES
from shared.envelope import Envelope
from shared.redrive.entities import EntityRef

REDRIVE_PREFIX = "busbar.redrive."
REDRIVE_COUNT = "busbar.redrive.count"
REDRIVE_AT = "busbar.redrive.at"
DEAD_LETTER_PROPERTIES = ("DeadLetterReason", "DeadLetterErrorDescription")
"""Broker-set properties that describe the *previous* failure; they never travel on a re-driven copy."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadLetter(Envelope):
    """A message received from a dead-letter queue (the settlement handle stays with the runner)."""

    source: EntityRef
    sequence_number: int
    body: bytes | None  # None: not an AMQP data body (value or sequence), which is never re-sent
    body_type: str
    application_properties: Mapping[str, PropertyValue]

    @property
    def redrive_count(self) -> int:
        """How many times Busbar has re-driven this message before (``busbar.redrive.count``)."""
        value = self.application_properties.get(REDRIVE_COUNT)
        if isinstance(value, bool) or not isinstance(value, int | str):
            return 0
        try:
            return max(0, int(value))
        except ValueError:
            return 0

    @property
    def last_redrive_at(self) -> datetime | None:
        """When Busbar last sent a copy of this message (``busbar.redrive.at``), if it did."""
        value = self.application_properties.get(REDRIVE_AT)
        if isinstance(value, datetime):
            return value if value.tzinfo else value.replace(tzinfo=UTC)
        if isinstance(value, int) and not isinstance(value, bool):
            # Epoch milliseconds: how uamqp (a Functions trigger's message) and archive rows written before
            # types were recorded hand an AMQP timestamp back; Busbar's receivers give a datetime.
            return datetime.fromtimestamp(value / 1000, UTC)
        return None

    @property
    def contract_type(self) -> str | None:
        """The first NServiceBus enclosed message type, if the message names one."""
        value = self.application_properties.get(ENCLOSED_MESSAGE_TYPES)
        if not isinstance(value, str) or not value.strip():
            return None
        return value.split(";", 1)[0].strip() or None
