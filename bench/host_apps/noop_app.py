"""A no-op Service Bus function for bench/host_throughput.py."""

import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus

app = func.FunctionApp()


@app.service_bus_queue_trigger(arg_name="msg", queue_name="%BENCH_QUEUE%", connection="ServiceBusConnection")
def noop(msg: func.ServiceBusMessage) -> None:
    pass


@app.service_bus_queue_trigger(
    arg_name="msg", queue_name="%BENCH_ASYNC_QUEUE%", connection="ServiceBusConnection"
)
async def noop_async(msg: func.ServiceBusMessage) -> None:
    pass


@app.service_bus_queue_trigger(
    arg_name="msg",
    queue_name="%BENCH_SDK_QUEUE%",
    connection="ServiceBusConnection",
    auto_complete_messages=False,
)
def noop_sdk(msg: servicebus.ServiceBusReceivedMessage, actions: servicebus.ServiceBusMessageActions) -> None:
    actions.complete(msg)
