"""NCRONTAB parsing and next-occurrence computation (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from devhost.ncrontab import CronError, parse_ncrontab


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        ("*/5 * * * * *", "2026-01-01T00:00:03", "2026-01-01T00:00:05"),
        ("0 */5 * * * *", "2026-01-01T00:04:59", "2026-01-01T00:05:00"),
        ("0 30 9 * * 1-5", "2026-01-02T09:30:00", "2026-01-05T09:30:00"),  # Friday -> Monday
        ("0 30 9 * * Mon-Fri", "2026-01-03T12:00:00", "2026-01-05T09:30:00"),
        ("0 0 0 1 jan *", "2026-06-01T00:00:00", "2027-01-01T00:00:00"),
        ("0 0 12 * * sunday", "2026-01-01T00:00:00", "2026-01-04T12:00:00"),
        ("0 0 * * * *", "2026-01-01T23:59:59", "2026-01-02T00:00:00"),
        ("5,10 0 0 * * *", "2026-01-01T00:00:05", "2026-01-01T00:00:10"),
        ("10/20 * * * * *", "2026-01-01T00:00:31", "2026-01-01T00:00:50"),
        ("0 0 0 29 2 *", "2026-03-01T00:00:00", "2028-02-29T00:00:00"),
        ("0 0 0 13 * 5", "2026-01-01T00:00:00", "2026-02-13T00:00:00"),  # Friday the 13th: both must match
        ("*/10 * * * *", "2026-01-01T00:00:00", "2026-01-01T00:10:00"),  # five fields: seconds = 0
    ],
)
def test_next_occurrence_follows_the_ncrontab_fields(expression: str, after: str, expected: str) -> None:
    assert parse_ncrontab(expression).next_after(at(after)) == at(expected)


def test_next_occurrence_is_strictly_after_the_given_moment() -> None:
    schedule = parse_ncrontab("0 0 * * * *")
    assert schedule.next_after(at("2026-01-01T05:00:00")) == at("2026-01-01T06:00:00")


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("* * * *", "expected 6 fields"),
        ("60 * * * * *", "second value 60 is outside 0-59"),
        ("* * 24 * * *", "hour value 24"),
        ("* * * * * 7", "day-of-week value 7"),
        ("* * * * foo *", "'foo' is not a number or name"),
        ("*/0 * * * * *", "step '0'"),
        ("5-1 * * * * *", "runs backwards"),
        ("0 0 0 30 2 *", "never occurs"),
        ("1,,2 * * * * *", "empty item"),
    ],
)
def test_invalid_schedules_are_refused_with_the_reason(expression: str, fragment: str) -> None:
    with pytest.raises(CronError, match=fragment):
        parse_ncrontab(expression)
