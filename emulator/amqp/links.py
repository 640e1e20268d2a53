"""Links of one AMQP session: the broker's receiving end of a client sender, and its sending end of a
client receiver (which is also a consumer of a message queue)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emulator.amqp.frames import TRANSFER, FlowField, field, frame
from emulator.broker import errors
from emulator.broker.message import StoredMessage
from emulator.broker.queue import MessageQueue
from emulator.broker.sessions import SessionState
from shared.amqp.encoding.types import UInt

if TYPE_CHECKING:
    from emulator.amqp.session import Session

# Credit the broker grants a client sender; the SDK ignores it and tops itself up, but a correct grant
# keeps other AMQP clients moving.
SENDER_CREDIT = 5000


class Link:
    """State shared by both link directions."""

    def __init__(self, session: Session, name: str, handle: int, source: Any, target: Any) -> None:
        self.session = session
        self.name = name
        self.handle = handle
        self.source = source
        self.target = target
        self.address = ""
        self.detached = False


class IncomingLink(Link):
    """The broker receives on this link: a client sender to an entity, or requests to a node."""

    def __init__(self, session: Session, name: str, handle: int, source: Any, target: Any) -> None:
        super().__init__(session, name, handle, source, target)
        self.delivery_count = 0
        self.credit = SENDER_CREDIT
        self.entity_path = ""
        self.node: str | None = None  # "$cbs", "$management", or None for an entity
        self.max_message_size = 0
        # Reassembly of a multi-frame delivery.
        self.partial: bytearray | None = None
        self.partial_id: int | None = None
        self.partial_format = 0
        self.partial_settled = False
        self.discarded: int | None = None  # bytes skipped of a delivery over the size limit

    def flow_fields(self) -> list[Any]:
        s = self.session
        return [
            UInt(s.next_incoming_id),
            UInt(s.incoming_window),
            UInt(s.next_outgoing_id),
            UInt(s.outgoing_window),
            UInt(self.handle),
            UInt(self.delivery_count),
            UInt(self.credit),
        ]

    def received(self) -> None:
        """Account for one delivery; re-grant credit before the client could run dry."""
        self.delivery_count = (self.delivery_count + 1) & 0xFFFFFFFF
        self.credit -= 1
        if self.credit < SENDER_CREDIT // 2:
            self.credit = SENDER_CREDIT
            self.session.send_flow(self.flow_fields())


class OutgoingLink(Link):
    """The broker sends on this link: deliveries of a queue to a client receiver, or node responses."""

    def __init__(self, session: Session, name: str, handle: int, source: Any, target: Any) -> None:
        super().__init__(session, name, handle, source, target)
        self.delivery_count = 0
        self.link_credit = 0
        self.receive_and_delete = False
        self.queue: MessageQueue | None = None
        # The message session this receiver holds (session-enabled entities only).
        self.message_session: SessionState | None = None

    # Consumer protocol -----------------------------------------------------------------------------

    def credit(self) -> int:
        return 0 if self.detached or self.session.closed else self.link_credit

    def session_lost(self) -> None:
        """The session lock expired: detach with the error the SDK raises as SessionLockLostError."""
        lost = self.message_session
        self.message_session = None
        if self.detached or lost is None:
            return
        self.session.detach_link(
            self,
            errors.SESSION_LOCK_LOST,
            f"The session lock has expired on the MessageSession. Session: '{lost.session_id}'.",
        )

    def entity_deleted(self) -> None:
        """The entity was deleted: detach with the error Azure gives for an entity that does not exist
        (``amqp:not-found``), which the SDK raises as ``MessagingEntityNotFoundError``."""
        if self.detached or self.queue is None:
            return
        gone = errors.entity_not_found(self.queue.path, self.session.namespace.name)
        self.session.detach_link(self, gone.condition, gone.description)

    def deliver(self, message: StoredMessage, settled: bool) -> None:
        if settled:
            payload = message.encode_for_delivery(over_link=True)
            tag = b""  # a settled delivery is never referred to again; Azure's tag is empty (the SDK: None)
        else:
            token = message.lock_token
            assert token is not None and self.queue is not None
            payload = message.encode_for_delivery(
                locked_until_ms=message.locked_until_ms, lock_token=token, over_link=True
            )
            tag = token.bytes_le  # the SDK reads the lock token as a .NET GUID from the tag
        delivery_id = self.send_transfer(tag, payload, settled)
        if not settled:
            assert message.lock_token is not None and self.queue is not None
            self.session.unsettled[delivery_id] = (self.queue, message.lock_token)

    # ---------------------------------------------------------------------------------------------

    def send_transfer(self, tag: bytes, payload: bytes, settled: bool) -> int:
        """Send one delivery, split into frames that fit the client's max frame size."""
        session = self.session
        delivery_id = session.next_outgoing_id
        session.next_outgoing_id = (delivery_id + 1) & 0xFFFFFFFF
        self.delivery_count = (self.delivery_count + 1) & 0xFFFFFFFF
        self.link_credit -= 1
        channel = session.channel
        handle = UInt(self.handle)
        first = [handle, UInt(delivery_id), tag, UInt(0), settled, False]
        chunk = session.connection.max_payload(len(tag))
        if len(payload) <= chunk:
            session.connection.write(frame(channel, TRANSFER, first, payload))
            return delivery_id
        frames: list[bytes] = []
        offset = 0
        while offset < len(payload):
            piece = payload[offset : offset + chunk]
            offset += len(piece)
            more = offset < len(payload)
            fields = (
                [handle, UInt(delivery_id), tag, UInt(0), settled, more]
                if not frames
                else [handle, None, None, None, settled, more]
            )
            frames.append(frame(channel, TRANSFER, fields, piece))
        session.connection.write(b"".join(frames))
        return delivery_id

    def on_flow(self, fields: list[Any]) -> None:
        """Apply a client flow: absolute credit relative to the client's view of the delivery count."""
        remote_count = field(fields, FlowField.DELIVERY_COUNT, 0)
        credit = field(fields, FlowField.LINK_CREDIT, 0)
        self.link_credit = (remote_count + credit - self.delivery_count) & 0xFFFFFFFF
        if self.link_credit > 0x7FFFFFFF:  # the client's count ran ahead: no credit
            self.link_credit = 0
        if self.queue is not None:
            self.queue.dispatch()
        if field(fields, FlowField.DRAIN, False):
            # Drain: consume the unused credit and tell the client.
            self.delivery_count = (self.delivery_count + max(self.link_credit, 0)) & 0xFFFFFFFF
            self.link_credit = 0
            self.session.send_flow(self.flow_fields(drain=True))
        elif field(fields, FlowField.ECHO, False):
            self.session.send_flow(self.flow_fields())

    def flow_fields(self, drain: bool = False) -> list[Any]:
        s = self.session
        return [
            UInt(s.next_incoming_id),
            UInt(s.incoming_window),
            UInt(s.next_outgoing_id),
            UInt(s.outgoing_window),
            UInt(self.handle),
            UInt(self.delivery_count),
            UInt(max(self.link_credit, 0)),
            None,
            drain,
        ]
