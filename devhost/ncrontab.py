"""NCRONTAB schedules as the Functions timer trigger reads them (the NCrontab library's dialect).

Six fields ``{second} {minute} {hour} {day} {month} {day-of-week}``; five fields mean seconds = 0. Each
field is ``*``, a value, a range ``a-b``, a list ``a,b``, or a step ``*/n``, ``a-b/n``, ``a/n`` (from a to
the field's end). Months and days of the week also take English names or three-letter abbreviations,
case-insensitively; day-of-week runs 0-6 with 0 = Sunday. As in NCrontab, a time matches only when both
the day-of-month and the day-of-week fields match.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import datetime, timedelta

_MONTHS = [m.lower() for m in calendar.month_name[1:]]
_DAYS = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]
_FIELDS = (
    ("second", 0, 59),
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day", 1, 31),
    ("month", 1, 12),
    ("day-of-week", 0, 6),
)
_SEARCH_LIMIT = timedelta(days=366 * 5)


class CronError(ValueError):
    """The expression is not a valid NCRONTAB schedule."""


def _names(field: str) -> dict[str, int]:
    if field == "month":
        return {name: i + 1 for i, name in enumerate(_MONTHS)} | {
            name[:3]: i + 1 for i, name in enumerate(_MONTHS)
        }
    if field == "day-of-week":
        return {name: i for i, name in enumerate(_DAYS)} | {name[:3]: i for i, name in enumerate(_DAYS)}
    return {}


def _value(text: str, field: str, low: int, high: int, expression: str) -> int:
    names = _names(field)
    key = text.strip().lower()
    if key in names:
        return names[key]
    if not key.isdigit():
        raise CronError(f"'{expression}': {field} value '{text}' is not a number or name")
    number = int(key)
    if not low <= number <= high:
        raise CronError(f"'{expression}': {field} value {number} is outside {low}-{high}")
    return number


def _parse_field(text: str, field: str, low: int, high: int, expression: str) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        if not part:
            raise CronError(f"'{expression}': empty item in the {field} field")
        base, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronError(f"'{expression}': {field} step '{step_text}' must be a positive number")
            step = int(step_text)
        if base == "*":
            start, end = low, high
        elif "-" in base:
            first, _, last = base.partition("-")
            start, end = (
                _value(first, field, low, high, expression),
                _value(last, field, low, high, expression),
            )
            if start > end:
                raise CronError(f"'{expression}': {field} range '{base}' runs backwards")
        else:
            start = _value(base, field, low, high, expression)
            end = high if step_text else start
        values.update(range(start, end + 1, step))
    return frozenset(values)


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A parsed schedule; :meth:`next_after` gives occurrences."""

    expression: str
    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    days_of_week: frozenset[int]

    def _day_matches(self, moment: datetime) -> bool:
        weekday = (moment.weekday() + 1) % 7  # Python: Monday = 0; NCRONTAB: Sunday = 0
        return moment.day in self.days and weekday in self.days_of_week

    def next_after(self, moment: datetime) -> datetime:
        """The first occurrence strictly after ``moment`` (same tzinfo, wall-clock arithmetic)."""
        candidate = moment.replace(microsecond=0) + timedelta(seconds=1)
        limit = moment + _SEARCH_LIMIT
        while candidate <= limit:
            if candidate.month not in self.months:
                year, month = divmod(candidate.month, 12)
                candidate = candidate.replace(
                    year=candidate.year + year, month=month + 1, day=1, hour=0, minute=0, second=0
                )
            elif not self._day_matches(candidate):
                candidate = (candidate + timedelta(days=1)).replace(hour=0, minute=0, second=0)
            elif candidate.hour not in self.hours:
                candidate = (candidate + timedelta(hours=1)).replace(minute=0, second=0)
            elif candidate.minute not in self.minutes:
                candidate = (candidate + timedelta(minutes=1)).replace(second=0)
            elif candidate.second not in self.seconds:
                candidate += timedelta(seconds=1)
            else:
                return candidate
        raise CronError(f"'{self.expression}' never occurs (e.g. 30 February)")


def parse_ncrontab(expression: str) -> CronSchedule:
    """Parse a five- or six-field NCRONTAB expression."""
    fields = expression.split()
    if len(fields) == 5:
        fields = ["0", *fields]
    if len(fields) != 6:
        raise CronError(
            f"'{expression}': expected 6 fields (second minute hour day month day-of-week), got {len(fields)}"
        )
    parsed = [
        _parse_field(text, name, low, high, expression)
        for text, (name, low, high) in zip(fields, _FIELDS, strict=True)
    ]
    schedule = CronSchedule(expression, *parsed)
    schedule.next_after(datetime(2000, 1, 1))  # reject schedules that never fire
    return schedule
