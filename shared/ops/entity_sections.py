"""Where the console shows each entity of the namespace: with the app's endpoints, with Busbar's
infrastructure, or apart as foreign. Pure: names in, placements out.

A namespace holds more than the endpoints of the app looking at it: the queues and topics Busbar keeps to
run them, and whatever else shares the namespace (other apps' endpoints, endpoints provisioned over the
API for hosts elsewhere, entities a tool or an emulator ``Config.json`` created). Listed together, an
operator looking for billing's dead letters reads past lock queues and someone else's ``orders``.

* **The app's endpoints** (what the app's composition root hosts): each endpoint's input queue and every
  subscription forwarding to it. A subscription's dead letters are the endpoint's (the re-drive sends them
  there and the failure groups count them for it), whoever created the subscription.
* **Busbar's infrastructure**: what Busbar creates to run those endpoints and is nobody's input: the hold
  queue of an ordered endpoint (``<queue>.held``), the provisioning lock queue, the fallback topic and its
  router subscription, the topics of the app's topology and its subscriptions that forward to a topic.
* **Foreign**: everything else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from shared.topology.names import held_queue


class Section(StrEnum):
    """The console's sections, in the order it shows them."""

    APP = "app"
    INFRASTRUCTURE = "infrastructure"
    FOREIGN = "foreign"


@dataclass(frozen=True, slots=True)
class AppEntities:
    """The entity paths the app knows as its own (as provisioned: hierarchy prefix applied; compared
    case-insensitively, as Service Bus names are). Built by the app's composition root."""

    endpoints: Mapping[str, str] = field(default_factory=dict)
    """Each hosted endpoint's input queue path -> the endpoint's name, in the order the console lists them."""
    topics: frozenset[str] = frozenset()
    """The topics of the app's topology (published to, subscribed on, forwarded to)."""
    subscriptions: frozenset[str] = frozenset()
    """The paths (``topic/Subscriptions/name``) of the app's topology's subscriptions."""
    lock_queue: str | None = None
    fallback_topic: str | None = None
    router_subscription: str | None = None
    """The router's subscription name on :attr:`fallback_topic`."""
    notes: tuple[str, ...] = ()
    """What could not be worked out (an invalid topology option): said, not hidden."""

    def endpoint_of_queue(self, queue: str) -> str | None:
        """The name of the endpoint whose input queue is ``queue``, or None."""
        wanted = queue.lower()
        return next((name for path, name in self.endpoints.items() if path.lower() == wanted), None)


@dataclass(frozen=True, slots=True)
class Placement:
    """An entity's section, what it is there (``role``) and the app endpoint it serves, if any."""

    section: Section
    role: str
    endpoint: str | None = None


def place_queue(name: str, app: AppEntities, queues: frozenset[str]) -> Placement:
    """Where the queue ``name`` goes; ``queues`` are every queue's name, lowercased (to tell a hold queue
    from a queue that merely ends in ``.held``)."""
    endpoint = app.endpoint_of_queue(name)
    if endpoint is not None:
        return Placement(Section.APP, "input queue", endpoint)
    for path, owner in app.endpoints.items():
        if held_queue(path).lower() == name.lower():
            return Placement(Section.INFRASTRUCTURE, f"hold queue of {owner} (held keys wait here)", owner)
    if app.lock_queue is not None and app.lock_queue.lower() == name.lower():
        return Placement(Section.INFRASTRUCTURE, "provisioning locks (no message is ever sent here)")
    base = name.lower().removesuffix(held_queue(""))
    if base != name.lower() and base in queues:
        return Placement(Section.FOREIGN, f"hold queue of {name[: len(base)]}")
    return Placement(Section.FOREIGN, "queue no endpoint of this app reads")


def place_topic(name: str, app: AppEntities) -> Placement:
    """Where the topic ``name`` goes."""
    if app.fallback_topic is not None and app.fallback_topic.lower() == name.lower():
        return Placement(Section.INFRASTRUCTURE, "fallback topic (the router reads it)")
    if name.lower() in {t.lower() for t in app.topics}:
        return Placement(Section.INFRASTRUCTURE, "topic of the app's topology")
    return Placement(Section.FOREIGN, "topic outside the app's topology")


def place_subscription(topic: str, name: str, forward_to: str | None, app: AppEntities) -> Placement:
    """Where the subscription ``topic/Subscriptions/name`` goes, given what it forwards to."""
    endpoint = app.endpoint_of_queue(forward_to) if forward_to else None
    if endpoint is not None:
        return Placement(Section.APP, f"subscription forwarding to {endpoint}", endpoint)
    if (
        app.fallback_topic is not None
        and app.router_subscription is not None
        and (topic.lower(), name.lower()) == (app.fallback_topic.lower(), app.router_subscription.lower())
    ):
        return Placement(Section.INFRASTRUCTURE, "the fallback router's subscription")
    if f"{topic}/Subscriptions/{name}".lower() in {s.lower() for s in app.subscriptions}:
        return Placement(
            Section.INFRASTRUCTURE, f"subscription of the app's topology forwarding to {forward_to}"
        )
    if forward_to:
        return Placement(Section.FOREIGN, f"subscription forwarding to {forward_to}")
    return Placement(Section.FOREIGN, "subscription read directly (no forwarding)")


__all__ = ["AppEntities", "Placement", "Section", "place_queue", "place_subscription", "place_topic"]
