"""The operations console's test scene: two endpoint queues and a forwarding subscription with poison,
transient and unmatched failures, and an app with the console's blueprint running under devhost."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.mgmt.servicebus.models import SBSubscription, SBSubscriptionProperties

from devhost.testing import running_host
from shared.redrive.entities import EntityRef
from tests.shared.redrive.redrive_support import (
    Provisioner,
    dead_letter_queue_messages,
    dead_letter_subscription_messages,
    message,
    redrive_env,
)

APP = """
import azure.functions as func

from functions import ops_api

app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)
app.register_functions(ops_api.bp)
"""

POISON = "PermanentHandlerError"
TRANSIENT = "MaxDeliveryCountExceeded"
UNMATCHED = "NoMatchingSubscription"


@pytest.fixture
def provision(emulator: Any) -> Iterator[Provisioner]:
    provisioner = Provisioner(emulator)
    yield provisioner
    provisioner.close()


@pytest.fixture
def scene(emulator: Any, provision: Provisioner, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Two endpoint queues and a subscription forwarding to the second, with failures of three kinds, and
    the app running under devhost limited to these entities."""
    billing, shipping = provision.queue(), provision.queue()
    topic = provision.topic()
    subscription = provision.subscription(topic)
    cs = emulator.connection_string
    dead_letter_queue_messages(
        cs,
        billing,
        [message(json.dumps({"order": i}).encode(), message_id=f"p-{i}") for i in range(3)],
        POISON,
        "OnOrderPlaced gave up on Sales.OrderPlaced: ValueError: amount must be positive",
    )
    dead_letter_queue_messages(
        cs,
        billing,
        [
            message(b'{"order": 9}', message_id=f"t-{i}", application_properties={"tenant": "acme"})
            for i in range(2)
        ],
        TRANSIENT,
        "Message could not be consumed after 10 delivery attempts.",
    )
    # Dead-letter in the subscription first, then make it forward to its endpoint (a forwarding
    # subscription never holds a message long enough to receive it).
    dead_letter_subscription_messages(cs, topic, subscription, [message(b"{}", message_id="u-1")], UNMATCHED)
    management = provision.client
    management.subscriptions.create_or_update(
        *management.scope,
        topic,
        subscription,
        SBSubscription(properties=SBSubscriptionProperties(forward_to=shipping)),
    )
    path = EntityRef.subscription(topic, subscription).path
    archive = tmp_path / "archive"
    settings = redrive_env(emulator, archive, [billing, shipping, path])
    app = tmp_path / "app" / "function_app.py"
    app.parent.mkdir()
    app.write_text(APP)
    with running_host(app, settings=settings) as host:
        yield {
            "host": host,
            "billing": billing,
            "shipping": shipping,
            "topic": topic,
            "subscription": subscription,
            "path": path,
            "archive": archive,
            "cs": cs,
        }
