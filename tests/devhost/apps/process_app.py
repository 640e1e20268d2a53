"""Test app for the worker process: who runs the code, a crash on a first delivery, and a coroutine
function whose settlement fails."""

import asyncio
import json
import logging
import os
import sys
import traceback

import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus
from app_records import recorder

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)
record = recorder(os.environ.get("DEVHOST_TEST_RECORD", ""))


@app.route(route="whoami")
def whoami(req: func.HttpRequest) -> func.HttpResponse:
    logging.getLogger("process_app").warning("whoami answered by %d", os.getpid())
    return func.HttpResponse(json.dumps({"pid": os.getpid(), "argv": sys.argv}), mimetype="application/json")


@app.route(route="stack")
def stack(req: func.HttpRequest) -> func.HttpResponse:
    frames = [(frame.filename, frame.name) for frame in traceback.extract_stack()]
    return func.HttpResponse(json.dumps(frames), mimetype="application/json")


@app.route(route="async-stack")
async def async_stack(req: func.HttpRequest) -> func.HttpResponse:
    frames = [(frame.filename, frame.name) for frame in traceback.extract_stack()]
    return func.HttpResponse(json.dumps(frames), mimetype="application/json")


@app.service_bus_queue_trigger(arg_name="msg", queue_name="%CRASH_QUEUE%", connection="ServiceBusConnection")
def crashes(msg: func.ServiceBusMessage) -> None:
    record("crashes", body=msg.get_body().decode(), delivery_count=msg.delivery_count, pid=os.getpid())
    if msg.delivery_count == 1:
        os._exit(1)  # the worker process dies mid-invocation


@app.service_bus_queue_trigger(
    arg_name="message",
    queue_name="%SETTLE_QUEUE%",
    connection="ServiceBusConnection",
    auto_complete_messages=False,
)
async def settles_twice(
    message: servicebus.ServiceBusReceivedMessage, actions: servicebus.ServiceBusMessageActions
) -> None:
    actions.complete(message)
    try:
        actions.complete(message)  # already completed: the host's receiver refuses
        second = "ok"
    except servicebus.serviceBusMessageActions.SettlementError as exc:
        second = f"{exc.original.code()}|{exc.original.details()}"
    record("settles_twice", body=str(message), second=second, pid=os.getpid())


@app.service_bus_queue_trigger(arg_name="msg", queue_name="%LINGER_QUEUE%", connection="ServiceBusConnection")
async def lingers(msg: func.ServiceBusMessage) -> None:
    record("lingers", body=msg.get_body().decode(), state="started")
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        record("lingers", body=msg.get_body().decode(), state="cancelled")
        raise
