"""A hosted endpoint's subscriptions follow its handlers: a ``DELETE`` (or a ``PUT`` leaving one out) that
would remove one is refused.

The app's start-up provisioning (``app/bootstrap.py``) plans every hosted endpoint's subscriptions from its
handlers and creates what is missing. A subscription of a handled event that an operator deleted over HTTP
would therefore come back at the next start, silently undoing the call, and until then the handlers would
wait for events that never arrive. So the provisioning API refuses such a ``DELETE`` (409
``SubscriptionHandled``, naming the event and its handlers) and deletes nothing; a ``PUT`` whose list leaves
out a handled event would delete its subscription as stale, and is refused the same way, changing nothing
(not even its creates): to stop a hosted endpoint
handling an event, remove the handler and deploy. What the code does not handle is not the code's and can
still be deleted: an event a ``PUT`` added for a hosted endpoint without a handler for it, an event on a topic
named with ``?topic=``, and every subscription of an endpoint the app does not host.

"Handled" is decided on the plan, not on the event's name: the ``DELETE`` is refused when one of the
subscriptions or rules it would delete is one the endpoint's handlers want (so a delete of a catch-all
subscription that also carries a handled event is refused too). Pure functions: no I/O.
"""

from __future__ import annotations

from collections.abc import Collection

from shared.api import ApiError
from shared.handlers.endpoints import Endpoint
from shared.topology import TopologyOptions, TopologyValidationError, UnmappedEventError, desired_state
from shared.topology.plan import Plan, rule_path


class SubscriptionHandled(ApiError):
    """A ``DELETE`` would remove a subscription (or rule) the hosted endpoint's handlers need: refused, and
    nothing was deleted (the details name each event and its handlers)."""

    status = 409
    code = "SubscriptionHandled"


def handled_deletes(
    endpoint: Endpoint,
    queue: str,
    options: TopologyOptions,
    plan: Plan,
    kept: Collection[str] = (),
) -> dict[str, list[str]]:
    """Each event ``endpoint`` handles whose subscription or rule ``plan`` would delete, with the names of
    its handlers (``module.function``), in registration order. ``queue``: the endpoint's input queue.
    ``kept``: events the request still lists (a ``PUT`` that moves one to another topic deletes its old
    path but keeps it: not a removal)."""
    deleted = {item.path.lower() for item in plan.items if item.action == "delete"}
    still_listed = {event.lower() for event in kept}
    found: dict[str, list[str]] = {}
    for subscribed in endpoint.subscriptions():
        if subscribed.event.lower() in still_listed:
            continue
        try:
            state = desired_state(options, queue, [subscribed], ordered=endpoint.ordered)
        except (TopologyValidationError, UnmappedEventError):
            continue  # the event has no path in this topology: the plan cannot delete one of it
        wanted = {s.path.lower() for s in state.subscriptions} | {
            rule_path(s.topic, s.name, r.name).lower() for s in state.subscriptions for r in s.rules
        }
        if wanted & deleted:  # entity names are case-insensitive in Service Bus
            found[subscribed.event] = [
                r.name for r in endpoint.handlers.registrations() if r.contract == subscribed.event
            ]
    return found


def refuse_handled_deletes(
    endpoint: Endpoint | None,
    queue: str,
    options: TopologyOptions,
    plan: Plan,
    *,
    kept: Collection[str] = (),
    unchanged: str = "nothing was deleted",
) -> None:
    """Raise :class:`SubscriptionHandled` when ``plan`` (an unsubscribe, or a ``PUT``'s plan with its stale
    deletes) would delete what the hosted ``endpoint``'s handlers need; an endpoint the app does not host
    (``None``) has no handlers here. ``kept``: the events a ``PUT`` lists (see :func:`handled_deletes`);
    ``unchanged``: what the message says was left alone."""
    if endpoint is None:
        return
    handled = handled_deletes(endpoint, queue, options, plan, kept)
    if not handled:
        return
    events = ", ".join(handled)
    raise SubscriptionHandled(
        f"endpoint {endpoint.name} handles {events}: its subscriptions follow its handlers; {unchanged}",
        [f"{event} is handled by {', '.join(handlers)}" for event, handlers in handled.items()]
        + [
            "to unsubscribe, remove the handler and deploy: the app's start-up provisioning re-creates a "
            "hosted endpoint's subscriptions from its handlers"
        ],
        endpoint=endpoint.name,
        handledBy=handled,
    )
