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

    .venv/bin/python bench/store_cost.py [--messages 600] [--rounds 3] [--levels 1,16] [--out FILE]

The harness (emulator, preload, devhost runs, interleaved rounds, medians, result file) is
``bench/host_comparison.py``'s, shared with ``bench/tracing_overhead.py``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

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
from bench.host_throughput import CpuMeter, _cpu_seconds  # noqa: E402
from devhost.storage.azurite import AzuritePorts, launch, terminate  # noqa: E402
from devhost.storage.settings import development_connection_string  # noqa: E402

RESULT_FILE = ROOT / "bench" / "results" / "store_cost.json"
APP = ROOT / "bench" / "host_apps" / "store_app.py"
KINDS = {"with_store": "STORE_QUEUE", "without_store": "BARE_QUEUE"}


class Meter(CpuMeter):
    """:class:`CpuMeter` plus Azurite's process."""

    def __init__(self, emulator_pid: int, azurite_pid: int) -> None:
        super().__init__(emulator_pid)
        self.azurite_pid = azurite_pid

    def reading(self) -> dict[str, float]:
        return {**super().reading(), "azurite": _cpu_seconds(self.azurite_pid)}


def main() -> int:
    args = parse_args(__doc__, messages=600)
    queues = [f"{kind}-{c}" for c in args.levels for kind in (*KINDS, "idle")]
    load_before = os.getloadavg()
    levels: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        emulator, conn = start_emulator(Path(tmp), queues, [INVOICES_TOPIC])
        azurite, ports = launch(Path(tmp) / "azurite", AzuritePorts(0, 0, 0))
        storage = development_connection_string("127.0.0.1", ports.blob, ports.queue, ports.table)
        settings = {"ServiceBusConnection": conn, "AzureWebJobsStorage": storage}
        meter = Meter(emulator.pid, azurite.pid)
        try:
            for concurrency in args.levels:

                def run_one(kind: str, round_number: int, concurrency: int = concurrency) -> RunMeasure:
                    queue = f"{kind}-{concurrency}"
                    preload_orders(conn, queue, args.messages, f"{kind}-{concurrency}-{round_number}")
                    # The other function's queue is an idle one: nothing is sent there.
                    idle = f"idle-{concurrency}"
                    values = {**settings, **{s: queue if k == kind else idle for k, s in KINDS.items()}}
                    return host_run(APP, values, args.messages, concurrency, meter, kind)

                level = measure_level(list(KINDS), args.rounds, run_one)
                with_store, without = level.rate("with_store"), level.rate("without_store")
                steady_with, steady_without = level.steady("with_store"), level.steady("without_store")
                levels[str(concurrency)] = {
                    "with_store_msgs_per_s": with_store,
                    "without_store_msgs_per_s": without,
                    "with_vs_without": round(with_store / without, 3),
                    "steady_with_store_msgs_per_s": steady_with,
                    "steady_without_store_msgs_per_s": steady_without,
                    "steady_with_vs_without": round(steady_with / steady_without, 3),
                    "rounds": level.rounds(),
                    "steady_rounds": level.steady_rounds(),
                    "cpu_ms_per_msg": level.cpu_ms_per_msg(),
                }
                print(
                    f"maxConcurrentCalls={concurrency}: with the store {with_store:.0f} msg/s, without "
                    f"{without:.0f} msg/s ({with_store / without:.0%}); steady {steady_with:.0f} vs "
                    f"{steady_without:.0f} msg/s ({steady_with / steady_without:.0%}) "
                    f"[medians of {args.rounds}]",
                    flush=True,
                )
        finally:
            stop_emulator(emulator)
            terminate(azurite)
    write_result(
        args.out or RESULT_FILE,
        "store_cost",
        args,
        load_before,
        {
            "handler": "billing-like: read the order's invoice row, write it, publish one InvoiceIssued; "
            "SDK-type binding, settles itself (autoComplete off); storage: Azurite on this machine",
            "with_store": "shared.handlers.subscriber.process: record point read, row point read, one "
            "transaction (record + row), the publish, record marked dispatched",
            "without_store": "the same dispatcher without reads or commit, the same publish",
            "levels": levels,
        },
    )
    return 0


if __name__ == "__main__":
    run_timed("store_cost", main)
