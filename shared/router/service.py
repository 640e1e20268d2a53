"""The fallback router's I/O: the namespace snapshot it decides on, the bridge, and unrouted records.

:func:`shared.router.decision.decide` is pure; this module feeds it a :class:`RoutingSnapshot` read through
``azure-mgmt-servicebus`` (cached for ``BUSBAR_ROUTER_SNAPSHOT_SECONDS``, counted from the start of the
read; re-read before an event is declared unrouted, so a subscription created a moment ago is never
missed), re-publishes bridged copies through Busbar's own AMQP sender (:mod:`shared.amqp.sender`,
every application property with its AMQP type; with the SessionId of
:func:`~shared.router.session.bridge_session`: the one the event arrived with, else its contract's ordering
key), and records unrouted events: logged, counted, and archived as Parquet (:mod:`shared.archive`) with
decision ``NoMatchingSubscription``.

**Migrations and a cached snapshot.** Whether an endpoint got an event through a fallback rule was decided
by the broker when the event was enqueued; the router decides later, on a snapshot up to the interval old.
A migration that deletes the rule makes that snapshot wrong for events enqueued after the delete (the
router would withhold their copy: a loss). Re-reading whenever the snapshot is older than the event would
fix it, but in a steady flow nearly every event is enqueued after the last read, so the router would list
the namespace once per event (ARM throttles reads, and a throttled router fails the message). Instead the
migration hands over (:mod:`shared.topology.handover`): the new subscription records the rules it retires,
the old ones stay for the interval (plus 2 s) after it is created, and the snapshot carries each retired
rule with its cutoff (:class:`~shared.router.decision.Retirement`). A snapshot read before the handover
existed is therefore used only for events the old rule did deliver, and one read after decides each event
by its ``EnqueuedTimeUtc`` against the cutoff (:func:`~shared.router.decision.as_enqueued`).

Why not a sequence-number boundary (a marker scheduled and cancelled on the fallback topic just before the
delete)? The number ``schedule_messages`` returns is the topic's, but the router reads copies numbered by
its subscription: "for topics and subscriptions, the sequence number for every subscription starts at 1"
(``BrokeredMessage.SequenceNumber`` reference), and the emulator's subscriptions number their copies
themselves too (``emulator/broker/routing.py``, ``_enqueue``); a scheduled message is renumbered when it
activates, and a partitioned topic numbers per partition. The two numbers cannot be compared, so the
boundary is a time on the service's clocks, with :data:`~shared.topology.handover.CLOCK_SKEW_SECONDS`
around it: a message enqueued that close to the cutoff is bridged although the old rule may have delivered
it too, and the endpoint, which handles a MessageId once (:mod:`shared.idempotency`), completes the twin
without handling it again.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from shared.amqp.kept_senders import KeptSenders
from shared.app_settings import AppSetting
from shared.archive.rows import archive_row
from shared.archive.writer import ArchiveWriter
from shared.contracts import ContractRegistry
from shared.envelope import PartitionKeyPolicy
from shared.management import ManagementClient
from shared.messages import IncomingMessage
from shared.router.decision import (
    BRIDGED_FROM,
    NO_MATCHING_SUBSCRIPTION,
    Retirement,
    RouterDecision,
    RoutingSnapshot,
    SubscriptionRules,
    decide,
)
from shared.router.session import SessionSource, bridge_session
from shared.telemetry.conventions import DESTINATION_NAME
from shared.telemetry.operations import linked, record_archived, trace_stamped

if TYPE_CHECKING:
    from shared.amqp.connection import Namespace
    from shared.amqp.outgoing import OutgoingMessage
from shared.topology.arm import rule_of
from shared.topology.handover import SNAPSHOT_SECONDS, Handover, skew_allowance
from shared.topology.handover import snapshot_seconds as snapshot_seconds  # the app reads it from here
from shared.topology.names import HierarchyNamespace
from shared.topology.options import TopologyOptions
from shared.topology.rule_filters import Rule

log = logging.getLogger(__name__)

ROUTER_SUBSCRIPTION = AppSetting(
    "BUSBAR_ROUTER_SUBSCRIPTION",
    "Name of the fallback router's catch-all subscription on the fallback topic (BUSBAR_FALLBACK_TOPIC). "
    "The router trigger binds to it, so it must be set explicitly.",
    default="busbar-router",
)

SETTINGS: tuple[AppSetting, ...] = (ROUTER_SUBSCRIPTION, SNAPSHOT_SECONDS)

FRESH_READ_INTERVAL = 2.0
"""Seconds: the snapshot is re-read before an event is declared unrouted only if it is older than this."""

UNROUTED = Counter[str]()
"""Unrouted events per contract since the process started (``None`` contract counted as ``<untyped>``)."""
_unrouted_lock = threading.Lock()


class UnroutedRecorder(Protocol):
    def record(
        self, message: IncomingMessage, decision: RouterDecision, topic: str, subscription: str
    ) -> None:
        """Keep a trace of an event no subscription matched."""


def load_snapshot(
    management: ManagementClient, fallback_topic: str, router_subscription: str
) -> RoutingSnapshot:
    """Read the fallback topic's subscriptions (rules, forwarding targets), every topic name, and the
    subscriptions of each other topic that forwards to an entity a fallback subscription forwards to too
    (where a bridged copy would be a second delivery). One list call per topic, plus the rules of those
    topics' subscriptions: the cost grows with the namespace."""
    group, namespace = management.scope
    topics = frozenset(t.name for t in management.topics.list_by_namespace(group, namespace))
    fallback = list(management.subscriptions.list_by_topic(group, namespace, fallback_topic))
    subscriptions = _subscriptions_of(management, fallback_topic, fallback)
    served = {
        s.forward_to.lower()
        for s in subscriptions
        if s.forward_to and s.name.lower() != router_subscription.lower()
    }
    shared_subscribers: dict[str, tuple[SubscriptionRules, ...]] = {}
    retirements: list[Retirement] = []
    for topic in topics:
        if topic.lower() == fallback_topic.lower() or not served:
            continue
        listed = list(management.subscriptions.list_by_topic(group, namespace, topic))
        if any((s.forward_to or "").lower() in served for s in listed):
            shared_subscribers[topic.lower()] = _subscriptions_of(management, topic, listed)
            retirements.extend(r for s in listed for r in _retirements(s, fallback_topic))
    return RoutingSnapshot(
        fallback_topic, router_subscription, subscriptions, topics, shared_subscribers, tuple(retirements)
    )


def with_topic(management: ManagementClient, snapshot: RoutingSnapshot, topic: str) -> RoutingSnapshot:
    """``snapshot`` with the subscriptions of ``topic`` (a bridge target it did not list, as none of its
    subscribers is served on the fallback topic) and the handovers they record. A migration that deleted an
    endpoint's whole fallback subscription left the endpoint served nowhere on the fallback topic, so only
    here does the router learn that the old subscription delivered what was enqueued before its cutoff."""
    listed = list(management.subscriptions.list_by_topic(*management.scope, topic))
    subscriptions = _subscriptions_of(management, topic, listed)
    retirements = tuple(r for s in listed for r in _retirements(s, snapshot.fallback_topic))
    return replace(
        snapshot,
        topic_subscriptions={**snapshot.topic_subscriptions, topic.lower(): subscriptions},
        retirements=snapshot.retirements + retirements,
    )


def _subscriptions_of(
    management: ManagementClient, topic: str, listed: list[Any]
) -> tuple[SubscriptionRules, ...]:
    """``topic``'s subscriptions as listed, each with its rules (one list call per subscription)."""
    group, namespace = management.scope
    return tuple(
        SubscriptionRules(
            s.name,
            tuple(
                rule_of(r) for r in management.rules.list_by_subscriptions(group, namespace, topic, s.name)
            ),
            s.forward_to or None,
        )
        for s in listed
    )


def _retirements(subscription: Any, fallback_topic: str) -> list[Retirement]:
    """The fallback rules a migration's new subscription took over, with their cutoff (its creation time
    on the management plane's clock plus the handover); nothing when it records no handover."""
    handover = Handover.parse(subscription.user_metadata)
    created, updated = _utc(subscription.created_at), _utc(subscription.updated_at)
    if handover is None or created is None:
        return []
    return [
        Retirement(
            r.subscription,
            Rule(r.rule, r.filter),
            handover.cutoff_of(r, created, updated),
            handover.endpoint,
            skew_allowance(handover.after_seconds),
        )
        for r in handover.retires
        if r.topic.lower() == fallback_topic.lower()
    ]


def _utc(moment: Any) -> datetime | None:
    if not isinstance(moment, datetime):
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def dedicated_topic_resolver(options: TopologyOptions) -> Callable[[str], str | None]:
    """A contract's dedicated topic: its mapped publish topic, else the topic named after it."""
    hierarchy = HierarchyNamespace(options.hierarchy_namespace)

    def resolve(contract: str) -> str | None:
        mapped = options.published_event_to_topics_map.get(contract)
        return hierarchy.apply(mapped.topic if mapped is not None else contract)

    return resolve


def bridged_copy(message: IncomingMessage, fallback_topic: str, destination: str = "") -> OutgoingMessage:
    """An exact copy of ``message`` (ids, session, properties, body) marked as bridged from the fallback.
    Its MessageId is the original's, so an endpoint that also got the original (through a fallback rule a
    migration is retiring) recognises the copy and does not handle it again. With tracing on, the copy
    carries a ``bridge`` span's context, a new trace linked to the original's (``destination``: where the
    copy goes, for that span)."""
    from shared.amqp.outgoing import outgoing_message  # proton loads its C library only when it is needed

    properties = {**message.application_properties, BRIDGED_FROM: fallback_topic}
    # The copy goes where the original went: a PartitionKey that conflicts with the SessionId yields to it.
    copy = outgoing_message(
        replace(message, application_properties=properties), PartitionKeyPolicy.SESSION_WINS
    )
    with linked("bridge", message.application_properties, destination=destination):
        return replace(copy, application_properties=trace_stamped(copy.application_properties))


class ArchivingRecorder:
    """Logs, counts and archives unrouted events (decision ``NoMatchingSubscription``)."""

    def __init__(self, writer: ArchiveWriter | None) -> None:
        self.writer = writer

    def record(
        self, message: IncomingMessage, decision: RouterDecision, topic: str, subscription: str
    ) -> None:
        with _unrouted_lock:
            UNROUTED[decision.contract or "<untyped>"] += 1
        log.warning(
            "unrouted event %s (message %s) on %s: %s",
            decision.contract,
            message.message_id,
            topic,
            decision.description,
        )
        if self.writer is None:
            return
        now = datetime.now(UTC)
        # Archived as if dead-lettered with reason NoMatchingSubscription (how the console groups it).
        unrouted = replace(
            message,
            dead_letter_reason=NO_MATCHING_SUBSCRIPTION,
            dead_letter_description=decision.description[:4096],
            dead_letter_source=None,
        )
        row = archive_row(
            unrouted,
            run_id=f"router-{uuid.uuid4().hex}",
            archived_at=now,
            decision=NO_MATCHING_SUBSCRIPTION,
            decision_detail=decision.description,
            source_entity=topic,
            source_kind="topic",
            source_topic=topic,
            source_subscription=subscription,
            target_entity=None,
            contract_type=decision.contract,
            redrive_count=0,
        )
        self.writer.write(row.run_id, [row])
        record_archived(None, NO_MATCHING_SUBSCRIPTION, attributes={DESTINATION_NAME: topic})


class FallbackRouter:
    """Routes events read from the fallback topic: bridge, record unrouted, or nothing to do."""

    def __init__(
        self,
        *,
        management: ManagementClient,
        namespace: Namespace,
        options: TopologyOptions,
        contracts: ContractRegistry,
        fallback_topic: str,
        router_subscription: str,
        recorder: UnroutedRecorder,
        snapshot_seconds: float = 30.0,
    ) -> None:
        self.management = management
        self.namespace = namespace
        self.contracts = contracts
        self.fallback_topic = fallback_topic
        self.router_subscription = router_subscription
        self.recorder = recorder
        self.snapshot_seconds = snapshot_seconds
        self.senders = KeptSenders(namespace)  # one per destination, kept for the router's life
        self._dedicated = dedicated_topic_resolver(options)
        self._snapshot: RoutingSnapshot | None = None
        self._loaded_at = 0.0
        self._lock = threading.Lock()

    def _current(self, *, fresh: bool) -> RoutingSnapshot:
        with self._lock:
            age = time.monotonic() - self._loaded_at
            # A fresh read is wanted before declaring an event unrouted, but a burst of unrouted events
            # must not turn into a burst of management-plane listings (ARM throttles reads).
            limit = min(self.snapshot_seconds, FRESH_READ_INTERVAL) if fresh else self.snapshot_seconds
            if self._snapshot is None or age > limit:
                # Its age counts from the start of the read: what it shows may be that old (a migration's
                # handover lasts the interval from then, see shared.topology.handover).
                started = time.monotonic()
                self._snapshot = load_snapshot(self.management, self.fallback_topic, self.router_subscription)
                self._loaded_at = started
            return self._snapshot

    def _with_target(self, snapshot: RoutingSnapshot, message: IncomingMessage) -> RoutingSnapshot:
        """``snapshot``, with the subscriptions of ``message``'s bridge target when it did not list them
        (read once per snapshot: kept in it)."""
        contract = message.contract_type
        target = self._dedicated(contract) if contract is not None else None
        if (
            target is None
            or target.lower() == snapshot.fallback_topic.lower()
            or target.lower() in snapshot.topic_subscriptions
            or not snapshot.has_topic(target)
        ):
            return snapshot
        widened = with_topic(self.management, snapshot, target)
        with self._lock:
            if self._snapshot is snapshot:
                self._snapshot = widened
        return widened

    def route(self, message: IncomingMessage) -> RouterDecision:
        """Decide and act; raises (so the broker redelivers) when the bridge or the archive fails."""
        decision = self._decide(message)
        if decision.bridge_to is not None or decision.bridge_to_entities:
            self._bridge(message, decision)
        if decision.unrouted:
            self.recorder.record(message, decision, self.fallback_topic, self.router_subscription)
        return decision

    def _bridge(self, message: IncomingMessage, decision: RouterDecision) -> None:
        """Send ``message``'s bridged copies where ``decision`` says, on the kept senders (each copy starts
        its own ``bridge`` span, linked to the original's trace, naming its destination)."""
        message = self._with_session(message, decision)
        if decision.bridge_to is not None:
            copy = bridged_copy(message, self.fallback_topic, decision.bridge_to)
            self.senders.send(decision.bridge_to, copy)
            log.info(
                "bridged %s (message %s) to %s", decision.contract, message.message_id, decision.bridge_to
            )
        for entity in decision.bridge_to_entities:
            # Subscribers of the dedicated topic that did not get the event on the fallback topic, straight
            # to where their subscriptions forward (the others must not receive it twice).
            self.senders.send(entity, bridged_copy(message, self.fallback_topic, entity))
            log.info("bridged %s (message %s) to %s", decision.contract, message.message_id, entity)

    def _decide(self, message: IncomingMessage) -> RouterDecision:
        """The decision on the cached snapshot, or, when that says unrouted, on a fresh one: declaring an
        event lost is a strong claim, checked against the namespace as it is now. Decided once per snapshot
        (a cached snapshot still fresh enough is not decided on twice)."""
        snapshot = self._with_target(self._current(fresh=False), message)
        decision = decide(message, snapshot, self._dedicated)
        if not decision.unrouted:
            return decision
        fresh = self._with_target(self._current(fresh=True), message)
        return decision if fresh is snapshot else decide(message, fresh, self._dedicated)

    def close(self) -> None:
        """Close the bridge's senders (the management client stays open: it belongs to the caller)."""
        self.senders.close()

    def _with_session(self, message: IncomingMessage, decision: RouterDecision) -> IncomingMessage:
        """``message`` with the SessionId its bridged copies carry, logging where it comes from."""
        session = bridge_session(message, self.contracts)
        if session.problem:
            log.warning(
                "bridging %s (message %s) as it arrived, without a SessionId: %s",
                decision.contract,
                message.message_id,
                session.problem,
            )
        elif session.source is SessionSource.ORDERING_KEY:
            log.info(
                "bridging %s (message %s) with SessionId %r, its ordering key (it arrived without one)",
                decision.contract,
                message.message_id,
                session.session_id,
            )
        return replace(message, session_id=session.session_id)
