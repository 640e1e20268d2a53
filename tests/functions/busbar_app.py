"""Helpers of the Functions app tests: the app's settings for an emulator, and clients built from them."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path

from azure.mgmt.servicebus.models import SBQueue, SBQueueProperties
from azure.servicebus import ServiceBusClient

from app.bootstrap import provision_router
from app.endpoints.sample import sample_catalog
from emulator.server import EmulatorThread
from shared.api.provisioning.service import entity_defaults
from shared.management import EMULATOR_NAMESPACE, ManagementClient, ManagementSettings
from shared.topology.queues import endpoint_queues
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
        # Ordered endpoints (crm) keep their held keys in Table Storage: Azurite's, one per test process.
        "AzureWebJobsStorage": table_connection_string(),
        "BUSBAR_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000000",
        "BUSBAR_RESOURCE_GROUP": "busbar-tests",
        "BUSBAR_NAMESPACE": EMULATOR_NAMESPACE,
        "BUSBAR_MANAGEMENT_ENDPOINT": f"http://127.0.0.1:{emulator.management_port}",
        "BUSBAR_MANAGEMENT_TOKEN": emulator.management_token,
        "BUSBAR_BILLING_QUEUE": f"billing-{suffix}",
        "BUSBAR_CRM_QUEUE": f"crm-{suffix}",
        "BUSBAR_SHIPPING_QUEUE": f"shipping-{suffix}",
        "BUSBAR_SALES_QUEUE": f"sales-{suffix}",
        # The app the tests know: the sample's endpoints alone, whatever modules app/endpoints/ holds too.
        "BUSBAR_ENDPOINT_MODULES": "sample",
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

    crm is ordered: its queue requires sessions and has its hold queue. Every queue requires duplicate
    detection over ``BUSBAR_DUPLICATE_DETECTION_WINDOW``, as the app's provisioning creates them. The
    endpoints' subscriptions are left to the tests, which provision them over HTTP."""
    with management_for(settings) as management:
        group, namespace = management.scope
        for endpoint in sample_catalog():
            # An ordered endpoint's queues require sessions: the PUT refuses a plain one (needs a new queue).
            window = entity_defaults(settings).duplicate_detection_window
            for spec in endpoint_queues(
                endpoint.queue(settings), ordered=endpoint.ordered, duplicate_detection_window=window
            ):
                properties = SBQueueProperties(
                    requires_session=spec.requires_session,
                    requires_duplicate_detection=spec.requires_duplicate_detection,
                    duplicate_detection_history_time_window=spec.duplicate_detection_window,
                )
                queue = SBQueue(properties=properties)
                management.queues.create_or_update(group, namespace, spec.name, queue)
        provision_router(
            management,
            settings["BUSBAR_FALLBACK_TOPIC"],
            settings["BUSBAR_ROUTER_SUBSCRIPTION"],
            entity_defaults(settings),
        )
