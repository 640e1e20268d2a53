"""Topic routing cost, measured through the azure-servicebus SDK.

For N = 1, 100 and 2,000 subscriptions on one topic, each subscription has one rule that matches a
distinct event type, and every published message matches exactly one subscription:

* ``correlation``: CorrelationFilter on the application property ``type``;
* ``sql``: SqlFilter ``[type] = 'EventK'``;
* ``topic_per_event``: the same events, each type on its own topic with a ``$Default`` subscription.

Messages per second published (batched sends of 100, 512-byte bodies) are written to
``bench/results/filters.json``. The emulator runs as its own process with a durable store.

    .venv/bin/python bench/filters.py [--messages 3000] [--sizes 1,100,2000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusMessage

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_emulator import ROOT, start_emulator

RESULTS = ROOT / "bench" / "results"


def config(kind: str, n: int) -> dict[str, Any]:
    def rule(k: int) -> dict[str, Any]:
        if kind == "correlation":
            return {
                "Name": f"r{k}",
                "Properties": {
                    "FilterType": "Correlation",
                    "CorrelationFilter": {"Properties": {"type": f"Event{k}"}},
                },
            }
        return {
            "Name": f"r{k}",
            "Properties": {"FilterType": "Sql", "SqlFilter": {"SqlExpression": f"[type] = 'Event{k}'"}},
        }

    topics: list[dict[str, Any]]
    if kind == "topic_per_event":
        topics = [{"Name": f"event{k}", "Subscriptions": [{"Name": "s"}]} for k in range(n)]
    else:
        subscriptions = [{"Name": f"s{k}", "Rules": [rule(k)]} for k in range(n)]
        topics = [
            {"Name": "events", "Properties": {"MaxSizeInMegabytes": 81920}, "Subscriptions": subscriptions}
        ]
    return {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [], "Topics": topics}]}}


def measure(kind: str, n: int, total: int, body: bytes) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.json"
        path.write_text(json.dumps(config(kind, n)))
        proc, conn = start_emulator(path, Path(tmp) / "data")
        try:
            with ServiceBusClient.from_connection_string(conn) as client:
                batches = (total + 99) // 100
                if kind == "topic_per_event":
                    topics = sorted({f"event{k % n}" for k in range(batches)})
                else:
                    topics = ["events"]
                senders = {}
                for topic in topics:  # opened before timing: each SDK sender is its own connection
                    senders[topic] = client.get_topic_sender(topic)
                    senders[topic].__enter__()
                started = time.perf_counter()
                sent = 0
                k = 0
                while sent < total:
                    batch = min(100, total - sent)
                    event = k % n
                    topic = f"event{event}" if kind == "topic_per_event" else "events"
                    messages = [
                        ServiceBusMessage(body, application_properties={"type": f"Event{event}"})
                        for _ in range(batch)
                    ]
                    senders[topic].send_messages(messages)
                    sent += batch
                    k += 1
                elapsed = time.perf_counter() - started
                for sender in senders.values():
                    sender.__exit__(None, None, None)
            return total / elapsed
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--sizes", default="1,100,2000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    body = os.urandom(256).hex().encode()
    figures: dict[str, dict[str, float]] = {}
    for kind in ("correlation", "sql", "topic_per_event"):
        figures[kind] = {}
        for n in sizes:
            rate = measure(kind, n, args.messages, body)
            figures[kind][str(n)] = round(rate)
            print(f"{kind:16s} N={n:5d}: {rate:8,.0f} msg/s", flush=True)
    result = {
        "benchmark": "filters",
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "messages_per_scenario": args.messages,
        "publish_msgs_per_s": figures,
        "ratio_correlation_2000_to_1": (
            round(figures["correlation"]["2000"] / figures["correlation"]["1"], 2)
            if "2000" in figures["correlation"] and "1" in figures["correlation"]
            else None
        ),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "filters.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
