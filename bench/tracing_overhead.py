"""What OpenTelemetry costs: messages per second a billing-like endpoint handles with tracing and metrics
exported over OTLP (to a local receiver) against the same endpoint with nothing configured, in one run
(issue 40; the aim is a ratio of at least 0.9).

One emulator (its own process, in memory); devhost runs ``bench/host_apps/traced_app.py``, whose function
settles through ``shared.telemetry.processing.processing`` (the process span, the processing metrics) and
publishes an ``InvoiceIssued`` per order (the publish span; the message stamped with it), as the product's
subscribers do. ``off``: no ``OTEL_*`` setting, so no SDK (the API's no-op tracer and meter); ``on``:
``OTEL_EXPORTER_OTLP_ENDPOINT`` names an OTLP/HTTP receiver in this process (``tests/otlp_collector.py``),
with the SDK's default batching. Every order arrives with a ``traceparent``, as from a traced publisher.

For each ``maxConcurrentCalls`` level, N ``Shipping.OrderAccepted`` messages are sent to the queue first; the
rate is N / (first invocation start -> last invocation end), and the steady rate counts the completions
between the 10% and the 90% one (``bench/host_throughput.py``'s measures); CPU per message per process
(the worker's is where tracing runs: a figure load from elsewhere moves far less than a rate). Each
configuration runs ``--rounds`` times, interleaved, medians reported. Writes
``bench/results/tracing_overhead.json``. Usage::

    .venv/bin/python bench/tracing_overhead.py [--messages 400] [--rounds 3] [--levels 1,16]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import statistics
import subprocess
import sys
import tempfile
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
from bench.host_throughput import CpuMeter, steady_rate  # noqa: E402
from bench.store_cost import start_emulator  # noqa: E402
from devhost.testing import running_host  # noqa: E402
from shared.topology.messages import build_message  # noqa: E402
from shared.topology.options import TopicRoutingMode  # noqa: E402
from tests.otlp_collector import Collector, running_collector  # noqa: E402

RESULT_FILE = ROOT / "bench" / "results" / "tracing_overhead.json"
APP = ROOT / "bench" / "host_apps" / "traced_app.py"
LEVELS = (1, 16)
MODES = ("off", "on")


def preload(conn: str, queue: str, total: int, run: str) -> None:
    """``total`` orders, each with a caller's ``traceparent`` (one trace per order)."""
    with ServiceBusClient.from_connection_string(conn) as client, client.get_queue_sender(queue) as sender:
        for start in range(0, total, 100):
            batch = []
            for n in range(start, min(start + 100, total)):
                message = build_message(
                    OrderAccepted(order_id=f"{run}-{n}", amount=12.5),
                    TopicRoutingMode.NotMultiplexed,
                    endpoint_name="bench",
                    message_id=str(uuid.uuid4()),
                )
                parent = f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"
                message.application_properties = {
                    **(message.application_properties or {}),
                    b"traceparent": parent,
                }
                batch.append(message)
            sender.send_messages(batch)


def host_run(
    settings: dict[str, str],
    queue: str,
    mode: str,
    total: int,
    concurrency: int,
    collector: Collector,
    meter: CpuMeter,
) -> tuple[float, float, dict[str, float]]:
    """One run over ``queue``: its rate, steady rate and CPU milliseconds per message (this process: the
    host and the OTLP receiver; the worker; the emulator)."""
    host_json = {"version": "2.0", "extensions": {"serviceBus": {"maxConcurrentCalls": concurrency}}}
    values = {**settings, "TRACED_QUEUE": queue}
    if mode == "on":
        values |= {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint, "OTEL_SERVICE_NAME": "bench"}
    with running_host(APP, settings=values, host_json=host_json) as host:
        already = len(host.invocations)
        start = meter.reading()
        host.wait_for_invocations(total, timeout=900)
        cpu = CpuMeter.per_message(start, meter.reading(), total - already)
        records = host.invocations
    failed = [r for r in records if not r.succeeded]
    if failed:
        raise RuntimeError(f"{len(failed)} invocations failed ({mode}): {failed[0].error}")
    first = min(r.started_at for r in records)
    last = max(r.finished_at for r in records)
    return total / (last - first), steady_rate([r.finished_at for r in records]), cpu


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 1)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=400, help="messages per run")
    parser.add_argument("--rounds", type=int, default=3, help="runs per configuration (medians reported)")
    parser.add_argument(
        "--levels",
        type=lambda text: tuple(int(level) for level in text.split(",")),
        default=LEVELS,
        help="maxConcurrentCalls levels, comma-separated (default: 1,16)",
    )
    args = parser.parse_args()
    queues = [f"{mode}-{c}" for c in args.levels for mode in MODES]
    load_before = os.getloadavg()
    levels: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, running_collector() as collector:
        emulator, conn = start_emulator(Path(tmp), queues)
        settings = {"ServiceBusConnection": conn}
        meter = CpuMeter(emulator.pid)
        try:
            for concurrency in args.levels:
                rates: dict[str, list[float]] = {mode: [] for mode in MODES}
                steady: dict[str, list[float]] = {mode: [] for mode in MODES}
                cpu: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
                for round_number in range(args.rounds):  # interleaved: load from elsewhere hits both alike
                    for mode in MODES:
                        queue = f"{mode}-{concurrency}"
                        preload(conn, queue, args.messages, f"{mode}-{concurrency}-{round_number}")
                        rate, steady_one, used = host_run(
                            settings, queue, mode, args.messages, concurrency, collector, meter
                        )
                        rates[mode].append(rate)
                        steady[mode].append(steady_one)
                        cpu[mode].append(used)
                on, off = _median(rates["on"]), _median(rates["off"])
                steady_on, steady_off = _median(steady["on"]), _median(steady["off"])
                cpu_ms = {
                    mode: {part: round(statistics.median(r[part] for r in rs), 3) for part in rs[0]}
                    for mode, rs in cpu.items()
                }
                worker_on, worker_off = cpu_ms["on"]["worker"], cpu_ms["off"]["worker"]
                levels[str(concurrency)] = {
                    "tracing_on_msgs_per_s": on,
                    "tracing_off_msgs_per_s": off,
                    "on_vs_off": round(on / off, 3),
                    "steady_tracing_on_msgs_per_s": steady_on,
                    "steady_tracing_off_msgs_per_s": steady_off,
                    "steady_on_vs_off": round(steady_on / steady_off, 3),
                    "rounds": {k: [round(v, 1) for v in values] for k, values in rates.items()},
                    "steady_rounds": {k: [round(v, 1) for v in values] for k, values in steady.items()},
                    # CPU per message is what tracing adds, whatever else the machine runs meanwhile
                    # ("client": this process, i.e. devhost and the OTLP receiver).
                    "cpu_ms_per_msg": cpu_ms,
                    "worker_cpu_off_vs_on": round(worker_off / worker_on, 3),
                }
                print(
                    f"maxConcurrentCalls={concurrency}: tracing on {on:.0f} msg/s, off {off:.0f} msg/s "
                    f"({on / off:.0%}); steady {steady_on:.0f} vs {steady_off:.0f} msg/s "
                    f"({steady_on / steady_off:.0%}); worker CPU {worker_on:.2f} vs {worker_off:.2f} ms/msg "
                    f"[medians of {args.rounds}]",
                    flush=True,
                )
        finally:
            emulator.terminate()
            emulator.wait(30)
        spans = len(collector.spans())
    result = {
        "benchmark": "tracing_overhead",
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
        "handler": "billing-like: one InvoiceIssued published per order; SDK-type binding, settles itself",
        "on": "OTEL_EXPORTER_OTLP_ENDPOINT -> an OTLP/HTTP receiver in the bench process (SDK defaults: "
        "batch span processor, metrics every 60 s): process span, publish span, processing metrics",
        "off": "no OTEL_* settings: no SDK installed, the OpenTelemetry API's no-op tracer and meter",
        "spans_received": spans,
        "levels": levels,
    }
    RESULT_FILE.parent.mkdir(parents=True, exist_ok=True)
    RESULT_FILE.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULT_FILE}")
    return 0


if __name__ == "__main__":
    start = time.monotonic()
    code = main()
    print(f"tracing_overhead: {time.monotonic() - start:.0f} s")
    sys.exit(code)
