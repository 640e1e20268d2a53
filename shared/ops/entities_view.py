"""The console's entities view: every queue, topic and subscription with its message counts, placed in
its section (:mod:`shared.ops.entity_sections`). Pure: ARM models in, the JSON body out.

The body lists the app's endpoints first (``endpoints``: each with its input queue and the subscriptions
forwarding to it, in the app's order), then Busbar's infrastructure and the foreign entities apart
(``infrastructure``, ``foreign``). ``queues``, ``topics`` and ``subscriptions`` list every entity by kind
as before, each row naming its section and role, for scripts that read the namespace whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shared.ops.entity_sections import (
    AppEntities,
    Placement,
    Section,
    place_queue,
    place_subscription,
    place_topic,
)
from shared.redrive.entities import EntityRef

_COUNTS = (
    ("active", "active_message_count"),
    ("deadLetter", "dead_letter_message_count"),
    ("scheduled", "scheduled_message_count"),
    ("transfer", "transfer_message_count"),
    ("transferDeadLetter", "transfer_dead_letter_message_count"),
)
_KIND_ORDER = {"queue": 0, "subscription": 1, "topic": 2}


def counts(entity: Any) -> dict[str, int]:
    """An ARM queue's, topic's or subscription's message counts by kind (0 where ARM reports none)."""
    details = getattr(entity, "count_details", None)
    return {name: int(getattr(details, attr, 0) or 0) for name, attr in _COUNTS}


def _row(kind: str, path: str, placement: Placement, entity: Any, **extra: Any) -> dict[str, Any]:
    row = {"kind": kind, "path": path, **extra, "section": placement.section.value, "role": placement.role}
    if placement.endpoint is not None:
        row["appEndpoint"] = placement.endpoint
    row["counts"] = counts(entity)
    return row


def entities_view(
    queues: Sequence[Any], topics: Sequence[tuple[Any, Sequence[Any]]], app: AppEntities
) -> dict[str, Any]:
    """The view of ``queues`` and ``topics`` (each with its subscriptions), ARM models, for ``app``."""
    names = frozenset(q.name.lower() for q in queues)
    queue_rows = [
        _row("queue", q.name, place_queue(q.name, app, names), q, endpoint=q.name)
        for q in sorted(queues, key=lambda q: q.name.lower())
    ]
    topic_rows, subscription_rows = [], []
    for topic, subscriptions in sorted(topics, key=lambda t: t[0].name.lower()):
        topic_rows.append(_row("topic", topic.name, place_topic(topic.name, app), topic))
        for sub in sorted(subscriptions, key=lambda s: s.name.lower()):
            path = EntityRef.subscription(topic.name, sub.name).path
            placement = place_subscription(topic.name, sub.name, sub.forward_to, app)
            # "endpoint": the failure groups' endpoint, the queue it feeds (its own path when none).
            extra = {"forwardTo": sub.forward_to, "endpoint": sub.forward_to or path}
            subscription_rows.append(_row("subscription", path, placement, sub, **extra))
    every = queue_rows + subscription_rows + topic_rows

    endpoints = []
    for queue, name in app.endpoints.items():
        own = [r for r in every if r["section"] == Section.APP and r.get("appEndpoint") == name]
        own.sort(key=lambda r: (_KIND_ORDER[r["kind"]], r["path"].lower()))
        endpoints.append({"endpoint": name, "queue": queue, "entities": own})
    per_endpoint: dict[str, int] = {}
    for row in queue_rows + subscription_rows:
        per_endpoint[row["endpoint"]] = per_endpoint.get(row["endpoint"], 0) + row["counts"]["deadLetter"]
    app_queues = [q for q in per_endpoint if app.endpoint_of_queue(q) is not None]
    ordered_keys = sorted(app_queues, key=lambda q: list(app.endpoints).index(_spelled(app, q)))
    ordered_keys += sorted(k for k in per_endpoint if k not in app_queues)
    return {
        "endpoints": endpoints,
        "infrastructure": [r for r in every if r["section"] == Section.INFRASTRUCTURE],
        "foreign": [r for r in every if r["section"] == Section.FOREIGN],
        "queues": queue_rows,
        "topics": topic_rows,
        "subscriptions": subscription_rows,
        # The app's endpoints first (in its order), then the rest by name.
        "deadLettersPerEndpoint": {k: per_endpoint[k] for k in ordered_keys},
        "notes": list(app.notes),
    }


def _spelled(app: AppEntities, queue: str) -> str:
    """``queue`` as :attr:`AppEntities.endpoints` spells it."""
    return next(path for path in app.endpoints if path.lower() == queue.lower())


__all__ = ["counts", "entities_view"]
