"""The plan-row columns the replay's sender, ledger and report share, named once.

A plan row is an archive row plus ``replay_key`` and ``target_entity`` (:mod:`spark.transforms`). The
ledger records its :data:`IDENTITY`; the report repeats :data:`REPORTED` after ``replay_run_id``; the
sender reads :data:`SEND` (selected before ``.rdd`` so no more than that is shipped to the executors).
"""

from __future__ import annotations

IDENTITY: tuple[str, ...] = (
    "replay_key",
    "message_id",
    "source_entity",
    "target_entity",
    "session_id",
    "sequence_number",
)
"""Which message went where: the ledger's columns before its status, the report's after the run id."""

REPORTED: tuple[str, ...] = (*IDENTITY, "dead_letter_reason", "contract_type")
"""What a report row says about its plan row before the outcome."""

MESSAGE: tuple[str, ...] = (
    "correlation_id",
    "subject",
    "content_type",
    "reply_to",
    "reply_to_session_id",
    "to",
    "partition_key",
    "time_to_live_ms",
    "body",
    "application_properties",
)
"""The archived message's remaining fields, which the sender rebuilds it from."""

SEND: tuple[str, ...] = (*REPORTED, *MESSAGE)
"""The plan columns the sender reads."""
