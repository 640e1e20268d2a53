"""Plans as data: what the provisioner would do per entity, what it did, what it found, and the entity
defaults it creates with. JSON-serialisable through ``to_dict``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from shared.topology.desired import RuleSpec, SubscriptionSpec
from shared.topology.duplicate_detection import DEFAULT_WINDOW
from shared.topology.handover import Handover
from shared.topology.queues import QueueSpec

Action = Literal["create", "unchanged", "update", "delete", "would-update", "refused"]
"""``update``: an existing subscription apply redirects to the endpoint's queue in place (its ``forwardTo``,
in a declared move off ``DesiredState.moved_from``); ``would-update``: a difference reported and left alone.
``refused``: an existing entity the plan cannot use and must not change (a queue whose immutable
properties differ from the desired ones); a plan holding one is not applied at all."""
Kind = Literal["queue", "topic", "subscription", "rule"]


@dataclass(frozen=True, slots=True)
class EntityDefaults:
    """Properties given to entities Busbar creates (NServiceBus: lock 5 min, batched operations, size
    ``EntityMaximumSize`` 5 GB, filter-evaluation dead-lettering off on subscriptions)."""

    lock_duration: timedelta = timedelta(minutes=5)
    max_delivery_count: int = 10
    max_size_in_megabytes: int = 5120
    enable_partitioning: bool = False
    enable_batched_operations: bool = True
    dead_lettering_on_filter_evaluation_exceptions: bool = False
    duplicate_detection_window: timedelta = DEFAULT_WINDOW
    """Every topic and endpoint queue Busbar creates requires duplicate detection over this window
    (``BUSBAR_DUPLICATE_DETECTION_WINDOW``, :mod:`shared.topology.duplicate_detection`)."""


@dataclass(frozen=True, slots=True)
class PlanItem:
    """One entity and what would happen to it."""

    action: Action
    kind: Kind
    path: str
    details: dict[str, Any] = field(default_factory=dict)
    topic: str | None = None
    subscription: str | None = None
    name: str = ""
    spec: SubscriptionSpec | RuleSpec | QueueSpec | None = None
    implicit: bool = False  # the $Default 1=1 rule ARM creates with every subscription
    after_creates: bool = False
    duplicate_detection_window: timedelta | None = None
    """A topic to create requiring duplicate detection over this window (``None``: a plain topic)."""
    """A delete that waits for the plan's creates: a migration's old path goes once the new one is there."""

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "kind": self.kind, "path": self.path, "details": self.details}


@dataclass(frozen=True, slots=True)
class Plan:
    """What applying would do, in order. JSON-serialisable through :meth:`to_dict`. ``near_quota``: the
    topics this plan adds to whose usage would reach 90% of a per-topic quota."""

    items: tuple[PlanItem, ...]
    near_quota: tuple[str, ...] = ()
    handover_seconds: float = 0.0
    handover: Handover | None = None
    """The record of a migration off the fallback topic, for :attr:`handover_updates`."""
    handover_updates: tuple[tuple[str, str], ...] = ()
    """Existing subscriptions (topic, name) apply writes :attr:`handover` on: the migration moves an event
    onto a rule of a subscription the endpoint already has, so no create carries the record."""
    """Seconds apply keeps a migration's old paths after the creates (:mod:`shared.topology.handover`)."""

    def of(self, action: Action) -> list[PlanItem]:
        return [i for i in self.items if i.action == action]

    @property
    def has_changes(self) -> bool:
        return any(i.action in ("create", "update", "delete") for i in self.items)

    @property
    def refusals(self) -> list[str]:
        """Why this plan must not be applied: one reason per ``refused`` item (empty: it may be)."""
        return [str(i.details.get("reason", i.path)) for i in self.items if i.action == "refused"]

    def summary(self) -> dict[str, int]:
        """Items per action; ``update`` and ``refused`` only appear when there is one."""
        out = {"create": 0, "unchanged": 0, "delete": 0, "would-update": 0}
        for item in self.items:
            out[item.action] = out.get(item.action, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"summary": self.summary(), "items": [i.to_dict() for i in self.items]}
        if self.handover_seconds:
            out["handoverSeconds"] = self.handover_seconds
        if self.handover_updates:
            out["handoverRecordedOn"] = [subscription_path(t, n) for t, n in self.handover_updates]
        return out


@dataclass(slots=True)
class ApplyResult:
    """Paths created, found unchanged (including creates another run got to first), redirected
    (``updated``), deleted (including already gone), and left alone because they differ
    (``would_update``)."""

    created: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    would_update: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, list[str]]:
        return {
            "created": self.created,
            "unchanged": self.unchanged,
            "updated": self.updated,
            "deleted": self.deleted,
            "would_update": self.would_update,
        }


@dataclass(frozen=True, slots=True)
class ExistingSubscription:
    """A subscription found in the namespace (see :meth:`Provisioner.describe`)."""

    topic: str
    name: str
    forward_to: str | None
    rules: tuple[RuleSpec, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "name": self.name,
            "forwardTo": self.forward_to,
            "rules": [r.to_dict() for r in self.rules],
        }


def subscription_path(topic: str, name: str) -> str:
    return f"{topic}/Subscriptions/{name}"


def rule_path(topic: str, subscription: str, name: str) -> str:
    return f"{subscription_path(topic, subscription)}/Rules/{name}"
