"""One envelope, one SDK adapter, one archive mapping: the PartitionKey rules every copy obeys, and the
round trip through an archive row."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.archive.rows import archive_row, envelope_from_row, time_to_live
from shared.envelope import Envelope, PartitionKeyConflict, PartitionKeyPolicy, copy_partition_key
from shared.envelope.sdk import to_message
from shared.messages import IncomingMessage
from shared.router.service import bridged_copy

SESSION_WINS, REFUSE = PartitionKeyPolicy.SESSION_WINS, PartitionKeyPolicy.REFUSE


@pytest.mark.parametrize("policy", [SESSION_WINS, REFUSE])
@pytest.mark.parametrize(
    ("session_id", "partition_key"), [(None, None), (None, "p"), ("s", None), ("s", "s")]
)
def test_a_partition_key_that_does_not_conflict_is_kept_as_it_is(
    policy: PartitionKeyPolicy, session_id: str | None, partition_key: str | None
) -> None:
    envelope = Envelope(session_id=session_id, partition_key=partition_key)
    assert copy_partition_key(envelope, policy) == partition_key


def test_a_conflicting_partition_key_yields_to_the_session_or_is_refused() -> None:
    envelope = Envelope(session_id="s", partition_key="other")
    assert copy_partition_key(envelope, SESSION_WINS) == "s"
    with pytest.raises(PartitionKeyConflict, match="partition_key"):
        copy_partition_key(envelope, REFUSE)
    message = to_message(envelope, SESSION_WINS)
    assert (message.session_id, message.partition_key) == ("s", "s")


def test_a_bridged_copy_keeps_the_partition_key_of_a_message_without_session() -> None:
    incoming = IncomingMessage(
        body=b"{}", message_id="m", partition_key="p", time_to_live=timedelta(seconds=9)
    )
    copy = bridged_copy(incoming, "fallback")
    assert (copy.message_id, copy.session_id, copy.partition_key) == ("m", None, "p")
    assert copy.time_to_live == timedelta(seconds=9)
    assert copy.application_properties is not None
    assert copy.application_properties["busbar.bridged-from"] == "fallback"


def test_an_envelope_survives_its_archive_row() -> None:
    envelope = Envelope(
        body=b"payload",
        message_id="m-1",
        content_type="application/json",
        correlation_id="c",
        session_id="s",
        subject="subject",
        reply_to="r",
        reply_to_session_id="rs",
        to="t",
        partition_key="s",
        time_to_live=timedelta(minutes=5),
        application_properties={"tenant": "acme", "at": datetime(2026, 1, 2, tzinfo=UTC), "blob": b"\xff"},
        dead_letter_reason="MaxDeliveryCountExceeded",
    )
    row = archive_row(
        envelope,
        run_id="run",
        archived_at=datetime(2026, 1, 2, 23, 0, tzinfo=UTC),
        decision="archive",
        decision_detail=None,
        source_entity="orders",
        source_kind="queue",
        source_topic=None,
        source_subscription=None,
        target_entity=None,
        contract_type=None,
        redrive_count=0,
    )
    assert (row.archived_date, row.time_to_live_ms) == ("2026-01-02", 300_000)
    assert envelope_from_row(row) == envelope


def test_an_archived_time_to_live_beyond_amqp_means_the_entity_default() -> None:
    assert time_to_live(None) is None
    assert time_to_live(0) is None
    assert time_to_live(2**32) is None
    assert time_to_live(1500) == timedelta(milliseconds=1500)
