"""A small asyncio HTTP/1.1 server for the management port.

Features: persistent connections (HTTP/1.1 keep-alive, as azure-core's requests transport reuses them),
``Content-Length`` and ``chunked`` request bodies, ``Expect: 100-continue``, bounded header and body
sizes, idle and per-request timeouts, optional TLS. Handlers are plain functions ``Request -> Response``
run on the event loop, so one request's effect on the broker is atomic with respect to every other.

A listener may also hand connections that open with another protocol's header to that protocol
(:class:`ProtocolSwitch`): a Service Bus namespace's host answers HTTPS and AMQP over TLS alike, and a
client's first bytes after the TLS handshake (``AMQP`` and a version, or an HTTP request line) say which.
Such a listener also takes that protocol over WebSockets (:mod:`emulator.arm.websocket`), and, when it is a
TLS listener, that protocol without TLS too (:mod:`emulator.arm.tls_or_plain_amqp`).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import http
import json
import logging
import ssl
import sys
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from emulator.arm import websocket
from emulator.arm.tls_or_plain_amqp import TlsOrPlainAmqp

log = logging.getLogger("emulator.http")

MAX_LINE = 16 * 1024
MAX_HEADER_BYTES = 64 * 1024
MAX_HEADERS = 100
MAX_BODY = 4 * 1024 * 1024
IDLE_TIMEOUT = 120.0  # keep-alive connections without a request are closed after this long
REQUEST_TIMEOUT = 30.0  # a started request must be complete (headers and body) within this
CLOSE_WAIT_SECONDS = 2.0  # a closing connection's wait for the peer (TLS close_notify) before it is aborted


@dataclass(slots=True)
class Request:
    """One parsed request; header names are lower-case."""

    method: str
    target: str
    headers: dict[str, str]
    body: bytes = b""
    scheme: str = "http"
    version: str = "HTTP/1.1"
    path: str = field(init=False)
    query: dict[str, list[str]] = field(init=False)

    def __post_init__(self) -> None:
        parts = urlsplit(self.target)
        self.path = parts.path or "/"
        self.query = parse_qs(parts.query, keep_blank_values=True)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def param(self, name: str) -> str | None:
        """A query parameter by case-insensitive name (the first value when repeated)."""
        wanted = name.lower()
        for key, values in self.query.items():
            if key.lower() == wanted and values:
                return values[0]
        return None

    @property
    def keep_alive(self) -> bool:
        tokens = {t.strip().lower() for t in (self.header("connection") or "").split(",")}
        if self.version == "HTTP/1.0":
            return "keep-alive" in tokens
        return "close" not in tokens


@dataclass(slots=True)
class Response:
    status: int
    body: bytes = b""
    headers: list[tuple[str, str]] = field(default_factory=list)
    close: bool = False  # close the connection after this response

    @classmethod
    def json(cls, status: int, document: object, headers: Iterable[tuple[str, str]] = ()) -> Response:
        body = json.dumps(document, separators=(",", ":")).encode()
        return cls(status, body, [("Content-Type", "application/json; charset=utf-8"), *headers])

    def encode(self, keep_alive: bool, head_only: bool = False) -> bytes:
        try:
            reason = http.HTTPStatus(self.status).phrase
        except ValueError:
            reason = "Unknown"
        lines = [f"HTTP/1.1 {self.status} {reason}"]
        names = {name.lower() for name, _ in self.headers}
        lines += [f"{name}: {value}" for name, value in self.headers]
        if self.status != 204 and self.status >= 200:
            lines.append(f"Content-Length: {len(self.body)}")
        if "date" not in names:
            lines.append(f"Date: {email.utils.formatdate(usegmt=True)}")
        lines.append("Connection: keep-alive" if keep_alive else "Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return head if head_only or self.status == 204 else head + self.body


Handler = Callable[[Request], Response]


@dataclass(frozen=True, slots=True)
class ProtocolSwitch:
    """Connections whose first bytes are ``prefix`` go to a fresh ``factory()`` protocol instead of HTTP."""

    prefix: bytes
    factory: Callable[[], asyncio.Protocol]


class _Sniffer(asyncio.Protocol):
    """Holds a new connection's first bytes until they tell HTTP from the switched protocol, then hands the
    transport (and those bytes) to the one they belong to."""

    def __init__(self, server: HttpServer, switch: ProtocolSwitch) -> None:
        self.server = server
        self.switch = switch
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        # A peer that never speaks is dropped after the idle time an HTTP connection gets.
        self.timer = asyncio.get_running_loop().call_later(IDLE_TIMEOUT, transport.abort)

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        self.buffer += data
        prefix = self.switch.prefix
        if len(self.buffer) < len(prefix) and prefix.startswith(self.buffer):
            return  # not yet decided: "A" might be the start of "AMQP"
        if self.timer is not None:
            self.timer.cancel()
        protocol: asyncio.Protocol
        if self.buffer.startswith(prefix):
            protocol = self.switch.factory()
        else:
            protocol = asyncio.StreamReaderProtocol(asyncio.StreamReader(limit=MAX_LINE), self.server._serve)
        self.transport.set_protocol(protocol)
        protocol.connection_made(self.transport)
        protocol.data_received(self.buffer)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()


class _Refused(Exception):
    """A request that cannot be read: answered with ``status`` and the connection closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _error(status: int, code: str, message: str) -> Response:
    return Response.json(status, {"error": {"code": code, "message": message}})


class HttpServer:
    """Serves ``handler`` on one listening socket (plain or TLS) until :meth:`close`."""

    def __init__(
        self,
        handler: Handler,
        ssl_context: ssl.SSLContext | None = None,
        switch: ProtocolSwitch | None = None,
    ) -> None:
        self.handler = handler
        self.ssl_context = ssl_context
        self.switch = switch
        self.scheme = "https" if ssl_context is not None else "http"
        self.port = 0
        self.accepted = 0  # connections accepted so far
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._handshakes: set[asyncio.Task[None]] = set()  # TLS handshakes of a plain-or-TLS listener
        self._closing = False

    async def start(self, host: str, port: int) -> int:
        switch = self.switch
        if switch is None:
            self._server = await asyncio.start_server(
                self._serve, host, port, ssl=self.ssl_context, limit=MAX_LINE
            )
        elif self.ssl_context is None:
            loop = asyncio.get_running_loop()
            self._server = await loop.create_server(lambda: _Sniffer(self, switch), host, port)
        else:
            # TLS (HTTPS, AMQP over TLS or WebSockets inside) or plain AMQP, as the first byte says.
            context = self.ssl_context
            loop = asyncio.get_running_loop()
            self._server = await loop.create_server(
                lambda: TlsOrPlainAmqp(
                    context, lambda: _Sniffer(self, switch), switch.factory, self._handshakes, IDLE_TIMEOUT
                ),
                host,
                port,
            )
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        """Stop listening, close every connection and wait (bounded) for their handlers to finish."""
        self._closing = True
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        for handshake in list(self._handshakes):
            handshake.cancel()  # start_tls closes its transport when cancelled
        tasks = [t for t in self._tasks | self._handshakes if not t.done()]
        if tasks:
            _done, pending = await asyncio.wait(tasks, timeout=5)
            for task in pending:
                task.cancel()
            if pending:
                # Let the cancellations run (each handler's ``finally`` closes its transport): a handler
                # still suspended when the loop closes is destroyed by the garbage collector instead,
                # mid-``await``, which reports "coroutine ignored GeneratorExit" and leaks its socket.
                await asyncio.wait(pending, timeout=CLOSE_WAIT_SECONDS + 1)
        if self._server is not None:
            # wait_closed waits for every connection the server accepted (Python 3.12+). The handlers above
            # have closed theirs; what is left has no handler (a TLS handshake or close_notify still pending)
            # and would hold the stop for the SSL timeouts (60 s, 30 s): drop it, as the handlers do theirs.
            if sys.version_info >= (3, 13):
                self._server.abort_clients()
            await self._server.wait_closed()
            self._server = None

    # ------------------------------------------------------------------------------------------ connections

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        self._writers.add(writer)
        try:
            while not self._closing:
                try:
                    request = await self._read_request(reader, writer)
                except _Refused as refused:
                    response = _error(refused.status, "BadRequest", refused.message)
                    writer.write(response.encode(keep_alive=False))
                    await writer.drain()
                    break
                if request is None:
                    break
                if self.switch is not None and websocket.is_upgrade(request.headers):
                    await self._upgrade(request, reader, writer, self.switch)
                    break
                response = self._dispatch(request)
                keep = request.keep_alive and not response.close and not self._closing
                writer.write(response.encode(keep, head_only=request.method == "HEAD"))
                await writer.drain()
                if not keep:
                    break
        except (ConnectionError, TimeoutError, asyncio.IncompleteReadError, ssl.SSLError, OSError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()
            closed = False
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), CLOSE_WAIT_SECONDS)
                closed = True
            if not closed:
                # A TLS close waits for the peer's close_notify; a peer that has gone never sends one, and
                # the socket would stay open until garbage collection. Drop it now.
                writer.transport.abort()
            if task is not None:
                self._tasks.discard(task)

    async def _upgrade(
        self,
        request: Request,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        switch: ProtocolSwitch,
    ) -> None:
        """A WebSocket upgrade: the switched protocol runs over it (AMQP over WebSockets) or it is refused."""
        refused = websocket.refusal(request.method, request.path, request.version, request.headers)
        if refused is None:
            await websocket.bridge(request.headers["sec-websocket-key"], reader, writer, switch.factory)
            return
        log.info("websocket upgrade %s refused: %s", request.path, refused.message)
        response = _error(refused.status, refused.code, refused.message)
        response.headers += refused.headers
        writer.write(response.encode(keep_alive=False))
        await writer.drain()

    def _dispatch(self, request: Request) -> Response:
        request_id = str(uuid.uuid4())
        try:
            response = self.handler(request)
        except Exception:
            log.exception("management request %s %s failed", request.method, request.path)
            response = _error(500, "InternalServerError", "The emulator failed to process the request.")
        response.headers += [("x-ms-request-id", request_id), ("x-ms-correlation-request-id", request_id)]
        return response

    async def _read_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> Request | None:
        line = b"\r\n"
        while line in (b"\r\n", b"\n"):  # tolerate empty lines between requests (RFC 9112 2.2)
            try:
                line = await asyncio.wait_for(reader.readline(), IDLE_TIMEOUT)
            except ValueError:
                raise _Refused(414, "The request line is too long.") from None
            if not line:
                return None
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT):
                return await self._read_rest(line, reader, writer)
        except TimeoutError:
            raise _Refused(408, "The request was not completed in time.") from None

    async def _read_rest(
        self, line: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> Request:
        parts = line.decode("latin-1").rstrip("\r\n").split(" ")
        if len(parts) != 3 or not parts[0].isalpha() or not parts[2].startswith("HTTP/"):
            raise _Refused(400, "The request line is malformed.")
        method, target, version = parts
        if version not in ("HTTP/1.1", "HTTP/1.0"):
            raise _Refused(505, f"HTTP version {version} is not supported.")
        if target.startswith(("http://", "https://")):
            split = urlsplit(target)
            target = (split.path or "/") + (f"?{split.query}" if split.query else "")
        if not target.startswith("/"):
            raise _Refused(400, "The request target must be an absolute path.")
        headers = await self._read_headers(reader)
        body = await self._read_body(headers, reader, writer)
        return Request(method.upper(), target, headers, body, scheme=self.scheme, version=version)

    async def _read_headers(self, reader: asyncio.StreamReader) -> dict[str, str]:
        headers: dict[str, str] = {}
        total = 0
        while True:
            try:
                raw = await reader.readline()
            except ValueError:
                raise _Refused(431, "A request header is too long.") from None
            if not raw:
                raise asyncio.IncompleteReadError(raw, None)
            if raw in (b"\r\n", b"\n"):
                return headers
            total += len(raw)
            if total > MAX_HEADER_BYTES or len(headers) >= MAX_HEADERS:
                raise _Refused(431, "The request headers are too large.")
            text = raw.decode("latin-1").rstrip("\r\n")
            name, sep, value = text.partition(":")
            if not sep or not name or name != name.strip() or " " in name or text[:1] in (" ", "\t"):
                raise _Refused(400, f"Malformed header line {text[:80]!r}.")
            key = name.lower()
            value = value.strip()
            if key in headers:
                if key == "content-length" and headers[key] != value:
                    raise _Refused(400, "Conflicting Content-Length headers.")
                if key != "content-length":
                    headers[key] = f"{headers[key]}, {value}"
            else:
                headers[key] = value

    async def _read_body(
        self, headers: dict[str, str], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bytes:
        encoding = headers.get("transfer-encoding")
        length_text = headers.get("content-length")
        if encoding is None and length_text is None:
            return b""
        if encoding is not None and encoding.lower() != "chunked":
            raise _Refused(501, f"Transfer-Encoding {encoding!r} is not supported.")
        length = 0
        if encoding is None:
            if not (length_text or "").isdigit():
                raise _Refused(400, "The Content-Length header is not a number.")
            length = int(length_text or "0")
            if length > MAX_BODY:
                raise _Refused(413, f"The request body exceeds {MAX_BODY} bytes.")
        if (headers.get("expect") or "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            await writer.drain()
        if encoding is None:
            return await reader.readexactly(length)
        return await self._read_chunked(reader)

    async def _read_chunked(self, reader: asyncio.StreamReader) -> bytes:
        body = bytearray()
        while True:
            size_line = (await reader.readline()).split(b";", 1)[0].strip()
            try:
                size = int(size_line, 16)
            except ValueError:
                raise _Refused(400, "Malformed chunk size.") from None
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass  # trailers are ignored
                return bytes(body)
            if len(body) + size > MAX_BODY:
                raise _Refused(413, f"The request body exceeds {MAX_BODY} bytes.")
            body += await reader.readexactly(size)
            await reader.readline()  # the CRLF after each chunk
