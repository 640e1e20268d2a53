"""AMQP over WebSockets on the namespace's TLS ports, as Service Bus serves it on 443.

The SDK's ``TransportType.AmqpOverWebsocket`` opens ``wss://<host>/$servicebus/websocket`` with the
subprotocol ``AMQPWSB10`` and then carries the AMQP byte stream (protocol headers, SASL, frames) in binary
WebSocket messages. After the RFC 6455 handshake this module hands the AMQP front end a transport whose
writes go out as unmasked binary frames, and feeds it the payload of every client data frame as if it had
come straight from TCP: message boundaries mean nothing to AMQP, so fragments are passed on as they come.

A client that breaks the framing rules (an unmasked frame, a length over :data:`MAX_FRAME_PAYLOAD`, a text
frame, an unknown opcode) gets a close frame with the RFC's code and its connection is dropped; the
listener goes on serving everyone else.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

log = logging.getLogger("emulator.websocket")

PATH = "/$servicebus/websocket"
SUBPROTOCOL = "AMQPWSB10"
_ACCEPT_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 1.3
# One AMQP frame is at most 1 MiB (the emulator's max-frame-size); a client may pack a few in one message.
MAX_FRAME_PAYLOAD = 4 * 1024 * 1024

CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
_OPCODES = {CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG}
NORMAL, PROTOCOL_ERROR, UNSUPPORTED_DATA, TOO_BIG = 1000, 1002, 1003, 1009


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why an upgrade request is not accepted, as the HTTP response that says so."""

    status: int
    code: str
    message: str
    headers: tuple[tuple[str, str], ...] = ()


class FramingError(Exception):
    """A client frame that breaks RFC 6455: the connection is closed with ``close_code``."""

    def __init__(self, close_code: int, reason: str) -> None:
        super().__init__(reason)
        self.close_code = close_code
        self.reason = reason


def _tokens(value: str | None) -> list[str]:
    return [token.strip() for token in (value or "").split(",") if token.strip()]


def is_upgrade(headers: dict[str, str]) -> bool:
    """Whether a request asks to switch to the WebSocket protocol."""
    return "websocket" in (token.lower() for token in _tokens(headers.get("upgrade")))


def refusal(method: str, path: str, version: str, headers: dict[str, str]) -> Refusal | None:
    """None if the upgrade request is a valid AMQP WebSocket handshake (RFC 6455 4.2.1), else why not."""
    if unquote(path).rstrip("/") != PATH:
        return Refusal(404, "NotFound", f"AMQP over WebSockets is served at {PATH}, not {path}.")
    if method != "GET" or version != "HTTP/1.1":
        return Refusal(400, "BadRequest", "A WebSocket handshake is an HTTP/1.1 GET request.")
    if "upgrade" not in (token.lower() for token in _tokens(headers.get("connection"))):
        return Refusal(400, "BadRequest", "A WebSocket handshake needs the header 'Connection: Upgrade'.")
    if headers.get("sec-websocket-version") != "13":
        version_header = (("Sec-WebSocket-Version", "13"),)
        return Refusal(426, "UpgradeRequired", "Only WebSocket version 13 is supported.", version_header)
    try:
        key = base64.b64decode(headers.get("sec-websocket-key", ""), validate=True)
    except binascii.Error:
        key = b""
    if len(key) != 16:
        return Refusal(400, "BadRequest", "Sec-WebSocket-Key must be 16 base64-encoded bytes.")
    if SUBPROTOCOL not in _tokens(headers.get("sec-websocket-protocol")):
        return Refusal(
            400, "BadRequest", f"The WebSocket subprotocol must be {SUBPROTOCOL} (AMQP 1.0 over WebSockets)."
        )
    return None


def accept_key(key: str) -> str:
    """The Sec-WebSocket-Accept value answering ``key`` (RFC 6455 4.2.2)."""
    return base64.b64encode(hashlib.sha1(key.encode("ascii") + _ACCEPT_GUID).digest()).decode("ascii")


def encode_frame(opcode: int, payload: bytes) -> bytes:
    """One final, unmasked frame (a server's frames are never masked)."""
    size = len(payload)
    if size < 126:
        head = bytes((0x80 | opcode, size))
    elif size < 1 << 16:
        head = bytes((0x80 | opcode, 126)) + size.to_bytes(2, "big")
    else:
        head = bytes((0x80 | opcode, 127)) + size.to_bytes(8, "big")
    return head + payload


def close_payload(code: int, reason: str) -> bytes:
    return code.to_bytes(2, "big") + reason.encode()[:123]


def unmask(data: bytes, mask: bytes) -> bytes:
    if not data:
        return data
    key = (mask * (len(data) // 4 + 1))[: len(data)]
    return (int.from_bytes(data, "big") ^ int.from_bytes(key, "big")).to_bytes(len(data), "big")


async def read_frame(reader: asyncio.StreamReader) -> tuple[bool, int, bytes]:
    """The next client frame as (final, opcode, unmasked payload); FramingError if it breaks the rules."""
    first, second = await reader.readexactly(2)
    final, opcode, length = bool(first & 0x80), first & 0x0F, second & 0x7F
    if first & 0x70:
        raise FramingError(PROTOCOL_ERROR, "reserved bits are set but no extension was negotiated")
    if opcode not in _OPCODES:
        raise FramingError(PROTOCOL_ERROR, f"unknown opcode {opcode:#x}")
    if not second & 0x80:
        raise FramingError(PROTOCOL_ERROR, "a client frame must be masked (RFC 6455 5.1)")
    if length == 126:
        length = int.from_bytes(await reader.readexactly(2), "big")
    elif length == 127:
        length = int.from_bytes(await reader.readexactly(8), "big")
    if opcode >= CLOSE and (not final or length > 125):
        raise FramingError(PROTOCOL_ERROR, "a control frame must be final with at most 125 payload bytes")
    if length > MAX_FRAME_PAYLOAD:
        raise FramingError(TOO_BIG, f"a frame of {length} bytes exceeds the limit of {MAX_FRAME_PAYLOAD}")
    mask = await reader.readexactly(4)
    return final, opcode, unmask(await reader.readexactly(length), mask)


class WebSocketTransport(asyncio.Transport):
    """What the AMQP connection writes to: each write goes out as one binary frame on ``inner``."""

    def __init__(self, inner: asyncio.WriteTransport) -> None:
        super().__init__()
        self.inner = inner
        self._closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.inner.get_extra_info(name, default)

    def is_closing(self) -> bool:
        return self._closing or self.inner.is_closing()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self.is_closing():
            self.inner.write(encode_frame(BINARY, bytes(data)))

    def close(self) -> None:
        self.close_with(NORMAL, "")

    def close_with(self, code: int, reason: str) -> None:
        """Send a close frame (once) and close the connection underneath."""
        if not self.is_closing():
            self.inner.write(encode_frame(CLOSE, close_payload(code, reason)))
        self._closing = True
        self.inner.close()

    def abort(self) -> None:
        self._closing = True
        self.inner.abort()


async def bridge(
    key: str,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    factory: Callable[[], asyncio.Protocol],
) -> None:
    """Complete the handshake for ``key``, then run a fresh ``factory()`` protocol over the WebSocket
    until either side closes it."""
    writer.write(
        (
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {accept_key(key)}\r\nSec-WebSocket-Protocol: {SUBPROTOCOL}\r\n\r\n"
        ).encode("ascii")
    )
    transport = WebSocketTransport(writer.transport)
    protocol = factory()
    protocol.connection_made(transport)
    peer = writer.get_extra_info("peername")
    log.debug("websocket %s: AMQP over WebSockets", peer)
    fragmented = False  # inside a message whose first frame was not final
    try:
        while not transport.is_closing():
            final, opcode, payload = await read_frame(reader)
            if opcode == PING:
                if not transport.is_closing():
                    writer.write(encode_frame(PONG, payload))
            elif opcode == CLOSE:
                if len(payload) == 1:
                    raise FramingError(PROTOCOL_ERROR, "a close frame's payload must not be one byte")
                code = int.from_bytes(payload[:2], "big") if payload else NORMAL
                transport.close_with(code, "")
            elif opcode == TEXT:
                raise FramingError(UNSUPPORTED_DATA, "AMQP over WebSockets takes binary frames only")
            elif opcode in (BINARY, CONTINUATION):
                if (opcode == CONTINUATION) != fragmented:
                    raise FramingError(PROTOCOL_ERROR, "continuation frame outside a fragmented message")
                fragmented = not final
                protocol.data_received(payload)
    except FramingError as exc:
        log.warning("websocket %s: closing with %d: %s", peer, exc.close_code, exc.reason)
        transport.close_with(exc.close_code, exc.reason)
    except (ConnectionError, TimeoutError, asyncio.IncompleteReadError, ssl.SSLError, OSError):
        pass
    finally:
        protocol.connection_lost(None)
