"""Test app: batch functions under host.json minMessageBatchSize / maxBatchWaitTime."""

import json
import os
import threading

import azure.functions as func

app = func.FunctionApp()
RECORD_FILE = os.environ.get("DEVHOST_TEST_RECORD", "")
_lock = threading.Lock()


def record(function: str, **fields: object) -> None:
    with _lock, open(RECORD_FILE, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"function": function, **fields}, default=str) + "\n")


@app.service_bus_queue_trigger(
    arg_name="batch", queue_name="%MIN_BATCH_QUEUE%", connection="ServiceBusConnection", cardinality="many"
)
def at_least(batch: list[func.ServiceBusMessage]) -> None:
    record("at_least", bodies=[m.get_body().decode() for m in batch])


@app.service_bus_queue_trigger(
    arg_name="batch",
    queue_name="%MIN_SESSION_QUEUE%",
    connection="ServiceBusConnection",
    cardinality="many",
    is_sessions_enabled=True,
)
def session_at_least(batch: list[func.ServiceBusMessage]) -> None:
    record("session_at_least", bodies=[m.get_body().decode() for m in batch])
