"""Emulator throughput through the real azure-servicebus SDK.

Starts the emulator as its own process (durable store on a temp data dir, as `make run` uses it) and
measures, messages per second:

* ``batched_send``: 1 KB messages sent in batches of 100 (``send_messages(list)``), one sender;
* ``receive_complete``: PEEK_LOCK receive with prefetch 100, then ``complete_message`` for each.

``--sessions`` measures message sessions instead: 1,000 sessions x 10 messages (1 KB, sent interleaved in
batches of 100) on a RequiresSession queue, consumed by 8 threads, each looping NEXT_AVAILABLE session
receivers (receive the session's 10 messages, complete them, close) until no session is left; messages per
second from the first accept to the last completion.

``--scheduled`` measures scheduled delivery: 10,000 messages sent with ``scheduled_enqueue_time_utc`` set to
the same instant (about 3 s ahead), one RECEIVE_AND_DELETE receiver with prefetch waiting for them; for each
message, the delivery latency after the due time (when the SDK hands it over) and the activation lag (its
``enqueued_time_utc``, the instant the broker made it active) in ms, p50/p99/max.

Writes ``bench/results/emulator_throughput.json``, merging into the fields already there, so runs with
different flags accumulate. ``--profile`` runs the emulator under cProfile and prints its top functions, to
name the bottleneck. Usage::

    .venv/bin/python bench/emulator_throughput.py [--messages 20000] [--profile]
    .venv/bin/python bench/emulator_throughput.py --sessions --scheduled
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import pstats
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from azure.servicebus import (
    NEXT_AVAILABLE_SESSION,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
)
from azure.servicebus.exceptions import OperationTimeoutError

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
CONFIG = """{"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [
  {"Name": "bench", "Properties": {"LockDuration": "PT1M", "MaxDeliveryCount": 10,
    "MaxSizeInMegabytes": 81920}},
  {"Name": "bench-sessions", "Properties": {"LockDuration": "PT1M", "RequiresSession": true,
    "MaxSizeInMegabytes": 81920}},
  {"Name": "bench-scheduled", "Properties": {"LockDuration": "PT1M", "MaxSizeInMegabytes": 81920}}
], "Topics": []}], "Logging": {"Type": "Console"}}}"""
RESULT_FILE = RESULTS / "emulator_throughput.json"


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


def sessions_throughput(
    conn: str, sessions: int, per_session: int, receivers: int, batch: int, body: bytes
) -> dict[str, Any]:
    """``sessions`` x ``per_session`` messages, consumed by ``receivers`` threads looping NEXT_AVAILABLE."""
    total = sessions * per_session
    messages = [(f"s-{s:05d}", i) for i in range(per_session) for s in range(sessions)]  # interleaved
    with (
        ServiceBusClient.from_connection_string(conn) as client,
        client.get_queue_sender("bench-sessions") as tx,
    ):
        for start in range(0, total, batch):
            tx.send_messages(
                [ServiceBusMessage(body, session_id=sid) for sid, _ in messages[start : start + batch]]
            )

    guard = threading.Lock()
    received = 0
    accepted_sessions = 0
    out_of_order = 0
    errors: list[BaseException] = []
    first_accept: list[float] = []
    last_complete = 0.0

    def worker() -> None:
        nonlocal received, accepted_sessions, out_of_order, last_complete
        try:
            with ServiceBusClient.from_connection_string(conn, retry_total=0) as client:
                while True:
                    try:
                        rx = client.get_queue_receiver(
                            "bench-sessions", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=3
                        ).__enter__()
                    except OperationTimeoutError:
                        return  # no session left
                    with rx:
                        with guard:
                            first_accept.append(time.perf_counter())
                            accepted_sessions += 1
                        got: list[int] = []
                        while len(got) < per_session:
                            batch_ = rx.receive_messages(
                                max_message_count=per_session - len(got), max_wait_time=5
                            )
                            if not batch_:
                                break
                            for message in batch_:
                                rx.complete_message(message)
                                got.append(message.sequence_number or 0)
                        with guard:
                            received += len(got)
                            out_of_order += got != sorted(got)
                            last_complete = time.perf_counter()
        except BaseException as exc:  # reported in the result
            errors.append(exc)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(receivers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = last_complete - min(first_accept) if first_accept else float("nan")
    return {
        "sessions_msgs_per_s": round(received / elapsed) if received else 0,
        "sessions_per_s": round(accepted_sessions / elapsed, 1) if received else 0,
        "sessions_count": sessions,
        "sessions_messages_per_session": per_session,
        "sessions_receivers": receivers,
        "sessions_received": received,
        "sessions_accepted": accepted_sessions,
        "sessions_out_of_order": out_of_order,
        "sessions_errors": [repr(e) for e in errors][:5],
        "sessions_elapsed_s": round(elapsed, 2),
    }


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered)) - 1))]


def scheduled_latency(
    conn: str, total: int, lead: float, batch: int, prefetch: int, body: bytes
) -> dict[str, Any]:
    """``total`` messages scheduled for one instant ``lead`` s ahead; latency of each delivery after it."""
    with ServiceBusClient.from_connection_string(conn) as client:
        receiver = client.get_queue_receiver(
            "bench-scheduled",
            receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE,
            prefetch_count=prefetch,
            max_wait_time=10,
        )
        with receiver, client.get_queue_sender("bench-scheduled") as tx:
            sent_from = time.time()
            due = datetime.now(UTC) + timedelta(seconds=lead)
            for start in range(0, total, batch):
                count = min(batch, total - start)
                tx.send_messages(
                    [ServiceBusMessage(body, scheduled_enqueue_time_utc=due) for _ in range(count)]
                )
            send_s = time.time() - sent_from
            due_ts = due.timestamp()
            early = 0
            delivery_ms: list[float] = []
            activation_ms: list[float] = []
            while len(delivery_ms) < total:
                got = receiver.receive_messages(max_message_count=prefetch, max_wait_time=10)
                now = time.time()
                if not got:
                    break
                for message in got:
                    delivery_ms.append((now - due_ts) * 1000)
                    if message.enqueued_time_utc is not None:
                        activation_ms.append((message.enqueued_time_utc.timestamp() - due_ts) * 1000)
                    early += now < due_ts
    return {
        "scheduled_messages": total,
        "scheduled_received": len(delivery_ms),
        "scheduled_delivered_early": early,
        "scheduled_lead_s": lead,
        "scheduled_send_s": round(send_s, 2),
        "scheduled_prefetch": prefetch,
        "scheduled_receive_mode": "RECEIVE_AND_DELETE",
        "scheduled_latency_p50_ms": round(_percentile(delivery_ms, 50)) if delivery_ms else None,
        "scheduled_latency_p99_ms": round(_percentile(delivery_ms, 99)) if delivery_ms else None,
        "scheduled_latency_max_ms": round(max(delivery_ms)) if delivery_ms else None,
        "scheduled_latency_mean_ms": round(statistics.fmean(delivery_ms)) if delivery_ms else None,
        "scheduled_activation_p50_ms": round(_percentile(activation_ms, 50)) if activation_ms else None,
        "scheduled_activation_p99_ms": round(_percentile(activation_ms, 99)) if activation_ms else None,
    }


def _load_previous() -> dict[str, Any]:
    try:
        previous = json.loads(RESULT_FILE.read_text())
    except (OSError, ValueError):
        return {}
    return previous if isinstance(previous, dict) else {}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--prefetch", type=int, default=100)
    parser.add_argument("--profile", action="store_true", help="profile the emulator process with cProfile")
    parser.add_argument("--sessions", action="store_true", help="measure session consumption (see above)")
    parser.add_argument("--session-count", type=int, default=1000)
    parser.add_argument("--session-messages", type=int, default=10)
    parser.add_argument("--session-receivers", type=int, default=8)
    parser.add_argument(
        "--scheduled", action="store_true", help="measure scheduled delivery latency (see above)"
    )
    parser.add_argument("--scheduled-messages", type=int, default=10000)
    parser.add_argument("--scheduled-lead", type=float, default=3.0, help="seconds from now to the due time")
    args = parser.parse_args()
    default_run = not (args.sessions or args.scheduled)
    body = os.urandom(512).hex().encode()  # 1 KB
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        profile_to = data_dir / "emulator.prof" if args.profile else None
        proc, conn = start_emulator(data_dir, profile_to)
        try:
            if default_run:
                send_rate = batched_send(conn, args.messages, args.batch, body)
                print(
                    f"batched send: {send_rate:,.0f} msg/s ({args.messages} x 1 KB, batches of {args.batch})"
                )
                receive_rate = receive_complete(conn, args.messages + 1, args.prefetch)
                print(f"receive+complete: {receive_rate:,.0f} msg/s (prefetch {args.prefetch})")
                result.update(
                    {
                        "message_bytes": len(body),
                        "messages": args.messages,
                        "batched_send_msgs_per_s": round(send_rate),
                        "receive_complete_msgs_per_s": round(receive_rate),
                        "send_batch": args.batch,
                        "prefetch": args.prefetch,
                        "profiled": args.profile,
                    }
                )
            if args.sessions:
                sessions = sessions_throughput(
                    conn, args.session_count, args.session_messages, args.session_receivers, args.batch, body
                )
                sessions["sessions_measured_at"] = _now()
                print("sessions:", _summary(sessions, "sessions_"))
                result.update(sessions)
            if args.scheduled:
                scheduled = scheduled_latency(
                    conn, args.scheduled_messages, args.scheduled_lead, args.batch, args.prefetch, body
                )
                scheduled["scheduled_measured_at"] = _now()
                print("scheduled:", _summary(scheduled, "scheduled_"))
                result.update(scheduled)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
        if profile_to is not None and profile_to.exists():
            stats = pstats.Stats(str(profile_to))
            stats.sort_stats("tottime").print_stats(15)
    RESULTS.mkdir(parents=True, exist_ok=True)
    merged = _load_previous()
    merged.update(
        {
            "benchmark": "emulator_throughput",
            "measured_at": _now(),
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "platform": platform.platform(),
            },
        }
    )
    merged.update(result)
    RESULT_FILE.write_text(json.dumps(merged, indent=2) + "\n")
    print(f"wrote {RESULT_FILE}")
    return 0


def _summary(fields: dict[str, Any], prefix: str) -> str:
    return ", ".join(f"{key.removeprefix(prefix)}={value}" for key, value in fields.items())


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


if __name__ == "__main__":
    sys.exit(main())
