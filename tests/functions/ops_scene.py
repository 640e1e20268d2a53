"""The operations console's test scenes: two endpoint queues and a forwarding subscription with poison,
transient and unmatched failures, and an app with the console's blueprint running under devhost; and the
namespace ``make run EMULATOR_CONFIG=emulator/sample-config.json`` gives the app, for the entity sections."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.mgmt.servicebus.models import SBQueue, SBQueueProperties, SBSubscription, SBSubscriptionProperties

from app import runtime
from app.bootstrap import provision as provision_app
from devhost.testing import running_host
from emulator.config import load_config
from emulator.server import EmulatorOptions, EmulatorThread
from shared.api.provisioning.lock import create_lock_queue
from shared.redrive.entities import EntityRef
from tests.functions.busbar_app import app_settings, management_for
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
    # The app hosts billing and shipping on these queues (crm's is not provisioned here).
    settings = redrive_env(
        emulator,
        archive,
        [billing, shipping, path],
        BUSBAR_BILLING_QUEUE=billing,
        BUSBAR_SHIPPING_QUEUE=shipping,
        BUSBAR_CRM_QUEUE=f"crm-{billing}",
    )
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


SAMPLE_CONFIG = Path(__file__).resolve().parents[2] / "emulator" / "sample-config.json"
MAKE_RUN_NAMES = {
    "BUSBAR_BILLING_QUEUE": "billing",
    "BUSBAR_CRM_QUEUE": "crm",
    "BUSBAR_SHIPPING_QUEUE": "shipping",
    "BUSBAR_SALES_QUEUE": "sales",
    "BUSBAR_FALLBACK_TOPIC": "busbar-fallback",
    "BUSBAR_ROUTER_SUBSCRIPTION": "busbar-router",
}
"""The entity names of local.settings.sample.json, which make run serves: the emulator is this scene's own."""
FOREIGN_ENDPOINT = "audit"
"""An ordered endpoint another host runs, on the fallback topic: its queue, hold queue and subscription."""


@pytest.fixture(scope="module")
def sample_namespace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """An emulator loaded with emulator/sample-config.json (``orders``, ``orders-errors``,
    ``wallet-transactions``, ``shipping``, ``bundle-1`` with ``Shipping`` forwarding to ``shipping``), the app
    provisioned on it as make run's start-up hook does, the provisioning lock queue, a foreign ordered
    endpoint, one dead letter in billing and one in ``orders``; the console's app running against it."""
    thread = EmulatorThread(
        EmulatorOptions(config=load_config(SAMPLE_CONFIG), amqp_port=0, management_port=0)
    )
    thread.start()
    try:
        root = tmp_path_factory.mktemp("sample-namespace")
        settings = app_settings(thread, **MAKE_RUN_NAMES, BUSBAR_ARCHIVE_URL=str(root / "archive"))
        provision_app(settings)
        with management_for(settings) as management:
            scope = management.scope
            create_lock_queue(management, "busbar-provisioning-locks")
            for queue in (FOREIGN_ENDPOINT, f"{FOREIGN_ENDPOINT}.held"):
                management.queues.create_or_update(
                    *scope, queue, SBQueue(properties=SBQueueProperties(requires_session=True))
                )
            management.subscriptions.create_or_update(
                *scope,
                "busbar-fallback",
                FOREIGN_ENDPOINT,
                SBSubscription(properties=SBSubscriptionProperties(forward_to=FOREIGN_ENDPOINT)),
            )
        cs = settings["ServiceBusConnection"]
        dead_letter_queue_messages(cs, "billing", [message()], POISON)
        dead_letter_queue_messages(cs, "orders", [message()], TRANSIENT)
        app = root / "app" / "function_app.py"
        app.parent.mkdir()
        app.write_text(APP)
        with running_host(app, settings=settings) as host:
            yield {"host": host, "settings": settings}
    finally:
        runtime.reset()
        thread.stop()
