"""The duplicate-detection window of every topic and endpoint queue Busbar creates.

With ``RequiresDuplicateDetection`` the broker remembers each ``MessageId`` it accepted for the entity's
``DuplicateDetectionHistoryTimeWindow`` and silently drops a later message with the same id
(learn.microsoft.com, "Duplicate detection": "the message is reported as accepted ... but the newly sent
message is instantly ignored and dropped"). Busbar gives every message a deterministic id (an
``Idempotency-Key``'s, or one derived from the message a handler handled: :mod:`shared.topology.message_ids`)
so a retried send is one of those drops.

The window comes from ``BUSBAR_DUPLICATE_DETECTION_WINDOW``, an ISO 8601 duration. Its bounds are Azure's:
at least 20 seconds, at most 7 days (``QueueProperties.DuplicateDetectionHistoryTimeWindow``: "Max value is 7
days and minimum is 20 seconds"; the same on the Standard and Premium tiers, while Basic has no duplicate
detection at all). The default, 10 minutes, is Azure's and seed 004's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta

from shared.app_settings import AppSetting, read

DEFAULT_WINDOW = timedelta(minutes=10)
MIN_WINDOW = timedelta(seconds=20)
MAX_WINDOW = timedelta(days=7)

DUPLICATE_DETECTION_WINDOW = AppSetting(
    "BUSBAR_DUPLICATE_DETECTION_WINDOW",
    "Duplicate-detection window of every topic and endpoint queue Busbar creates, as an ISO 8601 duration "
    "(PT20S to P7D, Azure's bounds). A publish or outgoing message sent again with the same MessageId "
    "inside it is dropped by the broker. Fixed when an entity is created: changing it applies to new "
    "entities only.",
    default="PT10M",
)

SETTINGS: tuple[AppSetting, ...] = (DUPLICATE_DETECTION_WINDOW,)

# Days, hours, minutes, seconds: the units of a TimeSpan. Years and months have no fixed length, so a
# window in them is refused rather than guessed.
_ISO_DURATION = re.compile(
    r"P(?:(?P<days>\d+)D)?(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?",
    re.IGNORECASE,
)


class InvalidDuplicateDetectionWindow(ValueError):
    """``BUSBAR_DUPLICATE_DETECTION_WINDOW`` is not an ISO 8601 duration within Azure's bounds."""


def parse_window(text: str) -> timedelta:
    """``text`` (``PT10M``, ``P1DT2H``...) as a window; :class:`InvalidDuplicateDetectionWindow` naming the
    setting when it is no duration of days, hours, minutes and seconds, or is outside 20 s .. 7 days."""
    name = DUPLICATE_DETECTION_WINDOW.name
    match = _ISO_DURATION.fullmatch(text.strip())
    if match is None or not any(match.groupdict().values()) or text.strip().upper().endswith("T"):
        raise InvalidDuplicateDetectionWindow(
            f"{name} must be an ISO 8601 duration of days, hours, minutes and seconds "
            f"(e.g. PT10M, PT30S, P1D), got {text!r}"
        )
    parts = {k: float(v) for k, v in match.groupdict().items() if v is not None}
    window = timedelta(**parts)
    if not MIN_WINDOW <= window <= MAX_WINDOW:
        raise InvalidDuplicateDetectionWindow(
            f"{name} must be between PT20S and P7D (Azure's bounds for DuplicateDetectionHistoryTimeWindow), "
            f"got {text!r}"
        )
    return window


def duplicate_detection_window(env: Mapping[str, str] | None = None) -> timedelta:
    """The window from ``BUSBAR_DUPLICATE_DETECTION_WINDOW`` in ``env`` (default: the process environment),
    ``PT10M`` when unset; a bad value raises :class:`InvalidDuplicateDetectionWindow`."""
    return parse_window(read(DUPLICATE_DETECTION_WINDOW, env) or "PT10M")


def iso_window(window: timedelta) -> str:
    """``window`` as the ISO 8601 text the plan shows (whole minutes as ``PT<n>M``, else seconds)."""
    seconds = int(window.total_seconds())
    return f"PT{seconds // 60}M" if seconds % 60 == 0 else f"PT{seconds}S"
