"""Carrying out a plan through ``azure-mgmt-servicebus``: the apply step of read → plan → apply.

:meth:`PlanExecutor.apply` executes the steps of a plan that :mod:`shared.topology.single_delivery` made,
and decides nothing: the creates and deletes, a move's redirects (one ARM update of a subscription's
``forwardTo``; Azure documents the update, ``az servicebus topic subscription update --forward-to``
(learn.microsoft.com enable-auto-forward), and NServiceBus's transport updates ``ForwardTo`` of existing
subscriptions too since Particular/NServiceBus.AzureServiceBus#763; Service Bus moves each message a
subscription auto-forwards from the source to the destination, learn.microsoft.com
service-bus-auto-forwarding, so every event goes to the old queue or the new one, never both), the rewrites
of rules whose condition changed, and a handover's record (:mod:`shared.topology.handover`). ``would-update``
items are reported, not done. A plan holding a ``refused`` item is not applied at all (a guard: the planner
refuses it first).

Order: deletes first, then queues, then topics, then each subscription followed by its rules (a filtered
subscription first gets ``$default`` ``1=0`` in place of the ``$Default`` ``1=1`` ARM gives every new
subscription, then its event rules), then the rewrites, and last a migration's old paths (after the
handover's wait).

Concurrency: two runs may apply the same creates. A create that meets an existing entity (409) or a delete
that meets a missing one (404) counts as done; a repeated PUT of a just-created entity carries the same
definition; the handover record is a read and two idempotent writes. Refusals by the management plane are
raised as :class:`ProvisioningError` (status, code, message of the ARM error; the SDK's
``HttpResponseError`` is its ``__cause__``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import replace
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

from shared.management import ManagementClient
from shared.topology.arm import arm_rule
from shared.topology.desired import RuleSpec, SubscriptionSpec
from shared.topology.errors import ProvisioningError, QueueNeedsRecreatingError
from shared.topology.handover import Handover
from shared.topology.names import DEFAULT_RULE_NAME
from shared.topology.namespace_reading import error_code, error_message, http_status, in_parallel
from shared.topology.plan import ApplyResult, EntityDefaults, Plan, PlanItem, rule_path, subscription_path
from shared.topology.queues import QueueSpec


class PlanExecutor:
    """Executes plans on one namespace (see the module docstring). ``concurrency`` management calls run at
    once (per subscription the calls stay in order). Queues are created with ``queue_defaults``."""

    def __init__(
        self,
        management: ManagementClient,
        defaults: EntityDefaults,
        queue_defaults: EntityDefaults,
        *,
        concurrency: int = 4,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.management = management
        self.defaults = defaults
        self.queue_defaults = queue_defaults
        self.concurrency = max(1, concurrency)
        self.sleep = sleep
        self.scope = management.scope

    def _parallel(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
        return in_parallel(fn, items, self.concurrency)

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
            status, code, message = http_status(exc), error_code(exc), error_message(exc)
            raise ProvisioningError(what, path, status, code, message, list(done)) from exc
        done.append(path)

    def _record_handover(self, topic: str, name: str, handover: Handover, done: list[str]) -> None:
        """Write ``handover`` on an existing subscription (:meth:`record_handover`)."""
        record = partial(self.record_handover, topic, name, handover)
        self._step("update", subscription_path(topic, name), record, done)

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
                *self.scope,
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
                *self.scope,
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
                *self.scope,
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
                *self.scope, topic, subscription, rule.name, arm_rule(rule.filter)
            )
        try:
            call()
        except HttpResponseError as exc:
            if http_status(exc) == 409:
                return False
            raise ProvisioningError(
                "create", item.path, http_status(exc), error_code(exc), error_message(exc), list(done)
            ) from exc
        done.append(item.path)
        return True

    def _rewrite_rule(self, item: PlanItem, done: list[str]) -> None:
        rule = item.spec
        assert isinstance(rule, RuleSpec) and item.topic is not None and item.subscription is not None
        topic, subscription = item.topic, item.subscription
        call = partial(
            self.management.rules.create_or_update,
            *self.scope,
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
            current = m.subscriptions.get(*self.scope, spec.topic, spec.name)
            if (current.user_metadata or "").lower() == (current.forward_to or "").lower():
                current.user_metadata = spec.user_metadata
            current.forward_to = spec.forward_to
            m.subscriptions.create_or_update(*self.scope, spec.topic, spec.name, current)

        self._step("update", item.path, redirect, done)

    def _delete(self, item: PlanItem, done: list[str]) -> bool:
        m = self.management
        try:
            if item.kind == "rule":
                assert item.topic is not None and item.subscription is not None
                m.rules.delete(*self.scope, item.topic, item.subscription, item.name)
            elif item.kind == "subscription":
                assert item.topic is not None
                m.subscriptions.delete(*self.scope, item.topic, item.name)
            elif item.kind == "topic":
                m.topics.delete(*self.scope, item.name)
            else:
                m.queues.delete(*self.scope, item.name)
        except HttpResponseError as exc:
            if http_status(exc) == 404:
                return False
            raise ProvisioningError(
                "delete", item.path, http_status(exc), error_code(exc), error_message(exc), list(done)
            ) from exc
        done.append(item.path)
        return True

    def record_handover(self, topic: str, name: str, handover: Handover) -> bool:
        """Write ``handover`` on the existing subscription ``topic/name`` (the new path is a rule of it),
        keeping the handovers it already records. Two updates: the first counts the new rules' handover
        from its own ``updatedAt``, the second writes that instant out as their cutoff, so no later update
        of the subscription can move it. False when the subscription is gone (nothing of the endpoint's
        left there). A read and two idempotent writes: an interrupted apply repeats it harmlessly."""
        group, namespace = self.scope
        current = self._existing_subscription(topic, name)
        if current is None:
            return False
        taken = {(r.topic.lower(), r.subscription.lower(), r.rule.lower()) for r in handover.retires}
        previous = Handover.parse(current.user_metadata)
        kept = tuple(
            r
            for r in (previous.fixed(current.created_at, current.updated_at).retires if previous else ())
            if (r.topic.lower(), r.subscription.lower(), r.rule.lower()) not in taken
        )
        pending = replace(handover, retires=kept + handover.retires, anchor="updatedAt")
        current.user_metadata = pending.to_metadata()
        updated = self.management.subscriptions.create_or_update(group, namespace, topic, name, current)
        current.user_metadata = pending.fixed(updated.created_at, updated.updated_at).to_metadata()
        self.management.subscriptions.create_or_update(group, namespace, topic, name, current)
        return True

    def _existing_subscription(self, topic: str, name: str) -> Any:
        """Subscription ``topic/name`` as ARM returns it; None when it is gone."""
        try:
            return self.management.subscriptions.get(*self.scope, topic, name)
        except HttpResponseError as exc:
            if http_status(exc) == 404:
                return None
            raise


__all__ = ["PlanExecutor"]
