"""A TLS port that also takes plain AMQP, told apart by a connection's first byte.

``UseDevelopmentEmulator=true`` in a connection string makes azure-servicebus open plain AMQP (no TLS) to
the port the ``Endpoint`` names (``_pyamqp/_connection.py``: the URL's port is kept when ``use_tls`` is
off, and ``ServiceBusClient.from_connection_string`` sets ``use_tls = not emulator``), while
``ServiceBusAdministrationClient`` always speaks HTTPS to that same ``host:port`` (its endpoint is
``"https://" + fully_qualified_namespace``). So for one connection string to serve both clients, as one
does on Azure, the emulator's HTTPS ports accept both.

A TLS connection opens with a handshake record (content type 22, ``0x16``, then the version's major byte
``0x03``, RFC 8446 5.1); AMQP opens with its protocol header ``AMQP`` (AMQP 1.0 2.2). The first byte alone
decides, so it is read with ``MSG_PEEK``, leaving every byte in the socket for the protocol that takes the
connection (asyncio's TLS layer reads the ClientHello itself). Peeking again for more bytes would spin on a
socket that stays readable; a wrong second byte fails the TLS handshake or AMQP's header check, each of
which closes the connection. Any other first byte, or a peer that closes before sending one, is closed
here.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Callable

log = logging.getLogger("emulator.http")

TLS_HANDSHAKE_RECORD = 0x16  # TLSPlaintext.type handshake(22)
AMQP_FIRST_BYTE = ord("A")  # b"AMQP" + protocol id + version


class TlsOrPlainAmqp(asyncio.Protocol):
    """Waits, without reading, for a new connection's first byte; then runs TLS with ``after_tls()`` as the
    protocol inside it, or hands the connection to ``plain_amqp()``, or closes it."""

    def __init__(
        self,
        context: ssl.SSLContext,
        after_tls: Callable[[], asyncio.Protocol],
        plain_amqp: Callable[[], asyncio.Protocol],
        tasks: set[asyncio.Task[None]],
        idle_timeout: float,
    ) -> None:
        self.context = context
        self.after_tls = after_tls
        self.plain_amqp = plain_amqp
        self.tasks = tasks  # the owning server's: it cancels pending handshakes when it closes
        self.idle_timeout = idle_timeout
        self.transport: asyncio.Transport | None = None
        self.peer: socket.socket | None = None  # a duplicate of the transport's socket, for the peek
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        # Nothing may be read before the decision: TLS wants the ClientHello from the socket itself.
        # asyncio starts reading only after this method returns, so pausing here reads nothing.
        transport.pause_reading()
        loop = asyncio.get_running_loop()
        wrapped = transport.get_extra_info("socket")
        if wrapped is None:
            transport.abort()
            return
        # The transport owns its descriptor in the event loop's selector; a duplicate may be watched too.
        self.peer = wrapped.dup()
        loop.add_reader(self.peer.fileno(), self._readable)
        # A peer that never speaks is dropped after the idle time an HTTP connection gets.
        self.timer = loop.call_later(self.idle_timeout, self._give_up)

    def _readable(self) -> None:
        transport, peer = self.transport, self.peer
        assert transport is not None and peer is not None
        try:
            first = peer.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return
        except OSError:
            first = b""
        self._stop_watching()
        if not first:
            transport.close()  # closed (or reset) before sending anything
        elif first[0] == TLS_HANDSHAKE_RECORD:
            self._start_tls(transport)
        elif first[0] == AMQP_FIRST_BYTE:
            protocol = self.plain_amqp()
            transport.set_protocol(protocol)
            protocol.connection_made(transport)
            transport.resume_reading()
        else:
            log.info("connection closed: its first byte 0x%02x opens neither TLS nor AMQP", first[0])
            _close_after_draining(transport)

    def _start_tls(self, transport: asyncio.Transport) -> None:
        task = asyncio.get_running_loop().create_task(self._handshake(transport))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _handshake(self, transport: asyncio.Transport) -> None:
        early = _EarlyData()
        try:
            secure = await asyncio.get_running_loop().start_tls(
                transport, early, self.context, server_side=True
            )
        except (OSError, ssl.SSLError, TimeoutError, ConnectionError) as exc:
            # start_tls has closed the transport: a failed handshake ends this connection only.
            log.info("TLS handshake failed: %s", exc)
            return
        if secure is None or early.lost:  # the peer went away during or right after the handshake
            return
        protocol = self.after_tls()
        secure.set_protocol(protocol)
        protocol.connection_made(secure)
        if early.data:
            protocol.data_received(bytes(early.data))
        if early.eof and not protocol.eof_received():
            secure.close()  # what the transport does itself when a protocol's eof_received says so

    def _give_up(self) -> None:
        self._stop_watching()
        if self.transport is not None:
            self.transport.abort()

    def _stop_watching(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.peer is not None:
            asyncio.get_running_loop().remove_reader(self.peer.fileno())
            self.peer.close()
            self.peer = None

    def connection_lost(self, exc: Exception | None) -> None:
        # Only while undecided: afterwards the transport reports to the protocol it was handed to.
        self._stop_watching()


class _EarlyData(asyncio.Protocol):
    """The protocol inside TLS until ``start_tls`` has returned its transport: a client may send right after
    its Finished message (an HTTP request, the AMQP header), and TLS delivers those bytes as they are
    decrypted, before the coroutine awaiting the handshake runs again. They are kept for the real protocol."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.eof = False
        self.lost = False

    def data_received(self, data: bytes) -> None:
        self.data += data

    def eof_received(self) -> bool:
        self.eof = True
        return True  # keep the transport open: the real protocol decides

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True


# How long a refused peer may keep sending after our FIN before its connection is aborted.
DRAIN_SECONDS = 2.0


class _Drain(asyncio.Protocol):
    """Discards what a refused peer sends until it closes its side too."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.timer = asyncio.get_running_loop().call_later(DRAIN_SECONDS, transport.abort)

    def data_received(self, data: bytes) -> None:
        pass

    def eof_received(self) -> bool:
        return False  # the transport closes

    def connection_lost(self, exc: Exception | None) -> None:
        self.timer.cancel()


def _close_after_draining(transport: asyncio.Transport) -> None:
    """Close cleanly (FIN) a connection whose bytes are still unread: closing a socket with unread input
    makes the kernel reset the connection (RFC 1122 4.2.2.13), so read and discard them first."""
    protocol = _Drain(transport)
    transport.set_protocol(protocol)
    transport.write_eof()
    transport.resume_reading()
