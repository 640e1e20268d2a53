"""The seed's capacity example on both topologies: 100 event types, 80 endpoints each subscribing to 25%.

For ``bundle`` (one topic, one subscription per endpoint with one SQL rule per event, plus the
``$default`` 1=0 rule NServiceBus gives every filtered subscription), ``bundle_without_false_default``
(the same without that rule: a subscription with no rules matches nothing, so delivery is identical) and
``topic_per_event`` (one topic per event, one catch-all subscription per endpoint and event), each in a
fresh emulator process, this script:

1. checks the whole desired state against the per-topic quotas (the NServiceBus-shaped bundle does not
   fit 80 endpoints: every subscription's ``$default`` rule is a SQL filter too, so 80 x 26 = 2,080 >
   2,000; the refusal and the largest endpoint count that fits are recorded, and that many endpoints are
   provisioned; without the false default rule 80 x 25 = 2,000 fits exactly);
2. provisions endpoint by endpoint through ``Provisioner.plan`` + ``apply`` (azure-mgmt-servicebus over
   the emulator's ARM endpoint) and times it; a second plan of every endpoint must be all ``unchanged``;
3. counts the entities on the namespace (ARM list calls);
4. publishes messages of uniformly random event types through the ``Publisher`` (azure-servicebus), 100
   events per publish call, after one warm-up call that opens the senders, and times it; then waits
   until the endpoint queues hold exactly the expected number of deliveries.

Figures go to ``bench/results/topologies.json``.

    .venv/bin/python bench/topologies.py [--endpoints 80] [--events 100] [--share 25] [--messages 2000]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from azure.servicebus import ServiceBusClient  # noqa: E402

from shared.contracts import Event  # noqa: E402
from shared.management import EMULATOR_NAMESPACE, ManagementClient, ManagementSettings  # noqa: E402
from shared.topology import (  # noqa: E402
    DesiredState,
    MigrationTopologyOptions,
    Provisioner,
    Publisher,
    QuotaExceededError,
    TopologyOptions,
    desired_state,
)
from shared.topology.quotas import check_desired  # noqa: E402

RESULTS = ROOT / "bench" / "results"


def start_emulator() -> tuple[subprocess.Popen[str], str, int, str]:
    """``python -m emulator --in-memory`` on free ports: process, connection string, ARM port, token."""
    cmd = [sys.executable, "-m", "emulator", "--in-memory", "--amqp-port", "0", "--management-port", "0"]
    cmd += ["--log-level", "WARNING"]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    assert proc.stdout is not None
    found: dict[str, str] = {}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(found) < 3:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            break
        for key, pattern in (
            ("port", r"management=127\.0\.0\.1:(\d+)"),
            ("token", r"Management token: (\S+)"),
            ("conn", r"Connection string: (\S+)"),
        ):
            match = re.search(pattern, line)
            if match:
                found[key] = match.group(1)
    if len(found) < 3:
        proc.kill()
        raise RuntimeError("the emulator did not become ready")
    return proc, found["conn"], int(found["port"]), found["token"]


def event_types(count: int) -> list[type[Event]]:
    return [
        type(f"Event{i:03d}", (Event,), {"__annotations__": {"n": int}}, contract=f"Bench.Event{i:03d}")
        for i in range(count)
    ]


def subscriptions(endpoints: int, events: int, share: int, seed: int = 42) -> dict[str, list[str]]:
    rng = random.Random(seed)
    per_endpoint = events * share // 100
    return {
        f"endpoint-{n:02d}": sorted(f"Bench.Event{i:03d}" for i in rng.sample(range(events), per_endpoint))
        for n in range(endpoints)
    }


def largest_fit(
    options: TopologyOptions, wanted: dict[str, list[str]], false_default_rule: bool
) -> tuple[int, str | None]:
    """How many endpoints (in order) fit the quotas, and the refusal of all of them (if any)."""
    states = [
        desired_state(options, q, events, false_default_rule=false_default_rule)
        for q, events in wanted.items()
    ]
    try:
        check_desired(DesiredState.combine(states))
        return len(states), None
    except QuotaExceededError as exc:
        refusal = str(exc)
    fits = len(states) - 1
    while fits > 0:
        try:
            check_desired(DesiredState.combine(states[:fits]))
            break
        except QuotaExceededError:
            fits -= 1
    return fits, refusal


def run_topology(
    name: str,
    options: TopologyOptions,
    wanted: dict[str, list[str]],
    args: argparse.Namespace,
    false_default_rule: bool = True,
) -> dict[str, Any]:
    fits, refusal = largest_fit(options, wanted, false_default_rule)
    endpoints = dict(list(wanted.items())[:fits])
    proc, conn, port, token = start_emulator()
    try:
        settings = ManagementSettings("bench", "bench", EMULATOR_NAMESPACE, f"http://127.0.0.1:{port}", token)
        with ManagementClient(settings) as management:
            provisioner = Provisioner(management, concurrency=args.concurrency)
            states = {
                q: desired_state(options, q, events, false_default_rule=false_default_rule)
                for q, events in endpoints.items()
            }
            started = time.perf_counter()
            per_endpoint: list[float] = []
            for state in states.values():
                t0 = time.perf_counter()
                provisioner.apply(provisioner.plan(state))
                per_endpoint.append(time.perf_counter() - t0)
            provisioning_s = time.perf_counter() - started
            t0 = time.perf_counter()
            replans = [provisioner.plan(state) for state in states.values()]
            replan_s = time.perf_counter() - t0
            assert all(not p.has_changes and not p.of("would-update") for p in replans), (
                "re-plan not idempotent"
            )
            counts = count_entities(management)
            throughput = publish(conn, options, management, endpoints, args)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    combined = DesiredState.combine(states.values())
    return {
        "topology": name,
        "false_default_rule": false_default_rule,
        "endpoints_requested": len(wanted),
        "endpoints_provisioned": fits,
        "quota_refusal": refusal,
        "entities": counts,
        "entities_expected": {
            "queues": len(combined.queues),
            "topics": len(combined.topics),
            "subscriptions": len(combined.subscriptions),
            "rules": combined.rule_count(),
        },
        "provisioning": {
            "total_s": round(provisioning_s, 2),
            "per_endpoint_ms_median": round(sorted(per_endpoint)[len(per_endpoint) // 2] * 1000, 1),
            "per_endpoint_ms_max": round(max(per_endpoint) * 1000, 1),
            "replan_all_unchanged_s": round(replan_s, 2),
        },
        "publish": throughput,
    }


def count_entities(management: ManagementClient) -> dict[str, int]:
    scope = management.scope
    topics = list(management.topics.list_by_namespace(*scope))
    subs = [(t.name, s.name) for t in topics for s in management.subscriptions.list_by_topic(*scope, t.name)]
    rules = sum(len(list(management.rules.list_by_subscriptions(*scope, t, s))) for t, s in subs)
    per_topic: dict[str, int] = {}
    for topic, _ in subs:
        per_topic[topic] = per_topic.get(topic, 0) + 1
    return {
        "queues": len(list(management.queues.list_by_namespace(*scope))),
        "topics": len(topics),
        "subscriptions": len(subs),
        "rules": rules,
        "max_subscriptions_per_topic": max(per_topic.values(), default=0),
    }


def publish(
    conn: str,
    options: TopologyOptions,
    management: ManagementClient,
    endpoints: dict[str, list[str]],
    args: argparse.Namespace,
) -> dict[str, Any]:
    types = event_types(args.events)
    rng = random.Random(7)
    chosen = [rng.choice(types) for _ in range(args.messages)]
    subscribers: dict[str, int] = {}
    for events in endpoints.values():
        for event in events:
            subscribers[event] = subscribers.get(event, 0) + 1
    expected = sum(subscribers.get(t.contract_name, 0) for t in chosen)
    with (
        ServiceBusClient.from_connection_string(conn) as client,
        Publisher(client, options, endpoint_name="bench") as pub,
    ):
        t0 = time.perf_counter()
        warm = pub.publish([t(n=-1) for t in types])  # opens every sender once
        warmup_s = time.perf_counter() - t0
        expected += sum(subscribers.get(t.contract_name, 0) for t in types)
        t0 = time.perf_counter()
        sent = 0
        for start in range(0, len(chosen), args.batch):
            result = pub.publish([t(n=i) for i, t in enumerate(chosen[start : start + args.batch], start)])
            sent += len(result.sent)
        elapsed = time.perf_counter() - t0
    delivered, settle_s = wait_for_deliveries(management, expected)
    return {
        "messages": args.messages,
        "events_per_publish_call": args.batch,
        "sent": sent,
        "dropped": args.messages - sent,
        "warmup_publish_s": round(warmup_s, 2),
        "warmup_dropped": len(warm.dropped),
        "seconds": round(elapsed, 2),
        "messages_per_s": round(sent / elapsed, 1),
        "deliveries_expected": expected,
        "deliveries_in_queues": delivered,
        "deliveries_settled_after_s": round(settle_s, 2),
    }


def wait_for_deliveries(
    management: ManagementClient, expected: int, timeout: float = 60.0
) -> tuple[int, float]:
    t0 = time.perf_counter()
    total = 0
    while time.perf_counter() - t0 < timeout:
        total = sum(int(q.message_count or 0) for q in management.queues.list_by_namespace(*management.scope))
        if total >= expected:
            break
        time.sleep(0.2)
    return total, time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--endpoints", type=int, default=80)
    parser.add_argument("--events", type=int, default=100)
    parser.add_argument(
        "--share", type=int, default=25, help="percent of the events each endpoint subscribes to"
    )
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=100, help="events per publish call")
    parser.add_argument("--concurrency", type=int, default=4, help="management calls at once")
    parser.add_argument("--out", type=Path, default=RESULTS / "topologies.json")
    args = parser.parse_args()
    # Publishing to topics nobody subscribed to is expected here; its warnings would drown the output.
    logging.getLogger("shared.topology.publisher").setLevel(logging.ERROR)
    wanted = subscriptions(args.endpoints, args.events, args.share)
    names = [f"Bench.Event{i:03d}" for i in range(args.events)]
    bundle = MigrationTopologyOptions(events_to_migrate_map=tuple(names))
    results = [
        run_topology("bundle", bundle, wanted, args),
        run_topology("bundle_without_false_default", bundle, wanted, args, false_default_rule=False),
        run_topology("topic_per_event", TopologyOptions(), wanted, args),
    ]
    document = {
        "benchmark": "topologies",
        "scenario": f"{args.events} event types, {args.endpoints} endpoints each subscribing to "
        f"{args.share}%",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    for r in results:
        print(
            f"{r['topology']:>28}: {r['endpoints_provisioned']}/{r['endpoints_requested']} endpoints, "
            f"{r['entities']}, provisioning {r['provisioning']['total_s']} s, "
            f"publish {r['publish']['messages_per_s']} msg/s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
