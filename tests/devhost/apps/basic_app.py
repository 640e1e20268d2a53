"""Test app: one of each trigger, driven by app settings (``%...%``)."""

import json
import os
import time

import azure.functions as func
from app_records import recorder

app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)

# Every invocation appends a JSON line here so tests can see exactly what each function received.
record = recorder(os.environ.get("DEVHOST_TEST_RECORD", ""))


@app.service_bus_queue_trigger(arg_name="msg", queue_name="%WORK_QUEUE%", connection="ServiceBusConnection")
def work(msg: func.ServiceBusMessage) -> None:
    body = msg.get_body().decode()
    record(
        "work",
        body=body,
        message_id=msg.message_id,
        delivery_count=msg.delivery_count,
        correlation_id=msg.correlation_id,
        user_properties=msg.user_properties,
        sequence_number=msg.sequence_number,
        lock_token=msg.lock_token,
        enqueued_time_utc=msg.enqueued_time_utc,
        metadata_keys=sorted((msg.metadata or {}).keys()),
        metadata_message_id=(msg.metadata or {}).get("MessageId"),
        at=time.monotonic(),
    )
    if body.startswith("fail"):
        raise RuntimeError(f"refusing {body}")
    if body.startswith("slow:"):
        time.sleep(float(body.split(":", 1)[1]))
    record("work_done", message_id=msg.message_id, at=time.monotonic())


@app.route(route="items/{item}/parts/{part:int}", methods=["GET", "PUT"])
def item_part(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(
        json.dumps(
            {"item": req.route_params["item"], "part": req.route_params["part"], "method": req.method}
        ),
        mimetype="application/json",
    )


@app.route(route="public", auth_level=func.AuthLevel.ANONYMOUS)
async def public(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(f"hello {req.params.get('name', 'world')}")


@app.route(route="admin-only", auth_level=func.AuthLevel.ADMIN)
def admin_only(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(status_code=204)


@app.route(route="boom", auth_level=func.AuthLevel.ANONYMOUS)
def boom(req: func.HttpRequest) -> func.HttpResponse:
    raise ValueError("boom")


@app.timer_trigger(arg_name="timer", schedule="%TICK_SCHEDULE%", run_on_startup=False)
def tick(timer: func.TimerRequest) -> None:
    record("tick", past_due=timer.past_due)
