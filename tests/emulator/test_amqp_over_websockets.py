"""AMQP over WebSockets on the namespace's TLS ports, as Service Bus serves it on 443: the SDK's
``TransportType.AmqpOverWebsocket`` (websocket-client when sync, aiohttp when async) sends, receives and
settles through ``wss://<host>:<port>/$servicebus/websocket``.

The SDK always dials 443 for WebSockets unless given ``custom_endpoint_address`` (its documented option for
a gateway in front of the namespace; it appends ``/$servicebus/websocket`` itself), which is how these
tests reach the emulator's port. A hostile WebSocket client is closed with RFC 6455's close code while the
listener keeps serving the SDK.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import socket
import ssl
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from azure.core.credentials import AzureNamedKeyCredential
from azure.servicebus import ServiceBusClient, ServiceBusMessage, TransportType
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient

from emulator.testing import EmulatorHandle, start_emulator

CREDENTIAL = AzureNamedKeyCredential("RootManageSharedAccessKey", "SAS_KEY_VALUE")
PATH = "/$servicebus/websocket"


@pytest.fixture(scope="module")
def namespace() -> Iterator[EmulatorHandle]:
    handle = start_emulator(management_tls=True, management_tls_port=0, amqps_port=0)
    yield handle
    handle.stop()


def amqps_port(handle: EmulatorHandle) -> int:
    port = handle.emulator.amqps_port
    assert port is not None
    return port


def ca_file(handle: EmulatorHandle) -> str:
    assert handle.emulator.management_ca_file is not None
    return str(handle.emulator.management_ca_file)


def websocket_options(handle: EmulatorHandle, port: int) -> dict[str, Any]:
    return {
        "transport_type": TransportType.AmqpOverWebsocket,
        "custom_endpoint_address": f"sb://localhost:{port}",
        "connection_verify": ca_file(handle),
        "retry_total": 0,
    }


def send_receive_complete(handle: EmulatorHandle, port: int, body: str) -> list[str]:
    queue = handle.create_queue()
    with ServiceBusClient(f"localhost:{port}", CREDENTIAL, **websocket_options(handle, port)) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage(body))
        with client.get_queue_receiver(queue, max_wait_time=5) as receiver:
            received = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            for message in received:
                receiver.complete_message(message)
            # Settled: nothing is left to receive.
            assert receiver.receive_messages(max_wait_time=1) == []
    return [str(m) for m in received]


def test_the_sync_client_sends_receives_and_completes_over_websockets(
    namespace: EmulatorHandle, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="emulator.websocket")
    assert send_receive_complete(namespace, amqps_port(namespace), "over wss") == ["over wss"]
    # The SDK came in through the WebSocket upgrade, not AMQP over plain TLS on the same port.
    assert any("AMQP over WebSockets" in m for m in caplog.messages)


def test_the_https_admin_port_takes_amqp_over_websockets_too(namespace: EmulatorHandle) -> None:
    port = namespace.emulator.management_tls_port
    assert port is not None
    assert send_receive_complete(namespace, port, "on the admin port") == ["on the admin port"]


def test_the_async_client_sends_receives_and_settles_over_websockets(
    namespace: EmulatorHandle, caplog: pytest.LogCaptureFixture
) -> None:
    queue = namespace.create_queue()
    port = amqps_port(namespace)
    big = os.urandom(100_000).hex()  # frames over 64 KiB: the 8-byte length form, both ways

    async def scenario() -> tuple[list[str], list[str]]:
        options = websocket_options(namespace, port)
        async with AsyncServiceBusClient(f"localhost:{port}", CREDENTIAL, **options) as client:
            async with client.get_queue_sender(queue) as sender:
                await sender.send_messages([ServiceBusMessage("first"), ServiceBusMessage(big)])
            async with client.get_queue_receiver(queue, max_wait_time=5) as receiver:
                first = await receiver.receive_messages(max_message_count=1, max_wait_time=5)
                await receiver.abandon_message(first[0])
                again = await receiver.receive_messages(max_message_count=2, max_wait_time=5)
                for message in again:
                    await receiver.complete_message(message)
                return [str(m) for m in first], [str(m) for m in again]

    caplog.set_level(logging.DEBUG, logger="emulator.websocket")
    first, again = asyncio.run(scenario())
    assert any("AMQP over WebSockets" in m for m in caplog.messages)
    assert first == ["first"]
    assert again == ["first", big]


class RawWebSocket:
    """A TLS client speaking the WebSocket handshake and frames by hand, to send what no library would."""

    def __init__(self, handle: EmulatorHandle, port: int) -> None:
        context = ssl.create_default_context(cafile=ca_file(handle))
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock = context.wrap_socket(raw, server_hostname="localhost")
        self.buffer = b""

    def handshake(self, path: str = PATH, protocol: str = "AMQPWSB10") -> tuple[str, dict[str, str], bytes]:
        key = base64.b64encode(uuid.uuid4().bytes).decode()
        self.sock.sendall(
            (
                f"GET {path} HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                f"Sec-WebSocket-Protocol: {protocol}\r\n\r\n"
            ).encode()
        )
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self.recv()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        status, *lines = head.decode("latin-1").split("\r\n")
        headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
        body = b""
        if "content-length" in headers:
            body = self.read(int(headers["content-length"]))
        return status, headers, body

    def recv(self) -> bytes:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("closed by the emulator")
        return data

    def read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            self.buffer += self.recv()
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def send_frame(
        self, first: int, payload: bytes, *, masked: bool = True, length: int | None = None
    ) -> None:
        size = len(payload) if length is None else length
        head = bytes((first,))
        mask_bit = 0x80 if masked else 0
        if size < 126:
            head += bytes((mask_bit | size,))
        elif size < 1 << 16:
            head += bytes((mask_bit | 126,)) + size.to_bytes(2, "big")
        else:
            head += bytes((mask_bit | 127,)) + size.to_bytes(8, "big")
        if masked:
            mask = os.urandom(4)
            payload = mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + payload)

    def read_frame(self) -> tuple[int, bytes]:
        first, second = self.read(2)
        assert second & 0x80 == 0, "server frames are never masked"
        size = second & 0x7F
        if size == 126:
            size = int.from_bytes(self.read(2), "big")
        elif size == 127:
            size = int.from_bytes(self.read(8), "big")
        return first & 0x0F, self.read(size)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw(namespace: EmulatorHandle) -> Iterator[RawWebSocket]:
    client = RawWebSocket(namespace, amqps_port(namespace))
    yield client
    client.close()


def test_the_handshake_accepts_the_amqp_subprotocol_with_the_rfc_6455_accept_key(
    raw: RawWebSocket,
) -> None:
    status, headers, _ = raw.handshake()
    assert status == "HTTP/1.1 101 Switching Protocols"
    assert headers["sec-websocket-protocol"] == "AMQPWSB10"
    assert headers["upgrade"].lower() == "websocket"
    # The AMQP front end answers the SASL header, framed as one binary message.
    raw.send_frame(0x82, b"AMQP\x03\x01\x00\x00")
    opcode, payload = raw.read_frame()
    assert (opcode, payload) == (0x2, b"AMQP\x03\x01\x00\x00")


def test_a_ping_gets_a_pong_and_a_fragmented_header_reaches_amqp(raw: RawWebSocket) -> None:
    raw.handshake()
    raw.send_frame(0x89, b"are you there")
    assert raw.read_frame() == (0xA, b"are you there")
    raw.send_frame(0x02, b"AMQP\x03")  # binary, not final
    raw.send_frame(0x80, b"\x01\x00\x00")  # final continuation
    assert raw.read_frame() == (0x2, b"AMQP\x03\x01\x00\x00")


def test_a_close_frame_is_answered_with_a_close_frame(raw: RawWebSocket) -> None:
    raw.handshake()
    raw.send_frame(0x88, (1000).to_bytes(2, "big"))
    opcode, payload = raw.read_frame()
    assert (opcode, payload[:2]) == (0x8, (1000).to_bytes(2, "big"))


@pytest.mark.parametrize(
    ("first", "payload", "masked", "length", "code", "reason"),
    [
        (0x82, b"AMQP\x03\x01\x00\x00", False, None, 1002, "must be masked"),
        (0x82, b"", True, 5 * 1024 * 1024, 1009, "exceeds the limit"),
        (0x81, b"AMQP", True, None, 1003, "binary frames only"),
        (0x83, b"", True, None, 1002, "unknown opcode 0x3"),
        (0x80, b"AMQP", True, None, 1002, "continuation frame"),
        (0xC2, b"AMQP", True, None, 1002, "reserved bits"),
    ],
    ids=["unmasked", "oversized", "text", "unknown-opcode", "stray-continuation", "reserved-bits"],
)
def test_a_bad_frame_closes_the_websocket_with_its_code_and_the_listener_keeps_serving(
    namespace: EmulatorHandle,
    raw: RawWebSocket,
    caplog: pytest.LogCaptureFixture,
    first: int,
    payload: bytes,
    masked: bool,
    length: int | None,
    code: int,
    reason: str,
) -> None:
    caplog.set_level(logging.INFO, logger="emulator.websocket")
    raw.handshake()
    raw.send_frame(first, payload, masked=masked, length=length)
    opcode, close = raw.read_frame()
    assert opcode == 0x8
    assert int.from_bytes(close[:2], "big") == code
    assert reason in close[2:].decode()
    assert any(f"closing with {code}" in m and reason in m for m in caplog.messages)
    # The emulator drops that connection and serves the next client.
    with pytest.raises((ConnectionError, ssl.SSLError, OSError)):
        while True:
            raw.recv()
    other = RawWebSocket(namespace, amqps_port(namespace))
    try:
        assert other.handshake()[0] == "HTTP/1.1 101 Switching Protocols"
        other.send_frame(0x82, b"AMQP\x03\x01\x00\x00")
        assert other.read_frame() == (0x2, b"AMQP\x03\x01\x00\x00")
    finally:
        other.close()


@pytest.mark.parametrize(
    ("path", "protocol", "status", "message"),
    [
        ("/$servicebus/other", "AMQPWSB10", "404", "/$servicebus/websocket"),
        (PATH, "mqtt", "400", "AMQPWSB10"),
    ],
    ids=["wrong-path", "wrong-subprotocol"],
)
def test_an_upgrade_on_another_path_or_subprotocol_is_refused_with_a_clear_message(
    raw: RawWebSocket, path: str, protocol: str, status: str, message: str
) -> None:
    line, _headers, body = raw.handshake(path, protocol)
    assert line.split(" ")[1] == status
    assert message in json.loads(body)["error"]["message"]
