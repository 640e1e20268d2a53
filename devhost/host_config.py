"""``host.json``: the host-wide settings devhost honours, with the Functions host's defaults.

Only version 2.0 files are accepted, like the real host. Durations use .NET TimeSpan text
(``[-][d.]hh:mm:ss[.fffffff]``); ``-00:00:00.0010000`` (Timeout.InfiniteTimeSpan) means "no limit".
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

_TIMESPAN = re.compile(
    r"^(?P<neg>-)?(?:(?P<days>\d+)\.)?(?P<h>\d{1,2}):(?P<m>\d{1,2}):(?P<s>\d{1,2})(?:\.(?P<f>\d{1,7}))?$"
)


_INFINITE = timedelta(milliseconds=1)  # Timeout.InfiniteTimeSpan is -1 ms


class HostConfigError(ValueError):
    """host.json is missing, malformed or holds a value the host would reject."""


def parse_timespan(text: str, *, setting: str) -> timedelta | None:
    """A .NET TimeSpan string as a timedelta; None for a negative (infinite) span."""
    match = _TIMESPAN.match(text.strip())
    if match is None:
        raise HostConfigError(f"host.json: {setting} = {text!r} is not a TimeSpan like '00:05:00'")
    fraction = match["f"] or "0"
    span = timedelta(
        days=int(match["days"] or 0),
        hours=int(match["h"]),
        minutes=int(match["m"]),
        seconds=int(match["s"]),
        microseconds=int(fraction.ljust(7, "0")[:6]),
    )
    return None if match["neg"] else span


@dataclass(frozen=True, slots=True)
class ServiceBusOptions:
    """``extensions.serviceBus``, defaults from the extension's ServiceBusOptions.cs (5.x)."""

    max_concurrent_calls: int = field(default_factory=lambda: 16 * (os.cpu_count() or 1))
    prefetch_count: int = 0
    max_auto_lock_renewal_duration: timedelta | None = timedelta(minutes=5)  # None: renew forever
    auto_complete_messages: bool = True
    max_concurrent_sessions: int = 8
    session_idle_timeout: timedelta | None = None  # None: the client's try timeout (60 s)
    max_message_batch_size: int = 1000
    max_batch_wait_time: timedelta = timedelta(seconds=30)
    min_message_batch_size: int = 1


@dataclass(frozen=True, slots=True)
class HostConfig:
    """What devhost reads from host.json."""

    route_prefix: str = "api"
    function_timeout: timedelta | None = timedelta(minutes=30)
    log_levels: Mapping[str, str] = field(default_factory=dict)
    service_bus: ServiceBusOptions = field(default_factory=ServiceBusOptions)

    @property
    def default_log_level(self) -> str:
        """``logging.logLevel.default`` (Information when unset)."""
        return self.log_levels.get("default", "Information")


def _int(raw: Mapping[str, Any], key: str, default: int, *, minimum: int = 0) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise HostConfigError(f"host.json: extensions.serviceBus.{key} must be an integer >= {minimum}")
    return value


def _span(raw: Mapping[str, Any], key: str, default: timedelta | None, prefix: str) -> timedelta | None:
    if key not in raw:
        return default
    value = raw[key]
    if not isinstance(value, str):
        raise HostConfigError(f"host.json: {prefix}{key} must be a TimeSpan string like '00:05:00'")
    return parse_timespan(value, setting=prefix + key)


def _lock_renewal(raw: Mapping[str, Any], default: timedelta | None, prefix: str) -> timedelta | None:
    """``maxAutoLockRenewalDuration``: ``-00:00:00.0010000`` (infinite), zero (no renewal) or positive; the
    processor options' setter refuses any other negative span."""
    key = "maxAutoLockRenewalDuration"
    span = _span(raw, key, default, prefix)
    if span is None and key in raw:
        magnitude = parse_timespan(raw[key].strip().lstrip("-"), setting=prefix + key)
        if magnitude != _INFINITE:
            raise HostConfigError(
                f"host.json: {prefix}{key} = {raw[key]!r} is negative; use '-00:00:00.0010000' for no limit"
            )
    return span


def _session_idle_timeout(raw: Mapping[str, Any], prefix: str) -> timedelta | None:
    """``sessionIdleTimeout``: unset (the client's try timeout) or positive, as
    ServiceBusSessionProcessorOptions requires (a zero span would release every session unread)."""
    key = "sessionIdleTimeout"
    span = _span(raw, key, None, prefix)
    if key in raw and (span is None or span <= timedelta(0)):
        raise HostConfigError(f"host.json: {prefix}{key} = {raw[key]!r} must be a positive TimeSpan")
    return span


def _service_bus(raw: Mapping[str, Any]) -> ServiceBusOptions:
    defaults = ServiceBusOptions()
    auto_complete = raw.get("autoCompleteMessages", True)
    if not isinstance(auto_complete, bool):
        raise HostConfigError("host.json: extensions.serviceBus.autoCompleteMessages must be true or false")
    prefix = "extensions.serviceBus."
    if _int(raw, "maxConcurrentCallsPerSession", 1, minimum=1) != 1:
        # The host would run that many invocations of one session at once, which also gives up the order
        # within a session; devhost serves one at a time and says so rather than differ silently.
        raise HostConfigError(
            f"host.json: {prefix}maxConcurrentCallsPerSession other than 1 is not supported by devhost "
            "(one message at a time per session, the host's default)"
        )
    batch_wait = _span(raw, "maxBatchWaitTime", defaults.max_batch_wait_time, prefix)
    return ServiceBusOptions(
        max_concurrent_calls=_int(raw, "maxConcurrentCalls", defaults.max_concurrent_calls, minimum=1),
        prefetch_count=_int(raw, "prefetchCount", 0),
        max_auto_lock_renewal_duration=_lock_renewal(raw, defaults.max_auto_lock_renewal_duration, prefix),
        auto_complete_messages=auto_complete,
        max_concurrent_sessions=_int(raw, "maxConcurrentSessions", 8, minimum=1),
        session_idle_timeout=_session_idle_timeout(raw, prefix),
        max_message_batch_size=_int(raw, "maxMessageBatchSize", 1000, minimum=1),
        max_batch_wait_time=batch_wait if batch_wait is not None else defaults.max_batch_wait_time,
        min_message_batch_size=_int(raw, "minMessageBatchSize", 1, minimum=1),
    )


def parse_host_config(raw: Mapping[str, Any]) -> HostConfig:
    """Validate a parsed host.json document."""
    if raw.get("version") != "2.0":
        raise HostConfigError(f'host.json: version must be "2.0", got {raw.get("version")!r}')
    extensions = raw.get("extensions") or {}
    http = extensions.get("http") or {}
    prefix = http.get("routePrefix", "api")
    if not isinstance(prefix, str):
        raise HostConfigError("host.json: extensions.http.routePrefix must be a string")
    timeout = raw.get("functionTimeout")
    function_timeout = (
        timedelta(minutes=30) if timeout is None else parse_timespan(str(timeout), setting="functionTimeout")
    )
    levels = (raw.get("logging") or {}).get("logLevel") or {}
    return HostConfig(
        route_prefix=prefix.strip("/"),
        function_timeout=function_timeout,
        log_levels={str(k): str(v) for k, v in levels.items()},
        service_bus=_service_bus(extensions.get("serviceBus") or {}),
    )


def load_host_config(source: Mapping[str, Any] | Path | None) -> HostConfig:
    """host.json from a path, an already-parsed mapping, or the defaults (None)."""
    if source is None:
        return parse_host_config({"version": "2.0"})
    if isinstance(source, Path):
        try:
            raw = json.loads(source.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise HostConfigError(f"host.json not found: {source}") from exc
        except json.JSONDecodeError as exc:
            raise HostConfigError(f"{source}: not valid JSON ({exc})") from exc
        if not isinstance(raw, dict):
            raise HostConfigError(f"{source}: the top level must be a JSON object")
        return parse_host_config(raw)
    return parse_host_config(source)
