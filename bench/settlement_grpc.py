"""The gRPC hop of SDK-type settlement, alone: what one ``ServiceBusMessageActions.complete`` costs.

In Azure a function's ``actions.complete(message)`` is a gRPC call from the Python worker to the Functions
host's Settlement service, which settles on the receiver holding the message. devhost serves that service
on each host's event loop (:mod:`devhost.servicebus.settlement_service`). This measures the extension's real
client against devhost's real service, both in this one process, with a receiver whose ``complete_message``
returns at once, so only the hop is timed: calls per second and process CPU per call (client, server and gRPC
threads), from 1 and from 16 threads (maxConcurrentCalls 1 and 16). Writes
``bench/results/settlement_grpc.json``.

Usage::

    .venv/bin/python bench/settlement_grpc.py [--calls 3000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import azurefunctions.extensions.bindings.servicebus as servicebus  # noqa: E402

from devhost.servicebus.settlement import REGISTRY, InvocationSettlement, worker_arguments  # noqa: E402
from devhost.servicebus.settlement_service import LoopSettlementServer  # noqa: E402

RESULT_FILE = ROOT / "bench" / "results" / "settlement_grpc.json"


class _InstantReceiver:
    """Settles at once: the broker's part is not what is measured here."""

    async def complete_message(self, message: Any) -> None:
        return None


class _Message:
    def __init__(self) -> None:
        self.lock_token = str(uuid.uuid4())


def _loop_thread() -> asyncio.AbstractEventLoop:
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    return loop


def measure(calls: int, threads: int, loop: asyncio.AbstractEventLoop) -> dict[str, float]:
    """``calls`` completes spread over ``threads`` threads; calls/s and CPU ms per call."""
    messages = [_Message() for _ in range(calls)]
    invocation = InvocationSettlement(_InstantReceiver(), loop)  # type: ignore[arg-type]
    REGISTRY.register(invocation, messages)  # type: ignore[arg-type]
    actions = servicebus.ServiceBusMessageActions.get_instance()
    share = calls // threads

    def work(part: list[_Message]) -> None:
        for message in part:
            actions.complete(message)

    workers = [
        threading.Thread(target=work, args=(messages[i * share : (i + 1) * share],)) for i in range(threads)
    ]
    cpu, wall = time.process_time(), time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    REGISTRY.release(invocation)
    done = share * threads
    return {
        "calls": done,
        "calls_per_s": round(done / wall, 1),
        "cpu_ms_per_call": round(cpu * 1000 / done, 3),
        "wall_ms_per_call": round(wall * 1000 / done * threads, 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=3000)
    args = parser.parse_args()
    loop = _loop_thread()
    server = asyncio.run_coroutine_threadsafe(LoopSettlementServer.start(), loop).result(30)
    # Where the extension's client looks for the host, as in a worker process: the worker arguments.
    sys.argv.extend(worker_arguments(server.port))
    measure(100, 1, loop)  # warm-up: channel connection, first-call paths
    results = {str(threads): measure(args.calls, threads, loop) for threads in (1, 16)}
    for threads, figures in results.items():
        print(
            f"{threads:>2} thread(s): {figures['calls_per_s']:.0f} completes/s, "
            f"{figures['cpu_ms_per_call']:.3f} ms CPU per call, "
            f"{figures['wall_ms_per_call']:.3f} ms per call as one caller sees it",
            flush=True,
        )
    result = {
        "benchmark": "settlement_grpc",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
        "measure": "extension's ServiceBusMessageActions.complete -> devhost's Settlement service (grpc.aio, "
        "on its loop) -> an instant receiver, in one process; CPU is the whole process's (client, server "
        "and gRPC threads)",
        "load_average_at_end": os.getloadavg(),
        "threads": results,
    }
    RESULT_FILE.parent.mkdir(parents=True, exist_ok=True)
    RESULT_FILE.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULT_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
