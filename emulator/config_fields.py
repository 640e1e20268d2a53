"""Typed, labelled reads of JSON object fields for the Config.json reader (:mod:`emulator.config`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta

from emulator.broker.properties import EntityStatus
from emulator.durations import parse_duration
from emulator.jsonc import JsonObject, describe
from emulator.validation import duration_problems

__all__ = ["FieldReader"]

_STATUS_NAMES = {status.value.lower(): status for status in EntityStatus}


class FieldReader:
    """Reads typed fields of JSON objects, collecting a labelled problem for each wrong one in ``problems``.

    Each read returns a usable value (the default when the field is wrong), so one pass finds every problem.
    """

    def __init__(self) -> None:
        self.problems: list[str] = []

    def add(self, label: str, message: str) -> None:
        self.problems.append(f"{label}: {message}")

    def fields(
        self,
        label: str,
        value: object,
        allowed: Sequence[str],
        where: str = "",
        aliases: Mapping[str, str] | None = None,
    ) -> dict[str, object] | None:
        """Map an object's keys case-insensitively onto ``allowed``; report unknown and repeated keys."""
        if not isinstance(value, JsonObject):
            what = where or "entry"
            self.add(label, f"{what} must be an object, got {describe(value)}")
            return None
        canonical = {key.lower(): key for key in allowed}
        if aliases:
            canonical.update(aliases)
        suffix = f" in {where}" if where else ""
        result: dict[str, object] = {}
        for key, item in value.pairs:
            name = canonical.get(key.lower())
            if name is None:
                self.add(label, f"unknown key '{key}'{suffix} (allowed: {', '.join(allowed)})")
            elif name in result:
                self.add(label, f"key '{name}' appears more than once{suffix}")
            else:
                result[name] = item
        return result

    def array(self, label: str, fields: Mapping[str, object], key: str) -> list[object]:
        value = fields.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            self.add(label, f"{key} must be an array, got {describe(value)}")
            return []
        return value

    def boolean(self, label: str, fields: Mapping[str, object], key: str, default: bool) -> bool:
        value = fields.get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        self.add(label, f"{key} must be a boolean, got {describe(value)}")
        return default

    def integer(self, label: str, fields: Mapping[str, object], key: str, default: int) -> int:
        value = fields.get(key)
        if value is None:
            return default
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        self.add(label, f"{key} must be an integer, got {describe(value)}")
        return default

    def optional_integer(self, label: str, fields: Mapping[str, object], key: str) -> int | None:
        """An integer value; ``null`` or absent means unset."""
        if fields.get(key) is None:
            return None
        return self.integer(label, fields, key, 0)

    def text(self, label: str, fields: Mapping[str, object], key: str, prefix: str = "") -> str | None:
        """A string value; ``""`` and ``null`` mean unset."""
        value = fields.get(key)
        if value is None or value == "":
            return None
        if isinstance(value, str):
            return value
        self.add(label, f"{prefix}{key} must be a string, got {describe(value)}")
        return None

    def duration(
        self, label: str, fields: Mapping[str, object], key: str, default: timedelta | None
    ) -> timedelta | None:
        value = fields.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            self.add(label, f"{key} must be an ISO-8601 duration string such as PT30S, got {describe(value)}")
            return default
        try:
            return parse_duration(value)
        except ValueError as exc:
            self.add(label, f"{key} is not a valid duration: {exc}")
            return default

    def finite_duration(
        self,
        label: str,
        fields: Mapping[str, object],
        key: str,
        default: timedelta,
        lo: timedelta,
        hi: timedelta,
    ) -> timedelta:
        value = self.duration(label, fields, key, default)
        if value is None:  # infinite where a finite value is required
            self.problems.extend(duration_problems(label, key, None, lo, hi))
            return default
        return value

    def status(self, label: str, fields: Mapping[str, object]) -> EntityStatus:
        value = fields.get("Status")
        if value is None:
            return EntityStatus.ACTIVE
        if isinstance(value, str) and value.lower() in _STATUS_NAMES:
            return _STATUS_NAMES[value.lower()]
        allowed = ", ".join(status.value for status in EntityStatus)
        self.add(label, f"Status must be one of {allowed}, got {describe(value)}")
        return EntityStatus.ACTIVE

    def name(self, kind_label: str, fields: Mapping[str, object]) -> str | None:
        value = fields.get("Name")
        if isinstance(value, str) and value:
            return value
        if value is None:
            self.add(kind_label, "Name is required")
        else:
            self.add(kind_label, f"Name must be a non-empty string, got {describe(value)}")
        return None
