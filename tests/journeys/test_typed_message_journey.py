"""Journeys of a typed .NET message through every hop Busbar re-sends it on (issue 25, points 1 and 6), end to
end through ``make run``'s app, the SDK and the documented commands only.

A .NET publisher's order, with an application property of every AMQP type a trigger can read and the .NET
SDK's described types (``Uri``, ``DateTimeOffset``, ``TimeSpan``, plus two descriptors nobody knows:
tests/journeys/typed_app.py), fails in the sample billing handler and is dead-lettered; then

* the re-drive timer re-drives it twice, archives it the third time, and ``make replay`` sends it on;
* or an operator retries it from the console, while the router bridges it to its dedicated topic.

Every queue and topic of the app requires duplicate detection (issue 35), and every hop re-sends under the
order's own MessageId: a re-drive or a retry inside the target's window would be dropped by the broker, so
the re-drive holds it until the window has passed (``duplicate-window``, shared/redrive/guards.py). The app
gets Azure's shortest window (``BUSBAR_DUPLICATE_DETECTION_WINDOW=PT20S``) so the journeys wait for it, and
the console's journey sees the hold itself: a retry right after the dead-lettering is held, not sent.

What arrives is read with qpid-proton (tests/journeys/amqp_reader.py), which names every property's AMQP
type, and compared with docs/operations.md's table ("Application property types on every hop"): the
re-drive, the console retry, the archive and the replay keep every property with its AMQP type (Busbar's
receivers decode them typed), and so does the router's bridge (the trigger gets the message's AMQP bytes,
and Busbar reads the types back from the extension's uamqp message); Busbar's own stamps are typed.

char and decimal properties are not on this order: the billing trigger (the Functions extension decodes with
uamqp) cannot read them, nor can the router's, so such an order is never handled, only abandoned until the
broker dead-letters it at MaxDeliveryCount -- another journey than a handler's failure, whose re-drive and
archive keep both types too (tests/shared/redrive/test_redrive_property_types.py re-drives such a message
twice and archives it; tests/spark/test_replay_property_types.py replays char and decimal rows).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.journeys.amqp_reader import WireMessage, receive_all
from tests.journeys.typed_app import (
    NSERVICEBUS_HEADERS,
    STAMPS,
    DotnetOrder,
    TypedApp,
    dotnet_order,
    eventually,
    typed_app,
)
from tests.shared.envelope.wire_types import DESCRIBED, DESCRIBED_EXACT, EXACT, MOMENT, SENT

BILLING = "billing"
WINDOW = "PT20S"
"""The app's duplicate-detection window: Azure's minimum, so re-drives wait as little as the broker allows."""
INSPECTION_QUEUE = "orders"  # emulator/sample-config.json (typed_app opts in): a queue no function consumes
DEDICATED_TOPIC = "Shipping.OrderAccepted"  # a topic named after the contract: the router bridges to it
AUDIT = "audit"  # an endpoint the app does not host, subscribed on the dedicated topic

PUBLISHED_TYPES = {
    **EXACT,
    **DESCRIBED_EXACT,
    **dict.fromkeys(NSERVICEBUS_HEADERS, "string"),
    "NServiceBus.MessageId": "string",
    "NServiceBus.CorrelationId": "string",
    **dict.fromkeys(STAMPS, "boolean"),
}
"""The order's properties as published: what the re-drive, the console retry, the replay and the router's
bridge send again."""

REDRIVE_STAMPS = {
    "busbar.redrive.count": "int",
    "busbar.redrive.at": "timestamp",
    "busbar.redrive.sequence_number": "long",
    "busbar.redrive.reason": "string",
    "busbar.redrive.description": "string",
    "busbar.redrive.source": "string",
    "busbar.redrive.run_id": "string",
}


def assert_arrived_intact(arrived: WireMessage, order: DotnetOrder, expected_types: dict[str, str]) -> None:
    """Body and system properties as sent; every property with its value and the type the docs' table gives
    it for the hops the message took."""
    assert bytes(arrived.body) == order.body
    assert (arrived.message_id, arrived.correlation_id) == (order.message_id, order.correlation_id)
    assert (arrived.content_type, arrived.subject) == ("application/json", "Shipping.OrderAccepted")
    assert arrived.types() == expected_types
    values = arrived.properties
    assert values["text"] == SENT["text"] and values["flag"] is True and values["null"] is None
    assert values["byte"] == -7 and values["short"] == -30000 and values["int"] == 2_000_000_000
    assert values["long"] == 1_795_749_929_335 and values["ushort"] == 65000 and values["ulong"] == 2**64 - 1
    assert values["uint"] == 4_000_000_000 and values["float"] == 1.5 and values["double"] == 2.25
    assert values["small_long"] == 5 and values["ubyte"] == 250
    assert values["timestamp"] == int(MOMENT.timestamp() * 1000)  # the same instant, in epoch milliseconds
    assert values["uuid"] == SENT["uuid"] and bytes(values["binary"]) == b"\x00\xff\x10"
    assert bytes(values["utf8_binary"]) == b"abc" and values["symbol"] == "sym"
    # .NET's Uri, DateTimeOffset and TimeSpan, and two descriptors nobody knows: descriptor and value intact.
    for name, described in DESCRIBED.items():
        assert values[name].descriptor == described.descriptor and values[name].value == described.value, name


def _archived(app: TypedApp) -> list[Path]:
    return sorted(app.archive.rglob("*.parquet"))


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.timeout(1200)
def test_a_typed_dotnet_message_is_redriven_twice_archived_and_replayed_intact(tmp_path: Path) -> None:
    order = dotnet_order()
    with typed_app(
        tmp_path / "app",
        BUSBAR_DUPLICATE_DETECTION_WINDOW=WINDOW,  # each re-drive waits for billing's window (docstring)
        BUSBAR_REDRIVE_SCHEDULE="*/3 * * * * *",
        BUSBAR_REDRIVE_ENTITIES=BILLING,
        BUSBAR_REDRIVE_MAX_REDRIVES="2",
        # The sample handler's failure is permanent; this operator re-drives it anyway (documented policy).
        BUSBAR_REDRIVE_POLICY=json.dumps({"reasons": {"PermanentHandlerError": "redrive"}}),
    ) as app:
        app.publish(order)
        eventually(lambda: _archived(app), "archiving the order after two re-drives", app)

        app.make(
            "replay", f"ARCHIVE={app.archive}", f"REPLAY_ARGS=--target_overrides {BILLING}={INSPECTION_QUEUE}"
        )
        [report] = (app.data / "replay" / "reports").glob("*/summary.json")
        assert json.loads(report.read_text())["outcomes"] == {"sent": 1}, report.read_text()

        [arrived] = receive_all(app.connection_string, INSPECTION_QUEUE)
        assert_arrived_intact(
            arrived, order, {**PUBLISHED_TYPES, **REDRIVE_STAMPS, "x-replay-run-id": "string"}
        )
        assert arrived.properties["busbar.redrive.count"] == 2  # re-driven twice, then archived
        assert arrived.properties["busbar.redrive.reason"] == "PermanentHandlerError"  # billing's failure
        assert receive_all(app.connection_string, f"{BILLING}/$deadletterqueue", idle_seconds=1) == []


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.timeout(900)
def test_a_typed_dotnet_message_is_retried_from_the_console_and_bridged_to_its_dedicated_topic(
    tmp_path: Path,
) -> None:
    order = dotnet_order()
    with typed_app(
        tmp_path / "app",
        BUSBAR_DUPLICATE_DETECTION_WINDOW=WINDOW,  # the retry waits for billing's window: see the docstring
        BUSBAR_REDRIVE_SCHEDULE="0 0 0 1 1 *",  # the timer stays out of the way: the operator retries
        BUSBAR_ROUTER_SNAPSHOT_SECONDS="1",
    ) as app:
        subscribed = app.http.put(
            f"/api/endpoints/{AUDIT}/subscriptions",
            json={"events": [{"type": "Shipping.OrderAccepted", "topic": DEDICATED_TOPIC}]},
        )
        assert subscribed.status_code == 201, subscribed.text
        # The router knows the new topic once it re-reads its snapshot (BUSBAR_ROUTER_SNAPSHOT_SECONDS).
        time.sleep(2)
        app.publish(order)

        failure = eventually(lambda: _billing_failure(app), "billing dead-lettering the order", app)
        # Billing saw the order's MessageId moments ago: a copy sent now would be dropped, so it is held.
        held = _retry(app, failure["sequenceNumber"])
        assert held["totals"]["held"] == 1 and held["totals"]["redriven"] == 0, held
        assert held["decisions"] == {BILLING: {"duplicate-window": 1}}, held
        still = _billing_failure(app)
        assert still is not None and still["sequenceNumber"] == failure["sequenceNumber"]  # still there
        # Once billing's window has passed, the same retry sends it.
        retried = eventually(
            lambda: _sent(_retry(app, failure["sequenceNumber"])), "the retry past billing's window", app
        )
        assert retried["totals"]["redriven"] == 1, retried

        # The retried copy fails in billing again and is dead-lettered: read it there, as it was re-sent.
        [again] = eventually(
            lambda: receive_all(app.connection_string, f"{BILLING}/$deadletterqueue", idle_seconds=1),
            "billing dead-lettering the retried copy",
            app,
        )
        assert_arrived_intact(
            again,
            order,
            {
                **PUBLISHED_TYPES,
                **REDRIVE_STAMPS,
                "DeadLetterReason": "string",
                "DeadLetterErrorDescription": "string",
            },
        )
        assert again.properties["busbar.redrive.count"] == 1
        assert again.properties["DeadLetterReason"] == "PermanentHandlerError"

        [bridged] = eventually(
            lambda: receive_all(app.connection_string, AUDIT, idle_seconds=1),
            "the router's bridged copy",
            app,
        )
        assert_arrived_intact(bridged, order, {**PUBLISHED_TYPES, "busbar.bridged-from": "string"})


def _billing_failure(app: TypedApp) -> dict[str, Any] | None:
    groups = app.http.get("/api/ops/failures").json()["groups"]
    messages = [m for g in groups for m in g["messages"] if m["entity"] == BILLING]
    return messages[0] if messages else None


def _retry(app: TypedApp, sequence_number: int) -> dict[str, Any]:
    """The console's retry of billing's dead-lettered message ``sequence_number``: the run's summary."""
    response = app.http.post(
        "/api/ops/failures/retry", json={"entity": BILLING, "sequenceNumbers": [sequence_number]}
    )
    assert response.status_code == 200, response.text
    summary: dict[str, Any] = response.json()["summary"]
    return summary


def _sent(summary: dict[str, Any]) -> dict[str, Any] | None:
    """``summary`` when its run sent the message; ``None`` while it is held for the duplicate window."""
    if summary["totals"]["held"] == 1:
        assert summary["decisions"] == {BILLING: {"duplicate-window": 1}}, summary
        return None
    return summary
