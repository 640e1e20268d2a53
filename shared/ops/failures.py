"""Failure groups for the operations console: dead-lettered messages grouped by (endpoint, dead-letter
reason, exception type), with counts, first and last time and what the re-drive policy will do. Pure.

The *exception type* comes from the framework failure headers when a message carries them
(``NServiceBus.ExceptionInfo.ExceptionType``, ``MT-Fault-ExceptionType``), otherwise from the
dead-letter description: Busbar writes ``<handler> gave up on <contract>: <ExceptionType>: <message>``,
and other clients put the exception's type name first. A message without either has no exception type.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.redrive.entities import EntityPlan
from shared.redrive.policy import Policy, classify, exception_type_of

# A dotted type name ending in Error/Exception/Fault, optionally followed by ":" (``ValueError:``).
_EXCEPTION_RE = re.compile(r"\b((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Fault))\b(?=:|$|\s)")


def exception_of(description: str | None, properties: Mapping[str, Any]) -> str | None:
    """The failing exception's type name, from headers or the dead-letter description."""
    found = exception_type_of(properties)
    if found:
        return found
    if not description:
        return None
    match = _EXCEPTION_RE.search(description)
    return match.group(1) if match else None


SAMPLE = 100  # messages listed per group (the count covers them all)


@dataclass(frozen=True, slots=True)
class Failure:
    """One dead-lettered message as the console lists it (read by peek)."""

    entity: str  # the entity path whose dead-letter queue holds it
    endpoint: str  # the endpoint that failed it: the queue, or the subscription's forward-to queue
    sequence_number: int
    reason: str | None
    exception: str | None
    enqueued_at: datetime | None
    message_id: str | None
    contract: str | None


@dataclass(frozen=True, slots=True)
class GroupKey:
    endpoint: str
    reason: str | None
    exception: str | None

    @property
    def id(self) -> str:
        """A stable id for URLs and buttons."""
        text = f"{self.endpoint}\x00{self.reason or ''}\x00{self.exception or ''}"
        return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


@dataclass(slots=True)
class FailureGroup:
    key: GroupKey
    count: int
    first_at: datetime | None
    last_at: datetime | None
    entities: dict[str, list[int]]  # entity path -> sequence numbers
    policy_action: str
    policy_rule: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.key.id,
            "endpoint": self.key.endpoint,
            "reason": self.key.reason,
            "exception": self.key.exception,
            "count": self.count,
            "first": self.first_at.isoformat() if self.first_at else None,
            "last": self.last_at.isoformat() if self.last_at else None,
            "entities": {path: len(numbers) for path, numbers in sorted(self.entities.items())},
            "messages": [
                {"entity": path, "sequenceNumber": number}
                for path, numbers in sorted(self.entities.items())
                for number in sorted(numbers)
            ][:SAMPLE],
            "policy": {"action": self.policy_action, "rule": self.policy_rule},
        }


def endpoint_of(plan: EntityPlan) -> str:
    """The endpoint a dead-letter queue belongs to: its queue, or the queue its subscription feeds."""
    if plan.source.kind == "queue":
        return plan.source.name
    return plan.target.name if plan.target is not None else plan.source.path


def group_failures(failures: Iterable[Failure], policy: Policy) -> list[FailureGroup]:
    """Groups, largest first (then by endpoint, reason, exception)."""
    groups: dict[GroupKey, FailureGroup] = {}
    for failure in failures:
        key = GroupKey(failure.endpoint, failure.reason, failure.exception)
        group = groups.get(key)
        if group is None:
            classification = classify(policy, failure.reason, failure.exception)
            group = FailureGroup(key, 0, None, None, {}, classification.action.value, classification.rule)
            groups[key] = group
        group.count += 1
        group.entities.setdefault(failure.entity, []).append(failure.sequence_number)
        when = failure.enqueued_at
        if when is not None:
            group.first_at = when if group.first_at is None else min(group.first_at, when)
            group.last_at = when if group.last_at is None else max(group.last_at, when)
    return sorted(
        groups.values(),
        key=lambda g: (-g.count, g.key.endpoint, g.key.reason or "", g.key.exception or ""),
    )
