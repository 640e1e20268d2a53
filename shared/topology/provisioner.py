"""Reconciling a desired state against a namespace through ``azure-mgmt-servicebus``.

:meth:`Provisioner.plan` only reads (GET / list) and returns what would change: ``create``, ``unchanged``,
``delete`` or ``would-update`` per entity. :meth:`Provisioner.apply` carries out the creates and deletes
of a plan and nothing else: ARM's PUT is create-or-update, and NServiceBus never updates an existing
entity, so a difference is reported as ``would-update`` (with the differences) and left alone. The one
exception is a declared move to a new queue (``DesiredState.moved_from``): a desired subscription that
exists forwarding to the old queue is redirected in place, one ARM update of its ``forwardTo`` (``update``
in the plan; Azure documents the update, ``az servicebus topic subscription update --forward-to``
(learn.microsoft.com enable-auto-forward, "Update the auto forward setting for an existing subscription"),
and NServiceBus's transport updates ``ForwardTo`` of existing subscriptions too since
Particular/NServiceBus.AzureServiceBus#763). Service Bus moves each message a subscription auto-forwards
from the source to the destination ("removes messages that are placed in the first queue or subscription
(source) and puts them in the second", learn.microsoft.com service-bus-auto-forwarding), so every event is
forwarded to the old queue or to the new one, never both and never neither. A queue
whose immutable properties differ (``RequiresSession``: :mod:`shared.topology.queues`) is ``refused``
instead, and a plan holding a refusal is not applied at all.

Concurrency: two runs may plan the same creates. A create that meets an existing entity (409) or a
delete that meets a missing one (404) counts as done; a repeated PUT of a just-created entity carries the
same definition. Order: queues, then topics, then each subscription followed by its rules (a filtered
subscription first gets ``$default`` ``1=0`` in place of the ``$Default`` ``1=1`` ARM gives every new
subscription, then its event rules).

Refusals by the management plane are raised as :class:`ProvisioningError` (status, code, message of the
ARM error; the SDK's ``HttpResponseError`` is its ``__cause__``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from functools import partial
from typing import Any

from azure.core.exceptions import HttpResponseError
from azure.mgmt.servicebus.models import (
    SBQueue,
    SBQueueProperties,
    SBSubscription,
    SBSubscriptionProperties,
    SBTopic,
    SBTopicProperties,
)

import shared.topology.quotas as quotas
from shared.management import ManagementClient
from shared.topology.arm import arm_rule, filter_of
from shared.topology.content_filters import refines
from shared.topology.desired import (
    FALSE_FILTER,
    TRUE_FILTER,
    DesiredState,
    RuleSpec,
    SubscriptionSpec,
    parse_subscribed_events,
    resolve_routes,
    subscription_name,
)
from shared.topology.duplicate_detection import iso_window
from shared.topology.errors import ProvisioningError, QueueNeedsRecreatingError, TopologyValidationError
from shared.topology.handover import Handover
from shared.topology.handover_steps import record_handover
from shared.topology.names import DEFAULT_RULE_NAME, HierarchyNamespace, rule_name
from shared.topology.options import MigrationTopologyOptions, TopicRoutingMode, TopologyOptions
from shared.topology.plan import (
    ApplyResult,
    EntityDefaults,
    ExistingSubscription,
    Plan,
    PlanItem,
    rule_path,
    subscription_path,
)
from shared.topology.queues import QueueSpec, immutable_mismatch, like_its_input, topic_mismatch
from shared.topology.routing import migration_unmapped_message
from shared.topology.validation import validate

MAX_DELIVERY_COUNT_AZURE = 2147483647


def _status(exc: HttpResponseError) -> int | None:
    return exc.status_code


def _code(exc: HttpResponseError) -> str | None:
    error = getattr(exc, "error", None)
    return getattr(error, "code", None) if error is not None else None


class Provisioner:
    """Plans and applies desired states on one namespace (see the module docstring).

    ``concurrency`` management calls run at once (per subscription the calls stay in order). Queues are
    created with ``queue_defaults`` when given (an endpoint's own queue settings), else ``defaults``."""

    def __init__(
        self,
        management: ManagementClient,
        defaults: EntityDefaults | None = None,
        *,
        concurrency: int = 4,
        queue_defaults: EntityDefaults | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.management = management
        self.sleep = sleep
        self.defaults = defaults or EntityDefaults()
        self.queue_defaults = queue_defaults or self.defaults
        self.concurrency = max(1, concurrency)
        self._scope = management.scope

    # ------------------------------------------------------------------------------------------ plan

    def plan(self, desired: DesiredState) -> Plan:
        """Read the namespace and compare. :class:`shared.topology.QuotaExceededError` is raised before
        the first call when ``desired`` alone exceeds a per-topic quota, and before returning when the
        new subscriptions plus a topic's existing ones would."""
        quotas.check_desired(desired)
        items: list[PlanItem] = []
        found_queues = dict(
            zip(
                (q.lower() for q in desired.queues),
                self._parallel(self._get_queue, desired.queues),
                strict=True,
            )
        )
        for queue in desired.queues:
            spec = desired.queue_spec(queue)
            served = found_queues.get(spec.held_for.lower()) if spec.held_for else None
            if served is not None:
                spec = like_its_input(spec, served)
            items.append(self._plan_queue(spec, found_queues[queue.lower()]))
        topics = list(dict.fromkeys([*desired.forwarding_topics, *desired.topics]))
        topic_state: dict[str, Any] = {}
        window = desired.duplicate_detection_window
        for topic, found in zip(topics, self._parallel(self._get_topic, topics), strict=True):
            topic_state[topic.lower()] = found
            items.append(self._plan_topic(topic, window, found))
        moved = {q.lower() for q in desired.moved_from}
        sub_items = self._parallel(
            lambda s: self._plan_subscription(s, topic_state, moved), desired.subscriptions
        )
        for group in sub_items:
            items.extend(group)
        near = self._check_existing_quotas(items, topic_state)
        return Plan(tuple(items), tuple(near))

    @staticmethod
    def _plan_queue(spec: QueueSpec, found: Any) -> PlanItem:
        """A queue's item: created with ``spec``, or kept when it exists as ``spec`` wants, or refused when
        its immutable properties differ (:func:`shared.topology.queues.immutable_mismatch`)."""
        if found is None:
            return PlanItem("create", "queue", spec.name, spec.to_dict(), name=spec.name, spec=spec)
        reason = immutable_mismatch(spec, found)
        if reason is None:
            return PlanItem("unchanged", "queue", spec.name, spec.to_dict(), name=spec.name, spec=spec)
        existing = bool(getattr(found, "requires_session", False))
        details: dict[str, Any] = {
            "requiresSession": {"existing": existing, "desired": spec.requires_session}
        }
        if spec.requires_duplicate_detection:
            found_dedup = bool(getattr(found, "requires_duplicate_detection", False))
            details["requiresDuplicateDetection"] = {"existing": found_dedup, "desired": True}
        details["reason"] = reason
        return PlanItem("refused", "queue", spec.name, details, name=spec.name, spec=spec)

    @staticmethod
    def _plan_topic(topic: str, window: timedelta | None, found: Any) -> PlanItem:
        """A topic's item: created requiring duplicate detection over ``window`` (none: a plain topic),
        kept when it exists as wanted, refused when it exists without the duplicate detection it needs
        (:func:`shared.topology.queues.topic_mismatch`: the same refusal as a queue's)."""
        details: dict[str, Any] = {}
        if window is not None:
            details = {
                "requiresDuplicateDetection": True,
                "duplicateDetectionHistoryTimeWindow": iso_window(window),
            }
        if found is None:
            return PlanItem("create", "topic", topic, details, name=topic, duplicate_detection_window=window)
        reason = topic_mismatch(topic, window, found)
        if reason is None:
            return PlanItem("unchanged", "topic", topic, details, name=topic)
        refused = {"requiresDuplicateDetection": {"existing": False, "desired": True}, "reason": reason}
        return PlanItem("refused", "topic", topic, refused, name=topic)

    def _check_existing_quotas(self, items: list[PlanItem], topic_state: dict[str, Any]) -> list[str]:
        """Quotas on what the plan creates plus what each existing topic already holds.

        A topic's existing rules are counted by listing every subscription's rules (ARM reports no
        per-topic filter count), and only for topics the plan adds subscriptions or rules to."""
        planned: dict[str, tuple[str, quotas.TopicUsage]] = {}
        for item in items:
            if item.action != "create" or item.topic is None:
                continue
            if item.kind == "subscription":
                added = quotas.TopicUsage(subscriptions=1)
            elif item.kind == "rule" and isinstance(item.spec, RuleSpec):
                added = quotas.rule_usage(item.spec.filter)
            else:
                continue
            key = item.topic.lower()
            name, usage = planned.get(key, (item.topic, quotas.TopicUsage()))
            planned[key] = (name, usage + added)
        existing_topics = [name for key, (name, _) in planned.items() if topic_state.get(key) is not None]
        existing = dict(
            zip(
                (t.lower() for t in existing_topics),
                self._parallel(self.topic_usage, existing_topics),
                strict=True,
            )
        )
        quotas.check(planned, existing)
        return quotas.near_limit(planned, existing)

    def topic_usage(self, topic: str) -> quotas.TopicUsage:
        """What ``topic`` holds now: subscriptions, SQL filters (true/false included), correlation filters."""
        names = [sub.name for sub in self.management.subscriptions.list_by_topic(*self._scope, topic)]

        def rules_of(subscription: str) -> quotas.TopicUsage:
            total = quotas.TopicUsage(subscriptions=1)
            for rule in self.management.rules.list_by_subscriptions(*self._scope, topic, subscription):
                total = total + quotas.rule_usage(filter_of(rule))
            return total

        usage = quotas.TopicUsage()
        # One list call per subscription: on a topic with 2,000 subscriptions this is the plan's cost
        # (2.7 s on the emulator, 4 at a time); ARM's read throttling bounds it in Azure.
        for counted in self._parallel(rules_of, names):
            usage = usage + counted
        return usage

    def _plan_subscription(
        self, spec: SubscriptionSpec, topic_state: dict[str, Any], moved: set[str]
    ) -> list[PlanItem]:
        path = spec.path
        existing = None
        if topic_state.get(spec.topic.lower()) is not None:
            existing = self._get(
                lambda: self.management.subscriptions.get(*self._scope, spec.topic, spec.name), path
            )
        if existing is None:
            items = [
                PlanItem(
                    "create",
                    "subscription",
                    path,
                    {
                        "forwardTo": spec.forward_to,
                        "userMetadata": spec.user_metadata,
                        **({} if spec.has_default_rule else {"defaultRule": "removed after creation"}),
                    },
                    spec.topic,
                    spec.name,
                    spec.name,
                    spec,
                )
            ]
            for rule in spec.rules:
                implicit = rule.filter == TRUE_FILTER and rule.name.lower() == "$default"
                details = {**rule.filter.to_dict(), **({"implicit": True} if implicit else {})}
                items.append(
                    PlanItem(
                        "create",
                        "rule",
                        rule_path(spec.topic, spec.name, rule.name),
                        details,
                        spec.topic,
                        spec.name,
                        rule.name,
                        rule,
                        implicit,
                    )
                )
            return items
        items = []
        forward = existing.forward_to or ""
        if forward.lower() != spec.forward_to.lower() and forward.lower() in moved:
            details = {"forwardTo": {"existing": existing.forward_to, "desired": spec.forward_to}}
            items.append(
                PlanItem("update", "subscription", path, details, spec.topic, spec.name, spec.name, spec)
            )
        elif forward.lower() != spec.forward_to.lower():
            items.append(
                PlanItem(
                    "would-update",
                    "subscription",
                    path,
                    {"forwardTo": {"existing": existing.forward_to, "desired": spec.forward_to}},
                    spec.topic,
                    spec.name,
                    spec.name,
                    spec,
                )
            )
        else:
            items.append(
                PlanItem("unchanged", "subscription", path, {}, spec.topic, spec.name, spec.name, spec)
            )
        rules = {
            r.name.lower(): r
            for r in self.management.rules.list_by_subscriptions(*self._scope, spec.topic, spec.name)
        }
        for rule in spec.rules:
            rpath = rule_path(spec.topic, spec.name, rule.name)
            found = rules.get(rule.name.lower())
            if found is None:
                items.append(
                    PlanItem(
                        "create", "rule", rpath, rule.filter.to_dict(), spec.topic, spec.name, rule.name, rule
                    )
                )
                continue
            current = filter_of(found)
            if current == rule.filter:
                items.append(PlanItem("unchanged", "rule", rpath, {}, spec.topic, spec.name, rule.name, rule))
            else:
                # A condition added, changed or dropped (routing by content): the rule is rewritten in place,
                # one atomic PUT, so the subscription never goes without it. Any other difference is
                # reported and left alone.
                rewritten = (
                    rule.content is not None
                    or refines(current, rule.filter)
                    or self._default_switches(spec, rule, current, rules)
                )
                items.append(
                    PlanItem(
                        "update" if rewritten else "would-update",
                        "rule",
                        rpath,
                        {"existing": current.to_dict(), "desired": rule.filter.to_dict()},
                        spec.topic,
                        spec.name,
                        rule.name,
                        rule,
                    )
                )
        items.extend(self._default_rule_left_behind(spec, rules))
        return items

    @staticmethod
    def _default_switches(
        spec: SubscriptionSpec, rule: RuleSpec, current: Any, found: dict[str, Any]
    ) -> bool:
        """Whether ``$Default`` switches between ``1=1`` and ``1=0`` because the subscription starts or stops
        routing by content: it starts when a rule of the spec holds a condition (the default must stop taking
        everything), it stops when it holds none and the subscription still has a rule the spec drops (that
        condition is about to go: the default must take everything again before it does)."""
        if rule.name.lower() != DEFAULT_RULE_NAME.lower():
            return False
        filtering = any(r.content is not None for r in spec.rules)
        if filtering:
            return current == TRUE_FILTER and rule.filter == FALSE_FILTER
        wanted = {r.name.lower() for r in spec.rules}
        dropped = [r for name, r in found.items() if name not in wanted]
        return current == FALSE_FILTER and rule.filter == TRUE_FILTER and bool(dropped)

    @staticmethod
    def _default_rule_left_behind(spec: SubscriptionSpec, found: dict[str, Any]) -> list[PlanItem]:
        """The delete of an existing subscription's ``$Default`` ``1=1`` once the subscription is to route
        by content: kept, it would match everything beside the condition (Azure: "if you add a custom rule,
        delete the default"). It goes after the creates and updates, so the subscription always has a rule
        taking the events it wants."""
        default = found.get(DEFAULT_RULE_NAME.lower())
        if default is None or spec.has_default_rule or not any(r.content is not None for r in spec.rules):
            return []
        if filter_of(default) != TRUE_FILTER:
            return []
        path = rule_path(spec.topic, spec.name, default.name)
        return [
            PlanItem(
                "delete", "rule", path, {}, spec.topic, spec.name, default.name, None, after_creates=True
            )
        ]

    # ------------------------------------------------------------------------------------------ apply

    def apply(self, plan: Plan) -> ApplyResult:
        """Carry out the creates and deletes of ``plan``; ``would-update`` items are reported, not done.

        A plan with a ``refused`` item is not applied at all: :class:`QueueNeedsRecreatingError` is raised
        before the first call."""
        if plan.refusals:
            raise QueueNeedsRecreatingError(plan.refusals)
        result = ApplyResult()
        done: list[str] = []
        for item in plan.items:
            if item.action == "unchanged":
                result.unchanged.append(item.path)
            elif item.action == "would-update":
                result.would_update.append(item.path)
        deletes = [i for i in plan.items if i.action == "delete"]
        self._delete_all([i for i in deletes if not i.after_creates], result, done)
        creates = [i for i in plan.items if i.action == "create"]
        for kind in ("queue", "topic"):
            batch = [i for i in creates if i.kind == kind]
            # Forwarding topics come first in a plan; topics are independent of each other otherwise.
            for item, created in zip(
                batch, self._parallel(lambda i: self._create(i, done), batch), strict=True
            ):
                (result.created if created else result.unchanged).append(item.path)
        # A move's redirects, once the new queue exists: one atomic update per subscription.
        redirects = [i for i in plan.items if i.action == "update" and i.kind == "subscription"]
        self._parallel(lambda i: self._redirect(i, done), redirects)
        result.updated.extend(i.path for i in redirects)
        groups: dict[tuple[str, str], list[PlanItem]] = {}
        for item in creates:
            if (
                item.kind in ("subscription", "rule")
                and item.topic is not None
                and item.subscription is not None
            ):
                groups.setdefault((item.topic.lower(), item.subscription.lower()), []).append(item)
        for outcomes in self._parallel(lambda g: self._create_group(g, done), list(groups.values())):
            for path, created in outcomes:
                (result.created if created else result.unchanged).append(path)
        # A changed condition: each rule rewritten in place (create_or_update replaces its filter).
        rewrites = [i for i in plan.items if i.action == "update" and i.kind == "rule"]
        self._parallel(lambda i: self._rewrite_rule(i, done), rewrites)
        result.updated.extend(i.path for i in rewrites)
        # A migration's old paths go last: until the new path is there, the old one keeps delivering. Off
        # the fallback topic they stay for the handover too, so every router has seen the new path (and
        # the cutoff written on it) before they go: see shared.topology.handover.
        late = [i for i in deletes if i.after_creates]
        if plan.handover is not None:
            for topic, name in plan.handover_updates:
                self._record_handover(topic, name, plan.handover, done)
        if late and plan.handover_seconds > 0:
            self.sleep(plan.handover_seconds)
        self._delete_all(late, result, done)
        return result

    def _step(self, what: str, path: str, call: Callable[[], Any], done: list[str]) -> None:
        try:
            call()
        except HttpResponseError as exc:
            raise ProvisioningError(what, path, _status(exc), _code(exc), _message(exc), list(done)) from exc
        done.append(path)

    def _record_handover(self, topic: str, name: str, handover: Handover, done: list[str]) -> None:
        """Write ``handover`` on an existing subscription (:func:`~shared.topology.handover_steps.
        record_handover`)."""
        m = self.management
        self._step(
            "update", subscription_path(topic, name), partial(record_handover, m, topic, name, handover), done
        )

    def _delete_all(self, deletes: list[PlanItem], result: ApplyResult, done: list[str]) -> None:
        # Rules before their subscriptions, subscriptions before anything else.
        for kind in ("rule", "subscription", "topic", "queue"):
            batch = [i for i in deletes if i.kind == kind]
            # A 404 counts as deleted too: the entity is gone either way (a concurrent run, or never there).
            self._parallel(lambda i: self._delete(i, done), batch)
            result.deleted.extend(i.path for i in batch)

    def _create_group(self, items: list[PlanItem], done: list[str]) -> list[tuple[str, bool]]:
        """One subscription's creates, in order. When this run created the subscription and one of its
        rules is then refused, the subscription is deleted again, so no half-provisioned subscription (one
        holding only ``$default`` ``1=0``) is left behind; the error lists it under ``rolled_back``."""
        outcomes: list[tuple[str, bool]] = []
        created_here: PlanItem | None = None
        subscription_in_plan = False
        # A filtered subscription's $default 1=0 goes in right after the subscription, before other rules.
        ordered = sorted(items, key=lambda i: (i.kind != "subscription", i.name.lower() != "$default"))
        try:
            for item in ordered:
                if item.kind == "subscription":
                    subscription_in_plan = True
                if item.implicit and subscription_in_plan:
                    outcomes.append((item.path, True))  # ARM created it with the subscription
                    continue
                created = self._create(item, done)
                outcomes.append((item.path, created))
                spec = item.spec
                if created and isinstance(spec, SubscriptionSpec):
                    created_here = item
                    if not spec.has_default_rule:
                        # Desired without a default rule: drop the $Default 1=1 ARM just created, before
                        # the event rules go in, so the subscription is unfiltered as briefly as possible.
                        self._delete(self._implicit_default_rule(spec), done)
        except ProvisioningError as error:
            if created_here is not None:
                self._roll_back(created_here, done, error)
            raise
        return outcomes

    def _roll_back(self, subscription: PlanItem, done: list[str], error: ProvisioningError) -> None:
        prefix = subscription.path + "/"
        try:
            self._delete(
                PlanItem(
                    "delete",
                    "subscription",
                    subscription.path,
                    {},
                    subscription.topic,
                    subscription.name,
                    subscription.name,
                ),
                [],
            )
        except ProvisioningError as failed:
            # The subscription stays, filtered by $default 1=0 (it receives nothing); the next apply
            # plans its missing rules and finishes it.
            error.message += f" (rolling back {subscription.path} failed too: {failed.message})"
            return
        for path in list(done):
            if path == subscription.path or path.startswith(prefix):
                done.remove(path)
        for path in list(error.done):
            if path == subscription.path or path.startswith(prefix):
                error.done.remove(path)
        error.rolled_back.append(subscription.path)

    @staticmethod
    def _implicit_default_rule(spec: SubscriptionSpec) -> PlanItem:
        name = DEFAULT_RULE_NAME
        path = rule_path(spec.topic, spec.name, name)
        return PlanItem("delete", "rule", path, {}, spec.topic, spec.name, name, None, True)

    def _create(self, item: PlanItem, done: list[str]) -> bool:
        """Create one entity; False when it already existed (a concurrent run)."""
        d = self.defaults
        if item.kind == "queue":
            q = self.queue_defaults
            wanted = item.spec if isinstance(item.spec, QueueSpec) else QueueSpec(item.name)
            call: Callable[[], Any] = lambda: self.management.queues.create_or_update(  # noqa: E731
                *self._scope,
                item.name,
                SBQueue(
                    properties=SBQueueProperties(
                        lock_duration=wanted.lock_duration or q.lock_duration,
                        max_delivery_count=wanted.max_delivery_count or q.max_delivery_count,
                        max_size_in_megabytes=q.max_size_in_megabytes,
                        enable_partitioning=q.enable_partitioning,
                        enable_batched_operations=q.enable_batched_operations,
                        requires_session=wanted.requires_session,
                        requires_duplicate_detection=wanted.requires_duplicate_detection,
                        duplicate_detection_history_time_window=wanted.duplicate_detection_window,
                    )
                ),
            )
        elif item.kind == "topic":
            topic_window = item.duplicate_detection_window
            call = lambda: self.management.topics.create_or_update(  # noqa: E731
                *self._scope,
                item.name,
                SBTopic(
                    properties=SBTopicProperties(
                        max_size_in_megabytes=d.max_size_in_megabytes,
                        enable_partitioning=d.enable_partitioning,
                        enable_batched_operations=d.enable_batched_operations,
                        requires_duplicate_detection=topic_window is not None,
                        duplicate_detection_history_time_window=topic_window,
                    )
                ),
            )
        elif item.kind == "subscription":
            spec = item.spec
            assert isinstance(spec, SubscriptionSpec)
            call = lambda: self.management.subscriptions.create_or_update(  # noqa: E731
                *self._scope,
                spec.topic,
                spec.name,
                SBSubscription(
                    properties=SBSubscriptionProperties(
                        lock_duration=d.lock_duration,
                        max_delivery_count=d.max_delivery_count,
                        forward_to=spec.forward_to,
                        user_metadata=spec.user_metadata,
                        dead_lettering_on_filter_evaluation_exceptions=d.dead_lettering_on_filter_evaluation_exceptions,
                        enable_batched_operations=d.enable_batched_operations,
                    )
                ),
            )
        else:
            rule = item.spec
            assert isinstance(rule, RuleSpec) and item.topic is not None and item.subscription is not None
            topic, subscription = item.topic, item.subscription
            call = lambda: self.management.rules.create_or_update(  # noqa: E731
                *self._scope, topic, subscription, rule.name, arm_rule(rule.filter)
            )
        try:
            call()
        except HttpResponseError as exc:
            if _status(exc) == 409:
                return False
            raise ProvisioningError(
                "create", item.path, _status(exc), _code(exc), _message(exc), list(done)
            ) from exc
        done.append(item.path)
        return True

    def _rewrite_rule(self, item: PlanItem, done: list[str]) -> None:
        rule = item.spec
        assert isinstance(rule, RuleSpec) and item.topic is not None and item.subscription is not None
        topic, subscription = item.topic, item.subscription
        call = partial(
            self.management.rules.create_or_update,
            *self._scope,
            topic,
            subscription,
            rule.name,
            arm_rule(rule.filter),
        )
        self._step("update", item.path, call, done)

    def _redirect(self, item: PlanItem, done: list[str]) -> None:
        """Point the existing subscription of ``item`` at its spec's ``forwardTo`` (and its ``userMetadata``
        too when that named the old queue, as Busbar writes it); nothing else of it changes."""
        spec = item.spec
        assert isinstance(spec, SubscriptionSpec)
        m = self.management

        def redirect() -> None:
            current = m.subscriptions.get(*self._scope, spec.topic, spec.name)
            if (current.user_metadata or "").lower() == (current.forward_to or "").lower():
                current.user_metadata = spec.user_metadata
            current.forward_to = spec.forward_to
            m.subscriptions.create_or_update(*self._scope, spec.topic, spec.name, current)

        self._step("update", item.path, redirect, done)

    def _delete(self, item: PlanItem, done: list[str]) -> bool:
        m = self.management
        try:
            if item.kind == "rule":
                assert item.topic is not None and item.subscription is not None
                m.rules.delete(*self._scope, item.topic, item.subscription, item.name)
            elif item.kind == "subscription":
                assert item.topic is not None
                m.subscriptions.delete(*self._scope, item.topic, item.name)
            elif item.kind == "topic":
                m.topics.delete(*self._scope, item.name)
            else:
                m.queues.delete(*self._scope, item.name)
        except HttpResponseError as exc:
            if _status(exc) == 404:
                return False
            raise ProvisioningError(
                "delete", item.path, _status(exc), _code(exc), _message(exc), list(done)
            ) from exc
        done.append(item.path)
        return True

    # ------------------------------------------------------------------------------------------ unsubscribe

    def plan_unsubscribe(
        self, options: TopologyOptions, endpoint_queue: str, event_name: str | dict[str, str]
    ) -> Plan:
        """The deletes that unsubscribe ``endpoint_queue`` from ``event_name`` (no calls are made): a
        contract name, or ``{"type": ..., "topic": ..., "routingMode": ...}`` for an explicit topic.

        Topic-per-event, NotMultiplexed route: delete the subscription (on a multiplexed catch-all topic
        this unsubscribes every event on it, as in NServiceBus). Filtered route: delete the event's rule and
        leave the subscription, even when only ``$default`` remains. Migration: an event to migrate loses
        its rule on TopicToSubscribeOn; a migrated one its catch-all subscriptions."""
        validate(options)
        events = parse_subscribed_events([event_name])
        name = subscription_name(options, endpoint_queue)
        items: list[PlanItem] = []

        def delete_rule(topic: str, rule: str) -> None:
            items.append(PlanItem("delete", "rule", rule_path(topic, name, rule), {}, topic, name, rule))

        def delete_subscription(topic: str) -> None:
            items.append(
                PlanItem("delete", "subscription", subscription_path(topic, name), {}, topic, name, name)
            )

        event = events[0].event
        if isinstance(options, MigrationTopologyOptions):
            hierarchy = HierarchyNamespace(options.hierarchy_namespace)
            if event in options.events_to_migrate_map:
                rule = options.subscribed_event_to_rule_name_map.get(event) or event
                delete_rule(hierarchy.apply(options.topic_to_subscribe_on), rule)
            elif event in options.subscribed_event_to_topics_map:
                for entry in options.subscribed_event_to_topics_map[event]:
                    delete_subscription(hierarchy.apply(entry.topic))
            else:
                raise TopologyValidationError([migration_unmapped_message(event, subscribe=True)])
            return Plan(tuple(items))
        for route in resolve_routes(options, events):
            if route.routing_mode is TopicRoutingMode.NotMultiplexed:
                delete_subscription(route.topic)
            else:
                delete_rule(route.topic, rule_name(route.event))
        return Plan(tuple(items))

    def unsubscribe(self, options: TopologyOptions, endpoint_queue: str, event_name: str) -> ApplyResult:
        """:meth:`plan_unsubscribe` applied (404s count as deleted: a concurrent run got there first)."""
        return self.apply(self.plan_unsubscribe(options, endpoint_queue, event_name))

    # ------------------------------------------------------------------------------------------ describe

    def describe(
        self, endpoint_queue: str, options: TopologyOptions | None = None
    ) -> list[ExistingSubscription]:
        """Every subscription in the namespace forwarding to the endpoint's (hierarchy-prefixed) queue, with
        its rules. Lists all topics: cost grows with the namespace."""
        hierarchy = HierarchyNamespace(options.hierarchy_namespace if options else None)
        queue = hierarchy.apply(endpoint_queue).lower()
        found: list[ExistingSubscription] = []
        topics = [t.name for t in self.management.topics.list_by_namespace(*self._scope)]

        def scan(topic: str) -> list[ExistingSubscription]:
            out = []
            for sub in self.management.subscriptions.list_by_topic(*self._scope, topic):
                if (sub.forward_to or "").lower() != queue:
                    continue
                rules = tuple(
                    RuleSpec(r.name, filter_of(r))
                    for r in self.management.rules.list_by_subscriptions(*self._scope, topic, sub.name)
                )
                out.append(ExistingSubscription(topic, sub.name, sub.forward_to, rules))
            return out

        for group in self._parallel(scan, topics):
            found.extend(group)
        return found

    # ------------------------------------------------------------------------------------------ helpers

    def _get(self, call: Callable[[], Any], path: str) -> Any:
        try:
            return call()
        except HttpResponseError as exc:
            if _status(exc) == 404:
                return None
            raise ProvisioningError("get", path, _status(exc), _code(exc), _message(exc), []) from exc

    def _get_queue(self, name: str) -> Any:
        return self._get(lambda: self.management.queues.get(*self._scope, name), name)

    def _get_topic(self, name: str) -> Any:
        return self._get(lambda: self.management.topics.get(*self._scope, name), name)

    def _parallel(self, fn: Callable[[Any], Any], items: Sequence[Any] | Iterable[Any]) -> list[Any]:
        items = list(items)
        if self.concurrency == 1 or len(items) <= 1:
            return [fn(i) for i in items]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(items))) as pool:
            return list(pool.map(fn, items))


def _message(exc: HttpResponseError) -> str:
    error = getattr(exc, "error", None)
    message = getattr(error, "message", None) if error is not None else None
    return str(message or exc.message or exc)


__all__ = [
    "MAX_DELIVERY_COUNT_AZURE",
    "ApplyResult",
    "EntityDefaults",
    "ExistingSubscription",
    "Plan",
    "PlanItem",
    "Provisioner",
    "filter_of",
    "rule_path",
    "subscription_path",
]
