"""Plans that keep one delivery per subscriber: the provisioner's plan, checked against every subscription
that already forwards the requested events into the endpoint's queue (any topic, fallback rules included).

See :mod:`shared.topology.delivery_paths` for what a path is. A plan that would add a second path for an
event is refused with :class:`~shared.topology.delivery_paths.DuplicateDeliveryError`, unless it is a
declared migration (``migrate``): then the plan also deletes the event's old paths, after its creates.
When those are fallback-topic rules, the plan is a handover (:mod:`shared.topology.handover`): the new
subscriptions record the rules they retire, and apply keeps the old rules for the router's snapshot interval
(plus a margin) after the creates, so the router never loses an event in the switch (an event it doubles
there is a duplicate the endpoint does not handle again).
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
from shared.topology.desired import DesiredState, SubscribedEvent, SubscriptionSpec
from shared.topology.handover import SNAPSHOT_SECONDS, Handover, RetiredRule, handover_seconds
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
    router_snapshot_seconds: float = float(SNAPSHOT_SECONDS.default or 30),
) -> Plan:
    """``provisioner.plan(desired)`` plus ``deletes`` (and, with ``migrate``, the old paths' deletes),
    refused when an event would then reach the endpoint's queue through two paths.

    ``existing``: the endpoint's subscriptions as :meth:`Provisioner.describe` returns them (read here when
    not given); ``enclosed_of``: see :func:`~shared.topology.event_carriers.checked_events`;
    ``router_snapshot_seconds``: the app's ``BUSBAR_ROUTER_SNAPSHOT_SECONDS`` (how long a handover lasts)."""
    queue = HierarchyNamespace(options.hierarchy_namespace).apply(endpoint_queue)
    checked = checked_events(options, events, enclosed_of)
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
    # The plan may delete a rule itself (a $Default left behind by routing by content): once is enough.
    planned = {i.path.lower() for i in plan.items if i.action == "delete"}
    removed = [
        replace(d, after_creates=True) if d.path.lower() in late else d
        for d in deletes
        if d.path.lower() not in planned
    ]
    if migrate:
        taken = {i.path.lower() for i in removed}
        removed += [i for i in moves if i.path.lower() not in taken]
    duplicates = duplicate_paths(options, queue, checked, found, desired, removed)
    if duplicates:
        raise DuplicateDeliveryError(duplicates, hint)
    retired = _retired_fallback_rules(options, [i for i in removed if i.after_creates], found)
    if not retired:
        return Plan(plan.items + tuple(removed), plan.near_quota)
    handover = Handover(queue, tuple(retired), handover_seconds(router_snapshot_seconds))
    items = tuple(_recording(item, handover) for item in plan.items)
    if items != plan.items:
        return Plan(items + tuple(removed), plan.near_quota, handover.after_seconds, handover)
    # No subscription of the endpoint is created: the new path is a rule on one it has. Apply writes the
    # record on those subscriptions (with the cutoffs fixed, see Provisioner.apply).
    retired_topics = {r.topic.lower() for r in retired}
    recorded_on: tuple[tuple[str, str], ...] = tuple(
        dict.fromkeys(
            (item.topic, item.name)
            for item in plan.items
            if item.kind == "subscription"
            and item.action == "unchanged"
            and item.topic is not None
            and item.topic.lower() not in retired_topics  # the router reads records off the fallback topic
            and isinstance(item.spec, SubscriptionSpec)
            and item.spec.forward_to.lower() == queue.lower()
        )
    )
    return Plan(items + tuple(removed), plan.near_quota, handover.after_seconds, handover, recorded_on)


def _retired_fallback_rules(
    options: TopologyOptions, late: Sequence[PlanItem], found: Sequence[ExistingSubscription]
) -> list[RetiredRule]:
    """The fallback-topic rules the migration's deletes take away (a whole subscription: all its rules)."""
    fallback = options.fallback_topic
    if fallback is None or not fallback.topic_name:
        return []
    topic = HierarchyNamespace(options.hierarchy_namespace).apply(fallback.topic_name).lower()
    retired: list[RetiredRule] = []
    for item in late:
        if item.topic is None or item.topic.lower() != topic:
            continue
        owner = item.subscription if item.kind == "rule" else item.name
        for sub in found:
            if sub.topic.lower() != topic or sub.name.lower() != (owner or "").lower():
                continue
            retired.extend(
                RetiredRule(sub.topic, sub.name, rule.name, rule.filter)
                for rule in sub.rules
                if rule.filter.kind != "false"
                and (item.kind != "rule" or rule.name.lower() == item.name.lower())
            )
    return retired


def _recording(item: PlanItem, handover: Handover) -> PlanItem:
    """A create of one of the endpoint's subscriptions, carrying the handover in its ``userMetadata``."""
    spec = item.spec
    if item.action != "create" or not isinstance(spec, SubscriptionSpec):
        return item
    if spec.forward_to.lower() != handover.endpoint.lower():
        return item
    metadata = handover.to_metadata()
    return replace(
        item, spec=replace(spec, user_metadata=metadata), details={**item.details, "userMetadata": metadata}
    )
