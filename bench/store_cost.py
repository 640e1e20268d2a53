"""The handled-message store's cost: messages per second a billing-like endpoint handles end to end with the
store (each message id handled once, its row and outgoing message committed with the record in Table
Storage) against the same endpoint without it, in one run (issue 35).

One emulator (its own process, in memory) and one Azurite (``devhost.storage.azurite``, a fresh data
directory); devhost runs ``bench/host_apps/store_app.py``, whose two functions run the same handler (read the
order's ``invoice`` row, write it, publish an ``InvoiceIssued`` to its topic) and settle the message:
``with_store`` through ``shared.handlers.subscriber.process`` (per message: the record's point read, the row's
point read, one entity group transaction, the publish, the record marked dispatched), ``without_store``
through the bare dispatcher and the same publish. Busbar has no switch to turn the store off, hence the bench
app.

For each ``maxConcurrentCalls`` level, N ``Shipping.OrderAccepted`` messages (each its own order, as
``POST /api/events`` publishes them) are sent to each function's queue first; the rate is N / (first
invocation start -> last invocation end), and the steady rate counts the completions between the 10% and the
90% one (``bench/host_throughput.py``'s measures). CPU per message per process (this one: the host side;
the worker; the emulator; Azurite). Each configuration runs ``--rounds`` times, interleaved, medians
reported. Writes ``bench/results/store_cost.json``. Usage::

    .venv/bin/python bench/store_cost.py [--messages 600] [--rounds 3] [--levels 1,16]
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
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from azure.servicebus import ServiceBusClient  # noqa: E402

from app.endpoints.sample.events import OrderAccepted  # noqa: E402
from bench.host_throughput import CpuMeter, _cpu_seconds, steady_rate  # noqa: E402
from devhost.storage.azurite import AzuritePorts, launch, terminate  # noqa: E402
from devhost.storage.settings import development_connection_string  # noqa: E402
from devhost.testing import running_host  # noqa: E402
from shared.topology.messages import build_message  # noqa: E402
from shared.topology.options import TopicRoutingMode  # noqa: E402

RESULT_FILE = ROOT / "bench" / "results" / "store_cost.json"
APP = ROOT / "bench" / "host_apps" / "store_app.py"
LEVELS = (1, 16)
KINDS = {"with_store": "STORE_QUEUE", "without_store": "BARE_QUEUE"}
TOPIC = "Billing.InvoiceIssued"  # where the sample's topology publishes an InvoiceIssued (one subscription)


def start_emulator(work: Path, queues: list[str]) -> tuple[subprocess.Popen[str], str]:
    """The emulator (in memory) with ``queues`` and the invoices' topic; its connection string."""
    entries = [{"Name": q, "Properties": {"LockDuration": "PT1M"}} for q in queues]
    topic = {"Name": TOPIC, "Subscriptions": [{"Name": "invoices"}]}
    namespace = {"Name": "sbemulatorns", "Queues": entries, "Topics": [topic]}
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


def preload(conn: str, queue: str, total: int, run: str) -> None:
    """``total`` orders, each its own (a fresh order id: nothing found in the store beforehand)."""
    with ServiceBusClient.from_connection_string(conn) as client, client.get_queue_sender(queue) as sender:
        for start in range(0, total, 100):
            batch = [
                build_message(
                    OrderAccepted(order_id=f"{run}-{n}", amount=12.5),
                    TopicRoutingMode.NotMultiplexed,
                    endpoint_name="bench",
                    message_id=str(uuid.uuid4()),
                )
                for n in range(start, min(start + 100, total))
            ]
            sender.send_messages(batch)


class Meter(CpuMeter):
    """:class:`CpuMeter` plus Azurite's process."""

    def __init__(self, emulator_pid: int, azurite_pid: int) -> None:
        super().__init__(emulator_pid)
        self.azurite_pid = azurite_pid

    def reading(self) -> dict[str, float]:
        return {**super().reading(), "azurite": _cpu_seconds(self.azurite_pid)}


def host_run(
    settings: dict[str, str], queue: str, kind: str, total: int, concurrency: int, meter: Meter
) -> tuple[float, float, dict[str, float]]:
    """One run of ``kind`` over ``queue``: its rate, steady rate and CPU per message."""
    host_json = {"version": "2.0", "extensions": {"serviceBus": {"maxConcurrentCalls": concurrency}}}
    idle = f"idle-{concurrency}"  # the other function's queue: nothing is sent there
    values = {**settings, **{setting: queue if k == kind else idle for k, setting in KINDS.items()}}
    with running_host(APP, settings=values, host_json=host_json) as host:
        already = len(host.invocations)
        start = meter.reading()
        host.wait_for_invocations(total, timeout=900)
        cpu = CpuMeter.per_message(start, meter.reading(), total - already)
        records = host.invocations
    failed = [r for r in records if not r.succeeded]
    if failed:
        raise RuntimeError(f"{len(failed)} invocations of {kind} failed")
    first = min(r.started_at for r in records)
    last = max(r.finished_at for r in records)
    return total / (last - first), steady_rate([r.finished_at for r in records]), cpu


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 1)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=600, help="messages per run")
    parser.add_argument("--rounds", type=int, default=3, help="runs per configuration (medians reported)")
    parser.add_argument(
        "--levels",
        type=lambda text: tuple(int(level) for level in text.split(",")),
        default=LEVELS,
        help="maxConcurrentCalls levels, comma-separated (default: 1,16)",
    )
    args = parser.parse_args()
    queues = [f"{kind}-{c}" for c in args.levels for kind in (*KINDS, "idle")]
    load_before = os.getloadavg()
    levels: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        emulator, conn = start_emulator(Path(tmp), queues)
        azurite, ports = launch(Path(tmp) / "azurite", AzuritePorts(0, 0, 0))
        storage = development_connection_string("127.0.0.1", ports.blob, ports.queue, ports.table)
        settings = {"ServiceBusConnection": conn, "AzureWebJobsStorage": storage}
        meter = Meter(emulator.pid, azurite.pid)
        try:
            for concurrency in args.levels:
                rates: dict[str, list[float]] = {kind: [] for kind in KINDS}
                steady: dict[str, list[float]] = {kind: [] for kind in KINDS}
                cpu: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
                for round_number in range(args.rounds):  # interleaved: load from elsewhere hits both alike
                    for kind in KINDS:
                        queue = f"{kind}-{concurrency}"
                        preload(conn, queue, args.messages, f"{kind}-{concurrency}-{round_number}")
                        rate, steady_one, used = host_run(
                            settings, queue, kind, args.messages, concurrency, meter
                        )
                        rates[kind].append(rate)
                        steady[kind].append(steady_one)
                        cpu[kind].append(used)
                with_store, without = _median(rates["with_store"]), _median(rates["without_store"])
                steady_with, steady_without = _median(steady["with_store"]), _median(steady["without_store"])
                levels[str(concurrency)] = {
                    "with_store_msgs_per_s": with_store,
                    "without_store_msgs_per_s": without,
                    "with_vs_without": round(with_store / without, 3),
                    "steady_with_store_msgs_per_s": steady_with,
                    "steady_without_store_msgs_per_s": steady_without,
                    "steady_with_vs_without": round(steady_with / steady_without, 3),
                    "rounds": {k: [round(v, 1) for v in values] for k, values in rates.items()},
                    "steady_rounds": {k: [round(v, 1) for v in values] for k, values in steady.items()},
                    "cpu_ms_per_msg": {
                        k: {part: round(statistics.median(r[part] for r in rs), 3) for part in rs[0]}
                        for k, rs in cpu.items()
                    },
                }
                print(
                    f"maxConcurrentCalls={concurrency}: with the store {with_store:.0f} msg/s, without "
                    f"{without:.0f} msg/s ({with_store / without:.0%}); steady {steady_with:.0f} vs "
                    f"{steady_without:.0f} msg/s ({steady_with / steady_without:.0%}) "
                    f"[medians of {args.rounds}]",
                    flush=True,
                )
        finally:
            emulator.terminate()
            emulator.wait(30)
            terminate(azurite)
    result = {
        "benchmark": "store_cost",
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
        "handler": "billing-like: read the order's invoice row, write it, publish one InvoiceIssued; "
        "SDK-type binding, settles itself (autoComplete off); storage: Azurite on this machine",
        "with_store": "shared.handlers.subscriber.process: record point read, row point read, one "
        "transaction (record + row), the publish, record marked dispatched",
        "without_store": "the same dispatcher without reads or commit, the same publish",
        "levels": levels,
    }
    RESULT_FILE.parent.mkdir(parents=True, exist_ok=True)
    RESULT_FILE.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULT_FILE}")
    return 0


if __name__ == "__main__":
    start = time.monotonic()
    code = main()
    print(f"store_cost: {time.monotonic() - start:.0f} s")
    sys.exit(code)
