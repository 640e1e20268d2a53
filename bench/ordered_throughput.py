"""Ordered vs unordered endpoint throughput (issue 34): handled messages per second for 64 ordering keys,
the same handler hosted as an ordered and as an unordered endpoint of one app, in one run.

The app (``bench/host_apps/ordered_app.py``) declares both endpoints with Busbar's own trigger factory, so
every message goes the way a real endpoint's does; the ordered one has a session-enabled queue and trigger
and does one point read of its key's row in Table Storage per message (:mod:`shared.ordering`). The handler
sleeps ``--work-ms`` (5 ms): it stands for a handler waiting on I/O, which is what concurrency buys time on
(a CPU job would measure the two shared cores instead, whatever the endpoint).

The emulator runs as its own process (in memory), Azurite as devhost's ``--with-azurite`` starts it, and
devhost runs the app as it does by default (the host in this process, the function code in its worker
process) with the repository's ``host.json`` (maxConcurrentCalls 16, maxConcurrentSessions 16,
sessionIdleTimeout 2 s). Each run sends N messages to one endpoint's queue with the SDK, spread over the keys
round robin, ``SessionId`` = key as Busbar's publish sets it (``shared.topology.messages.build_message``),
then starts the host and waits until all are handled. Runs alternate (ordered, unordered, ordered, ...) so
the shared machine's noise hits both alike; medians over ``--rounds`` are reported.

Figures, per endpoint: the rate (N / first invocation start -> last invocation end; host start-up excluded),
the steady rate between the 10% and the 90% completion, the invocations in flight on average (their summed
time over that span: the concurrency the endpoint had), the median invocation time, CPU per message per
process, and how many events were handled after a later event of their key. The ordered path's overhead per
message is reported as the time of its point read, timed from this process against the same Azurite
(``--reads`` per round, interleaved with the runs), and as CPU: ordered minus unordered, all processes
(Azurite's share apart). The invocation times are no measure of it: an invocation waits for one of the
worker's threads, so its time grows with the invocations in flight.

Optional configurations, interleaved with the others: ``--session-idle-variants`` runs the ordered endpoint
with other ``sessionIdleTimeout`` values (preloaded, each key's slot waits that long after its last event
before taking another key: 64 keys on 16 slots wait three times); ``--one-key-messages`` runs it with every
event of one key, the fully serial rate that 64 keys multiply.

Timings are reported, never asserted. Appends to ``bench/results/ordered_throughput.json`` under
``--label``. Usage::

    .venv/bin/python bench/ordered_throughput.py [--messages 2000] [--rounds 3] [--keys 64] [--label x]
        [--session-idle-variants 0.25] [--one-key-messages 200]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from azure.servicebus import ServiceBusClient

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bench_emulator import start_emulator  # noqa: E402
from bench.host_apps.ordered_app import ORDERED, UNORDERED, KeyedWork  # noqa: E402
from bench.host_throughput import CpuMeter, _cpu_seconds, _worker_pids, steady_rate  # noqa: E402
from devhost.storage.azurite import AzuritePorts, launch, terminate  # noqa: E402
from devhost.storage.settings import development_connection_string  # noqa: E402
from devhost.testing import running_host  # noqa: E402
from functions.subscribers import subscriber_name  # noqa: E402
from shared.ordering.held_keys import held_keys_from_settings  # noqa: E402
from shared.topology.messages import build_message  # noqa: E402
from shared.topology.options import TopicRoutingMode  # noqa: E402
from shared.topology.queues import endpoint_queues  # noqa: E402

RESULT_FILE = ROOT / "bench" / "results" / "ordered_throughput.json"
APP = ROOT / "bench" / "host_apps" / "ordered_app.py"
HOST_JSON = ROOT / "host.json"
KINDS = {"ordered": ORDERED, "unordered": UNORDERED}


@dataclass(frozen=True, slots=True)
class Configuration:
    """One measured configuration: which endpoint, how many events over how many keys, and the
    ``sessionIdleTimeout`` it runs with (None: host.json's)."""

    kind: str
    messages: int
    keys: int
    idle: float | None = None


def emulator_config(queues: dict[str, str]) -> dict[str, Any]:
    """Both endpoints' queues as Busbar provisions them (the ordered one's hold queue included)."""
    entries = []
    for kind, queue in queues.items():
        for spec in endpoint_queues(queue, ordered=KINDS[kind].ordered):
            properties: dict[str, Any] = {"LockDuration": "PT1M", "MaxDeliveryCount": 10}
            properties["RequiresSession"] = spec.requires_session
            if spec.duplicate_detection_window is not None:
                properties["RequiresDuplicateDetection"] = True
                properties["DuplicateDetectionHistoryTimeWindow"] = spec.to_dict()[
                    "duplicateDetectionHistoryTimeWindow"
                ]
            entries.append({"Name": spec.name, "Properties": properties})
    return {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": entries, "Topics": []}]}}


def key_of(index: int, keys: int) -> str:
    return f"key-{index % keys:03d}"


def preload(connection: str, queue: str, total: int, keys: int) -> None:
    """``total`` events, the keys round robin: a key's events are spread over the whole queue."""
    with (
        ServiceBusClient.from_connection_string(connection) as client,
        client.get_queue_sender(queue) as sender,
    ):
        for start in range(0, total, 100):
            events = [
                KeyedWork(key=key_of(i, keys), n=i // keys) for i in range(start, min(total, start + 100))
            ]
            sender.send_messages(
                [build_message(e, TopicRoutingMode.CorrelationFilter, endpoint_name="bench") for e in events]
            )


def out_of_key_order(record: Path) -> int:
    """Events handled after a later event of their key (``<key> <n>`` lines, in the order handled)."""
    latest: dict[str, int] = {}
    late = 0
    for line in record.read_text().splitlines():
        key, n = line.split()
        if int(n) < latest.get(key, -1):
            late += 1
        latest[key] = max(int(n), latest.get(key, -1))
    return late


def point_reads(settings: dict[str, str], queue: str, keys: int, count: int) -> list[float]:
    """Milliseconds per point read of a key's row (none exists: every key flows), as the ordered path does."""
    store = held_keys_from_settings(settings)
    try:
        store.get(queue, key_of(0, keys))  # creates the table, opens the connection
        times = []
        for i in range(count):
            started = time.perf_counter()
            store.get(queue, key_of(i, keys))
            times.append((time.perf_counter() - started) * 1000)
        return times
    finally:
        store.close()


def host_json(session_idle_seconds: float | None) -> dict[str, Any]:
    """The repository's ``host.json``, its ``sessionIdleTimeout`` replaced when ``session_idle_seconds``."""
    config: dict[str, Any] = json.loads(HOST_JSON.read_text())
    if session_idle_seconds is not None:
        idle = timedelta(seconds=session_idle_seconds)
        hours, rest = divmod(idle.total_seconds(), 3600)
        config["extensions"]["serviceBus"]["sessionIdleTimeout"] = (
            f"{int(hours):02d}:{int(rest // 60):02d}:{rest % 60:06.3f}"
        )
    return config


def host_run(
    settings: dict[str, str],
    kind: str,
    config: dict[str, Any],
    total: int,
    meter: Callable[[], dict[str, float]],
) -> dict[str, Any]:
    """Start the host on the preloaded queue of ``kind`` and measure until ``total`` are handled."""
    function = subscriber_name(KINDS[kind])

    def mine(records: list[Any]) -> list[Any]:
        return [r for r in records if r.function_name == function]

    with running_host(APP, settings=settings, host_json=config) as host:
        already = len(mine(host.invocations))
        start = meter()
        host.wait_for_invocations(lambda records: len(mine(records)) >= total, timeout=900)
        end = meter()
        records = mine(host.invocations)
    if not all(r.succeeded for r in records):
        raise RuntimeError(
            f"{kind}: an invocation failed: {next(r.error for r in records if not r.succeeded)}"
        )
    first = min(r.started_at for r in records)
    last = max(r.finished_at for r in records)
    # Those handled before the first reading are not counted (a tiny run may be done by then: its CPU
    # figures are then meaningless, and ``counted`` in the result says so).
    counted = max(total - already, 1)
    return {
        "rate": total / (last - first),
        "in_flight": sum(r.duration_ms for r in records) / 1000 / (last - first),
        "steady": steady_rate([r.finished_at for r in records]),
        "invocation_ms": statistics.median(r.duration_ms for r in records),
        "cpu": CpuMeter.per_message(start, end, counted),
        "counted": counted,
    }


def cpu_seconds_if_alive(pid: int) -> float:
    """CPU seconds of ``pid`` so far; 0 when it is gone (a worker process may exit between being listed and
    being read: host_throughput's meter would fail then)."""
    with contextlib.suppress(OSError):
        return _cpu_seconds(pid)
    return 0.0


def median_of(values: list[float], digits: int = 1) -> float:
    return round(statistics.median(values), digits)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=2000, help="messages per run")
    parser.add_argument(
        "--rounds", type=int, default=3, help="runs per endpoint, interleaved (medians reported)"
    )
    parser.add_argument("--keys", type=int, default=64, help="ordering keys the messages are spread over")
    parser.add_argument("--work-ms", type=int, default=5, help="milliseconds the handler sleeps per event")
    parser.add_argument("--reads", type=int, default=300, help="point reads timed per round")
    parser.add_argument("--label", default="after", help="the name these figures are filed under")
    parser.add_argument("--out", type=Path, default=RESULT_FILE, help="the result file (appended to)")
    parser.add_argument(
        "--one-key-messages",
        type=int,
        default=0,
        help="also run the ordered endpoint with this many events all of one key (0: not)",
    )
    parser.add_argument(
        "--session-idle-variants",
        type=lambda text: [float(value) for value in text.split(",") if value],
        default=[],
        help="also run the ordered endpoint with these sessionIdleTimeout values (seconds, comma-separated)",
    )
    args = parser.parse_args()
    # Configurations, run in this order each round: name -> (endpoint kind, sessionIdleTimeout override).
    configurations = {
        "ordered": Configuration("ordered", args.messages, args.keys),
        "unordered": Configuration("unordered", args.messages, args.keys),
    }
    for seconds in args.session_idle_variants:
        name = f"ordered_session_idle_{seconds:g}s"
        configurations[name] = Configuration("ordered", args.messages, args.keys, seconds)
    if args.one_key_messages:
        configurations["ordered_one_key"] = Configuration("ordered", args.one_key_messages, 1)
    load_at_start = os.getloadavg()
    queues = {"ordered": "bench-ordered", "unordered": "bench-unordered"}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "config.json").write_text(json.dumps(emulator_config(queues)))
        emulator, connection = start_emulator(work / "config.json", None)
        assert emulator.stdout is not None
        # Keep reading the emulator's output: a full pipe would block it mid-run.
        threading.Thread(target=emulator.stdout.read, daemon=True).start()
        azurite = None
        try:
            azurite, ports = launch(work / "azurite", AzuritePorts(0, 0, 0))
            azurite_pid = azurite.pid

            def meter() -> dict[str, float]:
                return {
                    "client": time.process_time(),
                    "worker": sum(cpu_seconds_if_alive(pid) for pid in _worker_pids()),
                    "emulator": _cpu_seconds(emulator.pid),
                    "azurite": _cpu_seconds(azurite_pid),
                }

            base = {
                "ServiceBusConnection": connection,
                "AzureWebJobsStorage": development_connection_string("127.0.0.1", *ports.named().values()),
                "BUSBAR_BENCH_ORDERED_QUEUE": queues["ordered"],
                "BUSBAR_BENCH_UNORDERED_QUEUE": queues["unordered"],
                "BENCH_WORK_MS": str(args.work_ms),
            }
            runs: dict[str, list[dict[str, Any]]] = {name: [] for name in configurations}
            late: dict[str, list[int]] = {name: [] for name in configurations}
            reads: list[float] = []
            for round_ in range(args.rounds):
                reads += point_reads(base, queues["ordered"], args.keys, args.reads)
                # Interleaved: ordered, unordered, (variants,) ordered, ...
                for name, c in configurations.items():
                    record = work / f"handled-{name}-{round_}.txt"
                    preload(connection, queues[c.kind], c.messages, c.keys)
                    settings = {**base, "BENCH_HANDLED_RECORD": str(record)}
                    runs[name].append(host_run(settings, c.kind, host_json(c.idle), c.messages, meter))
                    late[name].append(out_of_key_order(record))
                    print(
                        f"round {round_ + 1} {name}: {runs[name][-1]['rate']:.0f} msg/s "
                        f"(steady {runs[name][-1]['steady']:.0f})",
                        flush=True,
                    )
        finally:
            if azurite is not None:
                terminate(azurite)
            emulator.terminate()
            emulator.wait(30)
    rate = {name: statistics.median(r["rate"] for r in runs[name]) for name in configurations}
    steady = {name: statistics.median(r["steady"] for r in runs[name]) for name in configurations}
    invocation = {name: statistics.median(r["invocation_ms"] for r in runs[name]) for name in configurations}
    ordered_reads = sorted(reads)
    cpu = {
        name: {part: median_of([r["cpu"][part] for r in runs[name]], 3) for part in runs[name][0]["cpu"]}
        for name in configurations
    }
    run: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "label": args.label,
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip(),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
        "load_average_at_start": load_at_start,
        "load_average_at_end": os.getloadavg(),
        "messages_per_run": args.messages,
        "keys": args.keys,
        "rounds": args.rounds,
        "handler": f"sleeps {args.work_ms} ms (a handler waiting on I/O; a CPU job would measure the cores)",
        "host_json_service_bus": json.loads(HOST_JSON.read_text())["extensions"]["serviceBus"],
        "ordered_msgs_per_s": round(rate["ordered"], 1),
        "unordered_msgs_per_s": round(rate["unordered"], 1),
        "ratio_ordered_vs_unordered": round(rate["ordered"] / rate["unordered"], 3),
        "steady_msgs_per_s": {kind: round(value, 1) for kind, value in steady.items()},
        "steady_ratio_ordered_vs_unordered": round(steady["ordered"] / steady["unordered"], 3),
        "rounds_msgs_per_s": {name: [round(r["rate"], 1) for r in runs[name]] for name in configurations},
        "steady_rounds_msgs_per_s": {
            name: [round(r["steady"], 1) for r in runs[name]] for name in configurations
        },
        # Each variant: the ordered endpoint with another sessionIdleTimeout, against the same unordered runs.
        "session_idle_variants": {
            name: {
                "sessionIdleTimeout": host_json(c.idle)["extensions"]["serviceBus"]["sessionIdleTimeout"],
                "msgs_per_s": round(rate[name], 1),
                "ratio_vs_unordered": round(rate[name] / rate["unordered"], 3),
                "steady_ratio_vs_unordered": round(steady[name] / steady["unordered"], 3),
            }
            for name, c in configurations.items()
            if c.idle is not None
        },
        # All events of one key: one at a time, the rate 64 keys are to multiply (fewer events: it is slow).
        "ordered_one_key": {
            "messages_per_run": args.one_key_messages,
            "msgs_per_s": round(rate["ordered_one_key"], 1),
            "ordered_64_keys_vs_one_key": round(rate["ordered"] / rate["ordered_one_key"], 2),
        }
        if args.one_key_messages
        else None,
        # Invocations in flight on average (their summed time over the run's span): the concurrency had.
        "mean_invocations_in_flight": {
            name: median_of([r["in_flight"] for r in runs[name]], 2) for name in configurations
        },
        "invocation_ms_median": {name: round(value, 2) for name, value in invocation.items()},
        "table_point_read_ms": {
            "median": median_of(reads, 2),
            "p90": round(ordered_reads[len(ordered_reads) * 9 // 10], 2),
            "reads": len(reads),
        },
        "cpu_ms_per_msg": cpu,
        "ordered_cpu_overhead_ms_per_msg": {
            "total": round(cpu["ordered"]["total"] - cpu["unordered"]["total"], 3),
            "azurite": round(cpu["ordered"]["azurite"] - cpu["unordered"]["azurite"], 3),
        },
        "cpu_counted_messages": {name: [r["counted"] for r in runs[name]] for name in configurations},
        "handled_after_a_later_event_of_their_key": late,
    }
    previous = json.loads(args.out.read_text()) if args.out.exists() else {}
    filed: dict[str, Any] = previous.get("runs", {})
    filed[args.label] = run
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"benchmark": "ordered_throughput", "runs": filed}, indent=2) + "\n")
    print(
        f"ordered {rate['ordered']:.0f} msg/s, unordered {rate['unordered']:.0f} msg/s, ratio "
        f"{run['ratio_ordered_vs_unordered']:.2f} (steady {run['steady_ratio_ordered_vs_unordered']:.2f}); "
        f"ordered path: point read {run['table_point_read_ms']['median']:.2f} ms, CPU "
        f"+{run['ordered_cpu_overhead_ms_per_msg']['total']:.2f} ms/msg [medians of {args.rounds}]; "
        f"wrote {args.out}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
