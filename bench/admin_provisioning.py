"""Provisioning the seed topology through the namespace's ATOM API with ``ServiceBusAdministrationClient``.

The seed's capacity example, topic-per-event (NServiceBus 6.4+ default): 100 event types, 80 endpoints
each subscribing to 25 of them (the same random choice as ``bench/topologies.py``). The desired state
comes from :func:`shared.topology.desired_state`; this script creates it entity by entity with the admin
client against ``python -m emulator --in-memory --management-tls`` in a fresh process: every endpoint
queue, every event topic, then every forwarding subscription with its rules (the subscription is created
with the broker's ``$Default`` rule, which is replaced by the desired rules unless the desired rule *is* a
true filter). ``--concurrency`` clients work at once (as a setup script with a thread pool would).

Afterwards it lists everything back through the same API and checks the counts, and sends one event to
check that it is forwarded. Figures (seconds, requests, requests per second) go to
``bench/results/admin_provisioning.json``.

    .venv/bin/python bench/admin_provisioning.py [--endpoints 80] [--events 100] [--share 25]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from azure.servicebus import ServiceBusClient, ServiceBusMessage  # noqa: E402
from azure.servicebus.management import (  # noqa: E402
    CorrelationRuleFilter,
    FalseRuleFilter,
    ServiceBusAdministrationClient,
    SqlRuleFilter,
    TrueRuleFilter,
)
from topologies import subscriptions  # noqa: E402

from shared.topology import DesiredState, TopologyOptions, desired_state  # noqa: E402
from shared.topology.desired import RuleFilter, SubscriptionSpec  # noqa: E402

RESULTS = ROOT / "bench" / "results"


def start_emulator() -> tuple[subprocess.Popen[str], str, str, str]:
    """The emulator with HTTPS management: process, AMQP and admin connection strings, CA file."""
    cmd = [sys.executable, "-m", "emulator", "--in-memory", "--amqp-port", "0", "--management-port", "0"]
    cmd += ["--management-tls", "--management-tls-port", "0", "--amqps-port", "0", "--log-level", "WARNING"]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    assert proc.stdout is not None
    found: dict[str, str] = {}
    patterns = {
        "conn": r"^Connection string: (\S+)",
        "admin": r"^Admin connection string: (\S+) \(\w+: connection_verify=(\S+)\)",
    }
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(found) < 3:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            break
        for key, pattern in patterns.items():
            match = re.search(pattern, line)
            if match:
                found[key] = match.group(1)
                if key == "admin":
                    found["ca"] = match.group(2)
    if len(found) < 3:
        proc.kill()
        raise RuntimeError("the emulator did not become ready")
    return proc, found["conn"], found["admin"], found["ca"]


def admin_filter(rule: RuleFilter) -> Any:
    if rule.kind == "true":
        return TrueRuleFilter()
    if rule.kind == "false":
        return FalseRuleFilter()
    if rule.kind == "sql":
        return SqlRuleFilter(rule.sql)
    return CorrelationRuleFilter(properties=dict(rule.properties))


class Counter:
    def __init__(self) -> None:
        self.value = 0
        self._lock = threading.Lock()

    def add(self, n: int = 1) -> None:
        with self._lock:
            self.value += n


def provision(state: DesiredState, admin_string: str, ca: str, concurrency: int) -> dict[str, Any]:
    clients = [
        ServiceBusAdministrationClient.from_connection_string(admin_string, connection_verify=ca)
        for _ in range(concurrency)
    ]
    local = threading.local()
    counter = Counter()
    pool_index = Counter()

    def client() -> ServiceBusAdministrationClient:
        if not hasattr(local, "client"):
            with pool_index._lock:
                local.client = clients[pool_index.value % concurrency]
                pool_index.value += 1
        return local.client  # type: ignore[no-any-return]

    def queue(name: str) -> None:
        client().create_queue(name)
        counter.add()

    def topic(name: str) -> None:
        client().create_topic(name)
        counter.add()

    def subscription(spec: SubscriptionSpec) -> None:
        admin = client()
        admin.create_subscription(spec.topic, spec.name, forward_to=spec.forward_to)
        counter.add()
        if [r.filter.kind for r in spec.rules] == ["true"]:
            return  # the $Default rule the broker gave it is the desired one
        admin.delete_rule(spec.topic, spec.name, "$Default")
        counter.add()
        for rule in spec.rules:
            admin.create_rule(spec.topic, spec.name, rule.name, filter=admin_filter(rule.filter))
            counter.add()

    phases: dict[str, float] = {}
    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        for label, work, items in (
            ("queues", queue, state.queues),
            ("topics", topic, state.topics),
            ("subscriptions", subscription, state.subscriptions),
        ):
            started = time.perf_counter()
            for _ in pool.map(work, items):  # type: ignore[arg-type]
                pass
            phases[f"{label}_s"] = round(time.perf_counter() - started, 2)
    elapsed = time.perf_counter() - t0
    for c in clients:
        c.close()
    return {
        "seconds": round(elapsed, 2),
        "requests": counter.value,
        "requests_per_s": round(counter.value / elapsed, 1),
        **phases,
    }


def verify(state: DesiredState, admin_string: str, ca: str, conn: str) -> dict[str, Any]:
    with ServiceBusAdministrationClient.from_connection_string(admin_string, connection_verify=ca) as admin:
        t0 = time.perf_counter()
        queues = [q.name for q in admin.list_queues()]
        topics = [t.name for t in admin.list_topics()]
        subscription_count = sum(len(list(admin.list_subscriptions(t))) for t in topics)
        listing_s = time.perf_counter() - t0
    spec = state.subscriptions[0]
    with ServiceBusClient.from_connection_string(conn) as client:
        with client.get_topic_sender(spec.topic) as sender:
            sender.send_messages(ServiceBusMessage("probe", application_properties={spec.topic: True}))
        with client.get_queue_receiver(spec.forward_to, max_wait_time=5) as receiver:
            forwarded = receiver.receive_messages(max_message_count=1, max_wait_time=5)
    return {
        "queues": len(queues),
        "topics": len(topics),
        "subscriptions": subscription_count,
        "listing_s": round(listing_s, 2),
        "probe_forwarded": len(forwarded) == 1,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--endpoints", type=int, default=80)
    parser.add_argument("--events", type=int, default=100)
    parser.add_argument("--share", type=int, default=25)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--out", type=Path, default=RESULTS / "admin_provisioning.json")
    args = parser.parse_args()
    wanted = subscriptions(args.endpoints, args.events, args.share)
    options = TopologyOptions()
    state = DesiredState.combine(desired_state(options, q, events) for q, events in wanted.items())
    proc, conn, admin_string, ca = start_emulator()
    try:
        figures = provision(state, admin_string, ca, args.concurrency)
        check = verify(state, admin_string, ca, conn)
    finally:
        proc.terminate()
        proc.wait(30)
    expected = {
        "queues": len(state.queues),
        "topics": len(state.topics),
        "subscriptions": len(state.subscriptions),
    }
    document = {
        "benchmark": "admin_provisioning",
        "scenario": f"topic-per-event: {args.events} event types, {args.endpoints} endpoints each "
        f"subscribing to {args.share}%, created with ServiceBusAdministrationClient over HTTPS, "
        f"{args.concurrency} clients at once",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load": os.getloadavg()},
        "expected": expected,
        "provisioning": figures,
        "read_back": check,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    print(json.dumps(document, indent=2))
    ok = all(check[k] == v for k, v in expected.items()) and check["probe_forwarded"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
