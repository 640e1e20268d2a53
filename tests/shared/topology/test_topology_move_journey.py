"""Journey: making ``loyalty`` ordered while its events flow, with the topology guide's own commands
(docs/topology-guide.md, "Making an endpoint ordered: a new queue"), run as the guide shows them.

A private emulator (the guide's names, ``busbar-fallback``, ``loyalty``, ``loyalty-ordered``, are the test's
alone). ``Tenant.CustomerUpdated`` for five customers is published continuously through Busbar's publisher,
each customer's updates numbered in publish order, before, during and after the move. Two consumers run all
along, as the endpoint's two triggers would: the old queue's (plain receives, unordered) and the new queue's
(one session at a time, as a session trigger). What is asserted is the guide's promise: every event is
received exactly once, from one of the two queues; a customer's events in the new queue come in publish
order and all of them were published after every one of its events in the old queue (each subscription is
switched at one instant); and once the old queue is empty nothing forwards to it any more, so deleting it
loses nothing.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusClient, ServiceBusReceivedMessage
from azure.servicebus.exceptions import ServiceBusError

from app.endpoints.sample.events import CustomerUpdated
from emulator.testing import EmulatorHandle, start_emulator
from shared.management import EMULATOR_NAMESPACE, ManagementClient, ManagementSettings
from shared.topology import Publisher, parse_topology_options
from shared.topology.messages import MESSAGE_ID

REPO = Path(__file__).resolve().parents[3]
GUIDE = REPO / "docs" / "topology-guide.md"
SECTION = "## Making an endpoint ordered: a new queue"
CUSTOMERS = [f"c-{i}" for i in range(5)]
DRAIN = 120.0
APP_SETTING_PREFIXES = ("BUSBAR_", "ServiceBus", "AzureWebJobs")

pytestmark = [pytest.mark.subprocess, pytest.mark.timeout(300)]


@dataclass(frozen=True, slots=True)
class Received:
    message_id: str
    """The event's ``NServiceBus.MessageId`` (what the publisher returns; the broker's is fresh per send)."""
    customer: str
    number: int
    queue: str
    session_id: str | None


def guide_section() -> tuple[str, list[tuple[list[str], int]]]:
    """The section's options (its ``topology.json``) and its local command lines with the exit status each
    is documented to have (a ``# exit N`` comment on the line before; 0 otherwise)."""
    text = GUIDE.read_text()
    section = text[text.index(SECTION) :]
    [options] = re.findall(r"cat > topology\.json <<'EOF'\n(.*?\n)EOF\n", section, re.DOTALL)
    commands: list[tuple[list[str], int]] = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.DOTALL):
        expected = 0
        for line in block.splitlines():
            if (match := re.match(r"# exit (\d+)", line)) is not None:
                expected = int(match.group(1))
            elif " -m shared.topology " in line:
                commands.append((shlex.split(line), expected))
                expected = 0
    return options, commands


class Traffic:
    """Publishes CustomerUpdated for each customer in turn, numbered per customer, until stopped."""

    def __init__(self, client: ServiceBusClient, options_json: str) -> None:
        self.publisher = Publisher(client, parse_topology_options(options_json), endpoint_name="journey")
        self.sent: dict[str, tuple[str, int]] = {}  # message id -> (customer, number)
        self.stamps: list[tuple[float, float]] = []  # when each publish started and returned
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        number = 0
        while not self._stop.is_set():
            number += 1
            for customer in CUSTOMERS:
                started = time.time()
                result = self.publisher.publish([CustomerUpdated(customer_id=customer, name=f"v{number}")])
                (sent,) = result.sent  # the topic exists: nothing is dropped
                self.sent[sent.message_id] = (customer, number)
                self.stamps.append((started, time.time()))
            self._stop.wait(0.02)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self.publisher.close()


class Consumer:
    """Receives and completes what reaches ``queue``: plain receives, or one session at a time."""

    def __init__(self, client: ServiceBusClient, queue: str, *, sessions: bool) -> None:
        self.client, self.queue, self.sessions = client, queue, sessions
        self.received: list[Received] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _note(self, message: ServiceBusReceivedMessage) -> None:
        body = json.loads(b"".join(message.body))
        number = int(str(body["name"]).removeprefix("v"))
        properties = {
            (k.decode() if isinstance(k, bytes) else str(k)): v
            for k, v in (message.application_properties or {}).items()
        }
        raw = properties[MESSAGE_ID]
        message_id = raw.decode() if isinstance(raw, bytes) else str(raw)
        customer = body["customer_id"]
        self.received.append(Received(message_id, customer, number, self.queue, message.session_id))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                session = NEXT_AVAILABLE_SESSION if self.sessions else None
                with self.client.get_queue_receiver(self.queue, session_id=session, max_wait_time=1) as r:
                    while not self._stop.is_set():
                        batch = r.receive_messages(max_message_count=20, max_wait_time=1)
                        if not batch:
                            break  # a session trigger lets an idle session go and takes the next one
                        for message in batch:
                            self._note(message)
                            r.complete_message(message)
            except ServiceBusError as exc:  # no session available yet: try again
                if "session" not in str(exc).lower() and "timeout" not in type(exc).__name__.lower():
                    self.errors.append(repr(exc))

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


@pytest.fixture
def emulator() -> Iterator[EmulatorHandle]:
    handle = start_emulator()
    try:
        yield handle
    finally:
        handle.stop()


def run_documented(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, list[dict[str, Any]]]:
    """A command line of the guide, in ``cwd``; its exit status and JSON documents."""
    result = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    decoder, text, documents, position = json.JSONDecoder(), result.stdout, [], 0
    while position < len(text.rstrip()):
        document, position = decoder.raw_decode(text, position)
        documents.append(document)
        while position < len(text) and text[position].isspace():
            position += 1
    assert documents, f"{command}:\n{result.stdout}\n{result.stderr}"
    return result.returncode, documents


def wait_for(condition: Any, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_making_an_endpoint_ordered_while_events_flow_receives_every_event_exactly_once(
    emulator: EmulatorHandle, tmp_path: Path
) -> None:
    options, commands = guide_section()
    first, refused, plan, apply = commands  # the guide's four local commands, in its order
    (tmp_path / ".venv").symlink_to(REPO / ".venv")
    (tmp_path / "topology.json").write_text(options)
    management_settings = ManagementSettings(
        subscription_id="00000000-0000-0000-0000-000000000000",
        resource_group="busbar-tests",
        namespace=EMULATOR_NAMESPACE,
        endpoint=f"http://127.0.0.1:{emulator.management_port}",
        token=emulator.emulator.management_token,
    )
    env = {
        # The user's shell without the app's settings, and the private emulator's management plane.
        **{k: v for k, v in os.environ.items() if not k.startswith(APP_SETTING_PREFIXES)},
        "PYTHONPATH": str(REPO),
        "BUSBAR_SUBSCRIPTION_ID": management_settings.subscription_id,
        "BUSBAR_RESOURCE_GROUP": management_settings.resource_group,
        "BUSBAR_NAMESPACE": management_settings.namespace,
        "BUSBAR_MANAGEMENT_ENDPOINT": management_settings.endpoint or "",
        "BUSBAR_MANAGEMENT_TOKEN": management_settings.token or "",
    }
    assert run_documented(first[0], tmp_path, env)[0] == first[1] == 0  # loyalty, unordered
    code, (document,) = run_documented(refused[0], tmp_path, env)
    assert code == refused[1] == 2 and document["error"] == "needs-new-queue"

    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        ManagementClient(management_settings) as management,
    ):
        traffic = Traffic(client, options)
        old = Consumer(client, "loyalty", sessions=False)
        new = Consumer(client, "loyalty-ordered", sessions=True)
        traffic.start()
        old.start()
        try:
            wait_for(lambda: len(old.received) >= 50, "events in the old queue before the move", 60)
            code, (planned,) = run_documented(plan[0], tmp_path, env)
            assert code == plan[1] == 0, planned
            updates = [i for i in planned["plan"]["items"] if i["action"] == "update"]
            assert [(u["path"], u["details"]) for u in updates] == [
                (
                    "busbar-fallback/Subscriptions/loyalty",
                    {"forwardTo": {"existing": "loyalty", "desired": "loyalty-ordered"}},
                )
            ]
            moving_from = time.time()
            code, (shown, applied) = run_documented(apply[0], tmp_path, env)
            assert shown == planned  # apply prints the plan it carries out
            moved_by = time.time()
            assert code == apply[1] == 0, applied
            assert applied["applied"]["updated"] == ["busbar-fallback/Subscriptions/loyalty"]
            assert applied["applied"]["created"] == ["loyalty-ordered", "loyalty-ordered.held"]
            new.start()  # the new endpoint's trigger, listening on its queue
            after = len(new.received)
            wait_for(lambda: len(new.received) >= after + 50, "events in the new queue after the move", 60)
        finally:
            traffic.stop()
        sent = dict(traffic.sent)
        expected = len(sent)
        try:
            wait_for(lambda: len(old.received) + len(new.received) >= expected, "every event received", DRAIN)
            time.sleep(2)  # anything received twice would come in now
        finally:
            old.stop()
            new.stop()
        assert old.errors == [] and new.errors == []

        received = old.received + new.received
        counts = Counter(r.message_id for r in received)
        assert set(counts) == set(sent), "an event was lost, or one nobody published came"
        assert [m for m, n in counts.items() if n != 1] == [], "an event was received twice"
        during = [s for s in traffic.stamps if s[1] >= moving_from and s[0] <= moved_by]
        assert during, "nothing was published while apply ran: the move was not tested under traffic"
        for customer in CUSTOMERS:
            before = [r.number for r in old.received if r.customer == customer]
            since = [r.number for r in new.received if r.customer == customer]
            assert before and since, customer
            assert since == sorted(since), f"{customer}'s events in the new queue out of publish order"
            assert max(before) < min(since), f"{customer}: one subscription delivered to both queues"
            assert sorted(before + since) == list(range(1, max(since) + 1)), customer
        assert all(r.session_id == r.customer for r in new.received)
        # The old queue is empty, and nothing forwards to it any more: deleting it now loses nothing.
        scope = management.scope
        forwarding = [
            f"{t.name}/{s.name}"
            for t in management.topics.list_by_namespace(*scope)
            for s in management.subscriptions.list_by_topic(*scope, t.name)
            if (s.forward_to or "").lower() == "loyalty"
        ]
        assert forwarding == []
        details = management.queues.get(*scope, "loyalty").count_details
        assert (details.active_message_count, details.dead_letter_message_count) == (0, 0)
        print(
            f"move journey: {expected} events, {len(old.received)} from the old queue, {len(new.received)} "
            f"from the new one, {len(during)} published while apply ran; each received once"
        )
