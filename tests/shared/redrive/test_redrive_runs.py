"""Re-drive runs against the emulator: each rule of issue 9, end to end through the real SDKs."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from emulator.tier import Sku
from shared.archive.reader import read_archive, read_run_summary, row_properties
from shared.redrive.job import run_redrive
from shared.redrive.policy import Action
from shared.redrive.summary import RunSummary
from tests.shared.redrive.redrive_support import (
    Provisioner,
    dead_letter_queue_messages,
    dead_letter_subscription_messages,
    drain_queue,
    message,
    peek_queue,
    peek_subscription,
    redrive_env,
    text_properties,
)

DLQ = ServiceBusSubQueue.DEAD_LETTER


def run(emulator: Any, archive: Path, entities: list[str], **settings: str) -> RunSummary:
    return run_redrive(redrive_env(emulator, archive, entities, **settings), receive_wait=0.3)


def test_a_redriven_copy_keeps_body_ids_and_properties_and_moves_the_dead_letter_metadata(
    emulator: Any, provision: Any, tmp_path: Path
) -> None:
    queue = provision.queue()
    correlation = uuid.uuid4()
    original = message(
        b'{"order": 42}',
        message_id="order-42",
        correlation_id="corr-1",
        subject="OrderPlaced",
        content_type="application/json",
        reply_to="replies",
        to="orders",
        time_to_live=timedelta(hours=1),
        application_properties={
            "tenant": "acme",
            "amount": 12,
            "ratio": 0.5,
            "urgent": True,
            "ref": correlation,
        },
    )
    dead_letter_queue_messages(
        emulator.connection_string, queue, [original], "MaxDeliveryCountExceeded", "boom"
    )

    summary = run(emulator, tmp_path, [queue])

    assert summary.totals()["redriven"] == 1
    assert summary.to_dict()["entities"] == {queue: {"MaxDeliveryCountExceeded": {"redriven": 1}}}
    assert peek_queue(emulator.connection_string, queue, DLQ) == []
    (copy,) = drain_queue(emulator.connection_string, queue)
    assert b"".join(copy.body) == b'{"order": 42}'
    assert (copy.message_id, copy.correlation_id, copy.subject) == ("order-42", "corr-1", "OrderPlaced")
    assert (copy.content_type, copy.reply_to, copy.to) == ("application/json", "replies", "orders")
    assert copy.time_to_live == timedelta(hours=1)
    properties = text_properties(copy)
    assert {k: properties[k] for k in ("tenant", "amount", "ratio", "urgent", "ref")} == {
        "tenant": "acme",
        "amount": 12,
        "ratio": 0.5,
        "urgent": True,
        "ref": correlation,
    }
    assert copy.dead_letter_reason is None
    assert "DeadLetterReason" not in properties and "DeadLetterErrorDescription" not in properties
    assert properties["busbar.redrive.reason"] == "MaxDeliveryCountExceeded"
    assert properties["busbar.redrive.description"] == "boom"
    assert properties["busbar.redrive.source"] == queue
    assert properties["busbar.redrive.count"] == 1
    assert properties["busbar.redrive.run_id"] == summary.run_id


def test_a_subscription_dead_letter_goes_back_only_to_the_queue_its_subscription_forwards_to(
    emulator: Any, provision: Any, tmp_path: Path
) -> None:
    billing_queue, shipping_queue = provision.queue(), provision.queue()
    topic = provision.topic()
    billing = provision.subscription(topic)
    shipping = provision.subscription(topic, forward_to=shipping_queue)
    dead_letter_subscription_messages(
        emulator.connection_string,
        topic,
        billing,
        [message(b"invoice", message_id="inv-1")],
        "TTLExpiredException",
    )
    drain_queue(emulator.connection_string, shipping_queue)  # shipping handled its copy normally
    provision.subscription(topic, billing, forward_to=billing_queue)  # the subscriber's endpoint queue
    source = f"{topic}/Subscriptions/{billing}"

    summary = run(emulator, tmp_path, [f"{topic}/Subscriptions/*"])

    assert summary.to_dict()["entities"] == {source: {"TTLExpiredException": {"redriven": 1}}}
    (copy,) = drain_queue(emulator.connection_string, billing_queue)
    assert copy.message_id == "inv-1"
    assert text_properties(copy)["busbar.redrive.source"] == source
    assert drain_queue(emulator.connection_string, shipping_queue) == []  # no fan-out through the topic
    assert peek_subscription(emulator.connection_string, topic, shipping, DLQ) == []
    assert peek_subscription(emulator.connection_string, topic, billing, DLQ) == []


def test_a_subscription_without_a_forward_to_queue_is_archived_and_never_sent_to_the_topic(
    emulator: Any, provision: Any, tmp_path: Path
) -> None:
    topic = provision.topic()
    lonely, other = provision.subscription(topic), provision.subscription(topic)
    dead_letter_subscription_messages(
        emulator.connection_string,
        topic,
        lonely,
        [message(b"x", message_id="m-1")],
        "MaxDeliveryCountExceeded",
    )
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        client.get_subscription_receiver(topic, other) as receiver,
    ):
        for item in receiver.receive_messages(max_message_count=1, max_wait_time=2):
            receiver.complete_message(item)

    summary = run(emulator, tmp_path, [f"{topic}/Subscriptions/{lonely}"])

    assert summary.totals()["archived"] == 1
    assert summary.to_dict()["decisions"] == {f"{topic}/Subscriptions/{lonely}": {"no-private-target": 1}}
    assert peek_subscription(emulator.connection_string, topic, other) == []
    (row,) = read_archive(str(tmp_path)).to_pylist()
    assert (row["decision"], row["decision_detail"], row["target_entity"]) == (
        "no-private-target",
        "no forward-to queue",
        None,
    )
    assert (row["source_kind"], row["source_topic"], row["source_subscription"]) == (
        "subscription",
        topic,
        lonely,
    )


def test_a_poison_message_is_archived_instead_of_redriven_after_max_redrives(
    emulator: Any, provision: Any, tmp_path: Path
) -> None:
    queue = provision.queue()
    cs = emulator.connection_string
    dead_letter_queue_messages(cs, queue, [message(b"poison", message_id="p-1")], "MaxDeliveryCountExceeded")

    counts = []
    for _ in range(3):
        summary = run(emulator, tmp_path, [queue], BUSBAR_REDRIVE_MAX_REDRIVES="2")
        counts.append(summary.totals())
        # the handler fails again: the re-driven copy is dead-lettered once more
        with (
            ServiceBusClient.from_connection_string(cs) as client,
            client.get_queue_receiver(queue) as receiver,
        ):
            for item in receiver.receive_messages(max_message_count=1, max_wait_time=1):
                receiver.dead_letter_message(
                    item, reason="MaxDeliveryCountExceeded", error_description="again"
                )

    assert [c["redriven"] for c in counts] == [1, 1, 0]
    assert counts[2]["archived"] == 1
    assert peek_queue(cs, queue, DLQ) == [] and peek_queue(cs, queue) == []
    (row,) = read_archive(str(tmp_path)).to_pylist()
    assert (row["decision"], row["redrive_count"], row["message_id"]) == ("redrive-limit", 2, "p-1")
    assert row["decision_detail"] == "re-driven 2 times (max 2)"


def test_a_resend_inside_the_duplicate_detection_window_is_held_in_the_dead_letter_queue(
    emulator: Any, provision: Any, tmp_path: Path
) -> None:
    queue = provision.queue(requires_duplicate_detection=True, duplicate_detection_history_time_window="PT1H")
    cs = emulator.connection_string
    dead_letter_queue_messages(cs, queue, [message(b"dup", message_id="d-1")], "MaxDeliveryCountExceeded")

    summary = run(emulator, tmp_path, [queue])

    assert summary.totals() == {"redriven": 0, "archived": 0, "held": 1, "left": 0, "failed": 0}
    assert summary.to_dict()["decisions"] == {queue: {"duplicate-window": 1}}
    assert [m.message_id for m in peek_queue(cs, queue, DLQ)] == ["d-1"]  # still there: not lost
    assert drain_queue(cs, queue) == []


def test_a_hold_queue_dead_letter_its_endpoint_queue_saw_inside_the_window_is_held_not_dropped(
    emulator: Any, provision: Any, tmp_path: Path
) -> None:
    """Every endpoint queue requires duplicate detection: a parked message went through its endpoint queue
    before its hold queue, so sending its dead letter back inside the window would be accepted and dropped.
    The hold queue's enqueued time is later than the endpoint queue's, so the guard holds it."""
    window = "PT1H"
    queue = provision.queue(requires_duplicate_detection=True, duplicate_detection_history_time_window=window)
    held = provision.queue(
        f"{queue}.held", requires_duplicate_detection=True, duplicate_detection_history_time_window=window
    )
    cs = emulator.connection_string
    with ServiceBusClient.from_connection_string(cs) as client, client.get_queue_sender(queue) as sender:
        sender.send_messages(message(b"parked", message_id="p-held"))
    assert [m.message_id for m in drain_queue(cs, queue)] == ["p-held"]  # its blocker held the key: parked
    dead_letter_queue_messages(
        cs, held, [message(b"parked", message_id="p-held")], "MaxDeliveryCountExceeded"
    )

    summary = run(emulator, tmp_path, [held])

    assert summary.totals() == {"redriven": 0, "archived": 0, "held": 1, "left": 0, "failed": 0}
    assert summary.to_dict()["decisions"] == {held: {"duplicate-window": 1}}
    assert [m.message_id for m in peek_queue(cs, held, DLQ)] == ["p-held"]  # still there: not lost


def test_a_console_retry_inside_the_duplicate_detection_window_is_held_in_the_dead_letter_queue_too(
    emulator: Any, provision: Any, tmp_path: Path
) -> None:
    """The console's retry runs the timer's code with the operator's selection and action (``OpsService.
    retry``): the window guard still applies, so an operator's retry never loses a message to the broker's
    duplicate detection; it stays held until the window has passed."""
    queue = provision.queue(requires_duplicate_detection=True, duplicate_detection_history_time_window="PT1H")
    cs = emulator.connection_string
    dead_letter_queue_messages(cs, queue, [message(b"dup", message_id="d-ops")], "MaxDeliveryCountExceeded")
    [dead] = peek_queue(cs, queue, DLQ)
    assert dead.sequence_number is not None

    summary = run_redrive(
        redrive_env(emulator, tmp_path, [queue]),
        receive_wait=0.3,
        selection={queue.lower(): frozenset({dead.sequence_number})},
        operator_action=Action.REDRIVE,
    )

    assert summary.totals()["held"] == 1 and summary.totals()["redriven"] == 0
    assert [m.message_id for m in peek_queue(cs, queue, DLQ)] == ["d-ops"]  # still there: not lost
    assert drain_queue(cs, queue) == []


def test_with_the_archive_policy_a_resend_inside_the_duplicate_window_is_archived(
    emulator: Any, provision: Any, tmp_path: Path
) -> None:
    queue = provision.queue(requires_duplicate_detection=True, duplicate_detection_history_time_window="PT1H")
    cs = emulator.connection_string
    dead_letter_queue_messages(cs, queue, [message(b"dup", message_id="d-2")], "MaxDeliveryCountExceeded")

    summary = run(emulator, tmp_path, [queue], BUSBAR_REDRIVE_POLICY='{"duplicate_window": "archive"}')

    assert summary.totals()["archived"] == 1
    assert peek_queue(cs, queue, DLQ) == []
    (row,) = read_archive(str(tmp_path)).to_pylist()
    assert (row["decision"], row["message_id"], row["target_entity"]) == ("duplicate-window", "d-2", queue)


def test_the_broker_drops_a_same_id_message_scheduled_inside_the_window_so_holding_is_the_only_safe_choice(
    emulator: Any, provision: Any
) -> None:
    queue = provision.queue(requires_duplicate_detection=True, duplicate_detection_history_time_window="PT1H")
    cs = emulator.connection_string
    with ServiceBusClient.from_connection_string(cs) as client, client.get_queue_sender(queue) as sender:
        sender.send_messages(message(b"first", message_id="same"))
        sender.schedule_messages(
            message(b"second", message_id="same"), datetime.now(UTC) + timedelta(seconds=1)
        )
    time.sleep(1.5)
    assert [b"".join(m.body) for m in drain_queue(cs, queue)] == [b"first"]


def test_session_ids_are_kept_and_messages_of_a_session_keep_their_order(
    emulator: Any, provision: Any, tmp_path: Path
) -> None:
    queue = provision.queue(requires_session=True)
    cs = emulator.connection_string
    for session in ("s-1", "s-2"):
        batch = [message(f"{session}:{i}".encode(), session_id=session) for i in range(5)]
        dead_letter_queue_messages(cs, queue, batch, "MaxDeliveryCountExceeded", session_id=session)

    summary = run(emulator, tmp_path, [queue])

    assert summary.totals()["redriven"] == 10
    for session in ("s-1", "s-2"):
        received = drain_queue(cs, queue, session_id=session)
        assert [m.session_id for m in received] == [session] * 5
        assert [b"".join(m.body).decode() for m in received] == [f"{session}:{i}" for i in range(5)]


def test_a_copy_the_target_refuses_keeps_its_original_and_holds_its_sessions_later_messages(
    emulator: Any, provision: Any, tmp_path: Path
) -> None:
    # Each copy has its own outcome: a 1 MB queue takes the copies that fit and refuses the next one
    # (QuotaExceeded, amqp:resource-limit-exceeded). Only the originals whose copy was taken are completed,
    # and a refused copy holds its session's later messages, so no session is overtaken, nothing is lost
    # and nothing is sent twice.
    queue = provision.queue(requires_session=True, max_size_in_megabytes=1)
    cs = emulator.connection_string
    chunk = b"x" * (200 * 1024)
    for session in ("s-1", "s-2"):
        for i in range(2):  # one at a time: two would not fit one SDK batch (256 KB)
            original = message(chunk, message_id=f"{session}:{i}", session_id=session)
            dead_letter_queue_messages(cs, queue, [original], "MaxDeliveryCountExceeded", session_id=session)

    summary = run(emulator, tmp_path, [queue])

    assert summary.totals() == {"redriven": 2, "archived": 0, "held": 1, "left": 0, "failed": 1}
    [error] = summary.to_dict()["errors"]
    assert "send failed" in str(error) and "amqp:resource-limit-exceeded" in str(error)
    assert [m.message_id for m in peek_queue(cs, queue, DLQ)] == ["s-2:0", "s-2:1"]  # kept, in order
    assert [m.message_id for m in drain_queue(cs, queue, session_id="s-1")] == ["s-1:0", "s-1:1"]
    assert drain_queue(cs, queue, session_id="s-2") == []  # no copy of the refused or the held one


def test_a_message_without_session_id_for_a_session_queue_is_archived_not_redriven_into_a_rejection(
    emulator: Any, provision: Any, tmp_path: Path
) -> None:
    topic = provision.topic()
    target = provision.queue(requires_session=True)
    subscription = provision.subscription(topic)
    dead_letter_subscription_messages(
        emulator.connection_string, topic, subscription, [message(b"x")], "MaxDeliveryCountExceeded"
    )
    provision.subscription(topic, subscription, forward_to=target)

    summary = run(emulator, tmp_path, [f"{topic}/Subscriptions/{subscription}"])

    assert summary.to_dict()["decisions"] == {f"{topic}/Subscriptions/{subscription}": {"no-session-id": 1}}


def test_permanent_failures_are_archived_with_every_property_and_readable_by_pyarrow(
    emulator: Any, provision: Any, tmp_path: Path
) -> None:
    queue = provision.queue()
    cs = emulator.connection_string
    ref = uuid.uuid4()
    original = message(
        b"\x00\x01 not json",
        message_id="bad-1",
        session_id=None,
        correlation_id="c-9",
        subject="OrderPlaced",
        content_type="application/octet-stream",
        time_to_live=timedelta(minutes=30),
        application_properties={
            "NServiceBus.EnclosedMessageTypes": "Sales.OrderPlaced, Sales;Sales.IOrderEvent",
            "count": 3,
            "ratio": 1.25,
            "flag": False,
            "ref": ref,
        },
    )
    dead_letter_queue_messages(cs, queue, [original], "SchemaValidationFailed", "field 'order' is required")

    summary = run(emulator, tmp_path, [queue], BUSBAR_REDRIVE_ENTITIES=queue)

    assert summary.totals()["archived"] == 1
    assert peek_queue(cs, queue, DLQ) == [] and peek_queue(cs, queue) == []
    (path,) = summary.archive_files
    assert Path(path).name.startswith(f"{summary.run_id}-")
    assert f"entity={queue}" in path and "date=" in path
    (row,) = pq.read_table(path).to_pylist()
    assert row["run_id"] == summary.run_id
    assert row["decision"] == "archive" and row["decision_detail"] == "reason SchemaValidationFailed"
    assert (row["source_entity"], row["source_kind"], row["target_entity"]) == (queue, "queue", queue)
    assert row["body"] == b"\x00\x01 not json"
    assert (row["message_id"], row["correlation_id"], row["subject"]) == ("bad-1", "c-9", "OrderPlaced")
    assert row["content_type"] == "application/octet-stream"
    assert row["time_to_live_ms"] == 30 * 60 * 1000
    assert row["contract_type"] == "Sales.OrderPlaced, Sales"
    assert row["dead_letter_reason"] == "SchemaValidationFailed"
    assert row["dead_letter_description"] == "field 'order' is required"
    assert row["delivery_count"] is not None and row["sequence_number"] is not None
    assert row["enqueued_time"] is not None and row["archived_at"] >= row["enqueued_time"]
    assert row["archived_date"] == row["archived_at"].strftime("%Y-%m-%d")
    assert row["redrive_count"] == 0
    properties = row_properties(row)
    assert properties["count"] == 3 and properties["ratio"] == 1.25 and properties["flag"] is False
    assert properties["ref"] == ref
    assert properties["DeadLetterReason"] == "SchemaValidationFailed"
    written = read_run_summary(str(tmp_path), summary.run_id)
    assert written["totals"]["archived"] == 1
    assert written["entities"] == {queue: {"SchemaValidationFailed": {"archived": 1}}}


def test_reasons_the_policy_leaves_stay_in_the_dead_letter_queue_and_the_run_ends(
    emulator: Any, provision: Any, tmp_path: Path
) -> None:
    queue = provision.queue()
    cs = emulator.connection_string
    dead_letter_queue_messages(cs, queue, [message() for _ in range(3)], "NeedsHuman")

    summary = run(emulator, tmp_path, [queue], BUSBAR_REDRIVE_POLICY='{"reasons": {"NeedsHuman": "leave"}}')

    assert summary.to_dict()["entities"] == {queue: {"NeedsHuman": {"left": 3}}}
    assert len(peek_queue(cs, queue, DLQ)) == 3
    assert not (tmp_path / "date=").exists()


def test_a_plan_counts_what_a_run_would_do_and_settles_nothing(
    emulator: Any, provision: Any, tmp_path: Path
) -> None:
    queue = provision.queue()
    cs = emulator.connection_string
    dead_letter_queue_messages(cs, queue, [message(), message()], "MaxDeliveryCountExceeded")
    dead_letter_queue_messages(cs, queue, [message()], "ValidationFailed")

    summary = run_redrive(redrive_env(emulator, tmp_path, [queue]), dry_run=True)

    assert summary.dry_run
    assert summary.to_dict()["entities"] == {
        queue: {"MaxDeliveryCountExceeded": {"redriven": 2}, "ValidationFailed": {"archived": 1}}
    }
    assert len(peek_queue(cs, queue, DLQ)) == 3 and peek_queue(cs, queue) == []
    assert not tmp_path.joinpath("_runs").exists()


def test_the_message_budget_bounds_a_run_and_the_next_run_continues(
    emulator: Any, provision: Any, tmp_path: Path
) -> None:
    queue = provision.queue()
    cs = emulator.connection_string
    dead_letter_queue_messages(cs, queue, [message() for _ in range(5)], "MaxDeliveryCountExceeded")

    first = run(emulator, tmp_path, [queue], BUSBAR_REDRIVE_MAX_MESSAGES="3")
    second = run(emulator, tmp_path, [queue], BUSBAR_REDRIVE_MAX_MESSAGES="3")

    assert (first.totals()["redriven"], first.stop_reason) == (3, "max-messages")
    assert (second.totals()["redriven"], second.stop_reason) == (2, "drained")
    assert len(drain_queue(cs, queue)) == 5


def test_an_archive_that_cannot_be_written_leaves_the_messages_dead_lettered(
    emulator: Any, provision: Any, tmp_path: Path
) -> None:
    queue = provision.queue()
    cs = emulator.connection_string
    dead_letter_queue_messages(cs, queue, [message(), message()], "ValidationFailed")
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the archive directory should be")

    summary = run(emulator, blocker / "archive", [queue])

    assert summary.totals()["failed"] == 2 and summary.totals()["archived"] == 0
    assert "archive write failed" in summary.errors[0]["error"]
    assert "summary write failed" in summary.errors[-1]["error"]
    assert len(peek_queue(cs, queue, DLQ)) == 2


def test_an_entity_setting_that_matches_nothing_is_reported(emulator: Any, tmp_path: Path) -> None:
    missing = f"missing-{uuid.uuid4().hex[:8]}"

    summary = run(emulator, tmp_path, [missing])

    assert summary.errors == [
        {"entity": missing, "error": "BUSBAR_REDRIVE_ENTITIES entry matches no queue or subscription"}
    ]


def test_a_copy_larger_than_the_target_accepts_is_archived_as_oversize_not_sent(
    make_emulator: Any, tmp_path: Path
) -> None:
    """The target's limit shrank after the message was dead-lettered. Only on a Premium namespace can a
    queue's maximum message size change (1024..102400 KB); Standard's is fixed at 256 KB and ARM refuses the
    property there, as Azure does."""
    premium = make_emulator(sku=Sku.PREMIUM)
    provision = Provisioner(premium)
    cs = premium.connection_string
    big = b"x" * (1536 * 1024)
    try:
        queue = provision.queue(max_message_size_in_kilobytes=2048)
        with ServiceBusClient.from_connection_string(cs) as client:
            # Sent alone: the SDK caps a batch at 1 MB on Premium, whatever the entity's message size.
            with client.get_queue_sender(queue) as sender:
                sender.send_messages(message(big, message_id="big"))
            with client.get_queue_receiver(queue) as receiver:
                (received,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
                receiver.dead_letter_message(received, reason="MaxDeliveryCountExceeded")
        provision.queue(queue, max_message_size_in_kilobytes=1024)  # the target's limit shrank meanwhile
    finally:
        provision.close()

    summary = run(premium, tmp_path, [queue])

    assert summary.to_dict()["decisions"] == {queue: {"oversize": 1}}
    assert peek_queue(cs, queue) == [] and peek_queue(cs, queue, DLQ) == []
    (row,) = read_archive(str(tmp_path)).to_pylist()
    assert (row["message_id"], row["body"], row["decision_detail"]) == (
        "big",
        big,
        "larger than 1048576 bytes",
    )


def test_a_message_that_stays_holds_the_later_messages_of_its_session_but_not_other_sessions(
    emulator: Any, provision: Any, tmp_path: Path
) -> None:
    queue = provision.queue(requires_session=True)
    cs = emulator.connection_string
    first = ServiceBusMessage(b"s-1:first", session_id="s-1")
    later = ServiceBusMessage(b"s-1:later", session_id="s-1")
    other = ServiceBusMessage(b"s-2:only", session_id="s-2")
    dead_letter_queue_messages(cs, queue, [first], "ValidationFailed", session_id="s-1")
    dead_letter_queue_messages(cs, queue, [later], "MaxDeliveryCountExceeded", session_id="s-1")
    dead_letter_queue_messages(cs, queue, [other], "MaxDeliveryCountExceeded", session_id="s-2")
    blocker = tmp_path / "archive"
    blocker.write_text("not a directory: the first message cannot be archived and stays")

    summary = run(emulator, blocker, [queue])

    assert summary.to_dict()["entities"] == {
        queue: {"ValidationFailed": {"failed": 1}, "MaxDeliveryCountExceeded": {"held": 1, "redriven": 1}}
    }
    assert summary.to_dict()["decisions"][queue]["session-order"] == 1
    assert [b"".join(m.body) for m in drain_queue(cs, queue, session_id="s-2")] == [b"s-2:only"]
    assert drain_queue(cs, queue, session_id="s-1") == []  # "later" never overtook "first"
    assert [b"".join(m.body) for m in peek_queue(cs, queue, DLQ)] == [b"s-1:first", b"s-1:later"]


def test_a_message_the_archive_cannot_encode_stays_dead_lettered_and_the_rest_of_the_queue_proceeds(
    emulator: Any, provision: Any, tmp_path: Path
) -> None:
    queue = provision.queue()
    cs = emulator.connection_string
    odd = message(b"odd", message_id="odd", application_properties={"list": [1, 2]})  # AMQP list property
    dead_letter_queue_messages(cs, queue, [odd, message(b"fine", message_id="fine")], "ValidationFailed")

    summary = run(emulator, tmp_path, [queue])

    assert summary.to_dict()["entities"] == {queue: {"ValidationFailed": {"failed": 1, "archived": 1}}}
    (error,) = summary.errors
    assert "archive row failed: PropertyCodecError" in error["error"] and "type list" in error["error"]
    assert [m.message_id for m in peek_queue(cs, queue, DLQ)] == ["odd"]
    assert read_archive(str(tmp_path)).column("message_id").to_pylist() == ["fine"]
