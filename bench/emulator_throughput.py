"""Emulator throughput through the real azure-servicebus SDK.

Starts the emulator as its own process (durable store on a temp data dir, as `make run` uses it) and
measures, messages per second:

* ``batched_send``: 1 KB messages sent in batches of 100 (``send_messages(list)``), one sender;
* ``receive_complete``: PEEK_LOCK receive with prefetch 100, then ``complete_message`` for each.

Writes ``bench/results/emulator_throughput.json``. ``--profile`` runs the emulator under cProfile and
prints its top functions, to name the bottleneck. Usage::

    .venv/bin/python bench/emulator_throughput.py [--messages 20000] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import pstats
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from azure.servicebus import ServiceBusClient, ServiceBusMessage

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
CONFIG = """{"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [
  {"Name": "bench", "Properties": {"LockDuration": "PT1M", "MaxDeliveryCount": 10, "MaxSizeInMegabytes": 81920}}
], "Topics": []}], "Logging": {"Type": "Console"}}}"""


def start_emulator(data_dir: Path, profile_to: Path | None) -> tuple[subprocess.Popen[str], str]:
    config = data_dir / "config.json"
    config.write_text(CONFIG)
    cmd = [sys.executable]
    if profile_to is not None:
        cmd += ["-m", "cProfile", "-o", str(profile_to)]
    cmd += ["-m", "emulator", "--config", str(config), "--data-dir", str(data_dir / "data")]
    cmd += ["--amqp-port", "0", "--management-port", "0", "--log-level", "WARNING"]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        match = re.search(r"Connection string: (\S+)", line)
        if match:
            return proc, match.group(1)
    proc.kill()
    raise RuntimeError("emulator did not become ready")


def batched_send(conn: str, total: int, batch: int, body: bytes) -> float:
    with ServiceBusClient.from_connection_string(conn) as client, client.get_queue_sender("bench") as sender:
        sender.send_messages([ServiceBusMessage(body)])  # warm the link
        started = time.perf_counter()
        for start in range(0, total, batch):
            sender.send_messages([ServiceBusMessage(body) for _ in range(min(batch, total - start))])
        return total / (time.perf_counter() - started)


def receive_complete(conn: str, total: int, prefetch: int) -> float:
    received = 0
    with (
        ServiceBusClient.from_connection_string(conn) as client,
        client.get_queue_receiver("bench", prefetch_count=prefetch, max_wait_time=5) as receiver,
    ):
        started = time.perf_counter()
        while received < total:
            batch = receiver.receive_messages(max_message_count=prefetch, max_wait_time=5)
            if not batch:
                break
            for message in batch:
                receiver.complete_message(message)
            received += len(batch)
        elapsed = time.perf_counter() - started
    return received / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--prefetch", type=int, default=100)
    parser.add_argument("--profile", action="store_true", help="profile the emulator process with cProfile")
    args = parser.parse_args()
    body = os.urandom(512).hex().encode()  # 1 KB
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        profile_to = data_dir / "emulator.prof" if args.profile else None
        proc, conn = start_emulator(data_dir, profile_to)
        try:
            send_rate = batched_send(conn, args.messages, args.batch, body)
            print(f"batched send: {send_rate:,.0f} msg/s ({args.messages} x 1 KB, batches of {args.batch})")
            receive_rate = receive_complete(conn, args.messages + 1, args.prefetch)
            print(f"receive+complete: {receive_rate:,.0f} msg/s (prefetch {args.prefetch})")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
        if profile_to is not None and profile_to.exists():
            stats = pstats.Stats(str(profile_to))
            stats.sort_stats("tottime").print_stats(15)
    RESULTS.mkdir(parents=True, exist_ok=True)
    result = {
        "benchmark": "emulator_throughput",
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "message_bytes": len(body),
        "messages": args.messages,
        "batched_send_msgs_per_s": round(send_rate),
        "receive_complete_msgs_per_s": round(receive_rate),
        "send_batch": args.batch,
        "prefetch": args.prefetch,
        "profiled": args.profile,
    }
    out = RESULTS / "emulator_throughput.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
