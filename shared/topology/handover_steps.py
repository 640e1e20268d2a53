"""The management-plane step of a handover that ``apply`` takes besides its creates and deletes (see
:mod:`shared.topology.handover`): writing the record on an existing subscription when the new path is a rule
of it (a created subscription carries the record from its create).

The step is a read and two idempotent writes, so running ``apply`` again after an interruption repeats it
harmlessly. Errors are the SDK's ``HttpResponseError``: the provisioner reports them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from shared.management import ManagementClient
from shared.topology.handover import Handover


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


__all__ = ["record_handover"]
