"""The chaos run's accounting (pure): every accepted event, per endpoint that owes it something, is
handled (how many times), dead-lettered (with reason), archived, or **lost**; plus the time the app took
to handle events again after each fault.

- An endpoint that owes an event *handling* is satisfied by at least one probe record of it (more are
  repeated invocations, counted; whether they had a second *effect* is for ``bench/chaos_effects.py``).
  Found only dead-lettered or archived, the event was **parked** instead of handled (not lost, but the
  promise was not kept). Found nowhere: **lost**.
- An endpoint that owes an event *poison* treatment (billing for a negative amount) is satisfied by a
  dead-letter or archive entry of it; handled would be a bug, nowhere is **lost**.
- The fallback router owes an event nobody subscribes to (*unrouted*) an archive entry with decision
  ``NoMatchingSubscription``. Handled by any endpoint would be a bug; found only dead-lettered (on the
  router's subscription) it was **parked** instead; neither archived nor handled nor parked: **lost**.
"""

from __future__ import annotations

import bisect
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.chaos_faults import Fault
from bench.chaos_load import HANDLED, POISON, UNROUTED, AcceptedEvent
from shared.router.decision import NO_MATCHING_SUBSCRIPTION

RECOVERY_SCAN = 2000  # events after a fault looked at for its recovery (they are handled roughly in order)


@dataclass(frozen=True, slots=True)
class Handled:
    """One probe record: ``endpoint`` ran its handler for the event ``key`` (message ``message_id``) to its
    end, at ``at``."""

    endpoint: str
    key: str
    at: float
    message_id: str | None = None


@dataclass(frozen=True, slots=True)
class Parked:
    """An event of ``endpoint`` found in a dead-letter queue (``where`` "dead-letter") or the archive."""

    endpoint: str
    key: str
    where: str
    reason: str


def endpoint_of(entity: str) -> str:
    """The endpoint of an entity path: a queue's name, or a subscription's (named for its endpoint)."""
    return entity.rstrip("/").split("/")[-1]


def account(
    accepted: Sequence[AcceptedEvent], handled: Iterable[Handled], parked: Iterable[Parked]
) -> dict[str, Any]:
    """Every accepted event's fate per endpoint that owes it something (see the module docstring)."""
    handlings: Counter[tuple[str, str]] = Counter()
    handled_keys: set[str] = set()
    for record in handled:
        handlings[(record.key, record.endpoint)] += 1
        handled_keys.add(record.key)
    parked_at: dict[tuple[str, str], list[Parked]] = defaultdict(list)
    for entry in parked:
        parked_at[(entry.key, entry.endpoint)].append(entry)

    outcomes: Counter[str] = Counter()
    poison_reasons: Counter[str] = Counter()
    parked_reasons: Counter[str] = Counter()
    lost: list[dict[str, str]] = []
    owed_pairs: set[tuple[str, str]] = set()
    for item in accepted:
        event = item.event
        for endpoint, owed in sorted(event.expected.items()):
            pair = (event.key, endpoint)
            owed_pairs.add(pair)
            times = handlings.get(pair, 0)
            found = parked_at.get(pair, [])
            if owed == UNROUTED and event.key in handled_keys:
                outcomes["unrouted handled (a bug)"] += 1
            elif owed == UNROUTED and any(
                p.where == "archive" and p.reason.startswith(NO_MATCHING_SUBSCRIPTION) for p in found
            ):
                outcomes["unrouted archived by the router"] += 1
            elif owed == HANDLED and times:
                outcomes["handled"] += 1
            elif owed == POISON and found:
                outcomes["poison dead-lettered or archived"] += 1
                poison_reasons.update(f"{p.where}: {p.reason}" for p in found)
            elif owed == POISON and times:
                outcomes["poison handled (a bug)"] += 1
            elif found:  # owed handling (or the router's archive entry) but parked
                outcomes["parked instead of handled"] += 1
                parked_reasons.update(f"{p.where}: {p.reason}" for p in found)
            else:
                outcomes["lost"] += 1
                lost.append(
                    {"key": event.key, "contract": event.contract, "endpoint": endpoint, "owed": owed}
                )

    owed_handlings = {pair: n for pair, n in handlings.items() if pair in owed_pairs}
    extra = {pair: n for pair, n in owed_handlings.items() if n > 1}
    extra_by_endpoint: Counter[str] = Counter()
    for (_, endpoint), n in extra.items():
        extra_by_endpoint[endpoint] += n - 1
    unowed = sum(n for pair, n in handlings.items() if pair not in owed_pairs)
    return {
        "owed": len(owed_pairs),
        "outcomes": dict(sorted(outcomes.items())),
        "lost": len(lost),
        "lost_examples": lost[:20],
        "poison_reasons": dict(sorted(poison_reasons.items())),
        "parked_instead_of_handled_reasons": dict(sorted(parked_reasons.items())),
        # Handler invocations that ran to their end more than once (probe lines): not side effects by
        # themselves, the commit decides (bench/chaos_effects.py counts those from the tables).
        "repeated_invocations": {
            "events_invoked_more_than_once": len(extra),
            "extra_invocations": sum(n - 1 for n in extra.values()),
            "extra_invocations_by_endpoint": dict(sorted(extra_by_endpoint.items())),
            "most_invocations_for_one_event": max(owed_handlings.values(), default=0),
            "invocations_histogram": dict(sorted(Counter(owed_handlings.values()).items())),
        },
        # Handled, but not owed: events whose publish was not answered 202 (sent before a kill), or
        # never accepted at all. Allowed (at-least-once), reported.
        "handled_without_acceptance": unowed,
    }


def recovery_times(
    faults: Sequence[Fault], accepted: Sequence[AcceptedEvent], handled: Iterable[Handled]
) -> list[float | None]:
    """Per fault: seconds from the fault until the first event accepted after it was handled (None: none
    was). The service is back when new work gets done again."""
    first_handled: dict[str, float] = {}
    for record in handled:
        if record.key not in first_handled or record.at < first_handled[record.key]:
            first_handled[record.key] = record.at
    ordered = sorted(accepted, key=lambda item: item.accepted_at)
    starts = [item.accepted_at for item in ordered]
    times: list[float | None] = []
    for fault in faults:
        index = bisect.bisect_left(starts, fault.at)
        candidates = [
            first_handled[item.event.key]
            for item in ordered[index : index + RECOVERY_SCAN]
            if item.event.key in first_handled
        ]
        times.append(round(min(candidates) - fault.at, 3) if candidates else None)
    return times


def summarize(values: Sequence[float | None]) -> dict[str, Any]:
    """Count, p50 and max of the observed values (None: not observed, counted apart)."""
    observed = [v for v in values if v is not None]
    return {
        "count": len(observed),
        "not_observed": len(values) - len(observed),
        "p50_s": round(statistics.median(observed), 3) if observed else None,
        "max_s": round(max(observed), 3) if observed else None,
    }


def recovery_by_kind(faults: Sequence[Fault], times: Sequence[float | None]) -> Mapping[str, Any]:
    """:func:`summarize` per fault kind and over all faults."""
    by_kind: dict[str, list[float | None]] = defaultdict(list)
    for fault, value in zip(faults, times, strict=True):
        by_kind[fault.kind].append(value)
    result = {kind: summarize(values) for kind, values in sorted(by_kind.items())}
    result["all"] = summarize(times)
    return result
