"""Reading a namespace through ``azure-mgmt-servicebus``: the first step of read → plan → apply.

:class:`NamespaceReader` only reads (GET / list): an entity or ``None`` when ARM answers 404, a topic's
usage against the per-topic quotas, and every subscription forwarding to an endpoint's queue. Any other
ARM refusal is raised as :class:`~shared.topology.errors.ProvisioningError` (status, code, message; the
SDK's ``HttpResponseError`` is its ``__cause__``). Calls run ``concurrency`` at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from azure.core.exceptions import HttpResponseError

import shared.topology.quotas as quotas
from shared.management import ManagementClient
from shared.topology.arm import filter_of
from shared.topology.desired import RuleSpec
from shared.topology.errors import ProvisioningError
from shared.topology.names import HierarchyNamespace
from shared.topology.options import TopologyOptions
from shared.topology.plan import ExistingSubscription


def http_status(exc: HttpResponseError) -> int | None:
    """The HTTP status of an ARM error."""
    return exc.status_code


def error_code(exc: HttpResponseError) -> str | None:
    """ARM's error code (``error.code`` of the body), when it gave one."""
    error = getattr(exc, "error", None)
    return getattr(error, "code", None) if error is not None else None


def error_message(exc: HttpResponseError) -> str:
    """ARM's error message (``error.message`` of the body), else the SDK's."""
    error = getattr(exc, "error", None)
    message = getattr(error, "message", None) if error is not None else None
    return str(message or exc.message or exc)


def in_parallel(fn: Callable[[Any], Any], items: Iterable[Any], concurrency: int) -> list[Any]:
    """``[fn(i) for i in items]``, at most ``concurrency`` at a time, in order."""
    listed = list(items)
    if concurrency == 1 or len(listed) <= 1:
        return [fn(i) for i in listed]
    with ThreadPoolExecutor(max_workers=min(concurrency, len(listed))) as pool:
        return list(pool.map(fn, listed))


class NamespaceReader:
    """What one namespace holds now (read-only; see the module docstring)."""

    def __init__(self, management: ManagementClient, *, concurrency: int = 4) -> None:
        self.management = management
        self.concurrency = max(1, concurrency)
        self.scope = management.scope

    def parallel(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
        """:func:`in_parallel` at this reader's concurrency."""
        return in_parallel(fn, items, self.concurrency)

    def get(self, call: Callable[[], Any], path: str) -> Any:
        """``call()`` (an ARM GET of ``path``); ``None`` when the entity does not exist."""
        try:
            return call()
        except HttpResponseError as exc:
            if http_status(exc) == 404:
                return None
            raise ProvisioningError(
                "get", path, http_status(exc), error_code(exc), error_message(exc), []
            ) from exc

    def queue(self, name: str) -> Any:
        """Queue ``name`` as ARM returns it, or ``None``."""
        return self.get(lambda: self.management.queues.get(*self.scope, name), name)

    def topic(self, name: str) -> Any:
        """Topic ``name`` as ARM returns it, or ``None``."""
        return self.get(lambda: self.management.topics.get(*self.scope, name), name)

    def subscription(self, topic: str, name: str, path: str) -> Any:
        """Subscription ``topic/name`` as ARM returns it, or ``None``."""
        return self.get(lambda: self.management.subscriptions.get(*self.scope, topic, name), path)

    def rules(self, topic: str, subscription: str) -> list[Any]:
        """The ARM rules of ``topic/subscription``."""
        return list(self.management.rules.list_by_subscriptions(*self.scope, topic, subscription))

    def topic_usage(self, topic: str) -> quotas.TopicUsage:
        """What ``topic`` holds now: subscriptions, SQL filters (true/false included), correlation filters."""
        names = [sub.name for sub in self.management.subscriptions.list_by_topic(*self.scope, topic)]

        def rules_of(subscription: str) -> quotas.TopicUsage:
            total = quotas.TopicUsage(subscriptions=1)
            for rule in self.rules(topic, subscription):
                total = total + quotas.rule_usage(filter_of(rule))
            return total

        usage = quotas.TopicUsage()
        # One list call per subscription: on a topic with 2,000 subscriptions this is the plan's cost
        # (2.7 s on the emulator, 4 at a time); ARM's read throttling bounds it in Azure.
        for counted in self.parallel(rules_of, names):
            usage = usage + counted
        return usage

    def describe(
        self, endpoint_queue: str, options: TopologyOptions | None = None
    ) -> list[ExistingSubscription]:
        """Every subscription in the namespace forwarding to the endpoint's (hierarchy-prefixed) queue, with
        its rules. Lists all topics: cost grows with the namespace."""
        hierarchy = HierarchyNamespace(options.hierarchy_namespace if options else None)
        queue = hierarchy.apply(endpoint_queue).lower()
        topics = [t.name for t in self.management.topics.list_by_namespace(*self.scope)]

        def scan(topic: str) -> list[ExistingSubscription]:
            out = []
            for sub in self.management.subscriptions.list_by_topic(*self.scope, topic):
                if (sub.forward_to or "").lower() != queue:
                    continue
                rules = tuple(RuleSpec(r.name, filter_of(r)) for r in self.rules(topic, sub.name))
                out.append(ExistingSubscription(topic, sub.name, sub.forward_to, rules))
            return out

        found: list[ExistingSubscription] = []
        for group in self.parallel(scan, topics):
            found.extend(group)
        return found


__all__ = ["NamespaceReader", "error_code", "error_message", "http_status", "in_parallel"]
