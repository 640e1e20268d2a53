"""Test app: batch functions under host.json minMessageBatchSize / maxBatchWaitTime."""

import os
import typing

import azure.functions as func
from app_records import recorder

app = func.FunctionApp()
record = recorder(os.environ.get("DEVHOST_TEST_RECORD", ""))


@app.service_bus_queue_trigger(
    arg_name="batch",
    queue_name="%MIN_BATCH_QUEUE%",
    connection="ServiceBusConnection",
    cardinality="many",
    data_type=func.DataType.STRING,
)
def at_least(batch: typing.List[func.ServiceBusMessage]) -> None:
    record("at_least", bodies=[m.get_body().decode() for m in batch])


@app.service_bus_queue_trigger(
    arg_name="batch",
    queue_name="%MIN_SESSION_QUEUE%",
    connection="ServiceBusConnection",
    cardinality="many",
    is_sessions_enabled=True,
    data_type=func.DataType.STRING,
)
def session_at_least(batch: typing.List[func.ServiceBusMessage]) -> None:
    record("session_at_least", bodies=[m.get_body().decode() for m in batch])
