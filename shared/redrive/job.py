"""One re-drive run from app settings: the code the timer function, the CLI and devhost share."""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from azure.servicebus import ServiceBusClient

from shared.archive.writer import ArchiveWriter
from shared.management import ManagementClient, ManagementSettings, SettingsError
from shared.redrive.policy import Action, operator_policy
from shared.redrive.runner import Redriver, RunHooks
from shared.redrive.settings import RedriveSettings
from shared.redrive.summary import RunSummary
from shared.redrive.targets import discover

if TYPE_CHECKING:
    from shared.amqp.connection import Namespace

log = logging.getLogger(__name__)


class RunInProgress(Exception):
    """Another re-drive run (timer or console) is working in this process; ``run_id`` names it."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"re-drive run {run_id} is in progress")
        self.run_id = run_id


class RunGate:
    """One re-drive run at a time per process: the timer (a singleton across instances in Azure) and the
    console's retry / archive actions must not work the same dead-letter queues at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.current: str | None = None

    @contextmanager
    def entered(self, run_id: str) -> Iterator[None]:
        if not self._lock.acquire(blocking=False):
            raise RunInProgress(self.current or "?")
        self.current = run_id
        try:
            yield
        finally:
            self.current = None
            self._lock.release()


RUN_GATE = RunGate()


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


def wire_namespace(env: Mapping[str, str] | None = None) -> Namespace:
    """The namespace Busbar's own AMQP receivers read the dead-letter queues from (the same setting as
    :func:`service_bus_client`)."""
    from shared.amqp.connection import Namespace  # proton loads its C library only when a run receives

    try:
        return Namespace.from_settings(os.environ if env is None else env)
    except ValueError as error:
        raise SettingsError(str(error)) from None


def run_redrive(
    env: Mapping[str, str] | None = None,
    *,
    run_id: str | None = None,
    dry_run: bool = False,
    hooks: RunHooks | None = None,
    receive_wait: float = 1.0,
    selection: Mapping[str, frozenset[int]] | None = None,
    operator_action: Action | None = None,
) -> RunSummary:
    """Discover the dead-letter queues, run (or plan) a re-drive and, for a real run, write its summary
    next to the archive. Settings errors raise before anything is received; a run already in progress in
    this process raises :class:`RunInProgress`.

    The console's retry and archive pass ``selection`` (entity path, lower-case -> sequence numbers) and
    ``operator_action`` (what the operator asked for instead of the policy's per-reason action); every
    guard and the archive are the timer run's."""
    settings = RedriveSettings.from_env(env)
    management_settings = ManagementSettings.from_env(env)
    archive = ArchiveWriter(settings.archive_url, settings.archive_storage_options)
    run_id = run_id or new_run_id()
    policy = settings.policy if operator_action is None else operator_policy(settings.policy, operator_action)
    limits = settings.limits
    if selection is not None:  # an operator's selection is handled whole, not cut by the timer's budget
        limits = replace(limits, max_messages=max(limits.max_messages, sum(map(len, selection.values()))))
    with RUN_GATE.entered(run_id):
        with ManagementClient(management_settings) as management:
            discovery = discover(management, settings.entities)
        with service_bus_client(env) as client:
            namespace = wire_namespace(env)
            redriver = Redriver(
                client, namespace, archive, policy, limits, hooks=hooks, receive_wait=receive_wait
            )
            if dry_run:
                summary = redriver.plan(discovery.plans, run_id)
            else:
                summary = redriver.run(discovery.plans, run_id, selection)
    for pattern in discovery.unmatched:
        summary.error(pattern, "BUSBAR_REDRIVE_ENTITIES entry matches no queue or subscription")
    if not dry_run:
        try:
            summary.summary_path = archive.write_summary(run_id, summary.to_dict())
        except Exception as exc:  # the run's work is done and settled; only its audit file is missing
            log.exception("writing the summary of run %s failed", run_id)
            summary.error(settings.archive_url, f"summary write failed: {type(exc).__name__}: {exc}")
    return summary
