"""The harness of the benches that compare configurations of one devhost app on one load (bench/store_cost.py:
with and without the handled-message store; bench/tracing_overhead.py: with and without OpenTelemetry).

One emulator (its own process, in memory, :func:`start_emulator`); per ``maxConcurrentCalls`` level and
round, each configuration ("kind") gets N ``Shipping.OrderAccepted`` messages (each its own order) on its
queue first (:func:`preload_orders`), then a devhost run drains them (:func:`host_run`): the rate is
N / (first invocation start -> last invocation end), the steady rate counts the completions between the 10%
and the 90% one (``bench/host_throughput.py``'s measures), CPU per message per process. The kinds run
interleaved, round after round (:func:`measure_level`), so load from elsewhere on the machine hits each
alike; medians are reported (:class:`LevelSummary`). :func:`write_result` files the JSON with the machine,
the load and the commit.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from azure.servicebus import ServiceBusClient, ServiceBusMessage  # noqa: E402

from app.endpoints.sample.events import OrderAccepted  # noqa: E402
from bench.host_throughput import CpuMeter, steady_rate  # noqa: E402
from devhost.testing import running_host  # noqa: E402
from shared.topology.messages import build_message  # noqa: E402
from shared.topology.options import TopicRoutingMode  # noqa: E402

LEVELS = (1, 16)
PRELOAD_BATCH = 100
INVOICES_TOPIC: Mapping[str, Any] = {"Name": "Billing.InvoiceIssued", "Subscriptions": [{"Name": "invoices"}]}
"""Where the sample's topology publishes an ``InvoiceIssued`` (one subscription), which the billing-like
bench apps publish per order: it must exist, or every publish fails and its message is retried."""


def start_emulator(
    work: Path, queues: Sequence[str], topics: Sequence[Mapping[str, Any]] = ()
) -> tuple[subprocess.Popen[str], str]:
    """The emulator (its own process, in memory) with ``queues`` and ``topics`` (config-file entities);
    its connection string."""
    entries = [{"Name": q, "Properties": {"LockDuration": "PT1M"}} for q in queues]
    namespace = {"Name": "sbemulatorns", "Queues": entries, "Topics": list(topics)}
    (work / "config.json").write_text(json.dumps({"UserConfig": {"Namespaces": [namespace]}}))
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "emulator", "--config", str(work / "config.json"), "--in-memory"),
            *("--amqp-port", "0", "--management-port", "0", "--log-level", "WARNING"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert process.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        match = re.search(r"Connection string: (\S+)", process.stdout.readline())
        if match:
            # Keep reading its output: a full pipe would block the emulator mid-run.
            threading.Thread(target=process.stdout.read, daemon=True).start()
            return process, match.group(1)
    process.kill()
    raise RuntimeError("the emulator did not become ready")


def stop_emulator(process: subprocess.Popen[str]) -> None:
    """Stop the emulator :func:`start_emulator` started."""
    process.terminate()
    process.wait(30)


def preload_orders(
    conn: str,
    queue: str,
    total: int,
    run: str,
    stamp: Callable[[ServiceBusMessage], None] | None = None,
) -> None:
    """``total`` ``Shipping.OrderAccepted`` on ``queue``, each its own order (``<run>-<n>``, nothing found in
    a store beforehand) and message id, as ``POST /api/events`` publishes them; ``stamp`` adds to each."""
    with ServiceBusClient.from_connection_string(conn) as client, client.get_queue_sender(queue) as sender:
        for start in range(0, total, PRELOAD_BATCH):
            batch = []
            for n in range(start, min(start + PRELOAD_BATCH, total)):
                message = build_message(
                    OrderAccepted(order_id=f"{run}-{n}", amount=12.5),
                    TopicRoutingMode.NotMultiplexed,
                    endpoint_name="bench",
                    message_id=str(uuid.uuid4()),
                )
                if stamp is not None:
                    stamp(message)
                batch.append(message)
            sender.send_messages(batch)


@dataclass(frozen=True, slots=True)
class RunMeasure:
    """One run's numbers: messages per second overall and steady, CPU milliseconds per message per process."""

    rate: float
    steady: float
    cpu: dict[str, float]


def host_run(
    app: Path, settings: Mapping[str, str], total: int, concurrency: int, meter: CpuMeter, what: str
) -> RunMeasure:
    """Run ``app`` under devhost with ``settings`` at ``maxConcurrentCalls`` ``concurrency`` until it has
    handled ``total`` messages (preloaded); a failed invocation raises, naming ``what`` ran."""
    host_json = {"version": "2.0", "extensions": {"serviceBus": {"maxConcurrentCalls": concurrency}}}
    with running_host(app, settings=dict(settings), host_json=host_json) as host:
        already = len(host.invocations)
        start = meter.reading()
        host.wait_for_invocations(total, timeout=900)
        cpu = CpuMeter.per_message(start, meter.reading(), total - already)
        records = host.invocations
    failed = [r for r in records if not r.succeeded]
    if failed:
        raise RuntimeError(f"{len(failed)} invocations of {what} failed: {failed[0].error}")
    first = min(r.started_at for r in records)
    last = max(r.finished_at for r in records)
    return RunMeasure(total / (last - first), steady_rate([r.finished_at for r in records]), cpu)


def median(values: Sequence[float]) -> float:
    """The median, to one decimal (messages per second)."""
    return round(statistics.median(values), 1)


@dataclass(frozen=True, slots=True)
class LevelSummary:
    """One level's runs per kind, in round order, and their medians."""

    runs: dict[str, list[RunMeasure]]

    def rate(self, kind: str) -> float:
        """The median rate of ``kind``."""
        return median([r.rate for r in self.runs[kind]])

    def steady(self, kind: str) -> float:
        """The median steady rate of ``kind``."""
        return median([r.steady for r in self.runs[kind]])

    def rounds(self) -> dict[str, list[float]]:
        """Each kind's rates, round by round."""
        return {kind: [round(r.rate, 1) for r in runs] for kind, runs in self.runs.items()}

    def steady_rounds(self) -> dict[str, list[float]]:
        """Each kind's steady rates, round by round."""
        return {kind: [round(r.steady, 1) for r in runs] for kind, runs in self.runs.items()}

    def cpu_ms_per_msg(self) -> dict[str, dict[str, float]]:
        """Each kind's median CPU milliseconds per message, per process and in total."""
        return {
            kind: {part: round(statistics.median(r.cpu[part] for r in runs), 3) for part in runs[0].cpu}
            for kind, runs in self.runs.items()
        }


def measure_level(
    kinds: Sequence[str], rounds: int, run_one: Callable[[str, int], RunMeasure]
) -> LevelSummary:
    """``rounds`` rounds of every kind, interleaved (kind by kind within each round: load from elsewhere
    hits each alike); ``run_one(kind, round_number)`` preloads and runs one."""
    runs: dict[str, list[RunMeasure]] = {kind: [] for kind in kinds}
    for round_number in range(rounds):
        for kind in kinds:
            runs[kind].append(run_one(kind, round_number))
    return LevelSummary(runs)


def parse_args(doc: str | None, messages: int, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The comparison benches' options: ``--messages`` per run, ``--rounds``, ``--levels`` and ``--out``."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=messages, help="messages per run")
    parser.add_argument("--rounds", type=int, default=3, help="runs per configuration (medians reported)")
    parser.add_argument(
        "--levels",
        type=lambda text: tuple(int(level) for level in text.split(",")),
        default=LEVELS,
        help="maxConcurrentCalls levels, comma-separated (default: 1,16)",
    )
    parser.add_argument("--out", type=Path, default=None, help="the result file (default: bench/results/)")
    return parser.parse_args(argv)


def write_result(
    path: Path,
    benchmark: str,
    args: argparse.Namespace,
    load_before: tuple[float, ...],
    fields: dict[str, Any],
) -> None:
    """File ``benchmark``'s result at ``path``: the date, the machine and its load before and after, the
    commit, the run's size, then ``fields``."""
    result = {
        "benchmark": benchmark,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
        },
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip(),
        "messages_per_run": args.messages,
        "rounds": args.rounds,
        **fields,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")


def run_timed(name: str, main: Callable[[], int]) -> None:
    """Run a bench's ``main``, print how long it took, exit with its status."""
    start = time.monotonic()
    code = main()
    print(f"{name}: {time.monotonic() - start:.0f} s")
    sys.exit(code)
