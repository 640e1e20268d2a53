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

    .venv/bin/python bench/tracing_overhead.py [--messages 400] [--rounds 3] [--levels 1,16] [--out FILE]

The harness (emulator, preload, devhost runs, interleaved rounds, medians, result file) is
``bench/host_comparison.py``'s, shared with ``bench/store_cost.py``.
"""

from __future__ import annotations

import os
import secrets
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from azure.servicebus import ServiceBusMessage  # noqa: E402

from bench.host_comparison import (  # noqa: E402
    INVOICES_TOPIC,
    RunMeasure,
    host_run,
    measure_level,
    parse_args,
    preload_orders,
    run_timed,
    start_emulator,
    stop_emulator,
    write_result,
)
from bench.host_throughput import CpuMeter  # noqa: E402
from tests.otlp_collector import running_collector  # noqa: E402

RESULT_FILE = ROOT / "bench" / "results" / "tracing_overhead.json"
APP = ROOT / "bench" / "host_apps" / "traced_app.py"
MODES = ("off", "on")


def with_caller_trace(message: ServiceBusMessage) -> None:
    """A caller's ``traceparent`` on ``message`` (one trace per order), as from a traced publisher."""
    parent = f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"
    message.application_properties = {**(message.application_properties or {}), b"traceparent": parent}


def main() -> int:
    args = parse_args(__doc__, messages=400)
    queues = [f"{mode}-{c}" for c in args.levels for mode in MODES]
    load_before = os.getloadavg()
    levels: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp, running_collector() as collector:
        emulator, conn = start_emulator(Path(tmp), queues, [INVOICES_TOPIC])
        settings = {"ServiceBusConnection": conn}
        meter = CpuMeter(emulator.pid)
        try:
            for concurrency in args.levels:

                def run_one(mode: str, round_number: int, concurrency: int = concurrency) -> RunMeasure:
                    queue = f"{mode}-{concurrency}"
                    run = f"{mode}-{concurrency}-{round_number}"
                    preload_orders(conn, queue, args.messages, run, with_caller_trace)
                    values = {**settings, "TRACED_QUEUE": queue}
                    if mode == "on":
                        values |= {
                            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
                            "OTEL_SERVICE_NAME": "bench",
                        }
                    return host_run(APP, values, args.messages, concurrency, meter, f"tracing {mode}")

                level = measure_level(MODES, args.rounds, run_one)
                on, off = level.rate("on"), level.rate("off")
                steady_on, steady_off = level.steady("on"), level.steady("off")
                cpu_ms = level.cpu_ms_per_msg()
                worker_on, worker_off = cpu_ms["on"]["worker"], cpu_ms["off"]["worker"]
                levels[str(concurrency)] = {
                    "tracing_on_msgs_per_s": on,
                    "tracing_off_msgs_per_s": off,
                    "on_vs_off": round(on / off, 3),
                    "steady_tracing_on_msgs_per_s": steady_on,
                    "steady_tracing_off_msgs_per_s": steady_off,
                    "steady_on_vs_off": round(steady_on / steady_off, 3),
                    "rounds": level.rounds(),
                    "steady_rounds": level.steady_rounds(),
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
            stop_emulator(emulator)
        spans = len(collector.spans())
    write_result(
        args.out or RESULT_FILE,
        "tracing_overhead",
        args,
        load_before,
        {
            "handler": "billing-like: one InvoiceIssued published per order; SDK-type binding, "
            "settles itself",
            "on": "OTEL_EXPORTER_OTLP_ENDPOINT -> an OTLP/HTTP receiver in the bench process (SDK defaults: "
            "batch span processor, metrics every 60 s): process span, publish span, processing metrics",
            "off": "no OTEL_* settings: no SDK installed, the OpenTelemetry API's no-op tracer and meter",
            "spans_received": spans,
            "levels": levels,
        },
    )
    return 0


if __name__ == "__main__":
    run_timed("tracing_overhead", main)
