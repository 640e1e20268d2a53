"""Journey: moving ``Shipping.OrderAccepted`` off the fallback topic onto its own topic while events flow,
end to end through ``make run``'s app, the HTTP API and the topology guide's commands, with the app's
default router snapshot interval (30 s).

Orders (the migrated contract: billing, crm through an interface, shipping through billing's invoices) and
new customers (crm) are published continuously through ``POST /api/events/{type}`` before, during and after
``apply --migrate``. Every handler notes what it handled in the app's log (``app.endpoints.sample``'s
journal: ``<endpoint> handled <contract> for <key>``), and that is what is counted: no event is ever lost,
and every subscriber handles every event exactly once: before, during and after the move, including the
orders enqueued in the handover's window (from five seconds before its cutoff until the old rule's delete
took effect, bounded here by ``apply`` returning), which reach billing twice with one MessageId and are
handled once, as billing handles a MessageId once (docs/topology-guide.md).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from shared.local_settings import local_app_settings
from shared.management import ManagementClient, ManagementSettings
from shared.topology.handover import Handover, skew_allowance
from tests.devhost.test_make_run import REPO, MakeRun
from tests.devhost.test_make_run_tools import tool_environment

ORDER, CUSTOMER = "Shipping.OrderAccepted", "Tenant.CustomerCreated"
GUIDE = REPO / "docs" / "topology-guide.md"
# The sample handlers' log line, as devhost relogs a function's own records: the host's category
# ``Function.<name>.User``, the invocation id at the end.
HANDLED = re.compile(r"Function\.\w+\.User: (\w+) handled ([\w.]+) for (\S+) \(message (\S+?)\)")
# The subscriber's line once a message's handling has committed (shared/handlers/subscriber.py): written only
# by the delivery whose record and effects committed, never by a copy whose effects were discarded or whose
# commit failed and is retried. The sample's own line above is written inside the handler, before the
# commit, so a handler that ran twice for one message (a twin copy, a retried commit) writes it twice.
COMMITTED = re.compile(r"Function\.\w+\.User: (\w+) handled ([\w.]+) \(message (\S+)\) with ")
DRAIN = 180.0


@dataclass(frozen=True, slots=True)
class Published:
    """One event the journey published: its key, and the wall-clock interval its POST took (the broker
    enqueued it inside that interval; emulator and test share the machine's clock)."""

    contract: str
    key: str
    sent: float
    accepted: float


class Publisher:
    """Publishes an order and a customer, over and over, through the HTTP API with the host key."""

    def __init__(self, base_url: str, host_key: str) -> None:
        self.http = httpx.Client(base_url=base_url, headers={"x-functions-key": host_key}, timeout=60)
        self.published: list[Published] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _publish(self, contract: str, body: dict[str, Any], key: str) -> None:
        sent = time.time()
        response = self.http.post(f"/api/events/{contract}", json=body)
        if response.status_code != 202:
            self.failures.append(f"{contract} {key}: {response.status_code} {response.text}")
            return
        self.published.append(Published(contract, key, sent, time.time()))

    def _run(self) -> None:
        while not self._stop.is_set():
            tag = uuid.uuid4().hex[:10]
            self._publish(ORDER, {"order_id": f"o-{tag}", "amount": 5}, f"o-{tag}")
            self._publish(CUSTOMER, {"customer_id": f"c-{tag}", "name": "Ada"}, f"c-{tag}")
            self._stop.wait(0.1)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self.http.close()

    def count(self, contract: str) -> int:
        return sum(1 for p in self.published if p.contract == contract)


def handled(lines: list[str]) -> Counter[tuple[str, str]]:
    """(endpoint, key) -> how many times the endpoint's handler noted it."""
    return Counter((m.group(1), m.group(3)) for line in lines if (m := HANDLED.search(line)))


def handled_messages(lines: list[str]) -> dict[tuple[str, str], set[str]]:
    """(endpoint, key) -> the MessageIds whose handling noted the key."""
    found: dict[tuple[str, str], set[str]] = {}
    for line in lines:
        if m := HANDLED.search(line):
            found.setdefault((m.group(1), m.group(3)), set()).add(m.group(4))
    return found


def committed(lines: list[str]) -> Counter[tuple[str, str]]:
    """(endpoint, MessageId) -> how many times a handling of the message committed."""
    return Counter((m.group(1), m.group(3)) for line in lines if (m := COMMITTED.search(line)))


def quiet(lines: list[str]) -> bool:
    """Every function execution devhost started has finished."""
    started = {m.group(1) for line in lines if (m := re.search(r"Executing '.*Id=([\w-]+)\)", line))}
    finished = {m.group(1) for line in lines if (m := re.search(r"Executed '.*Id=([\w-]+)", line))}
    return started <= finished


def guide_commands() -> tuple[str, list[str], list[str]]:
    """From docs/topology-guide.md: the options it saves as topology.json, and the migration's plan and
    apply command lines, as the guide shows them."""
    text = GUIDE.read_text()
    [options] = [
        b
        for b in re.findall(r"cat > topology\.json <<'JSON'\n(.*?\n)JSON\n", text, re.DOTALL)
        if '"busbar-fallback"' in b and ORDER in b
    ]
    lines = [line for b in re.findall(r"```sh\n(.*?)```", text, re.DOTALL) for line in b.splitlines()]
    [plan] = [line for line in lines if " plan --migrate " in line]
    [apply] = [line for line in lines if " apply --migrate " in line]
    return options, shlex.split(plan), shlex.split(apply)


def run_documented(command: list[str], cwd: Path) -> tuple[list[dict[str, Any]], float, float]:
    """A command line of the guide, in the app directory; its JSON documents and when it ran."""
    started = time.time()
    result = subprocess.run(
        command,
        cwd=cwd,
        env={**tool_environment(), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    finished = time.time()
    assert result.returncode == 0, f"{command}:\n{result.stdout}\n{result.stderr}"
    decoder, text, documents, position = json.JSONDecoder(), result.stdout, [], 0
    while position < len(text.rstrip()):
        document, position = decoder.raw_decode(text, position)
        documents.append(document)
        while position < len(text) and text[position].isspace():
            position += 1
    return documents, started, finished


def wait_for(condition: Any, what: str, timeout: float, lines: list[str]) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}:\n" + "\n".join(lines[-80:]))
        time.sleep(0.25)


def handover_cutoff(app_dir: Path, topic: str, subscription: str) -> datetime:
    """The cutoff the migration recorded on billing's new subscription (read through azure-mgmt)."""
    settings = local_app_settings(app_dir / "local.settings.json", app_dir / ".data", {})
    with ManagementClient(ManagementSettings.from_env(settings)) as management:
        created = management.subscriptions.get(*management.scope, topic, subscription)
    handover = Handover.parse(created.user_metadata)
    assert handover is not None, created.user_metadata
    return handover.cutoff(created.created_at)


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.timeout(900)
def test_moving_an_event_to_its_own_topic_while_events_flow_delivers_every_event_once_per_subscriber(
    tmp_path: Path,
) -> None:
    if shutil.which("make") is None:
        pytest.fail("GNU make is required for the newcomer path")
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    (app_dir / ".venv").symlink_to(REPO / ".venv")
    options, plan_command, apply_command = guide_commands()
    app = MakeRun(app_dir / ".data")  # settings beside the data: app_dir/local.settings.json
    publisher: Publisher | None = None
    try:
        app.reader.wait_ready(timeout=120)
        settings = json.loads(app.settings.read_text())["Values"]
        assert settings["BUSBAR_ROUTER_SNAPSHOT_SECONDS"] == "30"  # the app's default interval
        publisher = Publisher(app.base_url, app.banner("Host key"))
        publisher.start()
        # Before: billing gets orders through its rule on the fallback topic.
        wait_for(lambda: publisher.count(ORDER) >= 20, "orders before the migration", 120, app.reader.lines)

        (app_dir / "topology.json").write_text(options)
        (planned,), _, _ = run_documented(plan_command, app_dir)
        old_rule = f"busbar-fallback/Subscriptions/billing/Rules/{ORDER}"
        assert [i["path"] for i in planned["plan"]["items"] if i["action"] == "delete"] == [old_rule]
        assert planned["plan"]["handoverSeconds"] == 32.0
        (shown, applied), apply_started, apply_finished = run_documented(apply_command, app_dir)
        assert shown == planned
        assert f"{ORDER}/Subscriptions/billing" in applied["applied"]["created"]
        assert applied["applied"]["deleted"] == [old_rule]

        # After: orders reach billing through the router's bridge to the dedicated topic, for more than a
        # snapshot interval, so routers that re-read the namespace without the old rule decide too.
        after_from = publisher.count(ORDER)
        wait_for(lambda: publisher.count(ORDER) >= after_from + 20, "orders after", 120, app.reader.lines)
        wait_for(lambda: time.time() > apply_finished + 35, "a snapshot interval after", 60, app.reader.lines)
        publisher.stop()
        assert publisher.failures == []
        published = list(publisher.published)

        def unhandled() -> list[str]:
            seen = handled(app.reader.lines)
            wanted = {ORDER: ("billing", "crm", "shipping"), CUSTOMER: ("crm",)}
            return [f"{e}:{p.key}" for p in published for e in wanted[p.contract] if not seen[(e, p.key)]]

        deadline = time.monotonic() + DRAIN
        while unhandled() and time.monotonic() < deadline:
            time.sleep(0.5)
        lost = unhandled()
        failed = [line for line in app.reader.lines if "(Failed" in line]
        assert lost == [], (
            f"{len(lost)} events never handled (lost): {lost[:20]}; failed executions: {failed}"
        )
        # A second copy of an event travels the same paths as the first; let everything in flight finish.
        wait_for(lambda: quiet(app.reader.lines), "the app to go quiet", DRAIN, app.reader.lines)
        time.sleep(5)
        wait_for(lambda: quiet(app.reader.lines), "the app to go quiet", DRAIN, app.reader.lines)

        seen = handled(app.reader.lines)
        messages = handled_messages(app.reader.lines)
        commits = committed(app.reader.lines)
        cutoff = handover_cutoff(app_dir, ORDER, "billing").timestamp()
        window = (cutoff - skew_allowance(32.0), apply_finished)
        orders = [p for p in published if p.contract == ORDER]
        customers = [p for p in published if p.contract == CUSTOMER]
        phases = Counter(
            "before" if p.accepted < apply_started else "after" if p.sent > apply_finished else "during"
            for p in orders
        )
        assert min(phases["before"], phases["during"], phases["after"]) >= 20, phases
        # Orders enqueued in the handover's window reached billing twice (through the old rule and the
        # router's bridge) with one MessageId, and billing handled each MessageId once.
        in_window = [p for p in orders if p.accepted >= window[0] and p.sent <= window[1]]
        failed = [line for line in app.reader.lines if "(Failed" in line]
        # Each subscriber got one message per order (shipping: the one invoice billing published for it) and
        # committed its handling once: a handler that ran again for the same message (a twin copy, a commit
        # retried after a storage timeout) discarded its effects.
        for published_event, endpoints in [(o, ("billing", "crm", "shipping")) for o in orders] + [
            (c, ("crm",)) for c in customers
        ]:
            for endpoint in endpoints:
                ids = messages[(endpoint, published_event.key)]
                assert len(ids) == 1, (endpoint, published_event, ids)
                [message_id] = ids
                assert commits[(endpoint, message_id)] == 1, (
                    endpoint,
                    published_event,
                    seen[(endpoint, published_event.key)],
                    window,
                    failed,
                )
        twins = sum(1 for line in app.reader.lines if "billing already handled message" in line)
        print(
            f"journey: {len(orders)} orders ({dict(phases)}), {len(customers)} customers; handover window "
            f"{datetime.fromtimestamp(window[0], UTC)} .. {datetime.fromtimestamp(window[1], UTC)} "
            f"({timedelta(seconds=window[1] - window[0])}): {len(in_window)} orders published in it; "
            f"billing completed {twins} copies it had already handled; every order handled once"
        )
        app.interrupt()
    finally:
        if publisher is not None:
            publisher.stop()
        app.kill()
