"""A fixed-bucket histogram of durations in milliseconds, for medians and 95th percentiles that add up
across minutes and instances. Pure.

Samples are not kept: each instance would have to store every duration of every minute. Instead a duration
falls into one of :data:`BUCKETS` buckets whose upper bounds grow by a factor of 2^(1/4) (about 19 %) from
0.1 ms to past an hour, so two histograms merge by adding counts, and a quantile is read back within the
width of its bucket: the bucket's geometric middle, off by at most about 9 % of the true value.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

SMALLEST_MS = 0.1
"""The first bucket's upper bound: anything quicker counts as 0.1 ms."""
STEPS_PER_DOUBLING = 4
BUCKETS = 102
"""Bucket ``BUCKETS - 1`` (from about an hour up) takes everything longer."""


def bucket_of(milliseconds: float) -> int:
    """The bucket ``milliseconds`` falls into: the first whose upper bound is at least it."""
    if milliseconds <= SMALLEST_MS:
        return 0
    index = math.ceil(STEPS_PER_DOUBLING * math.log2(milliseconds / SMALLEST_MS) - 1e-9)
    return min(index, BUCKETS - 1)


def upper_bound(bucket: int) -> float:
    """The largest duration (ms) bucket ``bucket`` holds."""
    return SMALLEST_MS * 2 ** (bucket / STEPS_PER_DOUBLING)


def representative(bucket: int) -> float:
    """The duration (ms) a quantile falling into ``bucket`` reports: its geometric middle (the first
    bucket's bound itself: it starts at 0)."""
    if bucket == 0:
        return SMALLEST_MS
    return math.sqrt(upper_bound(bucket - 1) * upper_bound(bucket))


@dataclass(slots=True)
class Histogram:
    """Counts per bucket (only the buckets hit are kept)."""

    counts: dict[int, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """How many durations were added."""
        return sum(self.counts.values())

    def add(self, milliseconds: float) -> None:
        """Count one duration (a negative one, from clocks apart, counts as the smallest)."""
        bucket = bucket_of(max(milliseconds, 0.0))
        self.counts[bucket] = self.counts.get(bucket, 0) + 1

    def merge(self, other: Histogram) -> None:
        """Add ``other``'s counts to this histogram's."""
        for bucket, count in other.counts.items():
            self.counts[bucket] = self.counts.get(bucket, 0) + count

    def copy(self) -> Histogram:
        """An independent copy."""
        return Histogram(dict(self.counts))

    def quantile(self, q: float) -> float | None:
        """The ``q`` quantile (0 < q <= 1; nearest rank) in milliseconds, or None when empty."""
        total = self.total
        if total == 0:
            return None
        rank = max(1, math.ceil(q * total))
        seen = 0
        for bucket in sorted(self.counts):
            seen += self.counts[bucket]
            if seen >= rank:
                return representative(bucket)
        raise AssertionError("unreachable: the ranks add up to the total")

    def to_json(self) -> str:
        """The counts as compact JSON (``{"bucket": count}``), for a table property."""
        return json.dumps({str(b): c for b, c in sorted(self.counts.items())}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> Histogram:
        """The histogram :meth:`to_json` wrote; an empty or unreadable value is an empty histogram (a row
        written by a later version is shown without its durations rather than failing the view)."""
        try:
            raw = json.loads(text) if text else {}
        except ValueError:
            return cls()
        if not isinstance(raw, Mapping):
            return cls()
        counts: dict[int, int] = {}
        for key, value in raw.items():
            if str(key).isdigit() and isinstance(value, int) and value > 0 and int(key) < BUCKETS:
                counts[int(key)] = value
        return cls(counts)
