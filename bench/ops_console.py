"""The console's failures view over many dead letters: 10,000 dead-lettered messages across 20 queues
(poison and transient reasons mixed), the app's console blueprint under devhost, an in-process emulator.

Times ``GET /api/ops/failures`` (peek every dead-letter queue, group, preview the policy) three times in a
row and ``GET /api/ops/entities`` once. Figures go to ``bench/results/ops_console.json``.

    .venv/bin/python bench/ops_console.py [--entities 20] [--messages 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from azure.mgmt.servicebus.models import SBQueue  # noqa: E402
from azure.servicebus import ServiceBusClient, ServiceBusMessage  # noqa: E402

from devhost.testing import running_host  # noqa: E402
from emulator.server import EmulatorOptions, EmulatorThread  # noqa: E402
from shared.management import EMULATOR_NAMESPACE, ManagementClient, ManagementSettings  # noqa: E402

RESULTS = ROOT / "bench" / "results"
APP = """
import azure.functions as func

from functions import ops_api

app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)
app.register_functions(ops_api.bp)
"""
REASONS = ("MaxDeliveryCountExceeded", "PermanentHandlerError", "PayloadValidationFailed")


def fill(connection_string: str, queue: str, count: int) -> None:
    """``count`` messages sent and dead-lettered, reasons in rotation."""
    with ServiceBusClient.from_connection_string(connection_string) as client:
        with client.get_queue_sender(queue) as sender:
            for start in range(0, count, 250):
                batch = [
                    ServiceBusMessage(json.dumps({"n": n}), message_id=f"{queue}-{n}")
                    for n in range(start, min(count, start + 250))
                ]
                sender.send_messages(batch)
        done = 0
        with client.get_queue_receiver(queue, prefetch_count=250) as receiver:
            while done < count:
                for message in receiver.receive_messages(max_message_count=250, max_wait_time=5):
                    reason = REASONS[message.sequence_number % len(REASONS)]
                    receiver.dead_letter_message(
                        message,
                        reason=reason,
                        error_description=f"OnEvent gave up on Bench.Event: ValueError: {done}",
                    )
                    done += 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entities", type=int, default=20)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=RESULTS / "ops_console.json")
    args = parser.parse_args()
    thread = EmulatorThread(EmulatorOptions(amqp_port=0, management_port=0))
    thread.start()
    emulator = thread.emulator
    assert emulator is not None
    prefix = f"ops-{uuid.uuid4().hex[:6]}"
    queues = [f"{prefix}-{i:02d}" for i in range(args.entities)]
    settings = {
        "ServiceBusConnection": emulator.connection_string,
        "BUSBAR_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000000",
        "BUSBAR_RESOURCE_GROUP": "bench",
        "BUSBAR_NAMESPACE": EMULATOR_NAMESPACE,
        "BUSBAR_MANAGEMENT_ENDPOINT": f"http://127.0.0.1:{emulator.management_port}",
        "BUSBAR_MANAGEMENT_TOKEN": emulator.management_token,
        "BUSBAR_ARCHIVE_URL": tempfile.mkdtemp(prefix="busbar-bench-archive-"),
        "BUSBAR_REDRIVE_SCHEDULE": "0 0 0 1 1 *",
        "BUSBAR_REDRIVE_ENTITIES": f"{prefix}-*",
    }
    try:
        with ManagementClient(ManagementSettings.from_env(settings)) as management:
            for queue in queues:
                management.queues.create_or_update(*management.scope, queue, SBQueue())
        t0 = time.perf_counter()
        per = args.messages // args.entities
        for queue in queues:
            fill(emulator.connection_string, queue, per)
        setup_s = time.perf_counter() - t0
        with tempfile.TemporaryDirectory() as directory:
            app = Path(directory) / "function_app.py"
            app.write_text(APP)
            with (
                running_host(app, settings=settings) as host,
                httpx.Client(
                    base_url=host.base_url, headers={"x-functions-key": host.master_key}, timeout=120
                ) as client,
            ):
                timings = []
                total = 0
                for _ in range(3):
                    t0 = time.perf_counter()
                    response = client.get("/api/ops/failures")
                    timings.append(round(time.perf_counter() - t0, 3))
                    response.raise_for_status()
                    total = response.json()["total"]
                    groups = response.json()["groupCount"]
                t0 = time.perf_counter()
                client.get("/api/ops/entities").raise_for_status()
                entities_s = round(time.perf_counter() - t0, 3)
    finally:
        thread.stop()
    document = {
        "benchmark": "ops_console",
        "scenario": f"{per * args.entities} dead letters across {args.entities} queues, "
        "GET /api/ops/failures (peek every dead-letter queue, group, policy preview) under devhost, "
        "in-process emulator",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load": os.getloadavg()},
        "setup_s": round(setup_s, 1),
        "failures_view_s": timings,
        "dead_letters_seen": total,
        "groups": groups,
        "entities_view_s": entities_s,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    print(json.dumps(document, indent=2))
    return 0 if total == per * args.entities else 1


if __name__ == "__main__":
    raise SystemExit(main())
