"""The queues an endpoint needs, with the properties that cannot change once a queue exists.

Every endpoint queue requires duplicate detection over the configured window
(``BUSBAR_DUPLICATE_DETECTION_WINDOW``, :mod:`shared.topology.duplicate_detection`): a publish or outgoing
message retried with its deterministic ``MessageId`` is dropped by the broker. An unordered endpoint has
one queue: its input queue, no sessions. An **ordered** endpoint (``Endpoint.ordered``) has two:

* its input queue with ``RequiresSession`` (each ordering key is a session, handled one message at a time);
* its **hold queue** ``<input queue>.held`` (:func:`~shared.topology.names.held_queue`), where the messages
  of a key held by a dead-lettered blocker are parked: ``RequiresSession`` too (parked per key), duplicate
  detection (parking a message again after a lost lock does not double it), no ``ForwardTo``; lock
  duration and max delivery count as the input queue's.

``RequiresSession`` and ``RequiresDuplicateDetection`` are immutable on Azure ("The value for the
requiresSession property of an existing Queue cannot be changed", the emulator's ARM refuses the same; a
topic's ``RequiresDuplicateDetection`` likewise). So an existing queue or topic that differs is never
adopted silently: :func:`immutable_mismatch` and :func:`topic_mismatch` word the refusal a plan reports,
and the move to a new entity is in ``docs/topology-guide.md``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from shared.topology.duplicate_detection import DEFAULT_WINDOW, iso_window
from shared.topology.errors import TopologyValidationError
from shared.topology.names import held_queue

GUIDE_SECTION = 'docs/topology-guide.md, "Making an endpoint ordered: a new queue"'
DUPLICATE_DETECTION_GUIDE = 'docs/topology-guide.md, "Duplicate detection on entities created without it"'


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
            out["duplicateDetectionHistoryTimeWindow"] = iso_window(self.duplicate_detection_window)
        if self.held_for is not None:
            out["holdQueueOf"] = self.held_for
        return out


def endpoint_queues(
    queue: str, *, ordered: bool, duplicate_detection_window: timedelta = DEFAULT_WINDOW
) -> tuple[QueueSpec, ...]:
    """The queues of the endpoint whose (hierarchy-prefixed) input queue is ``queue``, each requiring
    duplicate detection over ``duplicate_detection_window``."""
    window = duplicate_detection_window
    if not ordered:
        return (QueueSpec(queue, duplicate_detection_window=window),)
    return (
        QueueSpec(queue, requires_session=True, duplicate_detection_window=window),
        QueueSpec(
            held_queue(queue), requires_session=True, duplicate_detection_window=window, held_for=queue
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
    order); ``RequiresDuplicateDetection`` where the spec asks for it (every endpoint queue does: without
    it a retried send with the same MessageId is delivered twice; an extra duplicate check where none is
    asked for is harmless). The window itself is not compared: Azure lets it change on an existing entity."""
    has_sessions = bool(getattr(existing, "requires_session", False))
    problems: list[str] = []
    guides: list[str] = []
    if has_sessions != spec.requires_session:
        problems.append(f"RequiresSession is {has_sessions}, the endpoint needs {spec.requires_session}")
        guides.append(GUIDE_SECTION)
    if spec.requires_duplicate_detection and not getattr(existing, "requires_duplicate_detection", False):
        problems.append("RequiresDuplicateDetection is off, Busbar needs it on every endpoint queue")
        guides.append(DUPLICATE_DETECTION_GUIDE)
    if not problems:
        return None
    role = f"the hold queue of {spec.held_for}" if spec.held_for else "the endpoint's input queue"
    return refusal(
        f"queue {spec.name} ({role})",
        problems,
        "the endpoint needs a new queue (move to it with --move-from, or moveFrom in the PUT, which "
        "redirects its subscriptions in place)",
        guides,
    )


def topic_mismatch(topic: str, window: timedelta | None, existing: Any) -> str | None:
    """Why the existing topic (an ARM ``SBTopic``) cannot serve when topics must require duplicate
    detection over ``window`` (``None``: nothing is required), or ``None`` when it can."""
    if window is None or getattr(existing, "requires_duplicate_detection", False):
        return None
    return refusal(
        f"topic {topic}",
        ["RequiresDuplicateDetection is off, Busbar needs it on every topic it publishes to"],
        "its events need a new topic",
        [DUPLICATE_DETECTION_GUIDE],
    )


def refusal(entity: str, problems: list[str], remedy: str, guides: list[str]) -> str:
    """The wording of a plan's ``refused`` item: what differs, why it cannot change, what to do."""
    return (
        f"{entity} exists, but {'; '.join(problems)}. These properties cannot be changed on an existing "
        f"entity: {remedy} (give it a new name, let the old one drain, then delete it; see "
        f"{' and '.join(dict.fromkeys(guides))}). Nothing was provisioned."
    )
