"""Application properties of a replayed message: the archive's typed JSON (decoded by
:mod:`shared.archive.properties`, the re-drive's own codec) plus the job's declared edits."""

from __future__ import annotations

from typing import Any

from shared.archive.properties import PropertyCodecError, PropertyValue, decode_properties
from spark.params import PropertyTransform

__all__ = [
    "DEAD_LETTER_PROPERTIES",
    "ORIGINAL_MESSAGE_ID_PROPERTY",
    "REPLAY_RUN_ID_PROPERTY",
    "PropertyCodecError",
    "decode_properties",
    "transformed",
]

REPLAY_RUN_ID_PROPERTY = "x-replay-run-id"
"""Stamped on every replayed message so a later check can find re-failures of a replay run."""

DEAD_LETTER_PROPERTIES = ("DeadLetterReason", "DeadLetterErrorDescription")
"""Set by the broker on dead-lettering and archived with the message (the archive keeps them as columns
too); like the re-drive, the replay does not send them back: they describe the previous failure."""

ORIGINAL_MESSAGE_ID_PROPERTY = "x-original-message-id"
"""Set when the replay sends under a derived MessageId (``--message_id_policy derive``)."""


def transformed(
    properties: dict[str, PropertyValue], transform: PropertyTransform, replay_run_id: str
) -> dict[str, Any]:
    """``properties`` without the dead-letter annotations, after the job's removals and settings, stamped
    with the replay run id."""
    dropped = (*DEAD_LETTER_PROPERTIES, *transform.remove_properties)
    result: dict[str, Any] = {key: value for key, value in properties.items() if key not in dropped}
    result.update(dict(transform.set_properties))
    result[REPLAY_RUN_ID_PROPERTY] = replay_run_id
    return result
