"""One re-drive run from app settings: the code the timer function, the CLI and devhost share."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime

from azure.servicebus import ServiceBusClient

from shared.archive.writer import ArchiveWriter
from shared.management import ManagementClient, ManagementSettings, SettingsError
from shared.redrive.runner import Redriver, RunHooks
from shared.redrive.settings import RedriveSettings
from shared.redrive.summary import RunSummary
from shared.redrive.targets import discover

log = logging.getLogger(__name__)


def new_run_id(moment: datetime | None = None) -> str:
    """A run id that sorts by time: ``redrive-20261122T213000Z-<8 hex>``."""
    stamp = (moment or datetime.now(UTC)).astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"redrive-{stamp}-{uuid.uuid4().hex[:8]}"


def service_bus_client(env: Mapping[str, str] | None = None) -> ServiceBusClient:
    """A client from ``ServiceBusConnection`` (local) or ``ServiceBusConnection__fullyQualifiedNamespace``
    with the managed identity (Azure)."""
    values = os.environ if env is None else env
    connection_string = values.get("ServiceBusConnection", "").strip()
    if connection_string:
        return ServiceBusClient.from_connection_string(connection_string)
    namespace = values.get("ServiceBusConnection__fullyQualifiedNamespace", "").strip()
    if not namespace:
        raise SettingsError(
            "missing app setting: ServiceBusConnection (local) or "
            "ServiceBusConnection__fullyQualifiedNamespace (Azure, managed identity)"
        )
    from azure.identity import DefaultAzureCredential  # heavy; only needed in Azure

    return ServiceBusClient(namespace, DefaultAzureCredential())


def run_redrive(
    env: Mapping[str, str] | None = None,
    *,
    run_id: str | None = None,
    dry_run: bool = False,
    hooks: RunHooks | None = None,
    receive_wait: float = 1.0,
) -> RunSummary:
    """Discover the dead-letter queues, run (or plan) a re-drive and, for a real run, write its summary
    next to the archive. Settings errors raise before anything is received."""
    settings = RedriveSettings.from_env(env)
    management_settings = ManagementSettings.from_env(env)
    archive = ArchiveWriter(settings.archive_url, settings.archive_storage_options)
    run_id = run_id or new_run_id()
    with ManagementClient(management_settings) as management:
        discovery = discover(management, settings.entities)
    with service_bus_client(env) as client:
        redriver = Redriver(
            client, archive, settings.policy, settings.limits, hooks=hooks, receive_wait=receive_wait
        )
        work = redriver.plan if dry_run else redriver.run
        summary = work(discovery.plans, run_id)
    for pattern in discovery.unmatched:
        summary.error(pattern, "BUSBAR_REDRIVE_ENTITIES entry matches no queue or subscription")
    if not dry_run:
        try:
            summary.summary_path = archive.write_summary(run_id, summary.to_dict())
        except Exception as exc:  # the run's work is done and settled; only its audit file is missing
            log.exception("writing the summary of run %s failed", run_id)
            summary.error(settings.archive_url, f"summary write failed: {type(exc).__name__}: {exc}")
    return summary
