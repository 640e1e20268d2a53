"""Behaviour specs for hostile or broken input: raw bytes on the AMQP port, nonsense addresses, oversized
messages and connection floods.

Whatever a peer sends, the emulator may close *that* connection (with an AMQP error where the protocol
allows one) but must keep serving everybody else: every test ends by sending and receiving through the real
SDK on the same emulator. Raw frames are built here with ``struct`` and a tiny AMQP encoder/decoder so the
tests do not depend on the emulator's own codec. Only 127.0.0.1 is used; every wait is bounded.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.exceptions import MessageSizeExceededError, ServiceBusAuthenticationError

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
FRAME_HEADER = struct.Struct(">IBBH")
FRAME_AMQP, FRAME_SASL = 0, 1
OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH, END, CLOSE = range(0x10, 0x19)
SASL_MECHANISMS, SASL_INIT, SASL_OUTCOME = 0x40, 0x41, 0x44
SOURCE, TARGET, ERROR = 0x28, 0x29, 0x1D
IO_TIMEOUT = 5.0


# ---------------------------------------------------------------------------------------------- AMQP codec


class Sym(str):
    """An AMQP symbol (encodes as sym8)."""


@dataclass(frozen=True)
class UInt:
    value: int


@dataclass(frozen=True)
class UByte:
    value: int


@dataclass(frozen=True)
class Described:
    descriptor: Any
    value: Any


def encode(value: Any) -> bytes:
    """Encode the few AMQP types these tests send."""
    if value is None:
        return b"\x40"
    if value is True:
        return b"\x41"
    if value is False:
        return b"\x42"
    if isinstance(value, UByte):
        return b"\x50" + struct.pack(">B", value.value)
    if isinstance(value, UInt):
        return b"\x70" + struct.pack(">I", value.value)
    if isinstance(value, Sym):
        data = value.encode("ascii")
        return b"\xa3" + struct.pack(">B", len(data)) + data
    if isinstance(value, str):
        data = value.encode("utf-8")
        return b"\xa1" + struct.pack(">B", len(data)) + data
    if isinstance(value, bytes):
        return b"\xa0" + struct.pack(">B", len(value)) + value
    if isinstance(value, list):
        items = b"".join(encode(item) for item in value)
        return b"\xc0" + struct.pack(">BB", len(items) + 1, len(value)) + items
    if isinstance(value, Described):
        return b"\x00\x53" + struct.pack(">B", value.descriptor) + encode(value.value)
    raise TypeError(f"cannot encode {value!r}")


_FIXED = {
    0x50: (">B", 1), 0x51: (">b", 1), 0x60: (">H", 2), 0x61: (">h", 2), 0x70: (">I", 4), 0x71: (">i", 4),
    0x72: (">f", 4), 0x73: (">I", 4), 0x80: (">Q", 8), 0x81: (">q", 8), 0x82: (">d", 8), 0x83: (">q", 8),
    0x52: (">B", 1), 0x53: (">B", 1), 0x54: (">b", 1), 0x55: (">b", 1),
}  # fmt: skip


def decode(buf: bytes, pos: int = 0) -> tuple[Any, int]:
    """Decode one AMQP value (enough of the type system to read the emulator's performatives)."""
    code = buf[pos]
    pos += 1
    if code == 0x00:
        descriptor, pos = decode(buf, pos)
        value, pos = decode(buf, pos)
        return Described(descriptor, value), pos
    if code == 0x40:
        return None, pos
    if code in (0x41, 0x42):
        return code == 0x41, pos
    if code == 0x56:
        return buf[pos] == 1, pos + 1
    if code in (0x43, 0x44):
        return 0, pos
    if code == 0x45:
        return [], pos
    if code in _FIXED:
        fmt, size = _FIXED[code]
        return struct.unpack_from(fmt, buf, pos)[0], pos + size
    if code == 0x98:
        return uuid.UUID(bytes=bytes(buf[pos : pos + 16])), pos + 16
    if code in (0xA0, 0xA1, 0xA3, 0xB0, 0xB1, 0xB3):
        if code < 0xB0:
            length, pos = buf[pos], pos + 1
        else:
            length, pos = struct.unpack_from(">I", buf, pos)[0], pos + 4
        raw = bytes(buf[pos : pos + length])
        pos += length
        if code in (0xA0, 0xB0):
            return raw, pos
        return (Sym(raw.decode("ascii")) if code in (0xA3, 0xB3) else raw.decode("utf-8")), pos
    if code in (0xC0, 0xC1, 0xD0, 0xD1):
        if code in (0xC0, 0xC1):
            _size, count = buf[pos], buf[pos + 1]
            pos += 2
        else:
            _size, count = struct.unpack_from(">II", buf, pos)
            pos += 8
        items = []
        for _ in range(count):
            item, pos = decode(buf, pos)
            items.append(item)
        if code in (0xC1, 0xD1):
            return dict(zip(items[::2], items[1::2], strict=True)), pos
        return items, pos
    if code in (0xE0, 0xF0):
        if code == 0xE0:
            _size, count = buf[pos], buf[pos + 1]
            pos += 2
        else:
            _size, count = struct.unpack_from(">II", buf, pos)
            pos += 8
        element = buf[pos]
        items = []
        for _ in range(count):
            item, _end = decode(bytes([element]) + bytes(buf[pos + 1 :]), 0)
            pos += _end - 1
            items.append(item)
        return items, pos + 1
    raise ValueError(f"unsupported AMQP constructor 0x{code:02x} at {pos - 1}")


def frame(body: bytes, channel: int = 0, frame_type: int = FRAME_AMQP) -> bytes:
    return FRAME_HEADER.pack(8 + len(body), 2, frame_type, channel) + body


def performative(code: int, fields: list[Any], channel: int = 0, frame_type: int = FRAME_AMQP) -> bytes:
    return frame(encode(Described(code, fields)), channel, frame_type)


@dataclass
class Frame:
    frame_type: int
    channel: int
    code: int | None
    fields: list[Any]


def error_condition(fields: list[Any], index: int) -> str | None:
    """The condition of the error composite at ``fields[index]`` (close: 0, end: 0, detach: 2)."""
    if len(fields) <= index or not isinstance(fields[index], Described):
        return None
    err = fields[index].value
    return str(err[0]) if err else None


# ---------------------------------------------------------------------------------------------- raw client


class RawConnection:
    """A TCP connection to the emulator's AMQP port driven byte by byte."""

    def __init__(self, port: int, timeout: float = IO_TIMEOUT) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buffer = b""

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self, deadline: float) -> bool:
        """Read more bytes; False on EOF or reset."""
        self.sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            chunk = self.sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return False
        if not chunk:
            return False
        self.buffer += chunk
        return True

    def read_exact(self, n: int, timeout: float = IO_TIMEOUT) -> bytes:
        deadline = time.monotonic() + timeout
        while len(self.buffer) < n:
            if not self._fill(deadline):
                raise EOFError(f"connection closed after {len(self.buffer)} of {n} bytes: {self.buffer!r}")
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def read_frame(self, timeout: float = IO_TIMEOUT) -> Frame:
        header = self.read_exact(8, timeout)
        size, doff, frame_type, channel = FRAME_HEADER.unpack(header)
        body = self.read_exact(size - 8, timeout)[doff * 4 - 8 :]
        if not body:
            return Frame(frame_type, channel, None, [])
        value, _ = decode(body)
        assert isinstance(value, Described), f"frame body is not described: {body!r}"
        return Frame(frame_type, channel, value.descriptor, value.value or [])

    def read_until_closed(self, timeout: float = IO_TIMEOUT) -> tuple[list[Frame], bytes]:
        """Everything the emulator sends until it closes the socket; fails if it does not close in time."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if not self._fill(deadline):
                    break
            except TimeoutError:
                pytest.fail(f"the emulator did not close the connection within {timeout} s")
            if time.monotonic() > deadline:
                pytest.fail(f"the emulator did not close the connection within {timeout} s")
        raw = self.buffer
        frames: list[Frame] = []
        pos = 0
        while raw[pos : pos + 4] == b"AMQP":  # protocol headers precede the frames
            pos += 8
        while len(raw) - pos >= 8:
            size, doff, frame_type, channel = FRAME_HEADER.unpack_from(raw, pos)
            if size < 8 or len(raw) - pos < size:
                break
            body = raw[pos + doff * 4 : pos + size]
            pos += size
            if not body:
                frames.append(Frame(frame_type, channel, None, []))
                continue
            value, _ = decode(body)
            frames.append(Frame(frame_type, channel, value.descriptor, value.value or []))
        return frames, raw

    # Protocol steps ------------------------------------------------------------------------------

    def sasl_anonymous(self) -> None:
        self.send(SASL_HEADER)
        assert self.read_exact(8) == SASL_HEADER
        mechanisms = self.read_frame()
        assert (mechanisms.frame_type, mechanisms.code) == (FRAME_SASL, SASL_MECHANISMS)
        self.send(performative(SASL_INIT, [Sym("ANONYMOUS"), b"", "localhost"], frame_type=FRAME_SASL))
        outcome = self.read_frame()
        assert (outcome.frame_type, outcome.code) == (FRAME_SASL, SASL_OUTCOME)
        assert outcome.fields[0] == 0, f"SASL outcome {outcome.fields}"

    def open(self) -> Frame:
        """SASL, AMQP header and Open; returns the emulator's Open."""
        self.sasl_anonymous()
        self.send(AMQP_HEADER)
        assert self.read_exact(8) == AMQP_HEADER
        self.send(performative(OPEN, ["raw-test-client", "localhost", UInt(65536)]))
        reply = self.read_frame()
        assert reply.code == OPEN, reply
        return reply

    def begin(self, channel: int = 1) -> Frame:
        self.send(performative(BEGIN, [None, UInt(0), UInt(1000), UInt(1000)], channel=channel))
        reply = self.read_frame()
        assert reply.code == BEGIN, reply
        return reply


@pytest.fixture
def raw_connections() -> Iterator[list[RawConnection]]:
    """Raw connections a test opens; all closed at the end."""
    opened: list[RawConnection] = []
    yield opened
    for connection in opened:
        connection.close()


def connect(port: int, registry: list[RawConnection]) -> RawConnection:
    connection = RawConnection(port)
    registry.append(connection)
    return connection


# ---------------------------------------------------------------------------------------------- SDK checks


def assert_still_serving(backend: Any) -> None:
    """A normal SDK client on the same emulator sends and receives."""
    queue = backend.create_queue()
    body = f"still alive {uuid.uuid4()}"
    with ServiceBusClient.from_connection_string(backend.connection_string, retry_total=1) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage(body))
        with client.get_queue_receiver(queue) as receiver:
            received = receiver.receive_messages(max_message_count=1, max_wait_time=10)
            assert [str(m) for m in received] == [body]
            receiver.complete_message(received[0])


def close_condition(frames: list[Frame]) -> str | None:
    closes = [f for f in frames if f.frame_type == FRAME_AMQP and f.code == CLOSE]
    assert closes, f"no Close frame before the socket closed: {frames}"
    return error_condition(closes[-1].fields, 0)


# ---------------------------------------------------------------------------------------------- headers


GARBAGE_HEADERS = {
    "text": b"GARBAGE!",
    "http": b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
    "tls-client-hello": bytes.fromhex("160301020001") + b"\x00" * 16,
    "amqp-0-9-1": b"AMQP\x00\x00\x09\x01",
    "amqp-tls-protocol": b"AMQP\x02\x01\x00\x00",
    "amqp-wrong-version": b"AMQP\x00\x02\x00\x00",
}


@pytest.mark.emulator_only
def test_garbage_instead_of_a_protocol_header_gets_a_header_and_a_close(
    emulator: Any, raw_connections: list[RawConnection], subtests: Any
) -> None:
    for name, garbage in GARBAGE_HEADERS.items():
        with subtests.test(msg=name):
            connection = connect(emulator.amqp_port, raw_connections)
            connection.send(garbage)

            _, raw = connection.read_until_closed()

            assert raw in (SASL_HEADER, AMQP_HEADER), f"expected exactly one supported header, got {raw!r}"

    assert_still_serving(emulator)


@pytest.mark.emulator_only
def test_truncated_input_then_close_does_not_hurt(
    emulator: Any, raw_connections: list[RawConnection], subtests: Any
) -> None:
    for garbage in (b"", b"A", b"AMQ", b"AMQP\x03\x01"):
        connection = connect(emulator.amqp_port, raw_connections)
        if garbage:
            connection.send(garbage)
        connection.close()

    with subtests.test(msg="half a sasl-init"):
        connection = connect(emulator.amqp_port, raw_connections)
        connection.send(SASL_HEADER)
        assert connection.read_exact(8) == SASL_HEADER
        connection.read_frame()
        init = performative(SASL_INIT, [Sym("ANONYMOUS"), b"", "localhost"], frame_type=FRAME_SASL)
        connection.send(init[: len(init) // 2])
        connection.close()

    begin = performative(BEGIN, [None, UInt(0), UInt(1000), UInt(1000)], channel=1)
    cuts = {
        "frame header cut": begin[:5],
        "frame body cut": begin[: len(begin) - 3],
        "declared size larger than sent": FRAME_HEADER.pack(4096, 2, FRAME_AMQP, 1) + begin[8:],
    }
    for name, partial in cuts.items():
        with subtests.test(msg=name):
            connection = connect(emulator.amqp_port, raw_connections)
            connection.open()
            connection.send(partial)
            connection.close()

    assert_still_serving(emulator)


# ------------------------------------------------------------------------------------------ framing errors


BAD_FRAME_HEADERS = {
    "absurd size 0xFFFFFFF0": (0xFFFFFFF0, 2),
    "size below 8": (4, 2),
    "doff below 2": (16, 1),
    "doff beyond the frame": (16, 200),
}


@pytest.mark.emulator_only
def test_bad_frame_header_closes_with_framing_error(
    emulator: Any, raw_connections: list[RawConnection], subtests: Any
) -> None:
    for name, (size, doff) in BAD_FRAME_HEADERS.items():
        with subtests.test(msg=f"after open: {name}"):
            connection = connect(emulator.amqp_port, raw_connections)
            connection.open()
            connection.send(FRAME_HEADER.pack(size, doff, FRAME_AMQP, 0) + b"\x00" * 8)

            frames, _ = connection.read_until_closed()

            assert close_condition(frames) == "amqp:connection:framing-error"

    with subtests.test(msg="before open: absurd size"):
        connection = connect(emulator.amqp_port, raw_connections)
        connection.sasl_anonymous()
        connection.send(AMQP_HEADER + FRAME_HEADER.pack(0xFFFFFFF0, 2, FRAME_AMQP, 0) + b"\x00" * 64)

        frames, raw = connection.read_until_closed()

        assert raw.startswith(AMQP_HEADER)
        assert close_condition(frames) == "amqp:connection:framing-error"

    with subtests.test(msg="a SASL frame after open"):
        connection = connect(emulator.amqp_port, raw_connections)
        connection.open()
        connection.send(performative(SASL_INIT, [Sym("ANONYMOUS"), b"", "localhost"], frame_type=FRAME_SASL))

        frames, _ = connection.read_until_closed()

        assert close_condition(frames) == "amqp:connection:framing-error"

    with subtests.test(msg="during SASL: absurd size"):
        connection = connect(emulator.amqp_port, raw_connections)
        connection.send(SASL_HEADER)
        assert connection.read_exact(8) == SASL_HEADER
        connection.read_frame()
        connection.send(FRAME_HEADER.pack(0xFFFFFFF0, 2, FRAME_SASL, 0) + b"\x00" * 64)

        connection.read_until_closed()  # closed (no AMQP Close is possible before the AMQP header)

    assert_still_serving(emulator)


MALFORMED_BODIES = {
    "invalid constructor": b"\xff\xff\xff",
    "list8 overruns the frame": b"\x00\x53\x11\xc0\xff\x05\x40",
    "list count exceeds its items": b"\x00\x53\x11\xc0\x02\x05\x40",
    "string overruns the list": b"\x00\x53\x11\xc0\x05\x01\xa1\x40abc",
    "described non-list": b"\x00\x53\x11\xa1\x03abc",
    "unknown performative": b"\x00\x53\x77\x45",
    "descriptor only": b"\x00\x53",
}


@pytest.mark.emulator_only
def test_malformed_performative_closes_with_decode_error(
    emulator: Any, raw_connections: list[RawConnection], subtests: Any
) -> None:
    for name, body in MALFORMED_BODIES.items():
        with subtests.test(msg=name):
            connection = connect(emulator.amqp_port, raw_connections)
            connection.open()
            connection.send(frame(body, channel=1))

            frames, _ = connection.read_until_closed()

            assert close_condition(frames) == "amqp:decode-error"

    with subtests.test(msg="a second open"):
        connection = connect(emulator.amqp_port, raw_connections)
        connection.open()
        connection.send(performative(OPEN, ["raw-test-client", "localhost", UInt(65536)]))

        frames, _ = connection.read_until_closed()

        assert close_condition(frames) == "amqp:illegal-state"

    with subtests.test(msg="flow on a channel that was never begun"):
        connection = connect(emulator.amqp_port, raw_connections)
        connection.open()
        connection.send(performative(FLOW, [UInt(0), UInt(100), UInt(0), UInt(100)], channel=7))

        frames, _ = connection.read_until_closed()

        assert close_condition(frames) is not None

    assert_still_serving(emulator)


# ----------------------------------------------------------------------------------------- management port


def health_status(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as response:
        return int(response.status)


@pytest.mark.emulator_only
def test_junk_on_the_management_port_does_not_hurt(emulator: Any, subtests: Any) -> None:
    port = emulator.management_port
    junk = {
        "binary": bytes(range(256)) * 4,
        "endless request line": b"GET /" + b"a" * 200_000,
        "header line without end": b"GET /health HTTP/1.1\r\nX-Junk: " + b"b" * 200_000,
        "half a request": b"GET /hea",
        "amqp header": SASL_HEADER,
    }
    for name, payload in junk.items():
        with subtests.test(msg=name):
            with (
                socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT) as sock,
                contextlib.suppress(OSError),  # the emulator may hang up mid-write
            ):
                sock.sendall(payload)
            assert health_status(port) == 200

    assert_still_serving(emulator)


# ---------------------------------------------------------------------------------------------- no token


@pytest.mark.emulator_only
def test_attach_without_a_cbs_token_is_refused_as_unauthorized(
    emulator: Any, raw_connections: list[RawConnection], subtests: Any
) -> None:
    queue = emulator.create_queue()
    address = f"amqps://localhost:{emulator.amqp_port}/{queue}"
    for role in ("sender", "receiver"):
        with subtests.test(msg=role):
            connection = connect(emulator.amqp_port, raw_connections)
            connection.open()
            connection.begin(channel=1)
            is_receiver = role == "receiver"
            source = Described(SOURCE, [address if is_receiver else "raw-sender"])
            target = Described(TARGET, ["raw-receiver" if is_receiver else address])
            fields = [
                "raw-link",
                UInt(1),
                is_receiver,
                UByte(0),
                UByte(1),
                source,
                target,
                None,
                None,
                UInt(0),
            ]
            connection.send(performative(ATTACH, fields, channel=1))

            detach = None
            deadline = time.monotonic() + IO_TIMEOUT
            while detach is None and time.monotonic() < deadline:
                reply = connection.read_frame()
                assert reply.code != CLOSE, f"connection closed instead of refusing the link: {reply}"
                if reply.code == DETACH:
                    detach = reply
            assert detach is not None, "the link was not refused"
            assert detach.fields[1] is True, "a refused link is detached with closed=true"
            assert error_condition(detach.fields, 2) == "amqp:unauthorized-access"

    assert_still_serving(emulator)


# ---------------------------------------------------------------------------------------------- addresses


NONSENSE_SENDER_ADDRESSES = ["does-not-exist-{id}", "$weird/../x", "missing-{id}/deeper/still"]
NONSENSE_RECEIVER_ADDRESSES = [
    ("does-not-exist-{id}", None),
    ("$weird/../x", None),
    ("does-not-exist-{id}", ServiceBusSubQueue.DEAD_LETTER),
]


def test_nonsense_addresses_fail_authentication_as_missing_entities(backend: Any, subtests: Any) -> None:
    # Azure refuses the put-token for an entity that does not exist (see test_cbs_conformance.py).
    with ServiceBusClient.from_connection_string(backend.connection_string, retry_total=0) as client:
        for name in NONSENSE_SENDER_ADDRESSES:
            with subtests.test(msg=f"sender to {name}"), pytest.raises(ServiceBusAuthenticationError):  # noqa: SIM117
                with client.get_queue_sender(name.format(id=uuid.uuid4().hex[:8])) as sender:
                    sender.send_messages(ServiceBusMessage("lost"))
        for name, sub_queue in NONSENSE_RECEIVER_ADDRESSES:
            queue = name.format(id=uuid.uuid4().hex[:8])
            label = f"receiver from {name}" + (f" ({sub_queue.value})" if sub_queue else "")
            with subtests.test(msg=label), pytest.raises(ServiceBusAuthenticationError):  # noqa: SIM117
                with client.get_queue_receiver(queue, sub_queue=sub_queue) as receiver:
                    receiver.receive_messages(max_message_count=1, max_wait_time=2)
        with subtests.test(msg="receiver from a subscription of a missing topic"):
            topic = f"missing-topic-{uuid.uuid4().hex[:8]}"
            with (
                pytest.raises(ServiceBusAuthenticationError),
                client.get_subscription_receiver(topic, "some-subscription") as receiver,
            ):
                receiver.receive_messages(max_message_count=1, max_wait_time=2)

    assert_still_serving(backend)


# ---------------------------------------------------------------------------------------------- sizes


def test_message_over_the_queue_limit_is_refused_quickly(backend: Any, subtests: Any) -> None:
    """A Standard namespace's queue (256 KB, fixed) refuses bigger messages with message-size-exceeded. The
    SDK does not check single messages against the link's max-message-size itself, so the refusal is the
    emulator's."""
    queue = backend.create_queue()
    with ServiceBusClient.from_connection_string(backend.connection_string, retry_total=0) as client:
        with client.get_queue_sender(queue) as sender:
            for label, size in (("300 KB, one frame", 300 * 1024), ("3 MB, many frames", 3 * 1024 * 1024)):
                with subtests.test(msg=label):
                    started = time.monotonic()
                    with pytest.raises(MessageSizeExceededError):
                        sender.send_messages(ServiceBusMessage(b"x" * size), timeout=30)
                    assert time.monotonic() - started < 15
            # The sender is still usable for a message that fits.
            sender.send_messages(ServiceBusMessage(b"y" * (250 * 1024)))
        with client.get_queue_receiver(queue) as receiver:
            received = receiver.receive_messages(max_message_count=5, max_wait_time=5)
            assert [b"".join(m.body) for m in received] == [b"y" * (250 * 1024)]
            receiver.complete_message(received[0])

    assert_still_serving(backend)


@pytest.mark.emulator_only
def test_delivery_over_the_reassembly_limit_is_refused_not_buffered(make_emulator: Any) -> None:
    """A multi-frame delivery larger than the broker will ever reassemble fails with message-size-exceeded
    instead of being buffered; the broker's ceiling is lowered so the test stays cheap."""
    private = make_emulator()
    queue = private.create_queue(max_message_size_in_kilobytes=102400)
    private.call(lambda: setattr(private.emulator.amqp, "max_delivery_bytes", 512 * 1024))
    started = time.monotonic()
    with (
        ServiceBusClient.from_connection_string(private.connection_string, retry_total=0) as client,
        client.get_queue_sender(queue) as sender,
        pytest.raises(MessageSizeExceededError),
    ):
        sender.send_messages(ServiceBusMessage(b"z" * (2 * 1024 * 1024)), timeout=30)
    assert time.monotonic() - started < 20

    assert_still_serving(private)


# ---------------------------------------------------------------------------------------------- floods


def _open_sdk_connection(connection_string: str, queue: str) -> None:
    with (
        ServiceBusClient.from_connection_string(connection_string, retry_total=2) as client,
        client.get_queue_sender(queue),
    ):
        pass  # entering the sender opens the connection (SASL, CBS, attach); leaving closes it


def connection_count(handle: Any) -> int:
    return int(handle.call(lambda: len(handle.emulator.amqp.connections)))


def wait_for_connection_count(handle: Any, at_most: int, timeout: float = 10) -> int:
    deadline = time.monotonic() + timeout
    count = connection_count(handle)
    while count > at_most and time.monotonic() < deadline:
        time.sleep(0.05)
        count = connection_count(handle)
    return count


@pytest.mark.emulator_only
def test_connection_flood_leaves_the_emulator_serving(emulator: Any) -> None:
    port = emulator.amqp_port
    baseline = connection_count(emulator)
    sockets: list[socket.socket] = []
    try:
        begin = performative(BEGIN, [None, UInt(0), UInt(1000), UInt(1000)], channel=1)
        for index in range(300):
            sock = socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT)
            sockets.append(sock)
            kind = index % 4
            if kind == 1:
                sock.sendall(b"AMQ")  # half a protocol header
            elif kind == 2:
                sock.sendall(SASL_HEADER)  # a header, then silence
            elif kind == 3:
                sock.sendall(SASL_HEADER + begin[:6])  # half a frame where sasl-init belongs
        # With 300 idle or half-written connections hanging, 50 SDK connections still get through.
        queue = emulator.create_queue()
        with ThreadPoolExecutor(max_workers=10) as pool:
            futures = [
                pool.submit(_open_sdk_connection, emulator.connection_string, queue) for _ in range(50)
            ]
            for future in futures:
                future.result(timeout=60)
        assert_still_serving(emulator)
    finally:
        for index, sock in enumerate(sockets):
            if index % 2:  # half of them reset instead of closing politely
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()

    assert_still_serving(emulator)
    # Every one of those connections is forgotten again (no leak).
    assert wait_for_connection_count(emulator, baseline) <= baseline


@pytest.mark.emulator_only
def test_connections_over_the_quota_are_refused_and_slots_are_freed(
    make_emulator: Any, raw_connections: list[RawConnection]
) -> None:
    private = make_emulator(max_connections=5)
    for _ in range(5):
        connect(private.amqp_port, raw_connections).send(SASL_HEADER)
    for connection in raw_connections:
        assert connection.read_exact(8) == SASL_HEADER

    # Over the quota, SASL and the header exchange proceed as usual (the SDK reports a header mismatch
    # otherwise); the client's open is answered with open + close(resource-limit-exceeded).
    refused = connect(private.amqp_port, raw_connections)
    refused.sasl_anonymous()
    refused.send(AMQP_HEADER + performative(OPEN, ["raw-test-client", "localhost", UInt(65536)]))
    assert refused.read_exact(8) == AMQP_HEADER
    frames = [refused.read_frame(), refused.read_frame()]

    assert [f.code for f in frames] == [OPEN, CLOSE]
    assert close_condition(frames) == "amqp:resource-limit-exceeded"
    refused.send(performative(CLOSE, []))
    refused.read_until_closed()

    for connection in raw_connections:
        connection.close()
    assert wait_for_connection_count(private, 0) == 0
    assert_still_serving(private)
