"""Behaviour specs for message sessions, through the real azure-servicebus SDK (sync and ``aio``).

Named and NEXT_AVAILABLE session receivers, the exclusive session lock (its expiry, renewal by hand and by
AutoLockRenewer), session state (across consumers and restarts), strict FIFO inside a session, the refusal of
messages without a SessionId, ``list_queue_sessions`` and the seed-004 "Verify" checks for sessions: 50
out-of-order payloads observed in send order, 8 concurrent consumers without interleaving inside a session,
and a consumer killed mid-session whose session another consumer takes over after the lock expires.

Notes on the SDK (7.15) that shape these tests:

* ``SessionCannotBeLockedError`` and ``OperationTimeoutError`` are retryable: with the default retry policy
  (3 retries, exponential back-off from 0.8 s) a failing session accept takes many seconds. Tests that
  time such a failure use ``retry_total=0``.
* The SDK refuses locally to use a session whose ``locked_until_utc`` has passed (``SessionLockLostError``),
  so broker-side expiry is checked through what *another* receiver can do with the session.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from azure.servicebus import (
    NEXT_AVAILABLE_SESSION,
    AutoLockRenewer,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
)
from azure.servicebus.aio import AutoLockRenewer as AsyncAutoLockRenewer
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.aio import ServiceBusReceiver as AsyncServiceBusReceiver
from azure.servicebus.exceptions import (
    OperationTimeoutError,
    ServiceBusError,
    SessionCannotBeLockedError,
    SessionLockLostError,
)

from tests.emulator.sdk_helpers import (
    async_sdk_client,
    receive,
    sdk_client,
    seconds_from_now,
    sequence_number,
    single_queue_config,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from emulator.testing import EmulatorHandle
    from tests.emulator.backends import Backend

WAIT = 1  # seconds a receiver waits on an empty session
LOCK = timedelta(seconds=5)  # the shortest lock duration Azure accepts
LOCK_S = LOCK.total_seconds()


def _session_queue(backend: Backend, **properties: Any) -> str:
    properties.setdefault("lock_duration", LOCK)
    return backend.create_queue(requires_session=True, **properties)


def _send(backend: Backend, queue: str, messages: Iterable[ServiceBusMessage]) -> None:
    with sdk_client(backend) as client, client.get_queue_sender(queue) as sender:
        for message in messages:
            sender.send_messages(message)


def _msg(session_id: str, body: str, **kwargs: Any) -> ServiceBusMessage:
    return ServiceBusMessage(body, session_id=session_id, **kwargs)


async def _areceive(
    receiver: AsyncServiceBusReceiver, count: int, wait: float = WAIT
) -> list[ServiceBusReceivedMessage]:
    received: list[ServiceBusReceivedMessage] = []
    while len(received) < count:
        batch = await receiver.receive_messages(max_message_count=count - len(received), max_wait_time=wait)
        if not batch:
            break
        received.extend(batch)
    return received


def _assert_session_locked_elsewhere(backend: Backend, queue: str, session_id: str) -> None:
    """Opening a second receiver for ``session_id`` is refused with SessionCannotBeLockedError (no retries).

    Opening is enough: the session is accepted on link attach, and receiving nothing keeps a wrongly
    granted session's messages untouched."""
    with sdk_client(backend, retry_total=0) as other, pytest.raises(SessionCannotBeLockedError):
        other.get_queue_receiver(queue, session_id=session_id, max_wait_time=WAIT).__enter__().close()


# ---------------------------------------------------------------------------------------------- receivers


def test_named_session_receiver_gets_only_its_session_in_order(backend: Backend) -> None:
    queue = _session_queue(backend)
    _send(
        backend, queue, [_msg("a", "a0"), _msg("b", "b0"), _msg("a", "a1"), _msg("b", "b1"), _msg("a", "a2")]
    )

    with (
        sdk_client(backend) as client,
        client.get_queue_receiver(queue, session_id="a", max_wait_time=WAIT) as rx,
    ):
        received = receive(rx, 3, WAIT)
        assert rx.session.session_id == "a"
        assert 0.5 * LOCK_S < seconds_from_now(rx.session.locked_until_utc) <= LOCK_S + 1
        assert [str(m) for m in received] == ["a0", "a1", "a2"]
        assert [m.session_id for m in received] == ["a", "a", "a"]
        assert [m.delivery_count for m in received] == [0, 0, 0]
        # A session receiver's peek browses its own session only, locked messages included.
        peeked = rx.peek_messages(max_message_count=10, sequence_number=1)
        assert [str(m) for m in peeked] == ["a0", "a1", "a2"]
        for message in received:
            rx.complete_message(message)

    with (
        sdk_client(backend) as client,
        client.get_queue_receiver(queue, session_id="b", max_wait_time=WAIT) as rx,
    ):
        assert [str(m) for m in rx.peek_messages(max_message_count=10, sequence_number=1)] == ["b0", "b1"]
        rest = receive(rx, 2, WAIT)
        assert [str(m) for m in rest] == ["b0", "b1"]
        for message in rest:
            rx.complete_message(message)


def test_next_available_receivers_learn_their_session_ids_and_get_different_sessions(
    backend: Backend,
) -> None:
    queue = _session_queue(backend)
    _send(backend, queue, [_msg("x", "x0"), _msg("y", "y0"), _msg("x", "x1"), _msg("y", "y1")])

    with (
        sdk_client(backend) as client,
        client.get_queue_receiver(queue, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=WAIT) as first,
        client.get_queue_receiver(queue, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=WAIT) as second,
    ):
        ids = {first.session.session_id, second.session.session_id}
        assert ids == {"x", "y"}
        for rx in (first, second):
            sid = rx.session.session_id
            assert 0.5 * LOCK_S < seconds_from_now(rx.session.locked_until_utc) <= LOCK_S + 1
            messages = receive(rx, 2, WAIT)
            assert [str(m) for m in messages] == [f"{sid}0", f"{sid}1"]
            assert {m.session_id for m in messages} == {sid}
            for message in messages:
                rx.complete_message(message)


def test_async_named_and_next_available_session_receivers(backend: Backend) -> None:
    queue = _session_queue(backend)

    async def scenario() -> dict[str, Any]:
        async with async_sdk_client(backend) as client:
            async with client.get_queue_sender(queue) as sender:
                await sender.send_messages([_msg("n", "n0"), _msg("m", "m0"), _msg("n", "n1")])
            async with client.get_queue_receiver(queue, session_id="n", max_wait_time=WAIT) as named:
                named_messages = await _areceive(named, 3)
                named_id = named.session.session_id
                for message in named_messages:
                    await named.complete_message(message)
            async with client.get_queue_receiver(
                queue, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=WAIT
            ) as any_rx:
                next_id = any_rx.session.session_id
                next_messages = await _areceive(any_rx, 2)
                for message in next_messages:
                    await any_rx.complete_message(message)
        return {
            "named_id": named_id,
            "named": [str(m) for m in named_messages],
            "next_id": next_id,
            "next": [(m.session_id, str(m)) for m in next_messages],
        }

    outcome = asyncio.run(scenario())
    assert outcome["named_id"] == "n"
    assert outcome["named"] == ["n0", "n1"]
    assert outcome["next_id"] == "m"
    assert outcome["next"] == [("m", "m0")]


def test_next_available_times_out_after_max_wait_time_when_no_session_is_free(
    backend: Backend,
) -> None:
    queue = _session_queue(backend)

    with sdk_client(backend, retry_total=0) as client:
        started = time.monotonic()
        with (
            pytest.raises(OperationTimeoutError),
            client.get_queue_receiver(queue, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=WAIT) as rx,
        ):
            rx.receive_messages(max_message_count=1, max_wait_time=WAIT)
        elapsed = time.monotonic() - started
    assert 0.8 * WAIT <= elapsed < WAIT + 3, f"empty queue: timed out after {elapsed:.2f} s"

    # A session that has messages but is locked by someone else is not "available" either.
    _send(backend, queue, [_msg("busy", "b0")])
    with (
        sdk_client(backend) as owner_client,
        owner_client.get_queue_receiver(queue, session_id="busy", max_wait_time=WAIT) as owner,
        sdk_client(backend, retry_total=0) as client,
    ):
        started = time.monotonic()
        with (
            pytest.raises(OperationTimeoutError),
            client.get_queue_receiver(queue, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=WAIT) as rx,
        ):
            rx.receive_messages(max_message_count=1, max_wait_time=WAIT)
        elapsed = time.monotonic() - started
        assert 0.8 * WAIT <= elapsed < WAIT + 3, f"locked session: timed out after {elapsed:.2f} s"
        assert [str(m) for m in receive(owner, 1, WAIT)] == ["b0"]


def test_async_next_available_times_out_when_no_session_is_free(backend: Backend) -> None:
    queue = _session_queue(backend)

    async def scenario() -> tuple[type[BaseException] | None, float]:
        async with async_sdk_client(backend, retry_total=0) as client:
            started = time.monotonic()
            try:
                async with client.get_queue_receiver(
                    queue, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=WAIT
                ) as rx:
                    await rx.receive_messages(max_message_count=1, max_wait_time=WAIT)
            except Exception as exc:  # the type is the assertion
                return type(exc), time.monotonic() - started
            return None, time.monotonic() - started

    raised, elapsed = asyncio.run(scenario())
    assert raised is OperationTimeoutError
    assert 0.8 * WAIT <= elapsed < WAIT + 3


def test_next_available_receiver_waiting_for_a_session_gets_one_sent_meanwhile(
    backend: Backend,
) -> None:
    queue = _session_queue(backend)
    timer = threading.Timer(0.8, lambda: _send(backend, queue, [_msg("late", "late-0")]))
    timer.start()
    try:
        with sdk_client(backend, retry_total=0) as client:
            started = time.monotonic()
            with client.get_queue_receiver(queue, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=5) as rx:
                assert rx.session.session_id == "late"
                assert time.monotonic() - started < 5
                (message,) = receive(rx, 1, WAIT)
                assert str(message) == "late-0"
                rx.complete_message(message)
    finally:
        timer.join()


# ---------------------------------------------------------------------------------------------- session lock


def test_a_locked_session_cannot_be_locked_by_a_second_receiver_until_the_first_closes(
    backend: Backend,
) -> None:
    queue = _session_queue(backend)
    _send(backend, queue, [_msg("solo", "s0"), _msg("solo", "s1")])

    with sdk_client(backend) as client:
        with client.get_queue_receiver(queue, session_id="solo", max_wait_time=WAIT) as owner:
            (first,) = receive(owner, 1, WAIT)
            assert str(first) == "s0"
            _assert_session_locked_elsewhere(backend, queue, "solo")
            owner.complete_message(first)
        # Closing the receiver releases the session at once.
        with client.get_queue_receiver(queue, session_id="solo", max_wait_time=WAIT) as successor:
            (second,) = receive(successor, 1, WAIT)
            assert str(second) == "s1"
            assert second.delivery_count == 0
            successor.complete_message(second)


def test_async_a_locked_session_cannot_be_locked_by_a_second_receiver(backend: Backend) -> None:
    queue = _session_queue(backend)
    _send(backend, queue, [_msg("solo", "s0")])

    async def scenario() -> tuple[type[BaseException] | None, str]:
        async with (
            async_sdk_client(backend) as client,
            async_sdk_client(backend, retry_total=0) as other,
            client.get_queue_receiver(queue, session_id="solo", max_wait_time=WAIT) as owner,
        ):
            raised: type[BaseException] | None = None
            try:
                async with other.get_queue_receiver(queue, session_id="solo", max_wait_time=WAIT) as rx:
                    await rx.receive_messages(max_message_count=1, max_wait_time=WAIT)
            except Exception as exc:  # the type is the assertion
                raised = type(exc)
            (message,) = await _areceive(owner, 1)
            await owner.complete_message(message)
            return raised, str(message)

    raised, body = asyncio.run(scenario())
    assert raised is SessionCannotBeLockedError
    assert body == "s0"


def test_session_lock_renewed_by_hand_or_by_auto_lock_renewer_outlives_its_duration_unrenewed_one_expires(
    backend: Backend,
) -> None:
    """Three sessions held for longer than the lock duration: one renewed with ``session.renew_lock()``, one
    by an AutoLockRenewer (the seed's slow handler), one not at all."""
    queue = _session_queue(backend)
    _send(
        backend,
        queue,
        [_msg(s, f"{s}-{i}") for s in ("by-hand", "by-renewer", "lapsed") for i in range(2)],
    )
    failures: list[Any] = []

    with (
        sdk_client(backend) as client,
        client.get_queue_receiver(queue, session_id="by-hand", max_wait_time=WAIT) as by_hand,
        client.get_queue_receiver(queue, session_id="by-renewer", max_wait_time=WAIT) as by_renewer,
        client.get_queue_receiver(queue, session_id="lapsed", max_wait_time=WAIT) as lapsed,
        AutoLockRenewer() as renewer,
    ):
        renewer.register(
            by_renewer,
            by_renewer.session,
            max_lock_renewal_duration=30,
            on_lock_renew_failure=lambda *a: failures.append(a),
        )
        held = {rx.session.session_id: (rx, receive(rx, 1, WAIT)[0]) for rx in (by_hand, by_renewer, lapsed)}
        first_expiry = by_hand.session.locked_until_utc
        renewer_first_expiry = by_renewer.session.locked_until_utc
        assert first_expiry is not None and renewer_first_expiry is not None
        time.sleep(LOCK_S * 0.6)

        renewed = by_hand.session.renew_lock()
        assert renewed == by_hand.session.locked_until_utc
        assert renewed > first_expiry
        assert LOCK_S - 1 <= seconds_from_now(renewed) <= LOCK_S + 1

        time.sleep(max(0.0, seconds_from_now(first_expiry)) + 0.7)  # past the first lock, not the renewed one
        by_renewer_expiry = by_renewer.session.locked_until_utc
        assert by_renewer_expiry is not None and by_renewer_expiry > renewer_first_expiry
        for session_id in ("by-hand", "by-renewer"):
            rx, message = held[session_id]
            rx.complete_message(message)
            (second,) = receive(rx, 1, WAIT)
            assert (str(second), second.delivery_count) == (f"{session_id}-1", 0)
            rx.complete_message(second)
            _assert_session_locked_elsewhere(backend, queue, session_id)

        # The unrenewed session's lock is gone: settling fails, and the session is free for others.
        rx, message = held["lapsed"]
        with pytest.raises(SessionLockLostError):
            rx.complete_message(message)
        with pytest.raises(SessionLockLostError):
            rx.session.get_state()
        with client.get_queue_receiver(queue, session_id="lapsed", max_wait_time=WAIT) as successor:
            redelivered = receive(successor, 2, WAIT)
            assert [(str(m), m.delivery_count) for m in redelivered] == [("lapsed-0", 1), ("lapsed-1", 0)]
            for message in redelivered:
                successor.complete_message(message)
    assert failures == []


@pytest.mark.emulator_only
def test_async_auto_lock_renewer_reports_a_session_lock_lost_while_renewing(
    make_emulator: Callable[..., EmulatorHandle],
) -> None:
    """The broker goes away (a failover) while the renewer holds a session: the lock is lost, the renewer's
    failure callback fires and the receiver refuses further work with SessionLockLostError."""
    private = make_emulator()
    queue = _session_queue(private)
    _send(private, queue, [_msg("s", "m0")])

    async def scenario() -> tuple[list[Any], type[BaseException] | None]:
        failures: list[Any] = []
        failed = asyncio.Event()

        async def on_failure(renewable: Any, error: Exception | None) -> None:
            failures.append((renewable, error))
            failed.set()

        renewer = AsyncAutoLockRenewer()
        client = async_sdk_client(private, retry_total=0)
        rx = client.get_queue_receiver(queue, session_id="s", max_wait_time=WAIT)
        raised: type[BaseException] | None = None
        try:
            await rx.__aenter__()
            (message,) = await _areceive(rx, 1)
            renewer.register(rx, rx.session, max_lock_renewal_duration=30, on_lock_renew_failure=on_failure)
            await asyncio.get_running_loop().run_in_executor(None, private.thread.stop)
            await asyncio.wait_for(failed.wait(), timeout=LOCK_S + 3)
            try:
                await rx.complete_message(message)
            except Exception as exc:  # the type is the assertion
                raised = type(exc)
        finally:
            await renewer.close()
            await client.close()
        return failures, raised

    failures, raised = asyncio.run(scenario())
    assert len(failures) == 1
    renewable, error = failures[0]
    assert renewable.session_id == "s"
    assert error is not None
    assert raised is SessionLockLostError


# ---------------------------------------------------------------------------------------------- state


def test_session_state_round_trips_and_is_seen_by_the_next_consumer(backend: Backend) -> None:
    queue = _session_queue(backend)
    _send(backend, queue, [_msg("wallet-1", "debit-1"), _msg("wallet-1", "debit-2")])

    with sdk_client(backend) as client:
        with client.get_queue_receiver(queue, session_id="wallet-1", max_wait_time=WAIT) as rx:
            assert rx.session.get_state() is None
            rx.session.set_state(b'{"cursor": 1}')
            assert rx.session.get_state() == b'{"cursor": 1}'
            (message,) = receive(rx, 1, WAIT)
            rx.complete_message(message)
        with client.get_queue_receiver(queue, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=WAIT) as rx:
            assert rx.session.session_id == "wallet-1"
            assert rx.session.get_state() == b'{"cursor": 1}'
            rx.session.set_state("cursor=2")  # a str is stored UTF-8 encoded
            assert rx.session.get_state() == b"cursor=2"
            (message,) = receive(rx, 1, WAIT)
            assert str(message) == "debit-2"
            rx.complete_message(message)
            rx.session.set_state(None)  # clears it
            assert rx.session.get_state() is None
        with client.get_queue_receiver(queue, session_id="wallet-1", max_wait_time=WAIT) as rx:
            assert rx.session.get_state() is None


def test_async_session_state_round_trips(backend: Backend) -> None:
    queue = _session_queue(backend)
    _send(backend, queue, [_msg("s", "m0")])

    async def scenario() -> tuple[bytes | None, bytes | None, bytes | None]:
        async with async_sdk_client(backend) as client:
            async with client.get_queue_receiver(queue, session_id="s", max_wait_time=WAIT) as rx:
                before = await rx.session.get_state()
                await rx.session.set_state(b"\x00\x01state")
            async with client.get_queue_receiver(queue, session_id="s", max_wait_time=WAIT) as rx:
                seen = await rx.session.get_state()
                renewed = await rx.session.renew_lock()
                assert renewed == rx.session.locked_until_utc
                (message,) = await _areceive(rx, 1)
                await rx.complete_message(message)
                await rx.session.set_state(None)
                after = await rx.session.get_state()
        return before, seen, after

    assert asyncio.run(scenario()) == (None, b"\x00\x01state", None)


@pytest.mark.emulator_only
def test_session_state_and_messages_survive_a_restart(
    make_emulator: Callable[..., EmulatorHandle], tmp_path: Path
) -> None:
    data = tmp_path / "data"
    config = single_queue_config("wallets", requires_session=True, lock_duration=LOCK)
    first = make_emulator(config=config, data_dir=data)
    with sdk_client(first) as client:
        with client.get_queue_sender("wallets") as sender:
            sender.send_messages([_msg("w1", "tx-1"), _msg("w1", "tx-2")])
        with client.get_queue_receiver("wallets", session_id="w1", max_wait_time=WAIT) as rx:
            rx.session.set_state(b"balance=100")
            (message,) = receive(rx, 1, WAIT)
            rx.complete_message(message)
    first.thread.stop()

    second = make_emulator(config=config, data_dir=data)
    with sdk_client(second) as client:
        assert list(client.list_queue_sessions("wallets")) == ["w1"]
        with client.get_queue_receiver(
            "wallets", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=WAIT
        ) as rx:
            assert rx.session.session_id == "w1"
            assert rx.session.get_state() == b"balance=100"
            (message,) = receive(rx, 1, WAIT)
            assert (str(message), message.delivery_count) == ("tx-2", 0)
            rx.complete_message(message)


# ---------------------------------------------------------------------------------------------- ordering


def test_strict_fifo_inside_a_session_across_abandon_and_redelivery(backend: Backend) -> None:
    queue = _session_queue(backend)
    _send(backend, queue, [_msg("s", f"m{i}") for i in range(5)])
    observed: list[tuple[str, int | None]] = []

    with (
        sdk_client(backend) as client,
        client.get_queue_receiver(queue, session_id="s", max_wait_time=WAIT) as rx,
    ):
        for abandon in (True, True, False, False, True, False, False, False):
            (message,) = receive(rx, 1, WAIT)
            observed.append((str(message), message.delivery_count))
            if abandon:
                rx.abandon_message(message)
            else:
                rx.complete_message(message)
        assert receive(rx, 1, WAIT) == []

    assert observed == [
        ("m0", 0),
        ("m0", 1),
        ("m0", 2),
        ("m1", 0),
        ("m2", 0),
        ("m2", 1),
        ("m3", 0),
        ("m4", 0),
    ]


def test_fifty_shuffled_payloads_of_one_session_are_observed_in_send_order(backend: Backend) -> None:
    """Seed 004, Verify/Ordering: send 50 messages with the same SessionId and out-of-order payloads."""
    queue = _session_queue(backend)
    payloads = random.Random(4).sample(range(1000), 50)  # not cryptographic
    assert payloads != sorted(payloads)

    with sdk_client(backend) as client:
        with client.get_queue_sender(queue) as sender:
            for value in payloads[:20]:  # one by one ...
                sender.send_messages(_msg("wallet-7", json.dumps({"amount": value})))
            batch = sender.create_message_batch()  # ... then the rest in one batch
            for value in payloads[20:]:
                batch.add_message(_msg("wallet-7", json.dumps({"amount": value})))
            sender.send_messages(batch)
        with client.get_queue_receiver(
            queue, session_id="wallet-7", prefetch_count=20, max_wait_time=WAIT
        ) as rx:
            received = receive(rx, 50, WAIT)
            for message in received:
                rx.complete_message(message)

    assert [json.loads(str(m))["amount"] for m in received] == payloads
    sequence_numbers = [sequence_number(m) for m in received]
    assert sequence_numbers == sorted(sequence_numbers)
    assert len(set(sequence_numbers)) == 50


def _interleaved(sessions: list[str], per_session: int) -> list[ServiceBusMessage]:
    """Messages of every session, interleaved round-robin, body ``"<session>:<index>"``."""
    return [_msg(s, f"{s}:{i}") for i in range(per_session) for s in sessions]


def _check_concurrent_consumption(
    sessions: list[str],
    per_session: int,
    log: list[tuple[str, int, int]],
    holds: list[tuple[str, int, float, float]],
) -> None:
    """``log``: (session, index, receiver) as consumed; ``holds``: (session, receiver, start, end)."""
    for session in sessions:
        indexes = [index for s, index, _ in log if s == session]
        assert indexes == list(range(per_session)), f"session {session} was consumed as {indexes}"
        receivers = {rx for s, _, rx in log if s == session}
        assert len(receivers) == 1, f"session {session} was split across receivers {receivers}"
    assert len(log) == len(sessions) * per_session
    # Exclusive: no two receivers held the same session at overlapping times ...
    for session in sessions:
        spans = sorted((start, end) for s, _, start, end in holds if s == session)
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans))
    # ... while different sessions really were processed in parallel.
    events = sorted([(start, 1) for _, _, start, _ in holds] + [(end, -1) for _, _, _, end in holds])
    active = peak = 0
    for _, delta in events:
        active += delta
        peak = max(peak, active)
    assert peak >= 4, f"at most {peak} sessions were held at once"


def test_eight_concurrent_consumers_never_interleave_inside_a_session(backend: Backend) -> None:
    """Seed 004: MaxConcurrentSessions = 8, MaxConcurrentCallsPerSession = 1, with threads."""
    queue = _session_queue(backend)
    sessions = [f"wallet-{i:02d}" for i in range(12)]
    per_session = 6
    with sdk_client(backend) as client, client.get_queue_sender(queue) as sender:
        sender.send_messages(_interleaved(sessions, per_session))

    log: list[tuple[str, int, int]] = []
    holds: list[tuple[str, int, float, float]] = []
    errors: list[BaseException] = []
    guard = threading.Lock()
    receiver_ids = iter(range(10_000))

    def worker() -> None:
        try:
            with sdk_client(backend, retry_total=0) as client:
                while True:
                    try:
                        rx = client.get_queue_receiver(
                            queue, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=WAIT
                        ).__enter__()
                    except OperationTimeoutError:
                        return  # no session left
                    with rx:
                        with guard:
                            rx_id = next(receiver_ids)
                        start = time.monotonic()
                        session = rx.session.session_id
                        while batch := rx.receive_messages(max_message_count=per_session, max_wait_time=0.5):
                            for message in batch:
                                assert message.session_id == session
                                with guard:
                                    log.append((session, int(str(message).split(":")[1]), rx_id))
                                rx.complete_message(message)
                        with guard:
                            holds.append((session, rx_id, start, time.monotonic()))
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    _check_concurrent_consumption(sessions, per_session, log, holds)


def test_async_eight_concurrent_consumers_never_interleave_inside_a_session(backend: Backend) -> None:
    queue = _session_queue(backend)
    sessions = [f"wallet-{i:02d}" for i in range(12)]
    per_session = 6
    log: list[tuple[str, int, int]] = []
    holds: list[tuple[str, int, float, float]] = []
    receiver_ids = iter(range(10_000))

    async def worker(client: AsyncServiceBusClient) -> None:
        while True:
            try:
                rx = await client.get_queue_receiver(
                    queue, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=WAIT
                ).__aenter__()
            except OperationTimeoutError:
                return
            async with rx:
                rx_id = next(receiver_ids)
                start = time.monotonic()
                session = rx.session.session_id
                while batch := await rx.receive_messages(max_message_count=per_session, max_wait_time=0.5):
                    for message in batch:
                        assert message.session_id == session
                        log.append((session, int(str(message).split(":")[1]), rx_id))
                        await rx.complete_message(message)
                holds.append((session, rx_id, start, time.monotonic()))

    async def scenario() -> None:
        async with async_sdk_client(backend) as client, client.get_queue_sender(queue) as sender:
            await sender.send_messages(_interleaved(sessions, per_session))
        clients = [async_sdk_client(backend, retry_total=0) for _ in range(8)]
        try:
            await asyncio.wait_for(asyncio.gather(*(worker(c) for c in clients)), timeout=60)
        finally:
            await asyncio.gather(*(c.close() for c in clients))

    asyncio.run(scenario())
    _check_concurrent_consumption(sessions, per_session, log, holds)


# ---------------------------------------------------------------------------------------------- crash


_KILLED_CONSUMER = r"""
import json, sys, time
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusClient

connection_string, queue = sys.argv[1], sys.argv[2]
client = ServiceBusClient.from_connection_string(connection_string)
receiver = client.get_queue_receiver(queue, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=5)
receiver.__enter__()
receiver.session.set_state(b"cursor=tx-0")
(message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
print(json.dumps({
    "session": receiver.session.session_id,
    "body": str(message),
    "delivery_count": message.delivery_count,
    "locked_until": receiver.session.locked_until_utc.timestamp(),
}), flush=True)
time.sleep(120)  # "processing" - until SIGKILL
"""


def test_session_of_a_killed_consumer_is_taken_over_after_its_lock_expires(backend: Backend) -> None:
    """Seed 004 wallet scenario: a consumer dies mid-session (SIGKILL, so it cannot close anything). The
    session stays locked until its lock expires (Azure: "the lock is released when the receiver is closed,
    or when the lock expires if the application cannot close it"); then another consumer takes it over with
    the session state intact and the unsettled message redelivered with its delivery count incremented."""
    queue = _session_queue(backend)
    _send(backend, queue, [_msg("wallet-9", "tx-1"), _msg("wallet-9", "tx-2")])

    consumer = subprocess.Popen(
        [sys.executable, "-c", _KILLED_CONSUMER, backend.connection_string, queue],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line: list[str] = []
        reader = threading.Thread(
            target=lambda: line.append(consumer.stdout.readline() if consumer.stdout else "")
        )
        reader.start()
        reader.join(30)
        assert line and line[0], (
            "the consumer did not start: "
            f"{consumer.stderr.read() if consumer.poll() and consumer.stderr else ''}"
        )
        report = json.loads(line[0])
        assert report["session"] == "wallet-9"
        assert (report["body"], report["delivery_count"]) == ("tx-1", 0)
    finally:
        consumer.send_signal(signal.SIGKILL)
        consumer.wait(10)
        for stream in (consumer.stdout, consumer.stderr):
            if stream is not None:
                stream.close()
    killed_at = time.time()
    locked_until = float(report["locked_until"])

    problems: list[str] = []
    # Straight after the crash the session is still locked by the dead consumer.
    try:
        _assert_session_locked_elsewhere(backend, queue, "wallet-9")
    except BaseException as exc:  # collected so the rest of the scenario still runs
        problems.append(
            f"{locked_until - time.time():.1f} s before the dead consumer's lock expired, another receiver "
            f"could lock its session (expected SessionCannotBeLockedError): {exc!r}"
        )

    with (
        sdk_client(backend, retry_total=0) as client,
        client.get_queue_receiver(queue, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=LOCK_S + 3) as rx,
    ):
        taken_over_at = time.time()
        assert rx.session.session_id == "wallet-9"
        state = rx.session.get_state()
        redelivered = receive(rx, 2, WAIT)
        for message in redelivered:
            rx.complete_message(message)
    if taken_over_at < locked_until - 0.5:
        problems.append(
            f"the session was taken over {taken_over_at - killed_at:.1f} s after the kill, "
            f"{locked_until - taken_over_at:.1f} s before its lock expired"
        )
    assert state == b"cursor=tx-0"
    assert [(str(m), m.delivery_count) for m in redelivered] == [("tx-1", 1), ("tx-2", 0)]
    assert problems == []


# ---------------------------------------------------------------------------------------------- sending


def test_message_without_session_id_is_refused_by_a_session_queue_and_nothing_is_enqueued(
    backend: Backend,
) -> None:
    queue = _session_queue(backend)

    with sdk_client(backend) as client:
        with client.get_queue_sender(queue) as sender:
            with pytest.raises(ServiceBusError):
                sender.send_messages(ServiceBusMessage("no session"))
            with pytest.raises(ServiceBusError):  # one bad message fails the whole batch
                sender.send_messages([_msg("s", "ok"), ServiceBusMessage("no session")])
            sender.send_messages(_msg("s", "fine"))  # the sender is still usable
        assert list(client.list_queue_sessions(queue)) == ["s"]
        with client.get_queue_receiver(queue, session_id="s", max_wait_time=WAIT) as rx:
            assert [str(m) for m in rx.peek_messages(max_message_count=10, sequence_number=1)] == ["fine"]


def test_session_receiver_on_a_queue_without_sessions_and_plain_receiver_on_a_session_queue_fail(
    backend: Backend,
) -> None:
    plain = backend.create_queue()
    sessionful = _session_queue(backend)
    with sdk_client(backend, retry_total=0) as client:
        with (
            pytest.raises(ServiceBusError),
            client.get_queue_receiver(plain, session_id="s", max_wait_time=WAIT) as rx,
        ):
            rx.receive_messages(max_message_count=1, max_wait_time=WAIT)
        with pytest.raises(ServiceBusError), client.get_queue_receiver(sessionful, max_wait_time=WAIT) as rx:
            rx.receive_messages(max_message_count=1, max_wait_time=WAIT)


# ---------------------------------------------------------------------------------------------- listing


def test_list_queue_sessions_lists_sessions_with_messages_or_state(backend: Backend) -> None:
    queue = _session_queue(backend)
    _send(backend, queue, [_msg("with-messages", "m"), _msg("consumed", "c"), _msg("with-state", "x")])

    with sdk_client(backend) as client:
        with client.get_queue_receiver(queue, session_id="consumed", max_wait_time=WAIT) as rx:
            (message,) = receive(rx, 1, WAIT)
            rx.complete_message(message)
        with client.get_queue_receiver(queue, session_id="with-state", max_wait_time=WAIT) as rx:
            rx.session.set_state(b"early")
            (message,) = receive(rx, 1, WAIT)
            rx.complete_message(message)
        assert sorted(client.list_queue_sessions(queue)) == ["with-messages", "with-state"]

        time.sleep(0.05)
        cutoff = datetime.now(UTC)
        time.sleep(0.05)
        with client.get_queue_receiver(queue, session_id="updated", max_wait_time=WAIT) as rx:
            rx.session.set_state(b"late")
        assert list(client.list_queue_sessions(queue, state_updated_after=cutoff)) == ["updated"]
        assert sorted(client.list_queue_sessions(queue)) == ["updated", "with-messages", "with-state"]


def test_async_list_queue_sessions_pages_through_many_sessions(backend: Backend) -> None:
    queue = _session_queue(backend)
    sessions = [f"s-{i:03d}" for i in range(130)]  # more than one page of 100

    async def scenario() -> list[str]:
        async with async_sdk_client(backend) as client:
            async with client.get_queue_sender(queue) as sender:
                await sender.send_messages([_msg(s, s) for s in sessions])
            return [s async for s in client.list_queue_sessions(queue)]

    listed = asyncio.run(scenario())
    assert sorted(listed) == sessions
