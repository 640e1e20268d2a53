"""Discover the dead-letter queues to re-drive and where each one's messages go, through the management
plane (``azure-mgmt-servicebus``). An entity's transfer dead-letter queue is re-driven like its dead-letter
queue, to the same target, when the management plane counts messages in it.

* A queue's dead-lettered messages go back to the queue itself.
* A subscription's go to the queue it forwards to (in NServiceBus topology, the subscriber's endpoint
  queue): only that subscriber gets the copy.
* An ordered endpoint's hold queue (``<queue>.held``, :func:`shared.topology.names.held_queue`) holds the
  parked messages of held keys; one that failed while its key was released is dead-lettered there and goes
  back to the endpoint's queue, where it is recognised as its key's blocker.
* A subscription without a forward-to queue (or forwarding to a topic) has **no private target**. Its
  messages are never sent to the topic, which would hand a copy to every subscription (the portal
  explorer's behaviour); the policy's ``no_private_target`` archives them (default) or leaves them.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from shared.management import ManagementClient
from shared.redrive.entities import EntityPlan, EntityRef, Target
from shared.topology.names import held_queue

HELD_SUFFIX = held_queue("")

DEFAULT_MAX_MESSAGE_SIZE_KB = 256  # Standard tier; Premium entities report their own


@dataclass(frozen=True, slots=True)
class Discovery:
    """The dead-letter queues to work on, and configured entity patterns that matched nothing."""

    plans: list[EntityPlan]
    unmatched: list[str]


def target_of_queue(queue: Any) -> Target:
    """The re-drive target described by an ARM ``SBQueue``."""
    window = queue.duplicate_detection_history_time_window
    size_kb = queue.max_message_size_in_kilobytes or DEFAULT_MAX_MESSAGE_SIZE_KB
    return Target(
        name=queue.name,
        requires_duplicate_detection=bool(queue.requires_duplicate_detection),
        duplicate_detection_window=window if isinstance(window, timedelta) else timedelta(minutes=10),
        max_message_size_bytes=int(size_kb) * 1024,
        requires_session=bool(queue.requires_session),
    )


def _count(entity: Any, attribute: str, key: str) -> int | None:
    details = getattr(entity, "count_details", None)
    if details is None:
        return None
    value = getattr(details, attribute, None)
    if value is None and isinstance(details, dict):
        value = details.get(key, details.get(attribute))
    return int(value) if isinstance(value, int) else None


def dead_letter_count(entity: Any) -> int | None:
    """The dead-letter message count ARM reports for a queue or subscription (``None``: not reported)."""
    return _count(entity, "dead_letter_message_count", "deadLetterMessageCount")


def transfer_dead_letter_count(entity: Any) -> int | None:
    """The transfer dead-letter message count ARM reports (``None``: not reported)."""
    return _count(entity, "transfer_dead_letter_message_count", "transferDeadLetterMessageCount")


def _with_transfer(plan: EntityPlan, entity: Any) -> list[EntityPlan]:
    """``plan``, and a plan for the entity's transfer dead-letter queue when ARM counts messages there
    (only then: opening a receiver on every entity's empty sub-queue would double a run's cost)."""
    count = transfer_dead_letter_count(entity)
    if not count:
        return [plan]
    return [plan, replace(plan, dead_letter_count=count, transfer=True)]


def plan_entities(queues: Sequence[Any], subscriptions: Sequence[tuple[str, Any]]) -> list[EntityPlan]:
    """Plans for every queue and ``(topic, subscription)``, from ARM models. Pure."""
    names = {q.name.lower() for q in queues}
    targets = {
        q.name.lower(): replace(target_of_queue(q), holds_keys=held_queue(q.name.lower()) in names)
        for q in queues
    }
    plans = []
    for queue in queues:
        name = queue.name.lower()
        endpoint_queue = name.removesuffix(HELD_SUFFIX) if name.endswith(HELD_SUFFIX) else None
        own = targets.get(endpoint_queue, targets[name]) if endpoint_queue else targets[name]
        plan = EntityPlan(EntityRef.queue(queue.name), own, None, dead_letter_count(queue))
        plans += _with_transfer(plan, queue)
    for topic, subscription in subscriptions:
        source = EntityRef.subscription(topic, subscription.name)
        forward_to = subscription.forward_to
        target = targets.get(forward_to.lower()) if forward_to else None
        reason = None
        if target is None:
            reason = (
                f"forwards to {forward_to}, which is not a queue" if forward_to else "no forward-to queue"
            )
        plans += _with_transfer(
            EntityPlan(source, target, reason, dead_letter_count(subscription)), subscription
        )
    return plans


def select(plans: Sequence[EntityPlan], patterns: Sequence[str]) -> Discovery:
    """The plans whose entity path matches one of ``patterns`` (all when empty) and whose dead-letter
    queue is not known to be empty."""
    chosen = []
    matched: set[str] = set()
    for plan in plans:
        path = plan.source.path.lower()
        hits = [p for p in patterns if fnmatch.fnmatchcase(path, p.lower())]
        matched.update(hits)
        if (patterns and not hits) or plan.dead_letter_count == 0:
            continue
        chosen.append(plan)
    return Discovery(chosen, [p for p in patterns if p not in matched])


def discover(management: ManagementClient, patterns: Sequence[str] = ()) -> Discovery:
    """Every queue and subscription dead-letter queue of the namespace to work on."""
    queues = list(management.queues.list_by_namespace(*management.scope))
    subscriptions = [
        (topic.name, subscription)
        for topic in management.topics.list_by_namespace(*management.scope)
        for subscription in management.subscriptions.list_by_topic(*management.scope, topic.name)
    ]
    return select(plan_entities(queues, subscriptions), patterns)
