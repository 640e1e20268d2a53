"""The entities a re-drive reads from and sends to. Pure types."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

SUBSCRIPTIONS_SEGMENT = "/Subscriptions/"


@dataclass(frozen=True, slots=True)
class EntityRef:
    """A queue or a topic subscription whose dead-letter queue is re-driven."""

    kind: Literal["queue", "subscription"]
    name: str  # the queue, or the subscription's name
    topic: str | None = None

    @classmethod
    def queue(cls, name: str) -> EntityRef:
        """The queue ``name``."""
        return cls("queue", name)

    @classmethod
    def subscription(cls, topic: str, name: str) -> EntityRef:
        """Subscription ``name`` of ``topic``."""
        return cls("subscription", name, topic)

    @classmethod
    def parse(cls, path: str) -> EntityRef:
        """``orders`` (a queue) or ``events/Subscriptions/billing`` (a subscription)."""
        if SUBSCRIPTIONS_SEGMENT.lower() in path.lower():
            at = path.lower().index(SUBSCRIPTIONS_SEGMENT.lower())
            topic, name = path[:at], path[at + len(SUBSCRIPTIONS_SEGMENT) :]
            if not topic or not name or "/" in name:
                raise ValueError(f"not an entity path: {path!r}")
            return cls.subscription(topic, name)
        if not path or "/" in path:
            raise ValueError(f"not an entity path: {path!r}")
        return cls.queue(path)

    @property
    def path(self) -> str:
        """The entity path: ``orders`` or ``events/Subscriptions/billing``."""
        if self.kind == "queue":
            return self.name
        return f"{self.topic}{SUBSCRIPTIONS_SEGMENT}{self.name}"


@dataclass(frozen=True, slots=True)
class Target:
    """The queue a re-driven copy is sent to, with what the guards need to know about it."""

    name: str
    requires_duplicate_detection: bool = False
    duplicate_detection_window: timedelta = timedelta(minutes=10)
    max_message_size_bytes: int = 256 * 1024
    requires_session: bool = False
    holds_keys: bool = False
    """An ordered endpoint's queue (it has a hold queue): archiving a blocker there resumes its key."""


@dataclass(frozen=True, slots=True)
class EntityPlan:
    """One dead-letter queue to work on: its entity, its private target (or why it has none) and how many
    messages the management plane counted in it (``None``: unknown). ``transfer`` plans read the entity's
    transfer dead-letter queue (``$Transfer/$DeadLetterQueue``: failed send-via transfers) instead."""

    source: EntityRef
    target: Target | None
    no_target_reason: str | None = None
    dead_letter_count: int | None = None
    transfer: bool = False
