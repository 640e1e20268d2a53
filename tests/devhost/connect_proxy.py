"""A small authenticating HTTP proxy that only tunnels (``CONNECT``), for the SDK's ``proxy.py`` sample.

``ServiceBusClient(..., http_proxy={...})`` switches to AMQP over WebSockets and asks the proxy for a tunnel
to the namespace's port 443 (``CONNECT localhost:443``) with ``Proxy-Authorization: Basic``. A corporate
proxy would reach Azure's 443; this one sends every tunnel it grants to one upstream address (the
emulator's TLS port, which takes AMQP over WebSockets), whatever ``host:port`` the client asked for. TLS
runs end to end through the tunnel, between the client and the emulator. Standard library only.
"""

from __future__ import annotations

import base64
import contextlib
import select
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

MAX_REQUEST_HEAD = 64 * 1024
PIPE_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class ProxiedRequest:
    """One request the proxy answered: its method, the ``host:port`` asked for and whether it was let in."""

    method: str
    target: str
    authorized: bool


class ProxyPortTaken(RuntimeError):
    """The proxy's address is already in use (another process listens there)."""


class ConnectProxy:
    """Tunnels authorised ``CONNECT`` requests on ``listen`` to ``upstream``; everything else is refused
    (407 without the right basic credentials, 405 for a method other than ``CONNECT``)."""

    def __init__(
        self, listen: tuple[str, int], upstream: tuple[str, int], username: str, password: str
    ) -> None:
        self.listen = listen
        self.upstream = upstream
        self._credentials = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()
        self.requests: list[ProxiedRequest] = []
        self._lock = threading.Lock()
        self._server: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()

    def start(self) -> ConnectProxy:
        """Listen and serve on a thread; ProxyPortTaken if the address is in use."""
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT only; never a listener
        try:
            server.bind(self.listen)
        except OSError as error:
            server.close()
            raise ProxyPortTaken(f"{self.listen[0]}:{self.listen[1]} is already in use: {error}") from error
        server.listen(16)
        server.settimeout(0.2)
        self._server = server
        self._spawn(self._accept_loop)
        return self

    def close(self) -> None:
        """Stop listening and end every tunnel."""
        self._stopping.set()
        for thread in list(self._threads):
            thread.join(timeout=5)
        if self._server is not None:
            self._server.close()

    def __enter__(self) -> ConnectProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        assert self._server is not None
        while not self._stopping.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._spawn(self._serve, client)

    def _serve(self, client: socket.socket) -> None:
        with client:
            head = _read_head(client)
            if head is None:
                return
            request_line, headers, early = head
            method, _, rest = request_line.partition(" ")
            target = rest.partition(" ")[0]
            authorized = headers.get("proxy-authorization") == self._credentials
            with self._lock:
                self.requests.append(ProxiedRequest(method, target, authorized))
            if method != "CONNECT":
                client.sendall(
                    b"HTTP/1.1 405 Method Not Allowed\r\nAllow: CONNECT\r\nContent-Length: 0\r\n\r\n"
                )
                return
            if not authorized:
                client.sendall(
                    b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                    b'Proxy-Authenticate: Basic realm="busbar-test-proxy"\r\nContent-Length: 0\r\n\r\n'
                )
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                return
            with upstream:
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                upstream.sendall(early)
                self._pipe(client, upstream)

    def _pipe(self, client: socket.socket, upstream: socket.socket) -> None:
        """Copy bytes both ways until either side closes (or the proxy stops)."""
        peers = {client: upstream, upstream: client}
        while not self._stopping.is_set():
            readable, _, _ = select.select(list(peers), [], [], 0.2)
            for source in readable:
                try:
                    data = source.recv(PIPE_CHUNK)
                except OSError:
                    return
                if not data:
                    return
                with contextlib.suppress(OSError):
                    peers[source].sendall(data)


def _read_head(client: socket.socket) -> tuple[str, dict[str, str], bytes] | None:
    """The request line, headers (names lower-cased) and any bytes the client sent after them (the start of
    the tunnelled stream); None if the client left or sent too much."""
    client.settimeout(10)
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            chunk = client.recv(4096)
        except OSError:
            return None
        if not chunk or len(data) + len(chunk) > MAX_REQUEST_HEAD:
            return None
        data += chunk
    client.settimeout(None)
    head, early = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return lines[0], headers, early
