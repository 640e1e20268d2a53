"""Test app: SDK-typed triggers, one on a session queue and one on a plain queue, that settle each message
themselves over the extension's gRPC client (abandon, dead-letter or complete, by the body's prefix) and
then raise or return, with autoCompleteMessages left on."""

import os

import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus
from app_records import recorder

app = func.FunctionApp()
record = recorder(os.environ.get("DEVHOST_TEST_RECORD", ""))


def _settle_then_end(
    function: str, message: servicebus.ServiceBusReceivedMessage, actions: servicebus.ServiceBusMessageActions
) -> None:
    body = str(message)
    record(function, body=body, delivery_count=message.delivery_count)
    if body.startswith("abandon-") and message.delivery_count == 1:
        actions.abandon(message)
        raise RuntimeError("fails after abandoning")
    if body.startswith("deadletter-"):
        actions.deadletter(message, deadletter_reason="SettledByFunction")
        raise RuntimeError("fails after dead-lettering")
    actions.complete(message)  # a redelivered abandon- message, or a complete- one: then returns


@app.service_bus_queue_trigger(
    arg_name="message",
    queue_name="%SESSION_QUEUE%",
    connection="ServiceBusConnection",
    is_sessions_enabled=True,
)
def settles_in_session(
    message: servicebus.ServiceBusReceivedMessage, actions: servicebus.ServiceBusMessageActions
) -> None:
    _settle_then_end("settles_in_session", message, actions)


@app.service_bus_queue_trigger(
    arg_name="message", queue_name="%PLAIN_QUEUE%", connection="ServiceBusConnection"
)
def settles_plain(
    message: servicebus.ServiceBusReceivedMessage, actions: servicebus.ServiceBusMessageActions
) -> None:
    _settle_then_end("settles_plain", message, actions)
