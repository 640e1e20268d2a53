"""The management-plane steps of a handover that ``apply`` takes besides its creates and deletes (see
:mod:`shared.topology.handover`): before them, the endpoint's handover queue and the stamp on the old
subscriptions' rules; after the creates, the stamp on the new path's; after the deletes, when the old rules
were gone, and the stamps off again.

Each step is one idempotent call (or a read and a write), so running ``apply`` again after an interruption
repeats it harmlessly. Errors are the SDK's ``HttpResponseError``: the provisioner reports them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from azure.mgmt.servicebus.models import Action, SBQueue, SBQueueProperties

from shared.management import ManagementClient
from shared.topology.arm import filter_of
from shared.topology.handover import (
    DUPLICATE_WINDOW,
    Handover,
    handover_queue,
    stamp_action,
    unstamp_action,
)
from shared.topology.plan import rule_path


def create_handover_queue(management: ManagementClient, handover: Handover) -> str:
    """Create (or keep) the endpoint's handover queue: duplicate detection over :data:`DUPLICATE_WINDOW`,
    forwarding what it lets through to the endpoint's queue. Its path."""
    name = handover_queue(handover.endpoint)
    management.queues.create_or_update(
        *management.scope,
        name,
        SBQueue(
            properties=SBQueueProperties(
                requires_duplicate_detection=True,
                duplicate_detection_history_time_window=DUPLICATE_WINDOW,
                forward_to=handover.endpoint,
            )
        ),
    )
    return name


def stamp_subscription(management: ManagementClient, handover: Handover, topic: str, name: str) -> list[str]:
    """Give every rule of subscription ``topic/name`` (but a ``1=0`` one) the action that stamps its copies
    for the endpoint's handover queue, one update per rule, the filters unchanged. The rules' paths; none
    when the subscription is gone."""
    return _restamp(management, topic, name, lambda action: stamp_action(handover.endpoint, action))


def unstamp_subscription(
    management: ManagementClient, handover: Handover, topic: str, name: str
) -> list[str]:
    """Take the stamp of :func:`stamp_subscription` off the rules of ``topic/name`` (what is left of their
    own actions stays)."""
    return _restamp(management, topic, name, lambda action: unstamp_action(handover.endpoint, action))


def _restamp(
    management: ManagementClient, topic: str, name: str, action_of: Callable[[str | None], str | None]
) -> list[str]:
    group, namespace = management.scope
    try:
        rules: list[Any] = list(management.rules.list_by_subscriptions(group, namespace, topic, name))
    except Exception as exc:  # a 404: the subscription is gone, nothing to stamp
        if getattr(exc, "status_code", None) == 404:
            return []
        raise
    paths = []
    for rule in rules:
        if filter_of(rule).kind == "false":
            continue
        existing = rule.action.sql_expression if rule.action is not None else None
        wanted = action_of(existing)
        if wanted == existing:
            continue
        rule.action = Action(sql_expression=wanted) if wanted else None
        management.rules.create_or_update(group, namespace, topic, name, rule.name, rule)
        paths.append(rule_path(topic, name, rule.name))
    return paths


def _subscription(management: ManagementClient, topic: str, name: str) -> Any:
    """Subscription ``topic/name`` as ARM returns it; None when it is gone."""
    try:
        return management.subscriptions.get(*management.scope, topic, name)
    except Exception as exc:
        if getattr(exc, "status_code", None) == 404:
            return None
        raise


def record_handover(management: ManagementClient, topic: str, name: str, handover: Handover) -> bool:
    """Write ``handover`` on the existing subscription ``topic/name`` (the new path is a rule of it),
    keeping the handovers it already records. Two updates: the first counts the new rules' handover from
    its own ``updatedAt``, the second writes that instant out as their cutoff, so no later update of the
    subscription can move it. False when the subscription is gone (nothing of the endpoint's left there)."""
    group, namespace = management.scope
    current = _subscription(management, topic, name)
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
    updated = management.subscriptions.create_or_update(group, namespace, topic, name, current)
    current.user_metadata = pending.fixed(updated.created_at, updated.updated_at).to_metadata()
    management.subscriptions.create_or_update(group, namespace, topic, name, current)
    return True


def record_retired(management: ManagementClient, topic: str, name: str) -> bool:
    """Write on subscription ``topic/name`` that its handover's rules are gone, at the instant of that write
    on the management plane's clock: one update to get the instant (its ``updatedAt``, with every cutoff
    written out first so the update cannot move one), a second to write it. False when the subscription
    records no handover (or is gone)."""
    group, namespace = management.scope
    current = _subscription(management, topic, name)
    if current is None:
        return False
    handover = Handover.parse(current.user_metadata)
    if handover is None:
        return False
    fixed = handover.fixed(current.created_at, current.updated_at)
    current.user_metadata = replace(fixed, retired_at=None).to_metadata()
    updated = management.subscriptions.create_or_update(group, namespace, topic, name, current)
    current.user_metadata = replace(fixed, retired_at=updated.updated_at).to_metadata()
    management.subscriptions.create_or_update(group, namespace, topic, name, current)
    return True


__all__ = [
    "create_handover_queue",
    "record_handover",
    "record_retired",
    "stamp_subscription",
    "unstamp_subscription",
]
