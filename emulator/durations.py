"""Duration parsing and formatting as Azure Service Bus uses it.

Azure entity properties (``LockDuration``, ``DefaultMessageTimeToLive`` ...) travel as ISO-8601 durations
(``PT30S``, ``P1DT2H``), the way .NET's ``XmlConvert.ToString(TimeSpan)`` writes them.  ``host.json`` uses the
.NET ``TimeSpan`` text form instead (``00:05:00``, ``1.02:03:04.5``).  :func:`parse_duration` accepts both.

"Infinite" is spelled ``TimeSpan.MaxValue`` by Azure (``P10675199DT2H48M5.4775807S``); it is represented
here as ``None``.  Any duration of at least :data:`INFINITE_THRESHOLD` (10675199 days) also counts as
infinite.
"""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

__all__ = [
    "INFINITE_THRESHOLD",
    "MAX_VALUE_TEXT",
    "format_duration",
    "parse_duration",
]

#: ISO-8601 text of .NET ``TimeSpan.MaxValue``; Azure uses it for "never" (infinite TTL, no auto-delete).
MAX_VALUE_TEXT = "P10675199DT2H48M5.4775807S"

#: Durations at or above this many days are treated as infinite (``TimeSpan.MaxValue`` is just above it).
INFINITE_THRESHOLD = timedelta(days=10675199)

_INFINITE_SECONDS = Decimal(INFINITE_THRESHOLD.days) * 86400

_NUMBER = r"(\d+(?:[.,]\d+)?)"
_ISO_RE = re.compile(
    rf"""
    (?P<sign>-)?
    P
    (?:{_NUMBER}Y)?
    (?:{_NUMBER}M)?
    (?:{_NUMBER}W)?
    (?:{_NUMBER}D)?
    (?P<time>T
        (?:{_NUMBER}H)?
        (?:{_NUMBER}M)?
        (?:{_NUMBER}S)?
    )?
    """,
    re.VERBOSE | re.IGNORECASE | re.ASCII,
)
# Seconds per ISO designator, in the order the groups appear above.  Years and months follow
# XmlConvert.ToTimeSpan: a year is 365 days and a month 30 days.
_ISO_UNITS: tuple[tuple[str, int], ...] = (
    ("years", 365 * 86400),
    ("months", 30 * 86400),
    ("weeks", 7 * 86400),
    ("days", 86400),
    ("hours", 3600),
    ("minutes", 60),
    ("seconds", 1),
)

# .NET TimeSpan "c"/"g" text: [-][d.]hh:mm[:ss[.fffffff]]
_TIMESPAN_RE = re.compile(
    r"(?P<sign>-)?(?:(?P<days>\d+)\.)?(?P<hours>\d{1,2}):(?P<minutes>\d{1,2})"
    r"(?::(?P<seconds>\d{1,2})(?:\.(?P<fraction>\d{1,7}))?)?",
    re.ASCII,
)

_MICROSECOND = Decimal("0.000001")


def _to_timedelta(negative: bool, total_seconds: Decimal, original: str) -> timedelta | None:
    if total_seconds >= _INFINITE_SECONDS:
        if negative:
            raise ValueError(
                f"invalid duration {original!r}: a negative duration this large cannot be represented"
            )
        return None
    micros = int((total_seconds / _MICROSECOND).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))
    delta = timedelta(microseconds=micros)
    return -delta if negative else delta


def _parse_iso(text: str, original: str) -> timedelta | None:
    match = _ISO_RE.fullmatch(text)
    if match is None:
        if "T" not in text.upper() and re.search(r"\d[HS]", text, re.IGNORECASE):
            raise ValueError(
                f"invalid duration {original!r}: hours and seconds must follow the 'T' separator "
                "(e.g. PT1H, PT30S)"
            )
        raise ValueError(
            f"invalid duration {original!r}: expected an ISO-8601 duration such as PT30S, PT5M, P1DT2H "
            "or a .NET TimeSpan such as 00:05:00 or 1.02:03:04"
        )
    # Groups: 1 sign, 2 Y, 3 M, 4 W, 5 D, 6 the "T..." wrapper, 7 H, 8 M, 9 S.
    values: tuple[str | None, ...] = tuple(match.group(index) for index in (2, 3, 4, 5, 7, 8, 9))
    present = [(index, value) for index, value in enumerate(values) if value is not None]
    if not present:
        raise ValueError(f"invalid duration {original!r}: it has no components (e.g. PT0S for zero)")
    if match.group("time") is not None and all(value is None for value in values[4:]):
        raise ValueError(f"invalid duration {original!r}: 'T' must be followed by hours, minutes or seconds")
    total = Decimal(0)
    last_index = present[-1][0]
    for index, value in present:
        unit_name, unit_seconds = _ISO_UNITS[index]
        if ("." in value or "," in value) and index != last_index:
            raise ValueError(
                f"invalid duration {original!r}: only the last component may have a fraction, not {unit_name}"
            )
        try:
            number = Decimal(value.replace(",", "."))
        except InvalidOperation as exc:  # pragma: no cover - the regex only lets digits through
            raise ValueError(f"invalid duration {original!r}: bad number {value!r}") from exc
        total += number * unit_seconds
    return _to_timedelta(match.group("sign") is not None, total, original)


def _parse_timespan(text: str, original: str) -> timedelta | None:
    match = _TIMESPAN_RE.fullmatch(text)
    if match is None:
        raise ValueError(
            f"invalid duration {original!r}: expected an ISO-8601 duration such as PT30S, PT5M, P1DT2H "
            "or a .NET TimeSpan such as 00:05:00 or 1.02:03:04"
        )
    hours = int(match.group("hours"))
    minutes = int(match.group("minutes"))
    seconds = int(match.group("seconds") or 0)
    if hours > 23:
        raise ValueError(f"invalid duration {original!r}: hours must be 0..23 in TimeSpan text, got {hours}")
    if minutes > 59:
        raise ValueError(f"invalid duration {original!r}: minutes must be 0..59, got {minutes}")
    if seconds > 59:
        raise ValueError(f"invalid duration {original!r}: seconds must be 0..59, got {seconds}")
    total = Decimal(int(match.group("days") or 0) * 86400 + hours * 3600 + minutes * 60 + seconds)
    fraction = match.group("fraction")
    if fraction:
        total += Decimal("0." + fraction)
    return _to_timedelta(match.group("sign") is not None, total, original)


def parse_duration(text: str) -> timedelta | None:
    """Parse an ISO-8601 duration (``PT30S``) or .NET TimeSpan text (``00:00:30``).

    Returns ``None`` for "infinite": the ``TimeSpan.MaxValue`` text and any duration of 10675199 days or more.
    Raises :class:`ValueError` with a message naming the bad text otherwise.
    """
    if not isinstance(text, str):
        raise ValueError(f"invalid duration {text!r}: expected a string")
    stripped = text.strip()
    if not stripped:
        raise ValueError("invalid duration '': it is empty")
    body = stripped[1:] if stripped.startswith("-") else stripped
    if body[:1] in ("P", "p"):
        return _parse_iso(stripped, text)
    if ":" in stripped:
        return _parse_timespan(stripped, text)
    if body.isdigit():
        raise ValueError(
            f"invalid duration {text!r}: a bare number has no unit; write e.g. PT{body}S (seconds) "
            f"or 00:00:{body.zfill(2)} (TimeSpan)"
        )
    raise ValueError(
        f"invalid duration {text!r}: expected an ISO-8601 duration such as PT30S, PT5M, P1DT2H "
        "or a .NET TimeSpan such as 00:05:00 or 1.02:03:04"
    )


def format_duration(td: timedelta | None) -> str:
    """Format a duration as Azure writes it (``PT1M30S``, ``P1D``); ``None`` gives the MaxValue text."""
    if td is None or td >= INFINITE_THRESHOLD:
        return MAX_VALUE_TEXT
    sign = ""
    if td < timedelta(0):
        sign = "-"
        td = -td
    total_micros = (td.days * 86400 + td.seconds) * 1_000_000 + td.microseconds
    days, rest = divmod(total_micros, 86400 * 1_000_000)
    hours, rest = divmod(rest, 3600 * 1_000_000)
    minutes, rest = divmod(rest, 60 * 1_000_000)
    seconds, micros = divmod(rest, 1_000_000)
    out = [sign, "P"]
    if days:
        out.append(f"{days}D")
    time_part = ""
    if hours:
        time_part += f"{hours}H"
    if minutes:
        time_part += f"{minutes}M"
    if seconds or micros:
        if micros:
            time_part += f"{seconds}.{micros:06d}".rstrip("0") + "S"
        else:
            time_part += f"{seconds}S"
    if time_part:
        out.append("T" + time_part)
    elif not days:
        out.append("T0S")
    return "".join(out)
