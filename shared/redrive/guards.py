"""The checks a re-drive must pass before it sends: loop count and duplicate-detection window. Pure
(the size check needs the SDK's encoder: :func:`shared.redrive.copy.oversize`).

Duplicate detection: a target with ``requires_duplicate_detection`` silently drops a message whose
MessageId it saw inside its window; completing the dead-lettered original after such a "successful" send
loses the message (NServiceBus.AzureServiceBus #201, azure-service-bus #748). The target may have seen the
MessageId when the message was first enqueued (the dead-lettered message keeps its enqueued time) or when
an earlier run re-drove it (``busbar.redrive.at``), so the re-send is safe only after the later of the two
plus the window. Scheduling the copy for after the window does not help: the broker checks duplicates when
a message is scheduled, not when it activates (pinned in tests/shared/redrive), so the message is held in
the dead-letter queue instead.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from shared.redrive.entities import Target
from shared.redrive.message import DeadLetter

WINDOW_MARGIN = timedelta(seconds=5)
"""Extra wait after the window, for clock skew between us and the broker."""


def redrive_limit_reached(dead_letter: DeadLetter, max_redrives: int) -> bool:
    """True when the message has already been re-driven ``max_redrives`` times (a poison loop)."""
    return dead_letter.redrive_count >= max_redrives


def duplicate_window_end(dead_letter: DeadLetter, target: Target, now: datetime) -> datetime | None:
    """When a re-send of ``dead_letter`` to ``target`` stops being a duplicate; ``None``: safe now."""
    if not target.requires_duplicate_detection or dead_letter.message_id is None:
        return None
    last_seen = [t for t in (dead_letter.enqueued_time, dead_letter.last_redrive_at) if t is not None]
    if not last_seen:
        # The broker always stamps the enqueued time; without one, assume the worst.
        return now + target.duplicate_detection_window + WINDOW_MARGIN
    safe_from = max(last_seen) + target.duplicate_detection_window + WINDOW_MARGIN
    return safe_from if safe_from > now else None
