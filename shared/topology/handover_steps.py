"""The management-plane steps of a handover that ``apply`` takes besides its creates and deletes (see
:mod:`shared.topology.handover`): before them, the endpoint's handover queue and the retired rules' stamp;
after them, when the retired rules were gone.

Each step is one idempotent call (or a read and a write), so running ``apply`` again after an interruption
repeats it harmlessly. Errors are the SDK's ``HttpResponseError``: the provisioner reports them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from azure.mgmt.servicebus.models import Action, SBQueue, SBQueueProperties

from shared.management import ManagementClient
from shared.topology.handover import DUPLICATE_WINDOW, Handover, RetiredRule, handover_queue, stamp_action
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


def stamp_retired_rule(management: ManagementClient, handover: Handover, retired: RetiredRule) -> str | None:
    """Give ``retired`` the action that stamps its copies for the endpoint's handover queue (same filter,
    one update of the rule, so every message is delivered once, stamped or not). Its path; None when the
    rule is gone already."""
    group, namespace = management.scope
    try:
        rule: Any = management.rules.get(group, namespace, retired.topic, retired.subscription, retired.rule)
    except Exception as exc:  # a 404: a concurrent run deleted it, nothing to stamp
        if getattr(exc, "status_code", None) == 404:
            return None
        raise
    existing = rule.action.sql_expression if rule.action is not None else None
    wanted = stamp_action(handover.endpoint, existing)
    if wanted != existing:
        rule.action = Action(sql_expression=wanted)
        management.rules.create_or_update(
            group, namespace, retired.topic, retired.subscription, retired.rule, rule
        )
    return rule_path(retired.topic, retired.subscription, retired.rule)


def record_retired(management: ManagementClient, topic: str, name: str) -> bool:
    """Write on subscription ``topic/name`` that its handover's rules are gone, at the instant of that write
    on the management plane's clock: one update to get the instant (its ``updatedAt``, with every cutoff
    written out first so the update cannot move one), a second to write it. False when the subscription
    records no handover (or is gone)."""
    group, namespace = management.scope
    try:
        current: Any = management.subscriptions.get(group, namespace, topic, name)
    except Exception as exc:
        if getattr(exc, "status_code", None) == 404:
            return False
        raise
    handover = Handover.parse(current.user_metadata)
    if handover is None:
        return False
    fixed = handover.fixed(current.created_at, current.updated_at)
    current.user_metadata = replace(fixed, retired_at=None).to_metadata()
    updated = management.subscriptions.create_or_update(group, namespace, topic, name, current)
    current.user_metadata = replace(fixed, retired_at=updated.updated_at).to_metadata()
    management.subscriptions.create_or_update(group, namespace, topic, name, current)
    return True


__all__ = ["create_handover_queue", "record_retired", "stamp_retired_rule"]
