"""Executor-side pieces that need no broker: message building and the per-task rate limiter."""

from __future__ import annotations

import uuid
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from shared.archive.properties import PropertyCodecError
from shared.rate_limit import BatchPacer as RateLimiter
from spark.params import PropertyTransform
from spark.properties import ORIGINAL_MESSAGE_ID_PROPERTY, REPLAY_RUN_ID_PROPERTY
from spark.sender import build_message, derived_message_id
from tests.spark.archive_factory import archive_row


def _plan_row(**fields: Any) -> SimpleNamespace:
    """An archive row as the sender sees it (attribute access, plus the plan's replay_key)."""
    return SimpleNamespace(**asdict(archive_row(**fields)), replay_key="k")


def test_the_message_keeps_its_identity_and_typed_properties_plus_the_declared_edits() -> None:
    moment = datetime(2026, 3, 1, tzinfo=UTC)
    row = _plan_row(
        message_id="m-1",
        session_id="s-1",
        partition_key="s-1",
        correlation_id="c-1",
        subject="OrderPlaced",
        time_to_live_ms=90_000,
        properties={
            "n": 7,
            "flag": True,
            "raw": b"\x00\xff",
            "at": moment,
            "id": uuid.UUID(int=1),
            "gone": "x",
            "DeadLetterReason": "previous failure",
        },
    )
    transform = PropertyTransform(set_properties=(("x-fixed", "INC-42"),), remove_properties=("gone",))
    message = build_message(row, transform, "replay-1")
    assert (message.message_id, message.session_id, message.partition_key) == ("m-1", "s-1", "s-1")
    assert (message.correlation_id, message.subject, message.content_type) == (
        "c-1",
        "OrderPlaced",
        "application/json",
    )
    assert message.time_to_live == timedelta(seconds=90)
    assert message.body == b'{"n": 1}'
    assert message.application_properties == {
        "n": 7,
        "flag": True,
        "raw": b"\x00\xff",
        "at": moment,
        "id": uuid.UUID(int=1),
        "x-fixed": "INC-42",
        REPLAY_RUN_ID_PROPERTY: "replay-1",
    }
    # On the wire each keeps its AMQP type (proton: a bytes value is a binary, not UTF-8 text).
    on_wire: dict[str, Any] = message.to_proton().properties or {}
    assert type(on_wire["raw"]) is bytes


def test_a_message_archived_without_message_id_gets_a_stable_derived_one() -> None:
    row = _plan_row(message_id=None)
    first = build_message(row, PropertyTransform(), "replay-1").message_id
    assert first == build_message(row, PropertyTransform(), "replay-2").message_id == derived_message_id("k")


def test_the_derive_policy_sends_a_stable_new_message_id_and_keeps_the_original_as_a_property() -> None:
    row = _plan_row(message_id="m-1")
    first = build_message(row, PropertyTransform(), "replay-1", "derive")
    second = build_message(row, PropertyTransform(), "replay-2", "derive")
    assert first.message_id == second.message_id == derived_message_id("k") != "m-1"
    assert first.application_properties is not None
    assert first.application_properties[ORIGINAL_MESSAGE_ID_PROPERTY] == "m-1"


def test_rows_that_cannot_be_sent_as_archived_are_refused_clearly() -> None:
    with pytest.raises(ValueError, match="partition_key"):
        build_message(_plan_row(session_id="s-1", partition_key="other"), PropertyTransform(), "r")
    with pytest.raises(PropertyCodecError):
        build_message(_plan_row(application_properties='{"x": {"$nope": "1"}}'), PropertyTransform(), "r")


def test_the_rate_limiter_spaces_batches_to_the_task_share_of_the_rate() -> None:
    now = [100.0]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    limiter = RateLimiter(50.0, clock=lambda: now[0], sleep=sleep)
    limiter.acquire(100)  # first batch goes at once
    limiter.acquire(50)  # 100 messages at 50/s: the next batch waits 2 s
    now[0] += 5.0  # idle time is not banked beyond one batch
    limiter.acquire(10)
    limiter.acquire(10)
    assert sleeps == pytest.approx([2.0, 0.2])
    unlimited = RateLimiter(0.0, clock=lambda: 0.0, sleep=sleep)
    unlimited.acquire(10**6)
    assert len(sleeps) == 2
