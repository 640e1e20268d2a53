"""The planner: plans that keep one delivery per subscriber. Every caller that means to apply a plan (the
start-up provisioning, the HTTP provisioning API, ``python -m shared.topology``) plans through
:func:`plan_delivery`: the provisioner's raw plan, checked against every subscription that already forwards
the requested events into the endpoint's queue (any topic, fallback rules included), then refused as a whole
when it holds a ``refused`` item (:class:`PlanRefusedError`: an existing queue or topic needs a new one) or
would create a subscription beside one forwarding to the same queue already
(:class:`~shared.topology.queue_move.SecondSubscriptionError`). ``apply`` then only executes its steps.

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
from dataclasses import dataclass, replace
from typing import Any

from shared.topology.delivery_paths import (
    DuplicateDeliveryError,
    checked_events,
    duplicate_paths,
    migration_deletes,
)
from shared.topology.desired import DesiredState, SubscribedEvent, SubscriptionSpec
from shared.topology.errors import QueueNeedsRecreatingError
from shared.topology.handover import SNAPSHOT_SECONDS, Handover, RetiredRule, handover_seconds
from shared.topology.names import HierarchyNamespace
from shared.topology.options import TopologyOptions
from shared.topology.plan import ExistingSubscription, Plan, PlanItem, subscription_path
from shared.topology.provisioner import Provisioner
from shared.topology.queue_move import check_no_second_subscription

CLI_HINT = (
    "run apply with --migrate to remove the existing path in the same plan (a declared migration), or "
    "unsubscribe it first"
)
STARTUP_HINT = (
    "unsubscribe the existing path first (DELETE /api/endpoints/{endpoint}/subscriptions/{eventType}, or "
    "python -m shared.topology unsubscribe), or migrate to the new one with python -m shared.topology apply "
    "--migrate"
)


class PlanRefusedError(QueueNeedsRecreatingError):
    """A plan holds ``refused`` items (an existing queue or topic whose immutable properties differ): it is
    not applied at all. ``errors``: one reason per entity; ``plan``: the plan, to show what was found."""

    def __init__(self, plan: Plan) -> None:
        super().__init__(plan.refusals)
        self.plan = plan


@dataclass(frozen=True, slots=True)
class Subscriber:
    """One endpoint a plan provisions: its queue (without the hierarchy prefix) and the events it wants."""

    queue: str
    events: Sequence[SubscribedEvent]


def plan_delivery(
    provisioner: Provisioner,
    options: TopologyOptions,
    subscribers: Sequence[Subscriber],
    desired: DesiredState,
    *,
    migrate: bool = False,
    enclosed_of: Callable[[str], Sequence[Sequence[str]]] | None = None,
    existing: Sequence[ExistingSubscription] | None = None,
    deletes: Sequence[PlanItem] = (),
    hint: str = CLI_HINT,
    router_snapshot_seconds: float = float(SNAPSHOT_SECONDS.default or 30),
) -> Plan:
    """The plan of ``desired`` for ``subscribers``, checked: the one entry point of planning.

    One subscriber: :func:`plan_single_delivery` (``deletes``, ``migrate``, ``existing`` and the handover are
    its). Several (the start-up's every hosted endpoint, in one plan): the raw plan, and the one-delivery
    check for each subscriber's events against what forwards to its queue. Either way
    :class:`~shared.topology.queue_move.SecondSubscriptionError` first (the more specific reason) when the
    plan would create a subscription beside one that forwards to the same queue and that the plan does not
    delete, then the duplicate check, then :class:`PlanRefusedError` when the plan holds a refusal. Reads
    only."""
    management = provisioner.management

    def no_second_subscription(plan: Plan) -> None:
        deleted = {i.path.lower() for i in plan.items if i.action == "delete" and i.kind == "subscription"}

        def kept_subscriptions(topic: str) -> list[Any]:
            listed = management.subscriptions.list_by_topic(*management.scope, topic)
            return [sub for sub in listed if subscription_path(topic, sub.name).lower() not in deleted]

        check_no_second_subscription(plan, kept_subscriptions)

    if len(subscribers) == 1:
        [one] = subscribers
        plan = plan_single_delivery(
            provisioner,
            options,
            one.queue,
            one.events,
            desired,
            migrate=migrate,
            enclosed_of=enclosed_of,
            existing=existing,
            deletes=deletes,
            hint=hint,
            router_snapshot_seconds=router_snapshot_seconds,
            precheck=no_second_subscription,
        )
    else:
        plan = provisioner.plan(desired)
        no_second_subscription(plan)
        hierarchy = HierarchyNamespace(options.hierarchy_namespace)
        for subscriber in subscribers:
            checked = checked_events(options, subscriber.events, enclosed_of)
            found = provisioner.describe(subscriber.queue, options)
            queue = hierarchy.apply(subscriber.queue)
            duplicates = duplicate_paths(options, queue, checked, found, desired)
            if duplicates:
                raise DuplicateDeliveryError(duplicates, hint)
    if plan.refusals:
        raise PlanRefusedError(plan)
    return plan


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
    precheck: Callable[[Plan], None] | None = None,
) -> Plan:
    """``provisioner.plan(desired)`` plus ``deletes`` (and, with ``migrate``, the old paths' deletes),
    refused when an event would then reach the endpoint's queue through two paths (the one-delivery part
    of :func:`plan_delivery`, which callers that apply use).

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
    if precheck is not None:  # a more specific refusal than the duplicate's, when both apply
        precheck(Plan(plan.items + tuple(removed), plan.near_quota))
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
