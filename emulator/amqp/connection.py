"""One client connection: protocol headers, SASL ANONYMOUS, open/close, session begin/end, and frame
dispatch. Anything malformed closes this connection with an AMQP error; other connections are unaffected."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from emulator.amqp.frames import (
    AMQP_HEADER,
    ATTACH,
    BEGIN,
    CLOSE,
    DETACH,
    DISPOSITION,
    END,
    FLOW,
    FRAME_HEADER,
    FRAME_TYPE_AMQP,
    FRAME_TYPE_SASL,
    MIN_MAX_FRAME_SIZE,
    OPEN,
    SASL_HEADER,
    SASL_INIT,
    SASL_MECHANISMS,
    SASL_OUTCOME,
    TRANSFER,
    BeginField,
    FrameError,
    OpenField,
    decode_performative,
    error,
    field,
    frame,
    sasl_frame,
)
from emulator.amqp.session import NodeHandler, Session, entity_path
from emulator.auth import Grant
from emulator.broker import errors
from emulator.broker.errors import BrokerError
from emulator.broker.namespace import Namespace
from shared.amqp.encoding.types import Array, Symbol, UByte, UInt, UShort

log = logging.getLogger("emulator.amqp")

MAX_FRAME_SIZE = 1024 * 1024
CHANNEL_MAX = 65535
_TRANSFER_OVERHEAD = 64
# How long a refused peer gets to answer our close before its socket is dropped anyway.
_CLOSE_GRACE_SECONDS = 5.0


class ServerContext(Protocol):
    """What a connection and its sessions need of the server that accepted them.

    Implemented by :class:`emulator.server.AmqpServer`; a Protocol so the state machine never imports it.
    """

    @property
    def namespace(self) -> Namespace: ...

    @property
    def nodes(self) -> NodeHandler:
        """Where requests to the ``$cbs`` and ``$management`` nodes go."""
        ...

    @property
    def clock(self) -> Callable[[], float]:
        """Seconds since the epoch (token expiry)."""
        ...

    @property
    def handshake_timeout(self) -> float:
        """Seconds a peer has to finish header, SASL and open."""
        ...

    @property
    def max_connections(self) -> int: ...

    @property
    def max_delivery_bytes(self) -> int: ...

    @property
    def max_connection_buffer_bytes(self) -> int: ...

    def admit(self, connection: Connection) -> bool:
        """Count a new connection; False when the namespace's connection quota is reached."""
        ...

    def forget(self, connection: Connection) -> None:
        """A connection has gone."""
        ...


class Connection(asyncio.Protocol):
    """The AMQP state machine for one TCP connection."""

    def __init__(self, server: ServerContext) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._state = "header"
        self._sasl_done = False
        self.remote_max_frame_size = MAX_FRAME_SIZE
        self.container_id = ""
        self.sessions: dict[int, Session] = {}
        self._ended_channels: set[int] = set()
        self.grants: list[Grant] = []
        self.closed = False
        self.peer = "?"
        # Over the namespace's connection quota: negotiate as usual, then answer the client's open with
        # open + close(resource-limit-exceeded) so the SDK reports the quota, not a protocol mismatch.
        self._refused = False
        self._handshake_timer: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------------------------------------ transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self._refused = not self.server.admit(self)
        self._handshake_timer = asyncio.get_running_loop().call_later(
            self.server.handshake_timeout, self._handshake_expired
        )

    def connection_lost(self, exc: Exception | None) -> None:
        # Still-open sessions here mean the client vanished without closing (crash, network loss).
        self._cancel_handshake_timer()
        self._teardown(graceful=False)
        self.server.forget(self)

    def _handshake_expired(self) -> None:
        """A peer that has not finished header, SASL and open in time holds a slot for nothing."""
        self._handshake_timer = None
        if self.closed or self._state == "opened":
            return
        self.close_with_error(
            "amqp:connection:forced",
            f"The connection did not complete the AMQP handshake (protocol header, SASL, open) within "
            f"{self.server.handshake_timeout:g} seconds.",
        )

    def _cancel_handshake_timer(self) -> None:
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.closed:
            self.transport.write(data)

    def buffered_transfer_bytes(self) -> int:
        """Bytes of unfinished multi-frame deliveries held for this connection, across its sessions."""
        return sum(session.buffered_transfer_bytes() for session in self.sessions.values())

    def max_payload(self, tag_length: int) -> int:
        """Largest transfer payload that fits in one frame for the client."""
        return max(self.remote_max_frame_size - _TRANSFER_OVERHEAD - tag_length, 256)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self._buffer += data
        try:
            self._process()
        except FrameError as exc:
            self.close_with_error(exc.condition, exc.description)
        except Exception as exc:  # a bug must cost one connection, never the broker
            log.exception("connection %s: internal error", self.peer)
            self.close_with_error("amqp:internal-error", f"internal error: {exc}")

    # ------------------------------------------------------------------------------------------ parsing

    def _process(self) -> None:
        buf = self._buffer
        pos = 0
        try:
            while not self.closed:
                if self._state == "header":
                    if len(buf) - pos < 8:
                        break
                    header = bytes(buf[pos : pos + 8])
                    pos += 8
                    self._on_protocol_header(header)
                    continue
                if len(buf) - pos < 8:
                    break
                size, doff, frame_type, channel = FRAME_HEADER.unpack_from(buf, pos)
                if size < 8 or doff < 2 or doff * 4 > size:
                    raise FrameError(
                        "amqp:connection:framing-error", f"invalid frame header (size {size}, doff {doff})"
                    )
                if size > MAX_FRAME_SIZE:
                    raise FrameError(
                        "amqp:connection:framing-error",
                        f"frame of {size} bytes exceeds max-frame-size {MAX_FRAME_SIZE}",
                    )
                if len(buf) - pos < size:
                    break
                # A copy: the buffer is trimmed below, so nothing may keep a view of it.
                body = memoryview(bytes(buf[pos + doff * 4 : pos + size]))
                pos += size
                if size == doff * 4:
                    continue  # empty frame: heartbeat
                if frame_type == FRAME_TYPE_SASL:
                    self._on_sasl_frame(body)
                elif frame_type == FRAME_TYPE_AMQP and self._state in ("open", "opened", "closing"):
                    self._on_frame(channel, body)
                else:
                    raise FrameError("amqp:connection:framing-error", f"unexpected frame type {frame_type}")
        finally:
            del buf[:pos]

    def _on_protocol_header(self, header: bytes) -> None:
        if header == SASL_HEADER and not self._sasl_done:
            self.write(SASL_HEADER)
            self.write(sasl_frame(SASL_MECHANISMS, [Array(0xA3, (Symbol("ANONYMOUS"), Symbol("MSSBCBS")))]))
            self._state = "sasl"
        elif header == AMQP_HEADER:
            self.write(AMQP_HEADER)
            self._state = "open"
        else:
            # Not a protocol we speak: answer with the header we do speak, then close (AMQP 1.0 §2.2).
            self.write(SASL_HEADER if not self._sasl_done else AMQP_HEADER)
            log.info("connection %s: bad protocol header %r", self.peer, header)
            self._shutdown()

    def _on_sasl_frame(self, body: memoryview) -> None:
        if self._state != "sasl":
            raise FrameError("amqp:connection:framing-error", "SASL frame outside SASL negotiation")
        code, _fields, _ = decode_performative(body)
        if code != SASL_INIT:
            raise FrameError("amqp:connection:framing-error", "expected sasl-init")
        # ANONYMOUS (and MSSBCBS): identity comes from CBS tokens, not SASL.
        self.write(sasl_frame(SASL_OUTCOME, [UByte(0)]))
        self._sasl_done = True
        self._state = "header"

    def _on_frame(self, channel: int, body: memoryview) -> None:
        code, fields, payload_at = decode_performative(body)
        if self._state == "closing":
            if code == CLOSE:  # the peer has read our close: now the socket can go
                self._shutdown()
            return
        if code == OPEN:
            self._on_open(fields)
            return
        if self._state != "opened":
            raise FrameError("amqp:connection:framing-error", "expected open")
        if code == CLOSE:
            self.write(frame(0, CLOSE, []))
            self._shutdown()
            return
        if code == BEGIN:
            self._on_begin(channel, fields)
            return
        session = self.sessions.get(channel)
        if session is None:
            if channel in self._ended_channels:
                return  # the SDK detaches its management links after End; ignore those frames
            raise FrameError("amqp:not-found", f"no session on channel {channel}")
        if code == TRANSFER:
            session.on_transfer(fields, body[payload_at:])
        elif code == DISPOSITION:
            session.on_disposition(fields)
        elif code == FLOW:
            session.on_flow(fields)
        elif code == ATTACH:
            session.on_attach(fields)
        elif code == DETACH:
            session.on_detach(fields)
        elif code == END:
            del self.sessions[channel]
            self._ended_channels.add(channel)
            session.end(reply=True)
        else:
            raise FrameError("amqp:connection:framing-error", f"unexpected performative 0x{code:02x}")

    def _on_open(self, fields: list[Any]) -> None:
        if self._state == "opened":
            raise FrameError("amqp:illegal-state", "connection already open")
        self._cancel_handshake_timer()
        if self._refused:
            # Azure refuses connections over the quota with QuotaExceeded (amqp:resource-limit-exceeded).
            self.write(frame(0, OPEN, ["busbar-emulator"]))
            self.write(
                frame(
                    0,
                    CLOSE,
                    [
                        error(
                            errors.RESOURCE_LIMIT_EXCEEDED,
                            f"Cannot open a new connection: the namespace has reached its quota of "
                            f"{self.server.max_connections} concurrent connections.",
                        )
                    ],
                )
            )
            # Wait for the peer's close before dropping the socket: the SDK answers our close with its
            # own and, finding the socket gone, would report a broken pipe instead of the quota.
            self._state = "closing"
            self._handshake_timer = asyncio.get_running_loop().call_later(
                min(self.server.handshake_timeout, _CLOSE_GRACE_SECONDS), self._shutdown
            )
            return
        self.container_id = str(field(fields, OpenField.CONTAINER_ID, ""))
        max_frame = int(field(fields, OpenField.MAX_FRAME_SIZE, 0xFFFFFFFF))
        if max_frame < MIN_MAX_FRAME_SIZE:
            self.write(frame(0, OPEN, ["busbar-emulator"]))
            raise FrameError(
                "amqp:invalid-field", f"max-frame-size {max_frame} is below {MIN_MAX_FRAME_SIZE}"
            )
        self.remote_max_frame_size = min(max_frame, MAX_FRAME_SIZE * 16)
        self._state = "opened"
        self.write(
            frame(
                0,
                OPEN,
                ["busbar-emulator", None, UInt(MAX_FRAME_SIZE), UShort(CHANNEL_MAX)],
            )
        )

    def _on_begin(self, channel: int, fields: list[Any]) -> None:
        if field(fields, BeginField.REMOTE_CHANNEL) is not None:
            raise FrameError("amqp:not-implemented", "the broker does not begin sessions")
        if channel in self.sessions:
            raise FrameError("amqp:illegal-state", f"channel {channel} already has a session")
        session = Session(self, channel)
        session.next_incoming_id = int(field(fields, BeginField.NEXT_OUTGOING_ID, 0))
        self.sessions[channel] = session
        self._ended_channels.discard(channel)
        self.write(
            frame(
                channel,
                BEGIN,
                [
                    UShort(channel),
                    UInt(session.next_outgoing_id),
                    UInt(session.incoming_window),
                    UInt(session.outgoing_window),
                    UInt(0xFFFFFFFF),
                ],
            )
        )

    # ------------------------------------------------------------------------------------------ auth

    def add_grant(self, grant: Grant) -> None:
        """Accept a put-token's grant, and check the links again when it expires: Azure detaches a link
        whose token ran out (the SDK renews well before, so its links are never touched)."""
        self.grants.append(grant)
        delay = max(0.0, grant.expires_at - self.server.clock()) + 0.05
        asyncio.get_running_loop().call_later(delay, self.enforce_token_expiry)

    def enforce_token_expiry(self) -> None:
        """Drop expired grants and detach every entity link no remaining grant covers."""
        if self.closed:
            return
        now = self.server.clock()
        self.grants = [grant for grant in self.grants if grant.expires_at > now]
        for session in list(self.sessions.values()):
            for link in list(session.links.values()):
                path = getattr(link, "entity_path", "") or entity_path(link.address)
                if not path or path.lower() == "$cbs" or link.detached:
                    continue
                if not any(grant.covers(path, now) for grant in self.grants):
                    session.detach_link(
                        link,
                        errors.UNAUTHORIZED,
                        f"The token for '{path}' has expired and was not renewed: the link is closed. "
                        "Put a new token with CBS and attach again.",
                    )

    def authorize(self, path: str) -> None:
        """Raise unless a CBS token on this connection grants access to entity ``path``."""
        now = self.server.clock()
        if any(grant.covers(path, now) for grant in self.grants):
            return
        raise BrokerError(
            errors.UNAUTHORIZED,
            f"Unauthorized access. 'Send'/'Listen' claim(s) are required to perform this operation on "
            f"'{path}'. Put a token with CBS first.",
            401,
        )

    # ------------------------------------------------------------------------------------------ closing

    def close_with_error(self, condition: str, description: str) -> None:
        if self.closed:
            return
        log.info("connection %s: closing with %s: %s", self.peer, condition, description)
        if self._state in ("open", "opened"):
            if self._state == "open":
                self.write(frame(0, OPEN, ["busbar-emulator"]))
            self.write(frame(0, CLOSE, [error(condition, description)]))
        self._shutdown()

    def _shutdown(self) -> None:
        self._cancel_handshake_timer()
        self._teardown()
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _teardown(self, graceful: bool = True) -> None:
        for session in list(self.sessions.values()):
            session.end(reply=False, graceful=graceful)
        self.sessions.clear()
