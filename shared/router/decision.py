"""The fallback-topic router's decision: bridge to a dedicated topic, record as unrouted, or leave alone.

The router function reads the fallback topic through its own catch-all subscription, so it sees every event
published there. For each one it decides, purely:

(a) **Bridge.** When the event's contract has a dedicated topic (mapped in the topology options, or a topic
    named after the contract) that exists in the namespace, re-publish an exact copy there (same MessageId,
    SessionId, properties and body) marked with :data:`BRIDGED_FROM`. This is the bridge while publishers
    migrate to topic-per-event. It never loops: a copy that already carries the marker is never bridged
    again, and the fallback topic itself is never a bridge target. It never delivers twice: subscribers of
    the dedicated topic whose queue a fallback subscription already forwarded the event to get no copy
    (the others get theirs straight in their queues; see :func:`_bridge`).
(b) **Unrouted.** Service Bus silently drops a message no subscription matches. The router evaluates the
    rules of every *other* subscription on the fallback topic against the event; when none matches and the
    event was not bridged either, the event would be lost without a trace, so the router records it with
    reason :data:`NO_MATCHING_SUBSCRIPTION`.

Rule evaluation covers what Busbar's topology creates: correlation filters (every system property and
application property), ``1=1`` / ``1=0``, and ``[NServiceBus.EnclosedMessageTypes] LIKE '...'``. Any other
SQL expression is :attr:`Match.UNKNOWN`, which counts as a match: the router never archives an event as
unrouted unless it is certain.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from shared.messages import IncomingMessage
from shared.topology.handover import CLOCK_SKEW_SECONDS
from shared.topology.rule_filters import (
    SYSTEM_FIELDS,
    Known,
    Rule,
    correlation,
    evaluate,
    sql_filter,
)
from shared.topology.rule_filters import Match as Match  # the router's tests and callers read it here

BRIDGED_FROM = "busbar.bridged-from"
"""Application property on a bridged copy: the fallback topic it was copied from."""

NO_MATCHING_SUBSCRIPTION = "NoMatchingSubscription"
"""The archive reason of an event no subscription on the fallback topic matched."""


class CorrelationRule(Rule):
    """A correlation rule built from its fields: every set field and property must equal the message's."""

    __slots__ = ()

    def __init__(
        self,
        name: str,
        correlation_id: str | None = None,
        message_id: str | None = None,
        to: str | None = None,
        reply_to: str | None = None,
        subject: str | None = None,
        session_id: str | None = None,
        reply_to_session_id: str | None = None,
        content_type: str | None = None,
        properties: Mapping[str, Any] | None = None,
    ) -> None:
        values = (correlation_id, message_id, to, reply_to, subject, session_id, reply_to_session_id)
        fields = zip(SYSTEM_FIELDS, (*values, content_type), strict=True)
        system = {k: v for k, v in fields if v is not None}
        super().__init__(name, correlation(properties or {}, system))


class SqlRule(Rule):
    """A SQL rule built from its expression text."""

    __slots__ = ()

    def __init__(self, name: str, expression: str) -> None:
        super().__init__(name, sql_filter(expression))


@dataclass(frozen=True, slots=True)
class SubscriptionRules:
    """One subscription and its rules (OR-ed by the broker); ``forward_to`` is the entity it forwards to
    (the endpoint's queue), ``None`` when a receiver reads the subscription itself."""

    name: str
    rules: tuple[Rule, ...]
    forward_to: str | None = None


@dataclass(frozen=True, slots=True)
class RoutingSnapshot:
    """What the router knows about the namespace: the fallback topic's subscriptions, existing topics, and
    the subscriptions of every other topic that has a subscriber the fallback topic forwards to as well
    (``topic_subscriptions``, keyed by lower-cased topic: only there can a bridge deliver twice)."""

    fallback_topic: str
    router_subscription: str
    subscriptions: tuple[SubscriptionRules, ...]
    existing_topics: frozenset[str]
    topic_subscriptions: Mapping[str, tuple[SubscriptionRules, ...]] = field(default_factory=dict)
    retirements: tuple[Retirement, ...] = ()
    """Fallback rules a declared migration retires (recorded on the new path's subscription)."""

    def has_topic(self, name: str) -> bool:
        """Whether topic ``name`` exists (Service Bus names are case-insensitive)."""
        return name.lower() in _lowered(self.existing_topics)


@functools.lru_cache(maxsize=8)
def _lowered(names: frozenset[str]) -> frozenset[str]:
    # Asked for every routed message, of the same snapshot's names until the next snapshot.
    return frozenset(n.lower() for n in names)


@dataclass(frozen=True, slots=True)
class Retirement:
    """A rule of fallback subscription ``subscription`` that delivers messages enqueued before ``cutoff``
    and none after, whether or not a snapshot still shows it (see :mod:`shared.topology.handover`)."""

    subscription: str
    rule: Rule
    cutoff: datetime
    forward_to: str | None = None
    skew_seconds: float = CLOCK_SKEW_SECONDS
    """The handover's clock skew allowance (:func:`~shared.topology.handover.skew_allowance`)."""


@dataclass(frozen=True, slots=True)
class RouterDecision:
    """What to do with one event read from the fallback topic."""

    contract: str | None
    bridge_to: str | None = None
    unrouted: bool = False
    matched_subscriptions: tuple[str, ...] = ()
    note: str = ""
    bridge_to_entities: tuple[str, ...] = ()
    """Set instead of ``bridge_to`` when some subscribers of the dedicated topic already received the event
    on the fallback topic: the copy goes straight to the others' forwarding targets (their queues)."""

    @property
    def description(self) -> str:
        """A one-line account of the decision, for logs and the archive."""
        return self.note


def rule_matches(rule: Rule, message: IncomingMessage) -> Match:
    """Whether ``rule`` matches ``message``, as far as the router can tell (the one reading of a rule,
    :func:`~shared.topology.rule_filters.evaluate`)."""
    fields = {name: getattr(message, name) for name in SYSTEM_FIELDS}
    return evaluate(rule.filter, Known(message.application_properties, fields))


def subscription_matches(subscription: SubscriptionRules, message: IncomingMessage) -> Match:
    """OR over the subscription's rules; a subscription without rules receives nothing."""
    results = [rule_matches(rule, message) for rule in subscription.rules]
    if Match.YES in results:
        return Match.YES
    return Match.UNKNOWN if Match.UNKNOWN in results else Match.NO


def decide(
    message: IncomingMessage,
    snapshot: RoutingSnapshot,
    dedicated_topic: Callable[[str], str | None],
) -> RouterDecision:
    """Decide what the router does with ``message``; ``dedicated_topic`` maps a contract to its own topic."""
    contract = message.contract_type
    bridged_from = message.property_text(BRIDGED_FROM)
    if bridged_from is not None:
        return RouterDecision(contract, note=f"already bridged from {bridged_from!r}; not routed again")
    snapshot = as_enqueued(snapshot, message)

    matched: list[str] = []
    uncertain: list[str] = []
    for subscription in snapshot.subscriptions:
        if subscription.name.lower() == snapshot.router_subscription.lower():
            continue
        result = subscription_matches(subscription, message)
        if result is Match.YES:
            matched.append(subscription.name)
        elif result is Match.UNKNOWN:
            uncertain.append(subscription.name)

    bridge_to: str | None = None
    bridge_to_entities: tuple[str, ...] = ()
    notes: list[str] = []
    if contract is not None:
        target = dedicated_topic(contract)
        if (
            target is not None
            and target.lower() != snapshot.fallback_topic.lower()
            and snapshot.has_topic(target)
        ):
            bridge_to, bridge_to_entities, note = _bridge(message, snapshot, target, matched)
            notes.extend([note] if note else [])

    if bridge_to is not None:
        notes.append(f"bridged to dedicated topic {bridge_to!r}")
    if bridge_to_entities:
        notes.append(f"bridged straight to {list(bridge_to_entities)} (their subscriptions on {target!r})")
    if matched:
        notes.append(f"matched subscriptions {matched}")
    if uncertain:
        notes.append(f"assumed matched by {uncertain} (filters the router cannot evaluate)")
    unrouted = bridge_to is None and not bridge_to_entities and not matched and not uncertain
    if unrouted:
        others = [
            s.name for s in snapshot.subscriptions if s.name.lower() != snapshot.router_subscription.lower()
        ]
        notes.append(
            f"no subscription on topic {snapshot.fallback_topic!r} matches "
            f"{contract or 'an untyped message'} "
            f"(enclosed types {message.enclosed_types}; subscriptions checked: {others}) and it has no "
            "dedicated topic: Service Bus would drop it silently"
        )
    return RouterDecision(
        contract,
        bridge_to,
        unrouted,
        tuple(matched + uncertain),
        "; ".join(notes),
        bridge_to_entities=bridge_to_entities,
    )


def as_enqueued(snapshot: RoutingSnapshot, message: IncomingMessage) -> RoutingSnapshot:
    """The fallback subscriptions as the broker saw them when ``message`` was enqueued, as far as retired
    rules go: a retired rule is there for a message enqueued before its cutoff (less the clock skew
    allowance), even once it is deleted, and gone for any other message, even while it still shows.

    A message without an enqueued time counts as late: the rule is left out and the router bridges (a
    possible duplicate, never a loss)."""
    if not snapshot.retirements:
        return snapshot
    enqueued = message.enqueued_time
    subscriptions = list(snapshot.subscriptions)
    # In cutoff order: a rule recorded twice (an interrupted migration run again) was there until the later.
    for retired in sorted(snapshot.retirements, key=lambda r: r.cutoff):
        skew = timedelta(seconds=retired.skew_seconds)
        delivered = enqueued is not None and _aware(enqueued) < retired.cutoff - skew
        found = False
        for index, subscription in enumerate(subscriptions):
            if subscription.name.lower() != retired.subscription.lower():
                continue
            found = True
            kept = tuple(r for r in subscription.rules if r.name.lower() != retired.rule.name.lower())
            rules = (*kept, retired.rule) if delivered else kept
            subscriptions[index] = replace(subscription, rules=rules)
        if delivered and not found:  # the migration deleted the whole subscription
            subscriptions.append(SubscriptionRules(retired.subscription, (retired.rule,), retired.forward_to))
    return replace(snapshot, subscriptions=tuple(subscriptions))


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _bridge(
    message: IncomingMessage, snapshot: RoutingSnapshot, target: str, matched: list[str]
) -> tuple[str | None, tuple[str, ...], str]:
    """Where the bridged copy goes: the dedicated topic, unless some of its subscribers already received
    the event on the fallback topic (a subscription there forwarding to the same entity matched it).

    Only certain matches count as received: when in doubt the copy is sent (a duplicate), never withheld
    (a loss). Every subscriber already served: no copy. Some: the copy goes straight to the others'
    forwarding targets, which is where their subscriptions would have forwarded it; when one of them has
    no forwarding target, or a filter the router cannot evaluate (a content filter, which only the broker
    may apply), it can only be reached through the topic, and the note names the duplicate."""
    by_name = {s.name.lower(): s for s in snapshot.subscriptions}
    served = {
        (by_name[name.lower()].forward_to or "").lower()
        for name in matched
        if by_name[name.lower()].forward_to
    }
    receivers = [
        s
        for s in snapshot.topic_subscriptions.get(target.lower(), ())
        if subscription_matches(s, message) is not Match.NO
    ]
    already = [s for s in receivers if s.forward_to and s.forward_to.lower() in served]
    if not already:
        return target, (), ""
    names = sorted({s.forward_to or "" for s in already})
    others = [s for s in receivers if s not in already]
    if not others:
        return (
            None,
            (),
            f"not bridged to {target!r}: its subscribers {names} received it on the fallback topic",
        )
    # A subscriber whose filter the router cannot evaluate (routing by content: ``amount >= 1000``) can only
    # be reached through the topic, where the broker applies its filter: a copy put straight into its
    # queue would skip it.
    uncertain = [s for s in others if subscription_matches(s, message) is Match.UNKNOWN]
    if all(s.forward_to for s in others) and not uncertain:
        entities = tuple(dict.fromkeys(s.forward_to or "" for s in others))
        return None, entities, f"{names} received it on the fallback topic"
    why = "whose filter the router cannot evaluate" if uncertain else "without forwarding"
    return (target, (), f"{names} receive it twice: a subscriber of {target!r} {why} needs the topic")
