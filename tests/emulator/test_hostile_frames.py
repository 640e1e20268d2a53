"""Behaviour specs for small hostile frames that used to cost the whole broker its responsiveness.

Each case is sent on a raw socket (no CBS token: before any authentication). The hostile connection gets a
precise AMQP error, and while it is handled a normal SDK client on the same emulator sends and receives.
Raw frames come from the byte-level helpers of ``test_bad_input`` so the emulator's own codec is not used.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusConnectionError, ServiceBusError

from tests.emulator.test_bad_input import (
    AMQP_HEADER,
    ATTACH,
    BEGIN,
    CLOSE,
    DISPOSITION,
    FRAME_AMQP,
    OPEN,
    SASL_HEADER,
    TARGET,
    TRANSFER,
    Described,
    Frame,
    RawConnection,
    UInt,
    assert_still_serving,
    close_condition,
    encode,
    frame,
    performative,
    wait_for_connection_count,
)

ACCEPTED = 0x24
REJECTED = 0x25


@pytest.fixture
def raw_connections() -> Iterator[list[RawConnection]]:
    opened: list[RawConnection] = []
    yield opened
    for connection in opened:
        connection.close()


def connect(port: int, registry: list[RawConnection]) -> RawConnection:
    connection = RawConnection(port)
    registry.append(connection)
    return connection


def close_description(frames: list[Frame]) -> str:
    closes = [f for f in frames if f.frame_type == FRAME_AMQP and f.code == CLOSE]
    assert closes and isinstance(closes[-1].fields[0], Described), f"no Close with an error: {frames}"
    return str(closes[-1].fields[0].value[1])


def serve_while(emulator: Any, hostile: RawConnection) -> tuple[list[Frame], bytes]:
    """Check an SDK client is served while the hostile frame is being handled, then read the hostile
    connection's end."""
    assert_still_serving(emulator)
    return hostile.read_until_closed()


# ------------------------------------------------------------------------------------------- counts


def _begin_with_capabilities(capabilities: bytes) -> bytes:
    """A begin whose offered-capabilities field (index 5) is the raw encoding given."""
    fields = encode(None) + encode(UInt(0)) + encode(UInt(1000)) + encode(UInt(1000)) + encode(None)
    body_items = fields + capabilities
    body = b"\x00\x53" + bytes([BEGIN]) + b"\xd0" + struct.pack(">II", len(body_items) + 4, 6) + body_items
    return frame(body, channel=1)


def _array_of_nulls(count: int) -> bytes:
    # array32: size covers count (4 bytes) + element constructor (1 byte); no element bytes at all.
    return b"\xf0" + struct.pack(">II", 5, count) + b"\x40"


def _array_of_uints(count: int) -> bytes:
    return b"\xf0" + struct.pack(">II", 5 + 8, count) + b"\x70" + b"\x00" * 8


def _list_of_items(count: int) -> bytes:
    return b"\xd0" + struct.pack(">II", 4 + 3, count) + b"\x40\x40\x40"


def _map_of_items(count: int) -> bytes:
    return b"\xd1" + struct.pack(">II", 4 + 2, count) + b"\x40\x40"


HUGE_COUNTS = {
    "array of 1 million nulls in 5 bytes": _array_of_nulls(1_000_000),
    "array of 100 million nulls in 5 bytes": _array_of_nulls(100_000_000),
    "array of 4294967295 nulls in 5 bytes": _array_of_nulls(0xFFFFFFFF),
    "array of 4294967295 uints in 13 bytes": _array_of_uints(0xFFFFFFFF),
    "list of 4294967295 items in 7 bytes": _list_of_items(0xFFFFFFFF),
    "map of 4294967294 items in 6 bytes": _map_of_items(0xFFFFFFFE),
}


@pytest.mark.emulator_only
def test_a_count_larger_than_the_bytes_present_is_a_decode_error_and_others_are_served(
    emulator: Any, raw_connections: list[RawConnection], subtests: Any
) -> None:
    for name, value in HUGE_COUNTS.items():
        with subtests.test(msg=name):
            hostile = connect(emulator.amqp_port, raw_connections)
            hostile.open()
            hostile.send(_begin_with_capabilities(value))

            frames, _ = serve_while(emulator, hostile)

            assert close_condition(frames) == "amqp:decode-error"
            assert "declares" in close_description(frames)


@pytest.mark.emulator_only
def test_a_performative_nested_thousands_deep_is_a_decode_error(
    emulator: Any, raw_connections: list[RawConnection]
) -> None:
    depth = 100_000
    # list32 inside list32, 100,000 deep (900 KB: fits one frame); level k from the inside is 9k + 1 bytes.
    nested = b"".join(b"\xd0" + struct.pack(">II", 4 + 9 * (depth - i - 1) + 1, 1) for i in range(depth))
    nested += b"\x40"
    hostile = connect(emulator.amqp_port, raw_connections)
    hostile.open()
    body = b"\x00\x53" + bytes([BEGIN]) + b"\xd0" + struct.pack(">II", len(nested) + 4, 1) + nested
    hostile.send(frame(body, channel=1))

    frames, _ = serve_while(emulator, hostile)

    assert close_condition(frames) == "amqp:decode-error"
    assert "nested too deeply" in close_description(frames)


# ------------------------------------------------------------------------------------------- dispositions


DISPOSITION_RANGES = {
    "every delivery-id (0..4294967295)": (0, 0xFFFFFFFF),
    "ids never sent (10..20)": (10, 20),
    "a range that wraps (4294967290..5)": (0xFFFFFFFA, 5),
}


@pytest.mark.emulator_only
def test_a_disposition_over_ids_never_sent_closes_that_connection_at_once(
    emulator: Any, raw_connections: list[RawConnection], subtests: Any
) -> None:
    for name, (first, last) in DISPOSITION_RANGES.items():
        with subtests.test(msg=name):
            hostile = connect(emulator.amqp_port, raw_connections)
            hostile.open()
            hostile.begin(channel=1)
            accepted = Described(ACCEPTED, [])
            hostile.send(
                performative(DISPOSITION, [True, UInt(first), UInt(last), True, accepted], channel=1)
            )

            frames, _ = serve_while(emulator, hostile)

            assert close_condition(frames) == "amqp:invalid-field"
            assert f"first={first} last={last}" in close_description(frames)


# ------------------------------------------------------------------------------------------- transfers


def _attach_cbs_sender(connection: RawConnection, handle: int) -> None:
    """A sender link to $cbs: needs no token, and its transfers are reassembled like any other."""
    target = Described(TARGET, ["$cbs"])
    connection.send(
        performative(ATTACH, [f"cbs-{handle}", UInt(handle), False, None, None, None, target], channel=1)
    )
    reply = connection.read_frame()
    assert reply.code == ATTACH, reply
    flow = connection.read_frame()
    assert flow.code is not None, flow


def _transfer(handle: int, delivery_id: int, payload: bytes, more: bool) -> bytes:
    fields = [UInt(handle), UInt(delivery_id), f"tag-{delivery_id}".encode(), UInt(0), False, more]
    return frame(encode(Described(TRANSFER, fields)) + payload, channel=1)


def _buffered(handle: Any) -> int:
    return int(
        handle.call(
            lambda: max((c.buffered_transfer_bytes() for c in handle.emulator.amqp.connections), default=0)
        )
    )


@pytest.mark.emulator_only
def test_unfinished_deliveries_are_capped_per_connection_and_the_crossing_one_is_refused(
    make_emulator: Any, raw_connections: list[RawConnection]
) -> None:
    """Two links each reassembling a large delivery: the one that takes the connection past its budget is
    read and thrown away, then refused with resource-limit-exceeded; the connection stays up."""
    private = make_emulator()
    cap = 600 * 1024
    private.call(lambda: setattr(private.emulator.amqp, "max_connection_buffer_bytes", cap))
    hostile = connect(private.amqp_port, raw_connections)
    hostile.open()
    hostile.begin(channel=1)
    _attach_cbs_sender(hostile, 0)
    _attach_cbs_sender(hostile, 1)
    chunk = b"x" * (400 * 1024)

    hostile.send(_transfer(0, 0, chunk, more=True))
    hostile.send(_transfer(1, 1, chunk, more=True))
    hostile.send(_transfer(1, 1, chunk, more=True))
    assert_still_serving(private)
    assert _buffered(private) <= cap
    hostile.send(_transfer(1, 1, b"end", more=False))

    disposition = hostile.read_frame()
    assert disposition.code == DISPOSITION, disposition
    assert disposition.fields[1] == 1  # the second link's delivery
    state = disposition.fields[4]
    assert isinstance(state, Described) and state.descriptor == REJECTED
    condition = str(state.value[0].value[0])
    description = str(state.value[0].value[1])
    assert condition == "amqp:resource-limit-exceeded"
    assert f"more than {cap} bytes" in description
    # The first link's delivery is still being reassembled and the connection still answers.
    assert _buffered(private) == len(chunk)
    hostile.begin(channel=2)


# ------------------------------------------------------------------------------------------- handshakes


@pytest.mark.emulator_only
def test_connections_that_never_finish_the_handshake_are_closed_and_free_their_slots(
    make_emulator: Any, raw_connections: list[RawConnection], subtests: Any
) -> None:
    private = make_emulator(max_connections=5)
    private.call(lambda: setattr(private.emulator.amqp, "handshake_timeout", 1.0))
    opened = connect(private.amqp_port, raw_connections)
    opened.open()
    silent = connect(private.amqp_port, raw_connections)
    half_header = connect(private.amqp_port, raw_connections)
    half_header.send(b"AMQ")
    after_sasl = connect(private.amqp_port, raw_connections)
    after_sasl.sasl_anonymous()
    no_open = connect(private.amqp_port, raw_connections)
    no_open.sasl_anonymous()
    no_open.send(AMQP_HEADER)
    assert no_open.read_exact(8) == AMQP_HEADER

    with subtests.test(msg="silent and half-written sockets are closed"):
        for connection in (silent, half_header, after_sasl):
            frames, _ = connection.read_until_closed(timeout=15)
            assert not [f for f in frames if f.frame_type == FRAME_AMQP and f.code is not None]
    with subtests.test(msg="after the AMQP header: a close saying why"):
        frames, _ = no_open.read_until_closed(timeout=15)
        assert close_condition(frames) == "amqp:connection:forced"
        assert "did not complete the AMQP handshake" in close_description(frames)
    with subtests.test(msg="a connection that finished its handshake is not subject to the timeout"):
        assert opened.begin(channel=1).code == BEGIN
    with subtests.test(msg="the quota slots are free again for real clients"):
        assert wait_for_connection_count(private, 1) == 1
        assert_still_serving(private)


# ------------------------------------------------------------------------------------------- quota


@pytest.mark.emulator_only
def test_a_client_over_the_connection_quota_is_told_the_quota_was_exceeded(
    make_emulator: Any, raw_connections: list[RawConnection]
) -> None:
    private = make_emulator(max_connections=2)
    queue = private.create_queue()
    for _ in range(2):
        connect(private.amqp_port, raw_connections).open()

    with (
        ServiceBusClient.from_connection_string(private.connection_string, retry_total=0) as client,
        pytest.raises(ServiceBusError) as raised,
        client.get_queue_sender(queue) as sender,
    ):
        sender.send_messages(ServiceBusMessage("over the quota"), timeout=20)

    # The SDK maps a connection closed with an error to ServiceBusConnectionError, carrying Azure's
    # condition and the description (before: "Mismatching AMQP header protocol").
    text = str(raised.value)
    assert isinstance(raised.value, ServiceBusConnectionError)
    assert "amqp:resource-limit-exceeded" in text
    assert "quota of 2 concurrent connections" in text

    for connection in raw_connections:
        connection.close()
    assert wait_for_connection_count(private, 0) == 0
    assert_still_serving(private)


@pytest.mark.emulator_only
def test_a_raw_client_over_the_quota_gets_sasl_then_open_and_a_resource_limit_close(
    make_emulator: Any, raw_connections: list[RawConnection]
) -> None:
    private = make_emulator(max_connections=1)
    connect(private.amqp_port, raw_connections).send(SASL_HEADER)
    refused = connect(private.amqp_port, raw_connections)
    refused.sasl_anonymous()
    refused.send(AMQP_HEADER)
    refused.send(performative(OPEN, ["raw-test-client", "localhost", UInt(65536)]))

    assert refused.read_exact(8) == AMQP_HEADER
    frames = [refused.read_frame(), refused.read_frame()]
    assert [f.code for f in frames] == [OPEN, CLOSE]
    assert close_condition(frames) == "amqp:resource-limit-exceeded"

    # The emulator waits for the peer's close, then drops the socket.
    refused.send(performative(CLOSE, []))
    assert refused.read_until_closed()[1] == b""
