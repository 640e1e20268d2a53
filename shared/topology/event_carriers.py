"""The concrete events a subscription request brings into an endpoint's queue, and the topics each one
travels on: what the one-delivery check (:mod:`shared.topology.delivery_paths`) counts the paths of.

A request names contracts, an interface among them perhaps, each on its topics (``SubscribedEventToTopicsMap``
or the request's own ``topic``). What reaches the queue are concrete events, and a publisher sends each
to one topic (NServiceBus ``GetPublishDestinationCore``: the mapped topic, else the fallback topic, else
the topic named after it), which the fallback router bridges to the event's dedicated topic. So the check
counts, per concrete event, the paths by which *that event* arrives, not the paths of the subscribed name:
``Shipping.IOrderStatusChanged`` mapped to the topics ``Shipping.OrderAccepted`` and
``Shipping.OrderDeclined`` (the seeds' "Interface-based inheritance"; NServiceBus's acceptance test
``When_multi_subscribing_to_a_polymorphic_event_using_topic_mappings``) gives each concrete event one
path, while ``Shipping.OrderAccepted`` reaching the queue on the fallback topic and on its own topic is
two.

The concrete events of a name ``N``: the implementers a contract registry knows (``enclosed_of``), the
events the publish map sends to ``N``'s topics and the registry's contracts those topics are named after;
``N`` stands for itself when the registry does not know it. ``N`` mapped to a topic is the subscriber's word
that ``N`` travels there (another publisher may send it there), unless the topic is known to carry other
events only: the topic of an implementer (``SubscribeTo<V1Event>("V2Event")``) or of another mapped event.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from shared.contracts import ContractRegistry, enclosed_types
from shared.topology.desired import SubscribedEvent
from shared.topology.errors import UnmappedEventError
from shared.topology.names import HierarchyNamespace
from shared.topology.options import MigrationTopologyOptions, TopologyOptions
from shared.topology.routing import publish_route

EnclosedOf = Callable[[str], Sequence[Sequence[str]]]
"""For a contract name, the enclosed types of each concrete contract a subscription to it receives."""


def registry_enclosed_of(registry: ContractRegistry) -> EnclosedOf:
    """``enclosed_of`` from an app's contract registry: for a name, its registered concrete implementers'
    enclosed types (itself first when it is concrete; nothing for a name the registry does not know)."""
    return lambda name: [enclosed_types(c) for c in registry.implementers(name)]


@dataclass(frozen=True, slots=True)
class CheckedEvent:
    """A concrete event to check: its contract name, the types a message of it encloses (itself first,
    then its interfaces, when known), the explicit topics the request names for it, and ``elsewhere``: the
    (prefixed, lower-cased) topics known to carry other events only, never a path of this one."""

    event: str
    enclosed: tuple[str, ...]
    explicit_topics: tuple[str, ...] = field(default=())
    elsewhere: frozenset[str] = field(default=frozenset())


def publish_topics(options: TopologyOptions, event: str) -> frozenset[str]:
    """The (prefixed, lower-cased) topics publishers may send ``event`` on: its publish route, the topic
    named after it and its mapped topic (where the fallback router bridges it, or where a publisher
    without the mapping sends it), the fallback topic and the migration bundles."""
    hierarchy = HierarchyNamespace(options.hierarchy_namespace)
    topics = {hierarchy.apply(event)}
    mapped = options.published_event_to_topics_map.get(event)
    if mapped is not None:
        topics.add(hierarchy.apply(mapped.topic))
    if options.fallback_topic is not None and options.fallback_topic.topic_name:
        topics.add(hierarchy.apply(options.fallback_topic.topic_name))
    if isinstance(options, MigrationTopologyOptions):
        topics.update(
            hierarchy.apply(t) for t in (options.topic_to_publish_to, options.topic_to_subscribe_on)
        )
    with contextlib.suppress(UnmappedEventError):  # published nowhere under these options
        topics.add(publish_route(options, event).topic)
    return frozenset(t.lower() for t in topics)


def _sent_to(options: TopologyOptions, event: str) -> frozenset[str]:
    """The (prefixed, lower-cased) topics this app's publish map sends ``event`` to: its publish route and
    its dedicated topic (where the fallback router bridges it)."""
    hierarchy = HierarchyNamespace(options.hierarchy_namespace)
    mapped = options.published_event_to_topics_map.get(event)
    topics = {hierarchy.apply(mapped.topic if mapped is not None else event)}
    with contextlib.suppress(UnmappedEventError):
        topics.add(publish_route(options, event).topic)
    return frozenset(t.lower() for t in topics)


def carrier_topics(options: TopologyOptions, event: CheckedEvent) -> frozenset[str]:
    """The (prefixed, lower-cased) topics a message of ``event`` travels on, where a catch-all
    subscription takes it: :func:`publish_topics`, plus the topics the request or the options subscribe
    the event itself on, unless they carry other events only (``event.elsewhere``)."""
    hierarchy = HierarchyNamespace(options.hierarchy_namespace)
    said = [
        *event.explicit_topics,
        *(e.topic for e in options.subscribed_event_to_topics_map.get(event.event, ())),
    ]
    stated = {hierarchy.apply(t).lower() for t in said}
    return publish_topics(options, event.event) | (stated - event.elsewhere)


def _subscribed_topics(options: TopologyOptions, item: SubscribedEvent) -> list[str]:
    """The raw topics ``item`` is mapped to: the options' entries for it and the request's own topic."""
    topics = [e.topic for e in options.subscribed_event_to_topics_map.get(item.event, ())]
    return topics + ([item.topic] if item.topic is not None else [])


def checked_events(
    options: TopologyOptions, events: Iterable[SubscribedEvent], enclosed_of: EnclosedOf | None = None
) -> list[CheckedEvent]:
    """The concrete events a request's paths are checked for (see the module's docstring).
    ``enclosed_of(name)`` lists, for each concrete event a subscription to ``name`` receives, its enclosed
    types (a contract registry knows them: an interface stands for its implementers); without it, or for a
    name it does not know, the name stands for itself."""
    hierarchy = HierarchyNamespace(options.hierarchy_namespace)

    def concrete(name: str) -> tuple[str, ...] | None:
        """``name``'s enclosed types when the registry knows it as a concrete contract."""
        found = [tuple(types) for types in (enclosed_of(name) if enclosed_of else []) if types[0] == name]
        return found[0] if found else None

    enclosed: dict[str, tuple[str, ...]] = {}
    explicit: dict[str, list[str]] = {}
    for item in events:
        known = [tuple(types) for types in enclosed_of(item.event)] if enclosed_of else []
        for types in known or [(item.event,)]:
            enclosed.setdefault(types[0], types)
        if item.topic is not None and item.event in enclosed:
            explicit.setdefault(item.event, []).append(item.topic)
        for topic in _subscribed_topics(options, item):
            # What publishers send to the topic reaches the queue through it: the publish map's events
            # routed there, and the contract the topic is named after (its default destination).
            prefixed = hierarchy.apply(topic).lower()
            for name in options.published_event_to_topics_map:
                if prefixed in _sent_to(options, name) and name not in enclosed:
                    enclosed[name] = concrete(name) or (name, item.event)
            namesake = concrete(topic)
            if namesake is not None:
                enclosed.setdefault(topic, namesake)
    # A topic another known event is sent to, and this one is not, carries that event only.
    names = dict.fromkeys([*enclosed, *options.published_event_to_topics_map])
    sent = {name: _sent_to(options, name) for name in names}
    checked: list[CheckedEvent] = []
    for name, types in enclosed.items():
        others = frozenset[str]().union(*(topics for other, topics in sent.items() if other != name))
        elsewhere = others - publish_topics(options, name)
        checked.append(CheckedEvent(name, types, tuple(explicit.get(name, ())), elsewhere))
    return checked


__all__ = [
    "CheckedEvent",
    "EnclosedOf",
    "carrier_topics",
    "checked_events",
    "publish_topics",
    "registry_enclosed_of",
]
