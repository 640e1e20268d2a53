"""Entity names as NServiceBus validates and derives them: the Azure name regexes, rule-name hashing and
the hierarchy-namespace prefix.

The regexes are NServiceBus's ``EntityValidator`` ones verbatim (they encode Microsoft's resource-name
rules), so a name Busbar accepts is one a .NET endpoint accepts too.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

TOPIC_NAME = re.compile(
    r"^(?=.{1,260}$)(?=^[A-Za-z0-9])(?!.*[\\?#])(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9./_-]*[A-Za-z0-9])$"
)
QUEUE_NAME = re.compile(
    r"^(?=.{1,260}$)(?=^[A-Za-z0-9\$])(?!.*[\\?#])(?:[A-Za-z0-9\$]|[A-Za-z0-9\$][A-Za-z0-9./_-]*[A-Za-z0-9])$"
)
SUBSCRIPTION_NAME = re.compile(
    r"^(?!\$)(?=.{1,50}$)(?=^[A-Za-z0-9])(?!.*[\/\\?#])[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$"
)
RULE_NAME = SUBSCRIPTION_NAME  # identical, as in NServiceBus (kept as two names on purpose)

MAX_RULE_NAME_LENGTH = 50
HASHED_RULE_PREFIX = "Rule-"

DEFAULT_RULE_NAME = "$Default"
"""The catch-all rule every new subscription gets (TrueFilter ``1=1``)."""
FALSE_DEFAULT_RULE_NAME = "$default"
"""The reject-all rule NServiceBus gives filtered subscriptions (FalseFilter ``1=0``); the broker compares
rule names case-insensitively, so it replaces ``$Default``."""


def is_valid_topic_name(name: str) -> bool:
    return TOPIC_NAME.match(name) is not None


def is_valid_queue_name(name: str) -> bool:
    return QUEUE_NAME.match(name) is not None


def is_valid_subscription_name(name: str) -> bool:
    return SUBSCRIPTION_NAME.match(name) is not None


def is_valid_rule_name(name: str) -> bool:
    return RULE_NAME.match(name) is not None


def invalid(names: Iterable[str], kind: str) -> list[str]:
    """The names in ``names`` (first occurrence order, no duplicates) that fail ``kind``'s regex."""
    check = {
        "topic": is_valid_topic_name,
        "queue": is_valid_queue_name,
        "subscription": is_valid_subscription_name,
        "rule": is_valid_rule_name,
    }[kind]
    bad: list[str] = []
    for name in names:
        if not check(name) and name not in bad:
            bad.append(name)
    return bad


def rule_name(full_name: str) -> str:
    """The topic-per-event rule name of an event: the name itself up to 50 characters, otherwise
    ``Rule-`` + the first 16 lower-case hex digits of SHA-256 over its UTF-8 bytes (NServiceBus 6.4+).

    Names of 50 characters or fewer are not checked (NServiceBus does not check them either)."""
    if len(full_name) <= MAX_RULE_NAME_LENGTH:
        return full_name
    digest = hashlib.sha256(full_name.encode("utf-8")).hexdigest()
    return HASHED_RULE_PREFIX + digest[:16]


class HierarchyNamespace:
    """Prefixes entity paths with ``ns/`` (NServiceBus ``HierarchyNamespaceOptions``, ``DestinationManager``).

    Queues, topics and ``ForwardTo`` targets are prefixed; subscription and rule names never are. Prefixing
    is idempotent: a path that already starts with the prefix is left alone."""

    def __init__(self, namespace: str | None = None) -> None:
        if namespace is None or not namespace.strip():
            self.prefix = ""
        else:
            self.prefix = namespace if namespace.endswith("/") else namespace + "/"

    @property
    def enabled(self) -> bool:
        return bool(self.prefix)

    def apply(self, destination: str) -> str:
        """``destination`` under the hierarchy (unchanged without one, or when already prefixed)."""
        if not self.prefix or destination.startswith(self.prefix):
            return destination
        return self.prefix + destination

    def unprefixed(self, name: str) -> str:
        """``name`` without the hierarchy prefix (subscription names never carry it)."""
        if self.prefix and name.startswith(self.prefix):
            return name[len(self.prefix) :]
        return name


def held_queue(endpoint_queue: str) -> str:
    """The hold queue of an ordered endpoint whose input queue is ``endpoint_queue`` (give it the
    hierarchy-prefixed path to get the prefixed one): where the messages of a key held by a dead-lettered
    blocker wait (see :mod:`shared.topology.queues`)."""
    return f"{endpoint_queue}.held"
