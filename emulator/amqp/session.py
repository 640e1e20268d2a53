"""One AMQP session: link attach and detach, transfers from client senders, dispositions for deliveries,
and routing of ``$cbs`` / ``$management`` requests to their nodes."""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from emulator.amqp.frames import (
    ACCEPTED,
    ATTACH,
    DETACH,
    DISPOSITION,
    END,
    FLOW,
    MODIFIED,
    REJECTED,
    RELEASED,
    AttachField,
    DispositionField,
    FlowField,
    SourceField,
    TransferField,
    error,
    field,
    frame,
    outcome,
)
from emulator.amqp.links import IncomingLink, OutgoingLink
from emulator.broker import errors
from emulator.broker.errors import BrokerError
from emulator.broker.namespace import Namespace
from emulator.broker.queue import MessageQueue
from emulator.broker.sessions import SessionState, SessionWaiter
from emulator.encoding.message import BATCH_MESSAGE_FORMAT, split_batch
from shared.amqp.encoding.codec import DecodeError
from shared.amqp.encoding.sections import ParsedMessage, parse_message
from shared.amqp.encoding.types import Described, Long, Symbol, UByte, UInt, ULong

if TYPE_CHECKING:
    from emulator.amqp.connection import Connection

log = logging.getLogger("emulator.amqp")

MANAGEMENT_SUFFIX = "/$management"
SESSION_FILTER = Symbol("com.microsoft:session-filter")
LOCKED_UNTIL_UTC = Symbol("com.microsoft:locked-until-utc")
TIMEOUT_PROPERTY = Symbol("com.microsoft:timeout")
DEFAULT_SESSION_WAIT_MS = 60_000
# .NET ticks (100 ns) at the Unix epoch: the SDK reads com.microsoft:locked-until-utc in ticks.
DOTNET_EPOCH_TICKS = 621_355_968_000_000_000
_SERIAL_MASK = 0xFFFFFFFF
_SERIAL_WINDOW = 0x80000000


def entity_path(address: str | None) -> str:
    """The entity path a link address names.

    ``amqps://host:port/q1/$DeadLetterQueue`` → ``q1/$DeadLetterQueue``.
    """
    if not address:
        return ""
    if "://" in address:
        address = urlsplit(address).path
    return address.strip("/")


def _address(terminus: Any) -> str | None:
    if isinstance(terminus, Described) and isinstance(terminus.value, list) and terminus.value:
        value = terminus.value[0]
        return None if value is None else str(value)
    return None


class NodeHandler(Protocol):
    """Answers requests to the ``$cbs`` and ``$management`` nodes (:class:`emulator.amqp.nodes.Nodes`)."""

    def handle(self, session: Session, link: IncomingLink, payload: memoryview) -> None:
        """One request delivered on ``link``, an incoming link attached to a node."""
        ...


class Session:
    """State of one session on a connection (the broker uses the client's channel number as its own)."""

    def __init__(self, connection: Connection, channel: int) -> None:
        self.connection = connection
        self.channel = channel
        self.next_outgoing_id = 0
        self.next_incoming_id = 0
        self.incoming_window = 0x7FFFFFFF
        self.outgoing_window = 0x7FFFFFFF
        self.links: dict[int, IncomingLink | OutgoingLink] = {}
        # delivery-id → (queue, lock token) for peek-lock deliveries the client has not settled.
        self.unsettled: dict[int, tuple[MessageQueue, uuid.UUID]] = {}
        # handle → (error condition, limit) for deliveries being read and thrown away, refused when done.
        self._discard_reasons: dict[int, tuple[str, int]] = {}
        self.closed = False

    @property
    def namespace(self) -> Namespace:
        return self.connection.server.namespace

    def send_flow(self, fields: list[Any]) -> None:
        self.connection.write(frame(self.channel, FLOW, fields))

    # ------------------------------------------------------------------------------------------ attach

    def on_attach(self, fields: list[Any]) -> None:
        name = str(field(fields, AttachField.NAME, ""))
        handle = int(field(fields, AttachField.HANDLE, 0))
        role_receiver = bool(field(fields, AttachField.ROLE, False))
        source = field(fields, AttachField.SOURCE)
        target = field(fields, AttachField.TARGET)
        if handle in self.links:
            self.connection.close_with_error(
                "amqp:session:handle-in-use", f"handle {handle} is already attached"
            )
            return
        link: IncomingLink | OutgoingLink
        if role_receiver:
            link = OutgoingLink(self, name, handle, source, target)
            link.address = _address(source) or ""
        else:
            link = IncomingLink(self, name, handle, source, target)
            link.address = _address(target) or ""
        self.links[handle] = link
        try:
            pending = self._bind(link, fields)
        except BrokerError as exc:
            self._refuse(link, fields, exc)
            return
        if not pending:
            self._reply_attach(link, fields)
            if isinstance(link, OutgoingLink) and link.queue is not None:
                link.queue.attach(link)

    def _bind(self, link: IncomingLink | OutgoingLink, fields: list[Any]) -> bool:
        """Connect a link to its node or entity; raise BrokerError to refuse it.

        Returns True when the attach reply must wait (a next-available session receiver with no free
        session yet)."""
        path = entity_path(link.address)
        lowered = path.lower()
        if lowered == "$cbs":
            if isinstance(link, IncomingLink):
                link.node = "$cbs"
            return False
        if lowered.endswith(MANAGEMENT_SUFFIX):
            owner = path[: -len(MANAGEMENT_SUFFIX)]
            self.connection.authorize(owner)
            if self.namespace.send_target(owner) is None:
                self.namespace.receive_queue(owner)  # refuse a node of an entity that does not exist
            if isinstance(link, IncomingLink):
                link.node = "$management"
                link.entity_path = owner
            return False
        if not path:
            raise BrokerError(
                errors.NOT_FOUND, f"The link address '{link.address}' does not name an entity.", 404
            )
        self.connection.authorize(path)
        if isinstance(link, IncomingLink):
            target = self.namespace.entity_for(path)
            if target.send_disabled():
                raise BrokerError(
                    errors.ENTITY_DISABLED,
                    f"Messaging entity '{self.namespace.name}:{target.kind}:{target.name}' "
                    "is currently disabled for send.",
                )
            link.entity_path = path
            link.max_message_size = target.max_message_bytes
            return False
        entity, queue = self.namespace.receive_queue(path)
        if entity.receive_disabled():
            raise BrokerError(
                errors.ENTITY_DISABLED,
                f"Messaging entity '{self.namespace.name}:{entity.kind}:{entity.name}' "
                "is currently disabled for receive.",
            )
        if queue is entity.main and entity.props.forward_to:
            raise BrokerError(
                errors.NOT_ALLOWED,
                "Cannot create a message receiver on an entity with auto-forwarding enabled: "
                f"'{entity.name}'.",
            )
        link.receive_and_delete = field(fields, AttachField.SND_SETTLE_MODE, 2) == 1
        link.queue = queue
        return self._bind_session(link, queue, fields)

    def _bind_session(self, link: OutgoingLink, queue: MessageQueue, fields: list[Any]) -> bool:
        """Session receivers: lock the named session, or the next free one (waiting for one if needed)."""
        source_fields = link.source.value if isinstance(link.source, Described) else []
        filters = field(source_fields, SourceField.FILTER)
        wants_session = isinstance(filters, dict) and SESSION_FILTER in filters
        if queue.session_book is None:
            if wants_session:
                raise BrokerError(
                    errors.NOT_ALLOWED,
                    f"The entity '{queue.path}' does not require sessions; "
                    "a session receiver cannot be created.",
                )
            return False
        if not wants_session:
            raise BrokerError(
                errors.NOT_ALLOWED,
                "It is not possible for an entity that requires sessions to create a non-sessionful message "
                "receiver.",
            )
        assert isinstance(filters, dict)
        requested = filters[SESSION_FILTER]
        if requested is not None and not isinstance(requested, str):
            raise BrokerError(errors.INVALID_FIELD, errors.non_string_session_id(requested))
        if requested is not None:
            link.message_session = queue.lock_session(requested, link)
            return False
        session = queue.acquire_next_session(link)
        if session is not None:
            link.message_session = session
            return False
        properties = field(fields, AttachField.PROPERTIES, {})
        timeout_ms = (
            int(properties.get(TIMEOUT_PROPERTY, DEFAULT_SESSION_WAIT_MS))
            if isinstance(properties, dict)
            else 0
        )
        waiter = SessionWaiter(link, lambda granted: self._session_granted(link, fields, granted))
        waiter.timer = self.connection.server.namespace.call_at_ms(
            self.connection.server.namespace.now_ms() + timeout_ms,
            self._session_wait_expired,
            link,
            fields,
            waiter,
        )
        queue.wait_for_session(waiter)
        return True

    def _session_granted(self, link: OutgoingLink, fields: list[Any], granted: SessionState) -> None:
        if link.detached or self.closed:
            return
        link.message_session = granted
        self._reply_attach(link, fields)
        if link.queue is not None:
            link.queue.attach(link)
            link.queue.dispatch()

    def _session_wait_expired(self, link: OutgoingLink, fields: list[Any], waiter: SessionWaiter) -> None:
        queue = link.queue
        if queue is not None and queue.session_book is not None and waiter in queue.session_book.waiters:
            queue.session_book.waiters.remove(waiter)
        if link.detached or self.closed or link.message_session is not None:
            return
        self._refuse(
            link,
            fields,
            BrokerError(
                errors.TIMEOUT,
                "The operation did not complete within the allocated time: no session "
                "is available to accept.",
                408,
            ),
        )

    def detach_link(self, link: IncomingLink | OutgoingLink, condition: str, description: str) -> None:
        """Broker-initiated detach with an error (e.g. a session lock that expired)."""
        self.links.pop(link.handle, None)
        self._release_link(link)
        self.connection.write(
            frame(self.channel, DETACH, [UInt(link.handle), True, error(condition, description)])
        )

    def _reply_attach(
        self, link: IncomingLink | OutgoingLink, fields: list[Any], grant_credit: bool = True
    ) -> None:
        is_outgoing = isinstance(link, OutgoingLink)
        snd_settle = field(fields, AttachField.SND_SETTLE_MODE)
        rcv_settle = field(fields, AttachField.RCV_SETTLE_MODE)
        max_size = link.max_message_size if isinstance(link, IncomingLink) else 0
        source = link.source
        properties = None
        held = link.message_session if isinstance(link, OutgoingLink) else None
        if held is not None and isinstance(source, Described) and isinstance(source.value, list):
            # The SDK learns its session id from the echoed filter and the lock expiry from the properties.
            source_fields = list(source.value) + [None] * max(0, 11 - len(source.value))
            source_fields[SourceField.FILTER] = {SESSION_FILTER: held.session_id}
            source = Described(source.descriptor, source_fields)
            properties = {LOCKED_UNTIL_UTC: Long(held.locked_until_ms * 10_000 + DOTNET_EPOCH_TICKS)}
        reply: list[Any] = [
            link.name,
            UInt(link.handle),
            not is_outgoing,  # our role: receiver (True) facing a client sender
            None if snd_settle is None else UByte(snd_settle),
            None if rcv_settle is None else UByte(rcv_settle),
            source,
            link.target,
            None,
            None,
            UInt(0) if is_outgoing else None,  # the SDK requires initial-delivery-count from a sender
            ULong(max_size) if max_size else None,
            None,
            None,
            properties,
        ]
        self.connection.write(frame(self.channel, ATTACH, reply))
        if grant_credit and isinstance(link, IncomingLink):
            self.send_flow(link.flow_fields())

    def _refuse(self, link: IncomingLink | OutgoingLink, fields: list[Any], exc: BrokerError) -> None:
        """Refuse a link as AMQP prescribes: an attach with no terminus on our side, then a detach with
        the error (the SDK raises the error carried by the detach)."""
        is_outgoing = isinstance(link, OutgoingLink)
        self.connection.write(
            frame(
                self.channel,
                ATTACH,
                [
                    link.name,
                    UInt(link.handle),
                    not is_outgoing,
                    None,
                    None,
                    None if is_outgoing else link.source,
                    link.target if is_outgoing else None,
                    None,
                    None,
                    UInt(0) if is_outgoing else None,
                ],
            )
        )
        self.links.pop(link.handle, None)
        link.detached = True
        self.connection.write(
            frame(self.channel, DETACH, [UInt(link.handle), True, error(exc.condition, exc.description)])
        )

    # ------------------------------------------------------------------------------------------ detach / end

    def on_detach(self, fields: list[Any]) -> None:
        handle = int(field(fields, 0, 0))
        link = self.links.pop(handle, None)
        if link is None:
            return
        self._release_link(link)
        closed = bool(field(fields, 1, False))
        self.connection.write(frame(self.channel, DETACH, [UInt(handle), closed]))

    def _release_link(self, link: IncomingLink | OutgoingLink, graceful: bool = True) -> None:
        link.detached = True
        if isinstance(link, OutgoingLink) and link.queue is not None:
            # A receiver that closes gives its session up at once; one whose connection dropped keeps it
            # until the session lock expires ("released ... when the lock expires if the application
            # cannot close"). Either way, messages it holds stay locked until their locks expire.
            # Messages this link holds stay locked until their lock expires, as in Azure.
            link.queue.detach(link, release_session=graceful)
            self._forget_deliveries_of(link)

    def _forget_deliveries_of(self, link: OutgoingLink) -> None:
        """A detached link's deliveries can no longer be settled on the session (Azure ignores such a
        disposition), but their locks belong to the entity: they stay settleable by lock token through
        ``$management`` until they expire. The SDK falls back to exactly that when its link is gone."""
        for delivery_id, (queue, token) in list(self.unsettled.items()):
            held = queue.locks.get(token)
            if held is None or held.lock_owner is link:
                del self.unsettled[delivery_id]

    def end(self, reply: bool, graceful: bool = True) -> None:
        if self.closed:
            return
        self.closed = True
        for link in list(self.links.values()):
            self._release_link(link, graceful)
        self.links.clear()
        if reply:
            self.connection.write(frame(self.channel, END, []))

    # ------------------------------------------------------------------------------------------ flow

    def on_flow(self, fields: list[Any]) -> None:
        handle = field(fields, FlowField.HANDLE)
        if handle is None:
            if field(fields, FlowField.ECHO, False):
                self.send_flow(
                    [
                        UInt(self.next_incoming_id),
                        UInt(self.incoming_window),
                        UInt(self.next_outgoing_id),
                        UInt(self.outgoing_window),
                    ]
                )
            return
        link = self.links.get(int(handle))
        if isinstance(link, OutgoingLink):
            link.on_flow(fields)

    # ------------------------------------------------------------------------------------------ transfer

    def on_transfer(self, fields: list[Any], payload: memoryview) -> None:
        self.next_incoming_id = (self.next_incoming_id + 1) & 0xFFFFFFFF
        handle = int(field(fields, TransferField.HANDLE, 0))
        link = self.links.get(handle)
        if not isinstance(link, IncomingLink):
            self.connection.close_with_error(
                "amqp:session:unattached-handle", f"transfer on unattached handle {handle}"
            )
            return
        delivery_id = field(fields, TransferField.DELIVERY_ID)
        more = bool(field(fields, TransferField.MORE, False))
        if field(fields, TransferField.ABORTED, False):
            link.partial = None
            link.discarded = None
            return
        if link.partial is None:
            if delivery_id is None:
                self.connection.close_with_error(
                    "amqp:decode-error", "first transfer frame has no delivery-id"
                )
                return
            link.partial_id = int(delivery_id)
            link.partial_format = int(field(fields, TransferField.MESSAGE_FORMAT, 0))
            link.partial_settled = bool(field(fields, TransferField.SETTLED, False))
            if not more:
                self._delivery(link, int(delivery_id), link.partial_format, link.partial_settled, payload)
                return
            link.partial = bytearray(payload)
        elif link.discarded is not None:
            link.discarded += len(payload)
        else:
            link.partial += payload
        server = self.connection.server
        limit = server.max_delivery_bytes
        if link.discarded is None:
            if len(link.partial) > limit:
                # Too large to accept: stop buffering, read the rest of the delivery, then refuse just it.
                self._discard(link, errors.MESSAGE_SIZE_EXCEEDED, limit)
            elif self.connection.buffered_transfer_bytes() > server.max_connection_buffer_bytes:
                # Several links each reassembling a large delivery: the one that crosses the connection's
                # budget is refused, so one connection cannot hold hundreds of megabytes of fragments.
                self._discard(link, errors.RESOURCE_LIMIT_EXCEEDED, server.max_connection_buffer_bytes)
        if more:
            return
        assert link.partial_id is not None
        if link.discarded is not None:
            size, link.discarded, link.partial = link.discarded, None, None
            condition, ceiling = self._discard_reasons.pop(link.handle)
            link.received()
            if condition == errors.MESSAGE_SIZE_EXCEEDED:
                description = (
                    f"The received message (size: {size} bytes) exceeds the limit ({ceiling} bytes)."
                )
            else:
                description = (
                    f"The connection buffers more than {ceiling} bytes of unfinished deliveries; "
                    f"this delivery ({size} bytes) was refused."
                )
            self._settle_incoming(
                link.partial_id, link.partial_settled, outcome(REJECTED, [error(condition, description)])
            )
            return
        if not more:
            data, link.partial = link.partial, None
            assert link.partial_id is not None
            self._delivery(link, link.partial_id, link.partial_format, link.partial_settled, memoryview(data))

    def _discard(self, link: IncomingLink, condition: str, ceiling: int) -> None:
        assert link.partial is not None
        link.discarded = len(link.partial)
        link.partial = bytearray()
        self._discard_reasons[link.handle] = (condition, ceiling)

    def buffered_transfer_bytes(self) -> int:
        """Bytes of multi-frame deliveries this session is still reassembling."""
        return sum(
            len(link.partial)
            for link in self.links.values()
            if isinstance(link, IncomingLink) and link.partial is not None
        )

    def _delivery(
        self, link: IncomingLink, delivery_id: int, fmt: int, settled: bool, payload: memoryview
    ) -> None:
        link.received()
        if link.node is not None:
            self._settle_incoming(delivery_id, settled, outcome(ACCEPTED))
            self.connection.server.nodes.handle(self, link, payload)
            return
        try:
            try:
                raw = split_batch(payload) if fmt == BATCH_MESSAGE_FORMAT else [bytes(payload)]
                messages: list[ParsedMessage] = [parse_message(m) for m in raw]
            except DecodeError as exc:
                raise BrokerError(errors.DECODE_ERROR, f"The message could not be decoded: {exc}") from exc
            if not messages:
                raise BrokerError(errors.ARGUMENT_ERROR, "The batch contains no messages.")
            self.namespace.send(link.entity_path, messages)
        except BrokerError as exc:
            self._settle_incoming(
                delivery_id, settled, outcome(REJECTED, [error(exc.condition, exc.description)])
            )
            return
        self._settle_incoming(delivery_id, settled, outcome(ACCEPTED))

    def _settle_incoming(self, delivery_id: int, already_settled: bool, state: Described) -> None:
        if already_settled:
            return
        self.connection.write(frame(self.channel, DISPOSITION, [True, UInt(delivery_id), None, True, state]))

    # ------------------------------------------------------------------------------------------ disposition

    def on_disposition(self, fields: list[Any]) -> None:
        if not field(fields, DispositionField.ROLE, False):
            return  # the client settling our node responses or its own sends: nothing to do
        first = int(field(fields, DispositionField.FIRST, 0))
        last = int(field(fields, DispositionField.LAST, first))
        state = field(fields, DispositionField.STATE)
        client_settled = bool(field(fields, DispositionField.SETTLED, False))
        delivery_ids = self._settled_range(first, last)
        if delivery_ids is None:
            return
        for delivery_id in delivery_ids:
            entry = self.unsettled.pop(delivery_id, None)
            if entry is None:
                continue
            queue, token = entry
            reply = self._apply_outcome(queue, token, state)
            if not client_settled and reply is not None:
                self.connection.write(
                    frame(self.channel, DISPOSITION, [False, UInt(delivery_id), None, True, reply])
                )

    def _settled_range(self, first: int, last: int) -> list[int] | None:
        """The unsettled delivery-ids a disposition names, without walking the whole range.

        Delivery-ids are RFC 1982 serial numbers, so ``first..last`` may wrap. A range reaching past the
        ids this session has sent is a protocol error and closes the connection (returns None): walking
        ``0..0xFFFFFFFF`` id by id would stall the only event loop for minutes."""
        span = (last - first) & _SERIAL_MASK
        newest = (self.next_outgoing_id - 1) & _SERIAL_MASK
        # Serial-number comparison (window 2**31): both ends must be at or before the newest id sent.
        if (
            span >= _SERIAL_WINDOW
            or (newest - last) & _SERIAL_MASK >= _SERIAL_WINDOW
            or (newest - first) & _SERIAL_MASK >= _SERIAL_WINDOW
        ):
            self.connection.close_with_error(
                "amqp:invalid-field",
                f"disposition first={first} last={last} names delivery-ids this session never sent "
                f"(next delivery-id {self.next_outgoing_id})",
            )
            return None
        if span < len(self.unsettled):
            return [(first + offset) & _SERIAL_MASK for offset in range(span + 1)]
        return sorted(
            (i for i in self.unsettled if (i - first) & _SERIAL_MASK <= span),
            key=lambda i: (i - first) & _SERIAL_MASK,
        )

    def _apply_outcome(self, queue: MessageQueue, token: uuid.UUID, state: Any) -> Described | None:
        code = state.descriptor if isinstance(state, Described) else None
        values = state.value if isinstance(state, Described) and isinstance(state.value, list) else []
        try:
            if code == ACCEPTED:
                queue.complete(token)
                return outcome(ACCEPTED)
            if code == MODIFIED:
                undeliverable = bool(values[1]) if len(values) > 1 and values[1] is not None else False
                if undeliverable:
                    queue.defer(token)
                else:
                    queue.abandon(token)
                return outcome(MODIFIED, list(values))
            if code == REJECTED:
                reason, description = _dead_letter_info(values)
                queue.dead_letter(token, reason, description)
                return outcome(REJECTED)
            if code == RELEASED:
                queue.release(token)
                return outcome(RELEASED)
            return None
        except BrokerError as exc:
            return outcome(REJECTED, [error(exc.condition, exc.description)])


def _dead_letter_info(values: list[Any]) -> tuple[str | None, str | None]:
    err = values[0] if values else None
    if not isinstance(err, Described) or not isinstance(err.value, list):
        return None, None
    info = err.value[2] if len(err.value) > 2 else None
    description = err.value[1] if len(err.value) > 1 else None
    if isinstance(info, dict):
        reason = info.get("DeadLetterReason", info.get(Symbol("DeadLetterReason")))
        desc = info.get("DeadLetterErrorDescription", description)
        return (None if reason is None else str(reason)), (None if desc is None else str(desc))
    return None, None if description is None else str(description)
