"""Test app: handlers that outlast their entity's lock (the seed's lock-renewal check), for a plain and a
session-enabled queue, with the SDK-type binding and explicit settlement as the app's subscribers use it.

The first delivery of a message holds it for ``HOLD_SECONDS`` and then completes it; a redelivery (only
when the lock was not kept) completes at once, so a test without renewal sees it and ends."""

import os
import time

import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus
from app_records import recorder

app = func.FunctionApp()
record = recorder(os.environ.get("DEVHOST_TEST_RECORD", ""))
HOLD_SECONDS = float(os.environ.get("HOLD_SECONDS", "90"))


def hold_then_complete(
    function: str, message: servicebus.ServiceBusReceivedMessage, actions: servicebus.ServiceBusMessageActions
) -> None:
    fields = {
        "message_id": message.message_id,
        "session_id": message.session_id,
        "delivery_count": message.delivery_count,
    }
    record(function, phase="started", **fields)
    if message.delivery_count == 1:
        time.sleep(HOLD_SECONDS)
    try:
        actions.complete(message)
    except Exception as error:  # the lock was lost meanwhile: the host refuses the settlement
        record(function, phase="complete refused", error=f"{type(error).__name__}: {error}", **fields)
        raise
    record(function, phase="completed", **fields)


@app.service_bus_queue_trigger(
    arg_name="message",
    queue_name="%PLAIN_QUEUE%",
    connection="ServiceBusConnection",
    auto_complete_messages=False,
)
def holds_plain(
    message: servicebus.ServiceBusReceivedMessage, message_actions: servicebus.ServiceBusMessageActions
) -> None:
    hold_then_complete("holds_plain", message, message_actions)


@app.service_bus_queue_trigger(
    arg_name="message",
    queue_name="%SESSION_QUEUE%",
    connection="ServiceBusConnection",
    is_sessions_enabled=True,
    auto_complete_messages=False,
)
def holds_in_session(
    message: servicebus.ServiceBusReceivedMessage, message_actions: servicebus.ServiceBusMessageActions
) -> None:
    hold_then_complete("holds_in_session", message, message_actions)
