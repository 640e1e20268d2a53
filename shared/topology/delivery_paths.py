"""Delivery paths: the subscriptions that carry an event into an endpoint's queue, and the rule that an
endpoint receives each event through one of them only.

``E`` is a concrete event (see :mod:`shared.topology.event_carriers`: an interface subscription is checked
per implementer, so an interface mapped to its implementers' topics is one path for each of them). A
**path** of ``E`` into queue ``Q`` is a subscription forwarding to ``Q`` that takes ``E``, on a topic not
known to carry other events only:

- one of its rules serves ``E``: a correlation filter on ``E``'s stamp (or an interface's stamp ``E``
  carries), or ``[NServiceBus.EnclosedMessageTypes] LIKE`` matching ``E``'s enclosed types (the path is
  ``topic/subscription/rule``);
- or it takes everything (``1=1``) on a topic ``E`` travels on: the topic ``E`` is published to, the topic
  named after ``E`` or mapped to it (where the fallback router bridges it), the fallback topic, the topics
  ``E`` itself is subscribed on (the path is ``topic/subscription``): see
  :func:`~shared.topology.event_carriers.carrier_topics`.

Two paths of one event into one queue deliver it twice: directly on two topics, or once on the fallback
topic and once more through the router's bridge to the dedicated topic. :func:`duplicate_paths` finds the
events a plan would leave with two paths; :func:`migration_deletes` removes an event's old paths when the
plan is a declared migration. Pure functions: the existing subscriptions are read by the caller
(:meth:`shared.topology.Provisioner.describe`). SQL filters other than the ``LIKE`` shape never count as a
path (the planner does not guess what they take), except the rules of routing by content
(:mod:`shared.topology.content_filters`): an event rule with a condition added, and a rule named after the
event on a topic carrying it (a filtered NotMultiplexed subscription); each is a path of its event.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from shared.topology.desired import DesiredState
from shared.topology.errors import TopologyValidationError
from shared.topology.event_carriers import CheckedEvent, carrier_topics, checked_events
from shared.topology.names import HierarchyNamespace, rule_name
from shared.topology.options import TopologyOptions
from shared.topology.plan import PlanItem, rule_path, subscription_path
from shared.topology.rule_filters import Rule, RuleFilter, takes_everything, takes_type


class Forwarding(Protocol):
    """A subscription as found in the namespace or as desired (both shapes carry these)."""

    @property
    def topic(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def forward_to(self) -> str | None: ...
    @property
    def rules(self) -> tuple[Rule, ...]: ...


@dataclass(frozen=True, slots=True)
class DeliveryPath:
    """One way ``event`` reaches the queue: a subscription, and the rule that takes it (``None``: the
    subscription takes everything on its topic)."""

    event: str
    topic: str
    subscription: str
    rule: str | None = None

    @property
    def label(self) -> str:
        """``topic/subscription[/rule]``, as the refusal names it."""
        return f"{self.topic}/{self.subscription}" + (f"/{self.rule}" if self.rule else "")

    @property
    def subscription_key(self) -> tuple[str, str]:
        return (self.topic.lower(), self.subscription.lower())

    @property
    def key(self) -> tuple[str, str, str]:
        return (*self.subscription_key, (self.rule or "").lower())


@dataclass(frozen=True, slots=True)
class DuplicateDelivery:
    """An event that would reach the queue through more than one path after a plan."""

    event: str
    queue: str
    kept: tuple[DeliveryPath, ...]
    added: tuple[DeliveryPath, ...]

    @property
    def message(self) -> str:
        paths = [f"{p.label} (existing)" for p in self.kept] + [f"{p.label} (added)" for p in self.added]
        return f"{self.queue} would receive {self.event} {len(paths)} times, through {' and '.join(paths)}"

    def to_dict(self) -> dict[str, object]:
        return {
            "event": self.event,
            "queue": self.queue,
            "existing": [p.label for p in self.kept],
            "added": [p.label for p in self.added],
        }


class DuplicateDeliveryError(TopologyValidationError):
    """A plan would make an endpoint receive an event twice; ``duplicates`` names the paths."""

    def __init__(self, duplicates: Sequence[DuplicateDelivery], hint: str = "") -> None:
        self.duplicates = list(duplicates)
        self.hint = hint
        super().__init__([d.message + (f"; {hint}" if hint else "") for d in self.duplicates])


def rule_takes(rule: RuleFilter, enclosed: Sequence[str]) -> bool:
    """Whether a (non catch-all) rule takes a message enclosing ``enclosed``: certainly, or, for an event
    rule with a content condition added (:meth:`~shared.topology.content_filters.ContentFilter.combined`),
    whenever the message's content matches (:func:`~shared.topology.rule_filters.takes_type`, the router's
    reading of the rule). Either way it is a path: two of them could deliver the event twice."""
    return takes_type(rule, enclosed)


def paths_of(
    subscriptions: Iterable[Forwarding], queue: str, event: CheckedEvent, carriers: frozenset[str]
) -> list[DeliveryPath]:
    """Every path of ``event`` into ``queue`` among ``subscriptions``."""
    paths: list[DeliveryPath] = []
    for sub in subscriptions:
        if (sub.forward_to or "").lower() != queue.lower() or sub.topic.lower() in event.elsewhere:
            continue  # not into the queue, or on a topic that carries other events only
        if any(takes_everything(r.filter) for r in sub.rules) and sub.topic.lower() in carriers:
            paths.append(DeliveryPath(event.event, sub.topic, sub.name))
            continue
        # A NotMultiplexed subscription routing by content holds a rule named after the event it filters
        # (or an interface the event implements): on a topic carrying the event, that rule is a path.
        named = {rule_name(n).lower() for n in event.enclosed} if sub.topic.lower() in carriers else set()
        paths.extend(
            DeliveryPath(event.event, sub.topic, sub.name, r.name)
            for r in sub.rules
            if not takes_everything(r.filter)
            and r.filter.kind != "false"
            and (rule_takes(r.filter, event.enclosed) or r.name.lower() in named)
        )
    return paths


def _deleted(path: DeliveryPath, deletes: Iterable[PlanItem]) -> bool:
    for item in deletes:
        if item.topic is None:
            continue
        if item.kind == "subscription" and (item.topic.lower(), item.name.lower()) == path.subscription_key:
            return True
        if (
            item.kind == "rule"
            and item.subscription is not None
            and (item.topic.lower(), item.subscription.lower(), item.name.lower()) == path.key
        ):
            return True
    return False


def duplicate_paths(
    options: TopologyOptions,
    queue: str,
    events: Iterable[CheckedEvent],
    existing: Sequence[Forwarding],
    desired: DesiredState,
    deletes: Sequence[PlanItem] = (),
) -> list[DuplicateDelivery]:
    """The events that, once the plan (``desired`` created, ``deletes`` removed) is applied, would reach
    ``queue`` through two or more paths, at least one of them added by the plan. Paths that were doubled
    before and that the plan does not touch are not its doing and are not reported."""
    found: list[DuplicateDelivery] = []
    for event in events:
        carriers = carrier_topics(options, event)
        before = paths_of(existing, queue, event, carriers)
        known = {p.key for p in before}
        kept = [p for p in before if not _deleted(p, deletes)]
        wanted = paths_of(desired.subscriptions, queue, event, carriers)
        added = [p for p in wanted if p.key not in known]
        end = {p.key for p in kept} | {p.key for p in wanted}
        if added and len(end) > 1:
            found.append(DuplicateDelivery(event.event, queue, tuple(kept), tuple(added)))
    return found


def migration_deletes(
    options: TopologyOptions,
    queue: str,
    events: Iterable[CheckedEvent],
    existing: Sequence[Forwarding],
    desired: DesiredState,
    *,
    strict: bool = True,
) -> list[PlanItem]:
    """The deletes of a declared migration: for each event the desired state delivers, every other existing
    path into ``queue`` (its rule, or its catch-all subscription). They are marked ``after_creates``, so
    apply removes the old path only once the new one is in place. Moving an event off a catch-all
    subscription of the fallback topic is refused (``strict``) or left out: that subscription carries every
    other event too."""
    fallback = options.fallback_topic
    hierarchy = HierarchyNamespace(options.hierarchy_namespace)
    fallback_topic = (
        hierarchy.apply(fallback.topic_name).lower() if fallback and fallback.topic_name else None
    )
    items: dict[str, PlanItem] = {}
    errors: list[str] = []
    for event in events:
        carriers = carrier_topics(options, event)
        wanted = paths_of(desired.subscriptions, queue, event, carriers)
        if not wanted:
            continue  # nothing to migrate to: the old path stays
        keep = {p.key for p in wanted}
        details = {"migration": f"old path of {event.event}", "migratedTo": [p.label for p in wanted]}
        for path in paths_of(existing, queue, event, carriers):
            if path.key in keep:
                continue
            if path.rule is not None:
                where = rule_path(path.topic, path.subscription, path.rule)
                items.setdefault(
                    where.lower(),
                    PlanItem(
                        "delete", "rule", where, details, path.topic, path.subscription, path.rule,
                        after_creates=True,
                    ),
                )  # fmt: skip
            elif path.topic.lower() == fallback_topic:
                if not strict:
                    continue
                errors.append(
                    f"cannot migrate {event.event} off {path.label}: it takes every event on the fallback "
                    "topic; unsubscribe it explicitly"
                )
            else:
                where = subscription_path(path.topic, path.subscription)
                items.setdefault(
                    where.lower(),
                    PlanItem(
                        "delete", "subscription", where, details, path.topic, path.subscription,
                        path.subscription, after_creates=True,
                    ),
                )  # fmt: skip
    if errors:
        raise TopologyValidationError(errors)
    return list(items.values())


__all__ = [
    "CheckedEvent",
    "DeliveryPath",
    "DuplicateDelivery",
    "DuplicateDeliveryError",
    "carrier_topics",
    "checked_events",
    "duplicate_paths",
    "migration_deletes",
    "paths_of",
    "rule_takes",
]
