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

from collections.abc import Callable, Sequence

from shared.topology.desired import DesiredState, SubscriptionSpec
from shared.topology.errors import TopologyValidationError
from shared.topology.plan import ExistingSubscription, Plan


class IncompleteMoveError(TopologyValidationError):
    """A declared move would leave part of what the old queue receives behind (one error per path)."""


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


__all__ = ["IncompleteMoveError", "check_complete_move", "move_leftovers"]
