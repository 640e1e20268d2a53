"""JSON form of entity properties and rules, for the store (entities created at run time survive a
restart) and anything else that needs a lossless text form of them."""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import types
import typing
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from emulator.broker.properties import CorrelationFilterConfig, FrozenProperties
from emulator.durations import format_duration, parse_duration


def _property(value: Any) -> Any:
    """A property value (correlation property, SQL parameter) with its type kept: a bare duration string
    would come back as a string."""
    if isinstance(value, datetime):
        return {"dateTime": value.isoformat()}
    if isinstance(value, timedelta):
        return {"duration": format_duration(value)}
    return value


def _from_property(value: Any) -> Any:
    if isinstance(value, dict) and len(value) == 1:
        if "dateTime" in value:
            return datetime.fromisoformat(value["dateTime"])
        if "duration" in value:
            return parse_duration(value["duration"])
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, FrozenProperties):
        return {str(k): _property(v) for k, v in value.items()}
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def dumps(definition: object) -> str:
    """Serialise entity properties or a rule (a config dataclass) to JSON."""
    return json.dumps(_plain(definition), sort_keys=True)


def _build(kind: Any, value: Any) -> Any:
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(kind) if a is not type(None)]
        if value is None:
            return None
        return _build(options[0], value)
    if kind is timedelta:
        return parse_duration(value) if isinstance(value, str) else value
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return kind(value)
    if kind is CorrelationFilterConfig:
        return loads(CorrelationFilterConfig, json.dumps(value))
    if origin is Mapping and isinstance(value, dict):
        return FrozenProperties({k: _from_property(v) for k, v in value.items()})
    if origin is tuple and isinstance(value, list):
        (item,) = typing.get_args(kind)[:1]
        return tuple(_build(item, v) for v in value)
    return value


@functools.cache
def _field_types(cls: type) -> tuple[tuple[str, Any], ...]:
    """Each field's name and resolved type. Resolving (string annotations) is costly and was repeated for
    every entity restored: two thirds of a 10,000-entity restart."""
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))


def loads[T](cls: type[T], text: str) -> T:
    """Rebuild a config dataclass from :func:`dumps` output (unknown keys are ignored)."""
    data = json.loads(text)
    fields = _field_types(typing.cast(type, cls))
    kwargs = {name: _build(kind, data[name]) for name, kind in fields if name in data}
    return cls(**kwargs)
