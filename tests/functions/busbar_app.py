"""Helpers of the Functions app tests: the app's settings for an emulator, and clients built from them."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path

from azure.mgmt.servicebus.models import SBQueue
from azure.servicebus import ServiceBusClient

from app.bootstrap import provision_router
from emulator.server import EmulatorThread
from shared.api.provisioning.service import entity_defaults
from shared.management import EMULATOR_NAMESPACE, ManagementClient, ManagementSettings
from tests.azurite import table_connection_string

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "function_app.py"
HOST_JSON = ROOT / "host.json"


def app_settings(thread: EmulatorThread, **overrides: str) -> dict[str, str]:
    """Everything the app reads, pointed at ``thread``'s emulator and this test process's Azurite (its
    storage account, ``AzureWebJobsStorage``, as make run gives it), with fresh entity names."""
    emulator = thread.emulator
    assert emulator is not None
    suffix = uuid.uuid4().hex[:8]
    settings = {
        "ServiceBusConnection": emulator.connection_string,
        "AzureWebJobsStorage": table_connection_string(),
        "BUSBAR_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000000",
        "BUSBAR_RESOURCE_GROUP": "busbar-tests",
        "BUSBAR_NAMESPACE": EMULATOR_NAMESPACE,
        "BUSBAR_MANAGEMENT_ENDPOINT": f"http://127.0.0.1:{emulator.management_port}",
        "BUSBAR_MANAGEMENT_TOKEN": emulator.management_token,
        "BUSBAR_BILLING_QUEUE": f"billing-{suffix}",
        "BUSBAR_CRM_QUEUE": f"crm-{suffix}",
        "BUSBAR_SHIPPING_QUEUE": f"shipping-{suffix}",
        "BUSBAR_FALLBACK_TOPIC": f"bundle-{suffix}",
        "BUSBAR_FALLBACK_ROUTING_MODE": "CorrelationFilter",
        "BUSBAR_ROUTER_SUBSCRIPTION": "busbar-router",
        "BUSBAR_ROUTER_SNAPSHOT_SECONDS": "30",
        "BUSBAR_ENTITY_LOCK_DURATION_SECONDS": "30",
        # The re-drive timer (issue 9) is part of the app; these tests never want it to fire.
        "BUSBAR_REDRIVE_SCHEDULE": "0 0 0 1 1 *",
        # Unrouted events are archived: never into the working tree.
        "BUSBAR_ARCHIVE_URL": tempfile.mkdtemp(prefix="busbar-archive-"),
    }
    settings.update(overrides)
    return settings


def management_for(settings: Mapping[str, str]) -> ManagementClient:
    return ManagementClient(ManagementSettings.from_env(settings))


def sdk_client_for(settings: Mapping[str, str]) -> ServiceBusClient:
    return ServiceBusClient.from_connection_string(settings["ServiceBusConnection"])


def create_queues_and_router(settings: Mapping[str, str]) -> None:
    """Startup hook: the endpoint queues (the triggers listen on them) and the router subscription.

    The endpoints' subscriptions are left to the tests, which provision them over HTTP."""
    with management_for(settings) as management:
        group, namespace = management.scope
        for name in ("BUSBAR_BILLING_QUEUE", "BUSBAR_CRM_QUEUE", "BUSBAR_SHIPPING_QUEUE"):
            management.queues.create_or_update(group, namespace, settings[name], SBQueue())
        provision_router(
            management,
            settings["BUSBAR_FALLBACK_TOPIC"],
            settings["BUSBAR_ROUTER_SUBSCRIPTION"],
            entity_defaults(settings),
        )
