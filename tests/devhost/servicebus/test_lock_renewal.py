"""The seed's lock-renewal check, through devhost and the emulator: "run a handler that sleeps 90s with a 60s
LockDuration and MaxAutoLockRenewalDuration = 10m; assert no redelivery (delivery count stays 1)" -- for a
plain queue trigger and a session-enabled one, both with the SDK-type binding and explicit settlement as the
app's subscribers use them.

What the host renews (Azure.Messaging.ServiceBus, which the Functions host's Service Bus extension runs):
for a plain trigger, ``ReceiverManager.RenewMessageLockAsync`` renews the message's lock while its handler
runs, up to ``MaxAutoLockRenewalDuration``; for a session trigger ``ShouldAutoRenewMessageLock`` is false
(a session receiver has no message locks of its own) and ``SessionReceiverManager.RenewSessionLock``
renews the session's lock from its acceptance, up to ``MaxAutoLockRenewalDuration``. The extension passes
host.json's ``maxAutoLockRenewalDuration`` to both processors (``ServiceBusOptions.ToProcessorOptions`` /
``ToSessionProcessorOptions``); ``00:00:00`` turns renewal off (``AutoRenewLock`` needs a positive span).

Each check has its control: the same handler without renewal loses its lock after 60 s and the message is
delivered again (delivery count 2), as Azure does when a lock lapses; so the renewed case can fail.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from devhost.servicebus.lock_renewal import wait_before_renewing
from devhost.testing import HostHandle, running_host
from emulator.testing import EmulatorHandle
from tests.devhost.conftest import APPS, Records, app_settings, send

LOCK_DURATION = timedelta(seconds=60)
HOLD_SECONDS = 90  # the handler: longer than the lock, well within the renewal duration
RENEWING = "00:10:00"
NOT_RENEWING = "00:00:00"
OUTCOME_SECONDS = 240  # bounds the wait for a ~90 s handler (and its redelivery) on a busy machine
TEST_SECONDS = 300


@dataclass(frozen=True, slots=True)
class Trigger:
    """One of the test app's functions and the kind of queue it listens on."""

    function: str
    sessions: bool


PLAIN = Trigger("holds_plain", sessions=False)
SESSION = Trigger("holds_in_session", sessions=True)
TRIGGERS = [pytest.param(PLAIN, id="plain"), pytest.param(SESSION, id="session")]


@dataclass(frozen=True, slots=True)
class HeldMessage:
    """A message sent to a running host's trigger, and where to look for what became of it."""

    host: HostHandle
    records: Records
    queue: str
    message_id: str
    session_id: str | None

    def phases(self, function: str) -> list[tuple[str, int]]:
        """(phase, delivery count) of each record the handler wrote for this message, in order."""
        return [
            (r["phase"], r["delivery_count"])
            for r in self.records.of(function)
            if r["message_id"] == self.message_id
        ]


@contextmanager
def held_message(
    emulator: EmulatorHandle, records: Records, trigger: Trigger, renewal: str
) -> Iterator[HeldMessage]:
    """A host with ``maxAutoLockRenewalDuration`` = ``renewal`` and one message sent to ``trigger``'s
    fresh queue (60 s lock); the app's other queue exists too, so its listener has nothing to complain of."""
    queues = {
        "PLAIN_QUEUE": emulator.create_queue(lock_duration=LOCK_DURATION, max_delivery_count=10),
        "SESSION_QUEUE": emulator.create_queue(
            lock_duration=LOCK_DURATION, max_delivery_count=10, requires_session=True
        ),
    }
    settings = {**app_settings(emulator, records.path, queues), "HOLD_SECONDS": str(HOLD_SECONDS)}
    host_json = {
        "version": "2.0",
        # Two sessions at once: without renewal, a second session worker can take the session over once
        # its lock has lapsed, while the first invocation still runs (as the extension's processor would).
        "extensions": {"serviceBus": {"maxAutoLockRenewalDuration": renewal, "maxConcurrentSessions": 2}},
    }
    queue = queues["SESSION_QUEUE" if trigger.sessions else "PLAIN_QUEUE"]
    message_id = f"held-{uuid.uuid4().hex[:10]}"
    session_id = f"key-{message_id}" if trigger.sessions else None
    with running_host(APPS / "lock_renewal_app.py", settings=settings, host_json=host_json) as host:
        send(
            emulator.connection_string,
            queue,
            ServiceBusMessage(message_id, message_id=message_id, session_id=session_id),
        )
        yield HeldMessage(host, records, queue, message_id, session_id)


def _left_behind(emulator: EmulatorHandle, held: HeldMessage) -> list[Any]:
    """What is still in the message's queue or its dead-letter queue. Asked once the host has stopped, so
    it holds the session no longer (a session-enabled queue is read through its session only)."""
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_receiver(held.queue, session_id=held.session_id) as receiver:
            left = list(receiver.peek_messages(max_message_count=10))
        with client.get_queue_receiver(held.queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as receiver:
            return left + list(receiver.peek_messages(max_message_count=10))


@pytest.mark.slow
@pytest.mark.timeout(TEST_SECONDS)
@pytest.mark.parametrize("trigger", TRIGGERS)
def test_a_handler_outlasting_the_lock_is_delivered_once_while_the_host_renews_its_lock(
    shared_emulator: EmulatorHandle, records: Records, trigger: Trigger
) -> None:
    with held_message(shared_emulator, records, trigger, RENEWING) as held:
        held.records.wait(
            lambda _: any(phase != "started" for phase, _count in held.phases(trigger.function)),
            timeout=OUTCOME_SECONDS,
        )
        held.host.wait_for_invocations(lambda rs: any(r.function_name == trigger.function for r in rs))
        assert held.phases(trigger.function) == [("started", 1), ("completed", 1)]
        invocations = [r for r in held.host.invocations if r.function_name == trigger.function]
        assert [r.succeeded for r in invocations] == [True]
    assert _left_behind(shared_emulator, held) == []


@pytest.mark.slow
@pytest.mark.timeout(TEST_SECONDS)
@pytest.mark.parametrize("trigger", TRIGGERS)
def test_without_renewal_the_same_handler_loses_its_lock_and_the_message_is_delivered_again(
    shared_emulator: EmulatorHandle, records: Records, trigger: Trigger
) -> None:
    with held_message(shared_emulator, records, trigger, NOT_RENEWING) as held:
        # The first delivery's lock lapses after 60 s: the broker delivers the message again (count 2),
        # that delivery completes it, and the first invocation's completion, at 90 s, is refused.
        held.records.wait(
            lambda _: {("completed", 2), ("complete refused", 1)} <= set(held.phases(trigger.function)),
            timeout=OUTCOME_SECONDS,
        )
        phases = held.phases(trigger.function)
        assert sorted(phases) == [("complete refused", 1), ("completed", 2), ("started", 1), ("started", 2)]
    assert _left_behind(shared_emulator, held) == []


@pytest.mark.timeout(120)
def test_a_session_lock_is_renewed_for_the_renewal_duration_from_the_sessions_acceptance_not_per_message(
    shared_emulator: EmulatorHandle, records: Records
) -> None:
    # SessionReceiverManager.RenewSessionLock starts when the session is accepted and stops
    # MaxAutoLockRenewalDuration later, however many messages the session hands over meanwhile (the
    # extension's maintainers on a session function: azure-sdk-for-net#35267). Each handler here (4 s) is
    # shorter than the lock (5 s) and than the renewal duration (6 s), but the session is held for longer
    # than both together (4 x 4 s > 6 s + 5 s): its lock lapses with a message in hand, which is delivered
    # again. Renewed per message, nothing would be delivered twice.
    queue = shared_emulator.create_queue(lock_duration=timedelta(seconds=5), requires_session=True)
    plain = shared_emulator.create_queue()
    settings = {
        **app_settings(shared_emulator, records.path, {"PLAIN_QUEUE": plain, "SESSION_QUEUE": queue}),
        "HOLD_SECONDS": "4",
    }
    options = {
        "maxAutoLockRenewalDuration": "00:00:06",
        "maxConcurrentSessions": 1,
        "sessionIdleTimeout": "00:00:30",
    }
    key = f"key-{uuid.uuid4().hex[:8]}"
    ids = [f"{key}-{n}" for n in range(4)]
    host_json = {"version": "2.0", "extensions": {"serviceBus": options}}
    with running_host(APPS / "lock_renewal_app.py", settings=settings, host_json=host_json):
        send(
            shared_emulator.connection_string,
            queue,
            *(ServiceBusMessage(i, message_id=i, session_id=key) for i in ids),
        )
        mine = records.wait(
            lambda rs: {r["message_id"] for r in rs if r["phase"] == "completed"} == set(ids), timeout=90
        )
    started = [(r["message_id"], r["delivery_count"]) for r in mine if r["phase"] == "started"]
    completed = [r["message_id"] for r in mine if r["phase"] == "completed"]
    assert started[0] == (ids[0], 1) and completed[0] == ids[0]  # well within the first lock
    assert any(count == 2 for _, count in started), started  # the lock lapsed with a message in hand
    assert completed == ids  # each once, in the session's order


@pytest.mark.parametrize(("remaining", "renew_after"), [(60.0, 50.0), (10.0, 5.0), (0.3, 0.0)])
def test_a_message_lock_is_renewed_when_the_hosts_processor_renews_it(
    remaining: float, renew_after: float
) -> None:
    # ReceiverManager.CalculateRenewDelay: renew with half of what remains left, at most 10 s
    # (Constants.MaximumRenewBufferDuration) before the lock lapses; at once under 0.4 s.
    locked_until = datetime.now(UTC) + timedelta(seconds=remaining)
    assert wait_before_renewing(locked_until) == pytest.approx(renew_after, abs=0.5)
