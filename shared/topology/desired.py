"""Desired state as data: from an endpoint's subscribed events, the exact entities NServiceBus would
provision (``TopicPerEventTopologySubscriptionManager`` / ``MigrationTopologySubscriptionManager`` /
``MigrationTopologyCreator``): topics, the endpoint's input queue, subscriptions forwarding to it, their
``$Default``/``$default`` rules and one rule per event with its name and filter.

Nothing here talks to Service Bus; :mod:`shared.topology.provisioner` reconciles a :class:`DesiredState`
against a namespace.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from shared.topology.content_filters import ContentFilter
from shared.topology.duplicate_detection import DEFAULT_WINDOW, iso_window
from shared.topology.errors import IncompatibleRoutingModesError, TopologyValidationError
from shared.topology.names import (
    DEFAULT_RULE_NAME,
    FALSE_DEFAULT_RULE_NAME,
    HierarchyNamespace,
    invalid,
    rule_name,
)
from shared.topology.options import (
    MigrationTopologyOptions,
    SubscriptionEntry,
    TopicRoutingMode,
    TopologyOptions,
    parse_routing_mode,
)
from shared.topology.queues import QueueSpec, endpoint_queues, merge_queue_specs
from shared.topology.routing import SubscribeRoute, migration_unmapped_message, subscribe_routes

# Rule filters were defined here: they stay importable from here.
from shared.topology.rule_filters import FALSE_FILTER as FALSE_FILTER
from shared.topology.rule_filters import TRUE_FILTER as TRUE_FILTER
from shared.topology.rule_filters import FilterKind as FilterKind
from shared.topology.rule_filters import Rule
from shared.topology.rule_filters import RuleFilter as RuleFilter
from shared.topology.rule_filters import correlation_filter as correlation_filter
from shared.topology.rule_filters import sql_filter as sql_filter
from shared.topology.rule_filters import sql_like_filter as sql_like_filter
from shared.topology.validation import names_error, validation_errors

FORWARD_SUBSCRIPTION_PREFIX = "forwardTo-"

# ------------------------------------------------------------------------------------------ requests


@dataclass(frozen=True, slots=True)
class SubscribedEvent:
    """One event an endpoint subscribes to: a contract name, optionally on an explicit topic (like
    ``SubscribeTo<T>(topic)``) with an explicit routing mode, and optionally only when its content matches
    ``filter`` (:mod:`shared.topology.content_filters`)."""

    event: str
    topic: str | None = None
    routing_mode: TopicRoutingMode | None = None
    filter: ContentFilter | None = None

    @classmethod
    def parse(cls, item: object) -> SubscribedEvent:
        """From the HTTP/CLI shape: ``"Shipping.OrderAccepted"`` or
        ``{"type": "...", "topic": "...", "routingMode": "CorrelationFilter", "filter": ...}`` (a filter is a
        SQL string, ``"amount >= 1000"``, or a correlation object, ``{"region": "emea"}``)."""
        if isinstance(item, SubscribedEvent):
            return item
        if isinstance(item, str):
            if not item.strip():
                raise TopologyValidationError(["an event name must not be empty"])
            return cls(item.strip())
        if isinstance(item, Mapping):
            keys = {str(k).lower(): v for k, v in item.items()}
            unknown = sorted(set(keys) - {"type", "topic", "routingmode", "filter"})
            errors = [f"unknown field(s) {', '.join(unknown)} in {item!r}"] if unknown else []
            event, topic = keys.get("type"), keys.get("topic")
            if not isinstance(event, str) or not event.strip():
                errors.append(f"'type' (the event's contract name) is required in {item!r}")
            if topic is not None and (not isinstance(topic, str) or not topic.strip()):
                errors.append(f"'topic' must be a non-empty string in {item!r}")
            try:
                mode = parse_routing_mode(keys.get("routingmode"), f"{event}")
            except TopologyValidationError as exc:
                errors.extend(exc.errors)
                mode = None
            if mode is not None and topic is None:
                errors.append(f"'routingMode' needs a 'topic' in {item!r}")
            content: ContentFilter | None = None
            if keys.get("filter") is not None:
                try:
                    content = ContentFilter.parse(keys["filter"], str(event))
                except TopologyValidationError as exc:
                    errors.extend(exc.errors)
            if errors:
                raise TopologyValidationError(errors)
            assert isinstance(event, str)
            return cls(event.strip(), topic.strip() if isinstance(topic, str) else None, mode, content)
        raise TopologyValidationError([f"expected an event name or an object with 'type', got {item!r}"])

    def to_dict(self) -> dict[str, Any] | str:
        if self.topic is None and self.filter is None:
            return self.event
        out: dict[str, Any] = {"type": self.event}
        if self.topic is not None:
            out["topic"] = self.topic
        if self.routing_mode is not None:
            out["routingMode"] = str(self.routing_mode)
        if self.filter is not None:
            out["filter"] = self.filter.to_json()
        return out


def parse_subscribed_events(items: Iterable[object]) -> tuple[SubscribedEvent, ...]:
    """Every item parsed; all malformed items are reported at once. One event given two different filters
    is refused: an endpoint receives an event through one rule, and the handlers of both would run on
    whatever either condition admits (write one condition, combining them with OR)."""
    parsed: list[SubscribedEvent] = []
    errors: list[str] = []
    for item in items:
        try:
            parsed.append(SubscribedEvent.parse(item))
        except TopologyValidationError as exc:
            errors.extend(exc.errors)
    filters: dict[str, ContentFilter | None] = {}
    for event in parsed:
        known = filters.setdefault(event.event, event.filter)
        if known != event.filter:
            errors.append(
                f"{event.event} is subscribed with two different filters ({_shown(known)} and "
                f"{_shown(event.filter)}): an endpoint receives an event through one rule; give one "
                "filter (combine the conditions with OR), or none to receive every one"
            )
    if errors:
        raise TopologyValidationError(list(dict.fromkeys(errors)))
    return tuple(parsed)


def _shown(content: ContentFilter | None) -> str:
    return "no filter" if content is None else repr(content.to_json())


def content_filters(events: Iterable[SubscribedEvent]) -> dict[str, ContentFilter]:
    """The filter of each filtered event (:func:`parse_subscribed_events` made them one per event)."""
    return {e.event: e.filter for e in events if e.filter is not None}


SubscriptionRequest = tuple[SubscribedEvent, ...]
"""An endpoint's subscribed events (see :func:`parse_subscribed_events`)."""

# ------------------------------------------------------------------------------------------ entities


@dataclass(frozen=True, slots=True)
class RuleSpec(Rule):
    """A rule Busbar wants: its name and filter, and what it is for."""

    event: str | None = None  # the event the rule serves; None for $Default / $default
    content: ContentFilter | None = None
    """The condition the rule holds besides the event's type (routing by content), or None."""

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "event": self.event, **self.filter.to_dict()}
        if self.content is not None:
            out["contentFilter"] = self.content.to_json()
        return out


@dataclass(frozen=True, slots=True)
class SubscriptionSpec:
    """A forwarding subscription: ``forward_to`` a queue (the endpoint's) or a topic (hierarchy)."""

    topic: str
    name: str
    forward_to: str
    rules: tuple[RuleSpec, ...]
    user_metadata: str = ""

    @property
    def path(self) -> str:
        return f"{self.topic}/Subscriptions/{self.name}"

    @property
    def is_catch_all(self) -> bool:
        return any(r.filter.kind == "true" for r in self.rules)

    @property
    def has_default_rule(self) -> bool:
        """False when the subscription must not keep the ``$Default`` rule ARM creates with it."""
        return any(r.name.lower() == DEFAULT_RULE_NAME.lower() for r in self.rules)

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "name": self.name,
            "forwardTo": self.forward_to,
            "userMetadata": self.user_metadata,
            "rules": [r.to_dict() for r in self.rules],
        }


@dataclass(frozen=True, slots=True)
class DesiredState:
    """Entities to exist: queues first (forwarding targets), then topics, then subscriptions with rules.

    Additive: a desired state never asks to delete anything (unsubscribing is a separate plan)."""

    queues: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()
    subscriptions: tuple[SubscriptionSpec, ...] = ()
    forwarding_topics: tuple[str, ...] = field(default=())
    """Topics that subscriptions forward to (hierarchy); they must exist before those subscriptions."""
    queue_specs: tuple[QueueSpec, ...] = field(default=())
    """The immutable properties of :attr:`queues` (sessions, duplicate detection); a queue without a spec
    here is a plain one (:meth:`queue_spec`)."""
    moved_from: tuple[str, ...] = field(default=())
    """Queues the endpoint moves away from (``--move-from``): a desired subscription that exists forwarding
    to one of them is redirected to the endpoint's queue in place (a planned ``update``), never left."""
    duplicate_detection_window: timedelta | None = None
    """Every topic of :attr:`topics` and :attr:`forwarding_topics` requires duplicate detection over this
    window (``None``: no requirement, the state of a test or tool that wants plain topics)."""

    def queue_spec(self, name: str) -> QueueSpec:
        """The properties ``name`` must have: its spec, or a plain queue's."""
        for spec in self.queue_specs:
            if spec.name.lower() == name.lower():
                return spec
        return QueueSpec(name)

    @staticmethod
    def combine(states: Iterable[DesiredState]) -> DesiredState:
        """One state holding every entity of ``states`` (for provisioning many endpoints in one plan);
        rules of the same subscription are merged, a rule name with two filters is an error."""
        queues: dict[str, str] = {}
        topics: dict[str, str] = {}
        forwarding: dict[str, str] = {}
        subs: dict[tuple[str, str], SubscriptionSpec] = {}
        errors: list[str] = []
        specs: list[QueueSpec] = []
        moved: dict[str, str] = {}
        windows: dict[timedelta, None] = {}
        for state in states:
            for q in state.moved_from:
                moved.setdefault(q.lower(), q)
            if state.duplicate_detection_window is not None:
                windows[state.duplicate_detection_window] = None
            specs.extend(state.queue_spec(q) for q in state.queues)
            for q in state.queues:
                queues.setdefault(q.lower(), q)
            for t in state.topics:
                topics.setdefault(t.lower(), t)
            for t in state.forwarding_topics:
                forwarding.setdefault(t.lower(), t)
            for sub in state.subscriptions:
                key = (sub.topic.lower(), sub.name.lower())
                known = subs.get(key)
                if known is None:
                    subs[key] = sub
                    continue
                rules = {r.name.lower(): r for r in known.rules}
                for rule in sub.rules:
                    other = rules.setdefault(rule.name.lower(), rule)
                    if other.filter != rule.filter:
                        errors.append(f"rule {rule.name} of {sub.path} is wanted with two different filters")
                subs[key] = SubscriptionSpec(
                    known.topic, known.name, known.forward_to, tuple(rules.values()), known.user_metadata
                )
        if len(windows) > 1:
            errors.append(
                "topics are wanted with different duplicate-detection windows: "
                + ", ".join(iso_window(w) for w in windows)
            )
        if errors:
            raise TopologyValidationError(errors)
        return DesiredState(
            tuple(queues.values()),
            tuple(topics.values()),
            tuple(subs.values()),
            tuple(forwarding.values()),
            tuple(s for s in merge_queue_specs(specs) if s != QueueSpec(s.name)),
            tuple(moved.values()),
            next(iter(windows), None),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "queues": list(self.queues),
            "queueProperties": {q: self.queue_spec(q).to_dict() for q in self.queues},
            "topics": list(self.topics),
            "subscriptions": [s.to_dict() for s in self.subscriptions],
        }
        if self.duplicate_detection_window is not None:
            out["topicDuplicateDetectionWindow"] = iso_window(self.duplicate_detection_window)
        return out

    def rule_count(self) -> int:
        return sum(len(s.rules) for s in self.subscriptions)


# ------------------------------------------------------------------------------------------ naming


def subscription_name(options: TopologyOptions, endpoint_queue: str) -> str:
    """``map[queue] ?? map[queue without prefix] ?? queue``, with the hierarchy prefix stripped; never
    shortened (a name over 50 characters needs ``QueueNameToSubscriptionNameMap``)."""
    hierarchy = HierarchyNamespace(options.hierarchy_namespace)
    mapping = options.queue_name_to_subscription_name_map
    prefixed = hierarchy.apply(endpoint_queue)
    raw = hierarchy.unprefixed(endpoint_queue)
    name = mapping.get(prefixed) or mapping.get(endpoint_queue) or mapping.get(raw) or endpoint_queue
    return hierarchy.unprefixed(name)


# ------------------------------------------------------------------------------------------ topic-per-event


def resolve_routes(options: TopologyOptions, events: Iterable[SubscribedEvent]) -> list[SubscribeRoute]:
    explicit: dict[str, list[SubscriptionEntry]] = {}
    order: list[str] = []
    for item in events:
        if item.event not in explicit:
            explicit[item.event] = []
            order.append(item.event)
        if item.topic is not None:
            explicit[item.event].append(SubscriptionEntry(topic=item.topic, routing_mode=item.routing_mode))
    routes: list[SubscribeRoute] = []
    for event in order:
        routes.extend(subscribe_routes(options, event, explicit[event]))
    return routes


def _compatible(a: TopicRoutingMode, b: TopicRoutingMode) -> bool:
    # NotMultiplexed and CorrelationFilter coexist (rules OR together); SqlLikeFilter stands alone.
    return (a is TopicRoutingMode.SqlLikeFilter) == (b is TopicRoutingMode.SqlLikeFilter)


def _topic_subscription(
    topic: str,
    routes: list[SubscribeRoute],
    name: str,
    queue: str,
    false_default_rule: bool,
    filters: Mapping[str, ContentFilter],
) -> SubscriptionSpec:
    plain = [r.event for r in routes if r.routing_mode is TopicRoutingMode.NotMultiplexed]
    takers = [event for event in plain if event not in filters]
    moot = [event for event in plain if event in filters]
    if takers and moot:
        raise TopologyValidationError(
            [
                f"the filter of {', '.join(moot)} on topic {topic} would never apply: {', '.join(takers)} "
                f"subscribes to the same topic without a filter, so subscription {name} takes everything "
                "on it; filter those events too, or give them their own topics"
            ]
        )
    catch_all = bool(takers)
    rules: dict[str, RuleSpec] = {}
    if catch_all:
        rules[DEFAULT_RULE_NAME.lower()] = RuleSpec(DEFAULT_RULE_NAME, TRUE_FILTER)
    elif false_default_rule:
        rules[FALSE_DEFAULT_RULE_NAME.lower()] = RuleSpec(FALSE_DEFAULT_RULE_NAME, FALSE_FILTER)
    for route in routes:
        type_filter: RuleFilter | None
        if route.routing_mode is TopicRoutingMode.CorrelationFilter:
            type_filter = correlation_filter(route.event)
        elif route.routing_mode is TopicRoutingMode.SqlLikeFilter:
            type_filter = sql_like_filter(route.event)
        else:
            type_filter = None  # NotMultiplexed: the topic carries the event; only a condition needs a rule
        spec = event_rule(rule_name(route.event), route.event, type_filter, filters.get(route.event))
        if spec is not None:
            rules.setdefault(spec.name.lower(), spec)
    return SubscriptionSpec(topic, name, queue, tuple(rules.values()), user_metadata=queue)


def event_rule(
    name: str, event: str, type_filter: RuleFilter | None, content: ContentFilter | None
) -> RuleSpec | None:
    """The rule ``name`` that takes ``event``: its type condition AND-ed with its content condition (either
    may be absent; None when both are)."""
    if content is not None:
        return RuleSpec(name, content.combined(type_filter), event, content)
    if type_filter is not None:
        return RuleSpec(name, type_filter, event)
    return None


def desired_state(
    options: TopologyOptions,
    endpoint_queue: str,
    subscriptions: Iterable[SubscribedEvent | str | Mapping[str, Any]],
    *,
    false_default_rule: bool = True,
    ordered: bool = False,
    moved_from: str | None = None,
    duplicate_detection_window: timedelta = DEFAULT_WINDOW,
) -> DesiredState:
    """Everything ``endpoint_queue`` needs to receive ``subscriptions`` under ``options``.

    ``ordered``: the endpoint is ordered (``Endpoint.ordered``): its input queue requires sessions and
    its hold queue is wanted too (:func:`shared.topology.queues.endpoint_queues`).

    ``moved_from``: the endpoint's previous input queue (a move to a new queue, ``docs/topology-guide.md``,
    "Making an endpoint ordered: a new queue"): the subscriptions forwarding there are redirected to
    ``endpoint_queue`` in place, so both queues' subscription names must be the same
    (``QueueNameToSubscriptionNameMap`` maps the new queue to the old name).
    ``duplicate_detection_window``: the endpoint's queues and every topic of the state require duplicate
    detection over it (the app passes ``EntityDefaults.duplicate_detection_window``, read from
    ``BUSBAR_DUPLICATE_DETECTION_WINDOW``).

    ``false_default_rule``: filtered subscriptions get ``$default`` ``1=0``, as NServiceBus creates them.
    False leaves them with only their event rules (a subscription without rules matches nothing, so
    delivery is the same); that saves one SQL filter per subscription against the topic's 2,000, which is
    what lets the seed's 80 endpoints x 25 events fit one bundle topic.

    Raises :class:`TopologyValidationError` (every problem at once) for invalid options, names, or a
    migration event that is neither migrated nor to be migrated; :class:`IncompatibleRoutingModesError`
    when SqlLikeFilter and the catch-all modes meet on one topic."""
    events = parse_subscribed_events(subscriptions)
    errors = validation_errors(options)
    hierarchy = HierarchyNamespace(options.hierarchy_namespace)
    queue = hierarchy.apply(endpoint_queue)
    name = subscription_name(options, endpoint_queue)
    for message in (
        names_error("Queue", [queue], "queue"),
        names_error("Subscription", [name], "subscription"),
    ):
        if message is not None:
            errors.append(message)
    moved = hierarchy.apply(moved_from) if moved_from else None
    if moved_from and moved is not None:
        errors.extend(_move_errors(options, queue, name, moved_from, moved))
    if errors:
        raise TopologyValidationError(errors)
    filters = content_filters(events)
    if isinstance(options, MigrationTopologyOptions):
        state = _migration_state(options, queue, name, events, false_default_rule, filters)
    else:
        routes = resolve_routes(options, events)
        state = _topic_per_event_state(options, queue, name, routes, false_default_rule, filters)
    if moved is not None:
        state = replace(state, moved_from=(moved,))
    specs = endpoint_queues(queue, ordered=ordered, duplicate_detection_window=duplicate_detection_window)
    return replace(
        state,
        queues=tuple(s.name for s in specs),
        queue_specs=specs,
        duplicate_detection_window=duplicate_detection_window,
    )


def _move_errors(options: TopologyOptions, queue: str, name: str, moved_from: str, moved: str) -> list[str]:
    """Why ``queue`` cannot take over the subscriptions of ``moved`` in place (none: it can). A subscription
    is redirected under its own name, so the new queue's subscription name must be the old queue's: with
    another name the plan would create a second subscription beside the old one, and every event published
    until the old one went would reach both queues."""
    if moved.lower() == queue.lower():
        return [f"--move-from {moved_from}: the endpoint's queue is {queue} already; move to a new queue"]
    old_name = subscription_name(options, moved_from)
    if old_name.lower() == name.lower():
        return []
    mapping = json.dumps({HierarchyNamespace(options.hierarchy_namespace).unprefixed(queue): old_name})
    return [
        f"--move-from {moved_from}: {moved}'s subscriptions are named {old_name}, {queue}'s would be named "
        f"{name}; redirecting them in place needs the same name: add "
        f'"QueueNameToSubscriptionNameMap": {mapping} to the options'
    ]


def _topic_per_event_state(
    options: TopologyOptions,
    queue: str,
    name: str,
    routes: list[SubscribeRoute],
    false_default_rule: bool,
    filters: Mapping[str, ContentFilter],
) -> DesiredState:
    groups: dict[str, list[SubscribeRoute]] = {}
    spelled: dict[str, str] = {}
    for route in routes:
        key = route.topic.lower()  # NServiceBus groups topics case-insensitively
        groups.setdefault(key, []).append(route)
        spelled.setdefault(key, route.topic)
    errors: list[str] = []
    for key, group in groups.items():
        first = group[0]
        for route in group[1:]:
            if not _compatible(first.routing_mode, route.routing_mode):
                errors.append(
                    f"Incompatible subscription routing modes detected for topic '{spelled[key]}' on "
                    f"subscription '{name}'. Event '{route.event}' uses '{route.routing_mode}' but other "
                    f"events use '{first.routing_mode}'. All events subscribed to the same topic must use "
                    "the "
                    "same routing mode on the same endpoint subscription."
                )
                break
    if errors:
        raise IncompatibleRoutingModesError(errors)
    topic_error = names_error("Topic", spelled.values(), "topic")
    if topic_error is not None:
        raise TopologyValidationError([topic_error])
    subscriptions = tuple(
        _topic_subscription(spelled[k], g, name, queue, false_default_rule, filters)
        for k, g in groups.items()
    )
    return DesiredState((queue,), tuple(spelled.values()), subscriptions)


def _migration_state(
    options: MigrationTopologyOptions,
    queue: str,
    name: str,
    events: tuple[SubscribedEvent, ...],
    false_default_rule: bool,
    filters: Mapping[str, ContentFilter],
) -> DesiredState:
    hierarchy = HierarchyNamespace(options.hierarchy_namespace)
    publish_topic = hierarchy.apply(options.topic_to_publish_to)
    subscribe_topic = hierarchy.apply(options.topic_to_subscribe_on)
    topics = [publish_topic]
    subscriptions: list[SubscriptionSpec] = []
    forwarding: list[str] = []
    if options.is_hierarchy:
        topics.append(subscribe_topic)
        forwarding.append(subscribe_topic)
        subscriptions.append(
            SubscriptionSpec(
                publish_topic,
                FORWARD_SUBSCRIPTION_PREFIX + options.topic_to_subscribe_on,
                subscribe_topic,
                (RuleSpec(FALSE_DEFAULT_RULE_NAME, TRUE_FILTER),),
                user_metadata=subscribe_topic,
            )
        )
    errors: list[str] = []
    bundle_rules: dict[str, RuleSpec] = {}
    if false_default_rule:
        bundle_rules[FALSE_DEFAULT_RULE_NAME.lower()] = RuleSpec(FALSE_DEFAULT_RULE_NAME, FALSE_FILTER)
    migrated: list[SubscribeRoute] = []
    to_migrate = set(options.events_to_migrate_map)
    for item in events:
        if item.routing_mode is not None:
            errors.append(
                f"Subscription entry for event '{item.event}' has a routing mode of '{item.routing_mode}' "
                "but the "
                "migration topology does not support explicit routing modes. Use the topic-per-event "
                "topology "
                "instead."
            )
            continue
        if item.event in to_migrate and item.topic is None:
            rule = options.subscribed_event_to_rule_name_map.get(item.event) or item.event  # never hashed
            spec = event_rule(rule, item.event, sql_like_filter(item.event), filters.get(item.event))
            assert spec is not None
            bundle_rules.setdefault(rule.lower(), spec)
            continue
        entries = list(options.subscribed_event_to_topics_map.get(item.event, ()))
        if item.topic is not None:
            entries.append(SubscriptionEntry(topic=item.topic))
        if not entries:
            errors.append(migration_unmapped_message(item.event, subscribe=True))
            continue
        for entry in entries:
            migrated.append(
                SubscribeRoute(
                    item.event, entry.topic, hierarchy.apply(entry.topic), TopicRoutingMode.NotMultiplexed
                )
            )
    bad_rules = invalid((r.name for r in bundle_rules.values() if r.event is not None), "rule")
    if bad_rules:
        errors.append(names_error("SubscribedEventToRuleNameMap", bad_rules, "rule") or "")
    if errors:
        raise TopologyValidationError(errors)
    subscriptions.append(SubscriptionSpec(subscribe_topic, name, queue, tuple(bundle_rules.values()), queue))
    migrated_state = _topic_per_event_state(options, queue, name, migrated, false_default_rule, filters)
    return DesiredState.combine(
        [
            DesiredState((queue,), tuple(topics), tuple(subscriptions), tuple(forwarding)),
            migrated_state,
        ]
    )
