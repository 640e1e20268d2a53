"""Handovers: how a declared migration moves an event off the fallback topic without the router losing it,
whatever the router's snapshot interval.

The broker decides a fallback rule's delivery when a message is enqueued; the router decides whether to
bridge the message later, on a snapshot of the namespace up to ``BUSBAR_ROUTER_SNAPSHOT_SECONDS`` old. So
the router must know, for each message, whether the old rule was still there *when the message was
enqueued*. A migration that creates a subscription for the event's new path writes that down on it (its
``userMetadata``, a :class:`Handover`): the fallback rules it retires, and that they retire
``after_seconds`` after the subscription's creation. That instant, the **cutoff**, is read on the
management plane's clock (the subscription's ``createdAt``) and compared with the broker's
``EnqueuedTimeUtc``; no client clock takes part. (When the new path is a rule on a subscription the
endpoint already has, apply writes the record there: counted from that update's ``updatedAt``, then
written out as each rule's own cutoff, see ``Provisioner._record_handover``.) ``apply`` then waits
``after_seconds`` (the router's snapshot interval plus :data:`MARGIN_SECONDS`) after the create before it
deletes the old rules, so:

- a router snapshot read before the new subscription existed is used only for messages enqueued before
  the delete (its age never exceeds the interval), and for them the old rule did deliver: no copy is right;
- a snapshot that shows the handover decides by enqueued time: before the cutoff (less the skew
  allowance, :func:`skew_allowance`) the old rule delivered, even once it is gone from the namespace (a
  backlog); after it, the old rule counts as gone, even while the snapshot still shows it, and the router
  bridges (a snapshot that still shows the rule would otherwise withhold the copy: a loss).

What stays ambiguous resolves toward delivery: a message enqueued between the cutoff less the skew
allowance and the moment the delete took effect reached the endpoint through the old rule *and* is bridged.
The two copies carry the same MessageId (the bridge keeps it), and every endpoint handles a MessageId once
(:mod:`shared.idempotency`), so the second is completed without running the handlers: an ordinary
duplicate, which needs nothing of the migration. Sequence numbers would make the boundary exact, but the
router's copies are numbered by its subscription, not by the topic a marker could be scheduled on (see
:mod:`shared.router.service`), so nothing here relies on them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from shared.app_settings import AppSetting, read_seconds
from shared.topology.desired import RuleFilter
from shared.topology.errors import TopologyValidationError

# Declared here, read by the router (shared.router.service) and by migrations, which last this long (+2 s).
SNAPSHOT_SECONDS = AppSetting(
    "BUSBAR_ROUTER_SNAPSHOT_SECONDS",
    "How long the router reuses its snapshot of the fallback topic's subscriptions and rules, in seconds.",
    default="30",
)

MARGIN_SECONDS = 2.0
"""Added to the router's snapshot interval: the wait covers a snapshot read just before the create."""

CLOCK_SKEW_SECONDS = 5.0
"""How far the management plane's clock (``createdAt``) and the broker's (``EnqueuedTimeUtc``) may differ;
messages enqueued within it before the cutoff are bridged too, a twin of the copy the old rule delivered
that the endpoint completes without handling again. Wide, as a twin costs one lookup of the endpoint's
handled records; at most half the handover (:func:`skew_allowance`), so a short handover still bridges
only what was enqueued while the new path existed."""


def skew_allowance(after_seconds: float) -> float:
    """The clock skew allowance of a handover lasting ``after_seconds``."""
    return min(CLOCK_SKEW_SECONDS, after_seconds / 2)


MAX_USER_METADATA = 1024
"""Azure's limit on a subscription's ``userMetadata``."""

_KEY = "busbar.handover"


def snapshot_seconds(env: Mapping[str, str]) -> float:
    """``BUSBAR_ROUTER_SNAPSHOT_SECONDS`` as a number (a bad value is an error, not a silent default)."""
    return read_seconds(SNAPSHOT_SECONDS, env)


def handover_seconds(router_snapshot_seconds: float) -> float:
    """How long a migration keeps the old path after creating the new one."""
    return router_snapshot_seconds + MARGIN_SECONDS


@dataclass(frozen=True, slots=True)
class RetiredRule:
    """A fallback-topic rule a migration deletes: where it was and what it took."""

    topic: str
    subscription: str
    rule: str
    filter: RuleFilter
    cutoff: datetime | None = None
    """Its own cutoff, fixed once known (a record written on an existing subscription, see
    :meth:`Handover.cutoff_of`); None: the handover's anchor plus ``after_seconds``."""

    def to_dict(self) -> dict[str, Any]:
        out = {
            "topic": self.topic,
            "subscription": self.subscription,
            "rule": self.rule,
            **self.filter.to_dict(),
        }
        if self.cutoff is not None:
            out["cutoff"] = self.cutoff.isoformat()
        return out


@dataclass(frozen=True, slots=True)
class Handover:
    """What a migration writes on the new path's subscription: the endpoint (NServiceBus keeps its name in
    ``userMetadata``), the fallback rules retired, and how long after the subscription's creation."""

    endpoint: str
    retires: tuple[RetiredRule, ...]
    after_seconds: float
    anchor: Literal["createdAt", "updatedAt"] = "createdAt"
    """What ``after_seconds`` counts from: the subscription's creation (a subscription the migration
    created), or its last update (only while a record on an existing subscription has no cutoffs yet)."""

    def cutoff(self, created_at: datetime) -> datetime:
        """When the retired rules stop counting, on the management plane's clock."""
        return created_at + timedelta(seconds=self.after_seconds)

    def cutoff_of(self, rule: RetiredRule, created_at: datetime, updated_at: datetime | None) -> datetime:
        """``rule``'s cutoff, given the subscription's ``createdAt`` and ``updatedAt``."""
        if rule.cutoff is not None:
            return rule.cutoff
        anchor = updated_at if self.anchor == "updatedAt" and updated_at is not None else created_at
        return anchor + timedelta(seconds=self.after_seconds)

    def fixed(self, created_at: datetime, updated_at: datetime | None) -> Handover:
        """The same handover with every rule's cutoff written out (so later updates cannot move it)."""
        retires = tuple(replace(r, cutoff=self.cutoff_of(r, created_at, updated_at)) for r in self.retires)
        return replace(self, retires=retires, anchor="createdAt")

    def to_metadata(self) -> str:
        """The ``userMetadata`` text; refused when it would not fit Azure's 1,024 characters."""
        record: dict[str, Any] = {
            "endpoint": self.endpoint,
            "afterSeconds": self.after_seconds,
            "anchor": self.anchor,
            "retires": [r.to_dict() for r in self.retires],
        }
        text = json.dumps({_KEY: record}, separators=(",", ":"))
        if len(text) > MAX_USER_METADATA:
            raise TopologyValidationError(
                [
                    f"the migration of {self.endpoint} retires too many fallback rules to record on its new "
                    f"subscription ({len(text)} characters of userMetadata, at most {MAX_USER_METADATA}): "
                    "migrate fewer events at once"
                ]
            )
        return text

    @classmethod
    def parse(cls, metadata: str | None) -> Handover | None:
        """The handover recorded in ``metadata``; None for anything else (an endpoint name, say)."""
        if not metadata or not metadata.lstrip().startswith("{"):
            return None
        try:
            record = json.loads(metadata)[_KEY]
            retires = tuple(
                RetiredRule(
                    str(r["topic"]),
                    str(r["subscription"]),
                    str(r["rule"]),
                    RuleFilter.from_dict(r),
                    _moment(r["cutoff"]) if r.get("cutoff") else None,
                )
                for r in record["retires"]
            )
            anchor: Literal["createdAt", "updatedAt"] = (
                "updatedAt" if record.get("anchor") == "updatedAt" else "createdAt"
            )
            return cls(str(record["endpoint"]), retires, float(record["afterSeconds"]), anchor)
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


def _moment(text: Any) -> datetime:
    moment = datetime.fromisoformat(str(text))
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


__all__ = [
    "CLOCK_SKEW_SECONDS",
    "MARGIN_SECONDS",
    "SNAPSHOT_SECONDS",
    "Handover",
    "RetiredRule",
    "handover_seconds",
    "skew_allowance",
    "snapshot_seconds",
]
