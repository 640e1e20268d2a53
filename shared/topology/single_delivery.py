"""Plans that keep one delivery per subscriber: the provisioner's plan, checked against every subscription
that already forwards the requested events into the endpoint's queue (any topic, fallback rules included).

See :mod:`shared.topology.delivery_paths` for what a path is. A plan that would add a second path for an
event is refused with :class:`~shared.topology.delivery_paths.DuplicateDeliveryError`, unless it is a
declared migration (``migrate``): then the plan also deletes the event's old paths, after its creates.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from shared.topology.delivery_paths import (
    DuplicateDeliveryError,
    checked_events,
    duplicate_paths,
    migration_deletes,
)
from shared.topology.desired import DesiredState, SubscribedEvent
from shared.topology.names import HierarchyNamespace
from shared.topology.options import TopologyOptions
from shared.topology.plan import ExistingSubscription, Plan, PlanItem, subscription_path
from shared.topology.provisioner import Provisioner

CLI_HINT = (
    "run apply with --migrate to remove the existing path in the same plan (a declared migration), or "
    "unsubscribe it first"
)


def plan_single_delivery(
    provisioner: Provisioner,
    options: TopologyOptions,
    endpoint_queue: str,
    events: Iterable[SubscribedEvent],
    desired: DesiredState,
    *,
    migrate: bool = False,
    enclosed_of: Callable[[str], Sequence[Sequence[str]]] | None = None,
    existing: Sequence[ExistingSubscription] | None = None,
    deletes: Sequence[PlanItem] = (),
    hint: str = CLI_HINT,
) -> Plan:
    """``provisioner.plan(desired)`` plus ``deletes`` (and, with ``migrate``, the old paths' deletes),
    refused when an event would then reach the endpoint's queue through two paths.

    ``existing``: the endpoint's subscriptions as :meth:`Provisioner.describe` returns them (read here when
    not given); ``enclosed_of``: see :func:`~shared.topology.delivery_paths.checked_events`."""
    queue = HierarchyNamespace(options.hierarchy_namespace).apply(endpoint_queue)
    checked = checked_events(events, enclosed_of)
    found = list(provisioner.describe(endpoint_queue, options) if existing is None else existing)
    plan = provisioner.plan(desired)
    # The old paths of the events the plan moves: deleted only after the creates, whether the caller
    # deletes them already (a declarative PUT) or the migration adds them here.
    moves = migration_deletes(options, queue, checked, found, desired, strict=migrate)
    late = {i.path.lower() for i in moves} | {
        subscription_path(i.topic, i.subscription).lower()
        for i in moves
        if i.topic is not None and i.subscription is not None
    }  # the caller may delete the whole subscription an old rule is on
    removed = [replace(d, after_creates=True) if d.path.lower() in late else d for d in deletes]
    if migrate:
        taken = {i.path.lower() for i in removed}
        removed += [i for i in moves if i.path.lower() not in taken]
    duplicates = duplicate_paths(options, queue, checked, found, desired, removed)
    if duplicates:
        raise DuplicateDeliveryError(duplicates, hint)
    return Plan(plan.items + tuple(removed), plan.near_quota)
