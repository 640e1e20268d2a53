"""A move to a new queue must take everything the old queue receives.

A declared move (``DesiredState.moved_from``, ``--move-from``, the ``PUT``'s ``moveFrom``) redirects each of
the endpoint's subscriptions to the new queue in place, with all of its rules (:mod:`shared.topology.
provisioner`). Two things would then go wrong silently, so :func:`check_complete_move` refuses them before
anything changes:

* a subscription still forwarding to the old queue that the move does not redirect: its events keep going to
  a queue whose consumer is about to be retired and which the guide then deletes;
* a redirected subscription holding a rule the request does not list: that rule's events would reach the
  new queue unasked, never checked for an ordering key (:mod:`shared.topology.ordered_subscriptions`), and a
  session-enabled queue dead-letters those without one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from shared.topology.desired import DesiredState, SubscriptionSpec
from shared.topology.errors import TopologyValidationError
from shared.topology.plan import ExistingSubscription, Plan


class IncompleteMoveError(TopologyValidationError):
    """A declared move would leave part of what the old queue receives behind (one error per path)."""


class SecondSubscriptionError(TopologyValidationError):
    """A plan would create a subscription on a topic where another one forwards to the same queue already
    (one error per subscription)."""


def move_leftovers(
    plan: Plan, desired: DesiredState, old_queue: str, found: Sequence[ExistingSubscription]
) -> list[str]:
    """What a move off ``old_queue`` would leave behind: each subscription in ``found`` (those forwarding to
    ``old_queue``) that ``plan`` does not redirect, and each rule of a redirected one ``desired`` does not
    want. Empty: the move takes everything."""
    redirected = {
        (item.topic.lower(), item.name.lower())
        for item in plan.items
        if item.action == "update" and item.kind == "subscription" and item.topic is not None
    }
    wanted: dict[tuple[str, str], SubscriptionSpec] = {
        (s.topic.lower(), s.name.lower()): s for s in desired.subscriptions
    }
    problems: list[str] = []
    for existing in found:
        key = (existing.topic.lower(), existing.name.lower())
        spec = wanted.get(key)
        if key not in redirected or spec is None:
            problems.append(
                f"{existing.topic}/{existing.name} forwards to {old_queue}, and the move does not take it: "
                "list its events too (or unsubscribe it first)"
            )
            continue
        keep = {r.name.lower() for r in spec.rules}
        for rule in existing.rules:
            if rule.name.lower() not in keep:
                problems.append(
                    f"{existing.topic}/{existing.name}/{rule.name} would be redirected to "
                    f"{spec.forward_to} with its subscription, and the move does not list its event: list "
                    "it too (or unsubscribe it first)"
                )
    return problems


def check_complete_move(
    plan: Plan, desired: DesiredState, describe: Callable[[str], Sequence[ExistingSubscription]]
) -> None:
    """Raise :class:`IncompleteMoveError` naming everything a declared move would leave behind;
    ``describe(queue)``: the subscriptions forwarding to ``queue`` (``Provisioner.describe``)."""
    problems: list[str] = []
    for old_queue in desired.moved_from:
        problems.extend(move_leftovers(plan, desired, old_queue, describe(old_queue)))
    if problems:
        raise IncompleteMoveError(
            [f"the move off {', '.join(desired.moved_from)} is incomplete: {p}" for p in problems]
        )


def check_no_second_subscription(plan: Plan, subscriptions_of: Callable[[str], Iterable[Any]]) -> None:
    """Raise :class:`SecondSubscriptionError` when ``plan`` creates a subscription on an existing topic where
    another subscription (ARM ``SBSubscription``, from ``subscriptions_of(topic)``) already forwards to the
    same queue: every event on the topic would reach the queue twice. After a move to a new queue that is
    what forgetting its ``QueueNameToSubscriptionNameMap`` entry does: the redirected subscriptions keep
    the old name, and the new queue's own name would get a second set. One list call per such topic."""
    created_topics = {i.name.lower() for i in plan.items if i.action == "create" and i.kind == "topic"}
    problems: list[str] = []
    listed: dict[str, list[Any]] = {}
    for item in plan.items:
        spec = item.spec
        if item.action != "create" or item.kind != "subscription" or not isinstance(spec, SubscriptionSpec):
            continue
        if spec.topic.lower() in created_topics:
            continue
        found = listed.setdefault(spec.topic.lower(), list(subscriptions_of(spec.topic)))
        for other in found:
            if (other.forward_to or "").lower() == spec.forward_to.lower() and other.name != spec.name:
                problems.append(
                    f"{spec.topic}/{spec.name} would be created beside {spec.topic}/{other.name}, which "
                    f"forwards to {spec.forward_to} already: every event on {spec.topic} would reach it "
                    f"twice. After a move to a new queue, keep QueueNameToSubscriptionNameMap mapping "
                    f"the queue to {other.name} in the topology options. Nothing was provisioned."
                )
    if problems:
        raise SecondSubscriptionError(problems)


__all__ = [
    "IncompleteMoveError",
    "SecondSubscriptionError",
    "check_complete_move",
    "check_no_second_subscription",
    "move_leftovers",
]
