"""devhost throughput: messages per second a no-op Service Bus function processes end to end (the host
receives, invokes, completes), at maxConcurrentCalls 1, 16 and 64, against a bare SDK loop doing the same
receive + complete against the same emulator in the same run.

The emulator runs as its own process (in memory). For each concurrency level ``c``, N 1 KB messages are
sent to a fresh queue first; then

* ``bare_sdk``: one aio receiver (prefetch 0, as the host's default; the socket poll devhost's listeners
  use),
  ``receive_messages(max_message_count=c)`` then ``complete_message`` for each, until all N are done;
* ``devhost``: devhost (the host in this process, the function code in its worker process, as devhost
  runs by default) with the no-op app and ``maxConcurrentCalls = c``; the handler is a plain function, so
  every invocation hops to the worker's thread pool as in the Python worker;
* ``devhost_async_handler``: the same with an ``async def`` no-op (no thread hop), for comparison;
* ``devhost_sdk_types``: a plain function bound to the binding extension's ``ServiceBusReceivedMessage``
  that settles with its ``ServiceBusMessageActions`` (``autoComplete`` off): since issue 16 the trigger is
  decoded from ``model_binding_data`` by the extension and the complete crosses devhost's Settlement gRPC
  service, as in Azure.

Rate = N / (first message in hand -> last completion) for the bare loop and N / (first invocation start ->
last invocation end) for devhost (the last completion follows within a round trip). Host start-up (link
opening, ~1 s) is excluded from both. That rate includes each run's start (the first receives, devhost's
worker warming up) and end (the last receive, asked for more messages than are left, waits on the socket:
up to the SDK's 0.2 s socket timeout for the bare loop, devhost's 0.05 s short poll); the steady rate beside
it counts the completions between the 10% and the 90% one only.

CPU per message is reported beside each rate, per process (Linux ``/proc``): ``client`` is this process
(the bare loop, or devhost's host side: receivers, Settlement gRPC service, HTTP), ``worker`` devhost's
worker process (the function code, the extension's decoding and gRPC client), ``emulator`` the broker.
When their sum times the rate approaches the machine's cores, the run is CPU-bound rather than
latency-bound, and more cores would raise it. Each configuration runs ``--rounds`` times, interleaved, and the
medians are reported (the machine is shared, so single runs are noisy). Writes
``bench/results/host_throughput.json``. Usage::

    .venv/bin/python bench/host_throughput.py [--messages 1500] [--rounds 3] [--levels 1,16,64] [--label x]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from azure.servicebus import ServiceBusClient, ServiceBusMessage  # noqa: E402
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient  # noqa: E402

from devhost.servicebus.listener import SHORT_POLL_SECONDS  # noqa: E402
from devhost.testing import running_host  # noqa: E402

RESULT_FILE = ROOT / "bench" / "results" / "host_throughput.json"
APP = ROOT / "bench" / "host_apps" / "noop_app.py"
LEVELS = (1, 16, 64)


def config(queues: list[str]) -> str:
    entries = [{"Name": q, "Properties": {"LockDuration": "PT1M", "MaxDeliveryCount": 10}} for q in queues]
    return json.dumps(
        {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": entries, "Topics": []}]}}
    )


def start_emulator(work: Path, queues: list[str]) -> tuple[subprocess.Popen[str], str]:
    (work / "config.json").write_text(config(queues))
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "emulator", "--config", str(work / "config.json"), "--in-memory"),
            *("--amqp-port", "0", "--management-port", "0", "--log-level", "WARNING"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        match = re.search(r"Connection string: (\S+)", proc.stdout.readline())
        if match:
            # Keep reading the emulator's output: a full pipe would block the emulator mid-run.
            threading.Thread(target=proc.stdout.read, daemon=True).start()
            return proc, match.group(1)
    proc.kill()
    raise RuntimeError("emulator did not become ready")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _worker_pids() -> list[int]:
    """devhost worker processes started by this process."""
    pids: list[int] = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        with contextlib.suppress(OSError):
            pids += [int(p) for p in (task / "children").read_text().split()]
    found = []
    for pid in pids:
        with contextlib.suppress(OSError):
            if b"devhost.worker" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
    return found


class CpuMeter:
    """CPU used by this process, devhost's worker processes and the emulator between two readings."""

    def __init__(self, emulator_pid: int) -> None:
        self.emulator_pid = emulator_pid

    def reading(self) -> dict[str, float]:
        """Cumulative CPU seconds now, per process kind."""
        return {
            "client": time.process_time(),
            "worker": sum(_cpu_seconds(pid) for pid in _worker_pids()),
            "emulator": _cpu_seconds(self.emulator_pid),
        }

    @staticmethod
    def per_message(start: dict[str, float], end: dict[str, float], messages: int) -> dict[str, float]:
        """Milliseconds of CPU per message between two readings, per kind and in total."""
        used = {kind: (end[kind] - start[kind]) * 1000 / messages for kind in start}
        used["total"] = sum(used.values())
        return used


def _median_parts(readings: list[dict[str, float]]) -> dict[str, float]:
    return {part: round(statistics.median(r[part] for r in readings), 3) for part in readings[0]}


def preload(conn: str, queue: str, total: int) -> None:
    body = b"x" * 1024
    with ServiceBusClient.from_connection_string(conn) as client, client.get_queue_sender(queue) as sender:
        for start in range(0, total, 100):
            sender.send_messages([ServiceBusMessage(body) for _ in range(min(100, total - start))])


def steady_rate(completions: list[float]) -> float:
    """Messages per second between the 10% and the 90% completion: the run without its start (links
    warming up, the first receives) and its end (the last, partial receive)."""
    ends = sorted(completions)
    low, high = max(1, len(ends) // 10), len(ends) * 9 // 10
    return (high - low) / (ends[high - 1] - ends[low - 1])


async def bare_loop(conn: str, queue: str, total: int, batch: int) -> tuple[float, float]:
    """The rate (first message in hand -> last completion) and the steady rate."""
    completions: list[float] = []
    first: float | None = None
    async with (
        AsyncServiceBusClient.from_connection_string(conn) as client,
        # The socket poll of devhost's listeners (devhost.servicebus.listener.SHORT_POLL_SECONDS): with the
        # SDK's default (0.2 s) the last, partial receive of a run waits on the socket that long, a tail the
        # comparison would count against the bare loop alone.
        client.get_queue_receiver(queue, prefetch_count=0, socket_timeout=SHORT_POLL_SECONDS) as receiver,
    ):
        while len(completions) < total:
            messages = await receiver.receive_messages(max_message_count=batch, max_wait_time=5)
            if not messages:
                break
            first = first or time.perf_counter()
            for message in messages:
                await receiver.complete_message(message)
                completions.append(time.perf_counter())
        assert first is not None
        elapsed = time.perf_counter() - first
    if len(completions) < total:
        raise RuntimeError(f"bare loop received {len(completions)} of {total}")
    return total / elapsed, steady_rate(completions)


FUNCTION_QUEUES = {"host": "BENCH_QUEUE", "host-async": "BENCH_ASYNC_QUEUE", "host-sdk": "BENCH_SDK_QUEUE"}


def bare_run(
    conn: str, queue: str, total: int, batch: int, meter: CpuMeter
) -> tuple[float, float, dict[str, float]]:
    start = meter.reading()
    rate, steady = asyncio.run(bare_loop(conn, queue, total, batch))
    return rate, steady, CpuMeter.per_message(start, meter.reading(), total)


def devhost_run(
    conn: str, queue: str, total: int, concurrency: int, *, kind: str, meter: CpuMeter
) -> tuple[float, float, dict[str, float]]:
    host_json = {"version": "2.0", "extensions": {"serviceBus": {"maxConcurrentCalls": concurrency}}}
    idle = f"idle-{concurrency}"  # the other functions' queue: nothing is sent there
    settings = {"ServiceBusConnection": conn}
    settings.update({setting: queue if k == kind else idle for k, setting in FUNCTION_QUEUES.items()})
    with running_host(APP, settings=settings, host_json=host_json) as host:
        # The listeners start with the host: the few messages done before this reading are not counted.
        already = len(host.invocations)
        start = meter.reading()
        host.wait_for_invocations(total, timeout=600)
        cpu = CpuMeter.per_message(start, meter.reading(), total - already)
        records = host.invocations
    if not all(r.succeeded for r in records):
        raise RuntimeError("an invocation failed")
    first = min(r.started_at for r in records)
    last = max(r.finished_at for r in records)
    return total / (last - first), steady_rate([r.finished_at for r in records]), cpu


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=1500, help="messages per run")
    parser.add_argument("--rounds", type=int, default=3, help="runs per configuration (medians reported)")
    parser.add_argument("--label", default="after", help="the name these figures are filed under")
    parser.add_argument(
        "--levels",
        type=lambda text: tuple(int(level) for level in text.split(",")),
        default=LEVELS,
        help="maxConcurrentCalls levels to run, comma-separated (default: 1,16,64)",
    )
    args = parser.parse_args()
    kinds = ("bare", "host", "host-async", "host-sdk", "idle")
    queues = [f"{kind}-{c}" for c in args.levels for kind in kinds]
    with tempfile.TemporaryDirectory() as tmp:
        proc, conn = start_emulator(Path(tmp), queues)
        meter = CpuMeter(proc.pid)
        try:
            levels: dict[str, Any] = {}
            for concurrency in args.levels:
                runs: dict[str, list[float]] = {"bare": [], "host": [], "host-async": [], "host-sdk": []}
                steady: dict[str, list[float]] = {kind: [] for kind in runs}
                cpu: dict[str, list[dict[str, float]]] = {kind: [] for kind in runs}
                for _ in range(args.rounds):  # interleaved rounds: load from other processes hits all alike
                    queue = f"bare-{concurrency}"
                    preload(conn, queue, args.messages)
                    rate, steady_one, used = bare_run(conn, queue, args.messages, concurrency, meter)
                    runs["bare"].append(rate)
                    steady["bare"].append(steady_one)
                    cpu["bare"].append(used)
                    for kind in FUNCTION_QUEUES:
                        queue = f"{kind}-{concurrency}"
                        preload(conn, queue, args.messages)
                        rate, steady_one, used = devhost_run(
                            conn, queue, args.messages, concurrency, kind=kind, meter=meter
                        )
                        runs[kind].append(rate)
                        steady[kind].append(steady_one)
                        cpu[kind].append(used)
                bare, host, host_async, host_sdk = (
                    statistics.median(runs[k]) for k in ("bare", "host", "host-async", "host-sdk")
                )
                levels[str(concurrency)] = {
                    "bare_sdk_msgs_per_s": round(bare, 1),
                    "devhost_msgs_per_s": round(host, 1),
                    "devhost_vs_bare": round(host / bare, 3),
                    "devhost_async_handler_msgs_per_s": round(host_async, 1),
                    "devhost_async_handler_vs_bare": round(host_async / bare, 3),
                    "devhost_sdk_types_msgs_per_s": round(host_sdk, 1),
                    "devhost_sdk_types_vs_bare": round(host_sdk / bare, 3),
                    "rounds": {k: [round(v, 1) for v in values] for k, values in runs.items()},
                    # Between the 10% and the 90% completion (``steady_rate``), medians per kind.
                    "steady_msgs_per_s": {k: round(statistics.median(v), 1) for k, v in steady.items()},
                    "steady_devhost_vs_bare": round(
                        statistics.median(steady["host"]) / statistics.median(steady["bare"]), 3
                    ),
                    "steady_rounds": {k: [round(v, 1) for v in values] for k, values in steady.items()},
                    "cpu_ms_per_msg": {
                        k: {
                            part: round(statistics.median(r[part] for r in readings), 3)
                            for part in readings[0]
                        }
                        for k, readings in cpu.items()
                    },
                }
                print(
                    f"maxConcurrentCalls={concurrency}: bare SDK {bare:.0f} msg/s, devhost {host:.0f} msg/s "
                    f"({host / bare:.0%}), async handler {host_async:.0f} msg/s ({host_async / bare:.0%}), "
                    f"SDK types + gRPC settle {host_sdk:.0f} msg/s ({host_sdk / bare:.0%}) "
                    f"[medians of {args.rounds}]",
                    flush=True,
                )
                level = levels[str(concurrency)]
                steady_rates = level["steady_msgs_per_s"]
                print(
                    f"  steady (10%..90% of the completions): bare SDK {steady_rates['bare']:.0f} msg/s, "
                    f"devhost {steady_rates['host']:.0f} msg/s ({level['steady_devhost_vs_bare']:.0%})",
                    flush=True,
                )
                for k, parts in levels[str(concurrency)]["cpu_ms_per_msg"].items():
                    print(
                        f"  CPU ms/msg {k}: " + ", ".join(f"{part} {v:.2f}" for part, v in parts.items()),
                        flush=True,
                    )
        finally:
            proc.terminate()
            proc.wait(30)
    run: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
        "messages_per_level": args.messages,
        "message_bytes": 1024,
        "label": args.label,
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip(),
        "handler": "no-op; devhost: plain function (thread pool); async: coroutine; autoComplete; "
        "prefetch 0; "
        "sdk: extension types, actions.complete, autoComplete off",
        "load_average_at_end": os.getloadavg(),
        "target": "plain functions at maxConcurrentCalls 16: devhost >= 80% of the bare SDK loop (issue 26)",
        "levels": levels,
    }
    previous = json.loads(RESULT_FILE.read_text()) if RESULT_FILE.exists() else {}
    filed: dict[str, Any] = previous.get("runs", {}) if isinstance(previous, dict) else {}
    if isinstance(previous, dict) and "levels" in previous:
        # A file from before runs were labelled: devhost before issue 16 (its own stand-in actions).
        filed["before-issue-16"] = {k: v for k, v in previous.items() if k != "benchmark"}
    filed[args.label] = run
    result = {"benchmark": "host_throughput", "runs": filed}
    RESULT_FILE.parent.mkdir(parents=True, exist_ok=True)
    RESULT_FILE.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULT_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
