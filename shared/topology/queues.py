"""The queues an endpoint needs, with the properties that cannot change once a queue exists.

An unordered endpoint has one queue: its input queue, no sessions. An **ordered** endpoint
(``Endpoint.ordered``) has two:

* its input queue with ``RequiresSession`` (each ordering key is a session, handled one message at a time);
* its **hold queue** ``<input queue>.held`` (:func:`~shared.topology.names.held_queue`), where the messages
  of a key held by a dead-lettered blocker are parked: ``RequiresSession`` too (parked per key),
  ``RequiresDuplicateDetection`` over :data:`HOLD_DUPLICATE_WINDOW` (parking a message again after a lost
  lock does not double it), no ``ForwardTo``; lock duration and max delivery count as the input queue's.

``RequiresSession`` and ``RequiresDuplicateDetection`` are immutable on Azure ("The value for the
requiresSession property of an existing Queue cannot be changed", the emulator's ARM refuses the same). So
an existing queue that differs is never adopted silently: :func:`immutable_mismatch` words the refusal a
plan reports, and the move to a new queue is in ``docs/topology-guide.md``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from shared.topology.errors import TopologyValidationError
from shared.topology.names import held_queue

HOLD_DUPLICATE_WINDOW = timedelta(minutes=10)
"""How long a hold queue remembers a MessageId (ISO 8601 ``PT10M``)."""

GUIDE_SECTION = 'docs/topology-guide.md, "Making an endpoint ordered: a new queue"'


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """A queue Busbar provisions and its immutable properties (the rest come from the entity defaults)."""

    name: str
    requires_session: bool = False
    duplicate_detection_window: timedelta | None = None
    """Duplicate detection over this window; ``None``: no duplicate detection."""
    held_for: str | None = None
    """For a hold queue: the input queue whose held keys it parks."""
    lock_duration: timedelta | None = None
    max_delivery_count: int | None = None
    """Lock duration and max delivery count to create the queue with; ``None``: the provisioner's queue
    defaults. A hold queue takes its input queue's when that exists already (:func:`like_its_input`)."""

    @property
    def requires_duplicate_detection(self) -> bool:
        return self.duplicate_detection_window is not None

    def to_dict(self) -> dict[str, Any]:
        """The plan's and the desired state's view: ``requiresSession`` always, the rest when set."""
        out: dict[str, Any] = {"requiresSession": self.requires_session}
        if self.duplicate_detection_window is not None:
            out["requiresDuplicateDetection"] = True
            out["duplicateDetectionHistoryTimeWindow"] = _iso_minutes(self.duplicate_detection_window)
        if self.held_for is not None:
            out["holdQueueOf"] = self.held_for
        return out


def _iso_minutes(window: timedelta) -> str:
    seconds = int(window.total_seconds())
    return f"PT{seconds // 60}M" if seconds % 60 == 0 else f"PT{seconds}S"


def endpoint_queues(queue: str, *, ordered: bool) -> tuple[QueueSpec, ...]:
    """The queues of the endpoint whose (hierarchy-prefixed) input queue is ``queue``."""
    if not ordered:
        return (QueueSpec(queue),)
    return (
        QueueSpec(queue, requires_session=True),
        QueueSpec(
            held_queue(queue),
            requires_session=True,
            duplicate_detection_window=HOLD_DUPLICATE_WINDOW,
            held_for=queue,
        ),
    )


def like_its_input(spec: QueueSpec, existing_input: Any) -> QueueSpec:
    """``spec`` (a hold queue's) with the lock duration and max delivery count of its existing input queue
    (an ARM ``SBQueue``), so a hold queue added later still matches the queue it serves."""
    return replace(
        spec,
        lock_duration=getattr(existing_input, "lock_duration", None),
        max_delivery_count=getattr(existing_input, "max_delivery_count", None),
    )


def merge_queue_specs(specs: Iterable[QueueSpec]) -> tuple[QueueSpec, ...]:
    """One spec per queue name (case-insensitive, as Service Bus compares them); one queue wanted with two
    different specs (an endpoint ordered in one request and not in another) is an error."""
    merged: dict[str, QueueSpec] = {}
    errors: list[str] = []
    reported: set[str] = set()
    for spec in specs:
        known = merged.setdefault(spec.name.lower(), spec)
        if known != spec and spec.name.lower() not in reported:
            reported.add(spec.name.lower())
            errors.append(
                f"queue {spec.name} is wanted both with {known.to_dict()} and with {spec.to_dict()}"
            )
    if errors:
        raise TopologyValidationError(errors)
    return tuple(merged.values())


def immutable_mismatch(spec: QueueSpec, existing: Any) -> str | None:
    """Why the existing queue (an ARM ``SBQueue``) cannot serve as ``spec``, or ``None`` when it can.

    Compared: ``RequiresSession`` always (a queue with sessions the endpoint does not use would refuse
    every message the subscriptions forward without a SessionId; one without sessions cannot keep keys in
    order); ``RequiresDuplicateDetection`` only where the spec asks for it (an extra duplicate check on a
    plain input queue is harmless)."""
    has_sessions = bool(getattr(existing, "requires_session", False))
    problems: list[str] = []
    if has_sessions != spec.requires_session:
        problems.append(f"RequiresSession is {has_sessions}, the endpoint needs {spec.requires_session}")
    if spec.requires_duplicate_detection and not getattr(existing, "requires_duplicate_detection", False):
        problems.append("RequiresDuplicateDetection is off, the hold queue needs it")
    if not problems:
        return None
    role = f"the hold queue of {spec.held_for}" if spec.held_for else "the endpoint's input queue"
    return (
        f"queue {spec.name} ({role}) exists, but {'; '.join(problems)}. These properties cannot be changed "
        "on an existing queue: the endpoint needs a new queue (move to a new name with --move-from, or "
        "moveFrom in the PUT, which redirects its subscriptions in place; let the old queue drain, then "
        f"delete it; see {GUIDE_SECTION}). Nothing was provisioned."
    )
