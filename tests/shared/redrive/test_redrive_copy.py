"""Building the re-driven copy, the size guard, entity paths and target discovery from ARM models."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import SimpleNamespace

import pytest

from shared.envelope.properties import Char, Long
from shared.redrive.copy import CopyError, build_redrive_message, oversize
from shared.redrive.entities import EntityRef, Target
from shared.redrive.message import DeadLetter
from shared.redrive.targets import plan_entities, select

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def dead_letter(**fields: object) -> DeadLetter:
    values: dict[str, object] = {
        "source": EntityRef.subscription("events", "billing"),
        "sequence_number": 12,
        "body": b"payload",
        "body_type": "data",
        "application_properties": {
            "tenant": "acme",
            "DeadLetterReason": "MaxDeliveryCountExceeded",
            "DeadLetterErrorDescription": "x" * 5000,
            "busbar.redrive.count": 1,
            "busbar.redrive.reason": "older reason",
        },
        "message_id": "m-1",
        "session_id": "s-1",
        "partition_key": "s-1",
        "dead_letter_reason": "MaxDeliveryCountExceeded",
        "dead_letter_description": "x" * 5000,
        "dead_letter_source": "events/Subscriptions/billing",
        "time_to_live": timedelta(minutes=5),
    }
    values.update(fields)
    return DeadLetter(**values)  # type: ignore[arg-type]


def test_the_copy_replaces_dead_letter_properties_with_a_bounded_namespaced_history() -> None:
    copy = build_redrive_message(dead_letter(), "run-1", NOW)

    properties = copy.application_properties or {}
    assert properties["tenant"] == "acme"
    assert "DeadLetterReason" not in properties and "DeadLetterErrorDescription" not in properties
    assert properties["busbar.redrive.count"] == 2
    assert properties["busbar.redrive.reason"] == "MaxDeliveryCountExceeded"
    assert properties["busbar.redrive.description"] == "x" * 1024
    assert properties["busbar.redrive.source"] == "events/Subscriptions/billing"
    assert properties["busbar.redrive.dead_letter_source"] == "events/Subscriptions/billing"
    # A long, held typed (a plain int would go as a 32-bit int).
    assert properties["busbar.redrive.sequence_number"] == 12
    assert type(properties["busbar.redrive.sequence_number"]) is Long
    assert properties["busbar.redrive.at"] == NOW
    assert (copy.message_id, copy.session_id, copy.partition_key) == ("m-1", "s-1", "s-1")
    assert copy.time_to_live == timedelta(minutes=5)


def test_a_binary_property_is_copied_as_binary() -> None:
    copy = build_redrive_message(dead_letter(application_properties={"blob": b"\xff\x00"}), "run-1", NOW)
    assert copy.application_properties["blob"] == b"\xff\x00"
    on_wire: dict[str, object] = copy.to_proton().properties or {}
    sent = on_wire["blob"]
    assert type(sent) is bytes and sent == b"\xff\x00"  # proton encodes bytes as an AMQP binary


def test_a_char_property_is_copied_as_char() -> None:
    copy = build_redrive_message(dead_letter(application_properties={"grade": Char("A")}), "run-1", NOW)
    grade = copy.application_properties["grade"]
    assert grade == "A" and type(grade) is Char


def test_a_property_that_cannot_be_sent_makes_the_message_uncopyable_naming_it() -> None:
    properties = {"tenant": "acme", "price": Decimal("1E+7000")}
    with pytest.raises(CopyError, match=r"'price' cannot be sent: .*does not fit an AMQP decimal128"):
        build_redrive_message(dead_letter(application_properties=properties), "run-1", NOW)


def test_a_copy_larger_than_the_target_allows_is_oversize() -> None:
    copy = build_redrive_message(dead_letter(body=b"x" * 2000), "run-1", NOW)
    assert oversize(copy, 1024)
    assert not oversize(copy, 256 * 1024)


@pytest.mark.parametrize(
    ("path", "entity"),
    [
        ("orders", EntityRef.queue("orders")),
        ("events/Subscriptions/billing", EntityRef.subscription("events", "billing")),
        ("events/subscriptions/billing", EntityRef.subscription("events", "billing")),
    ],
)
def test_entity_paths_parse_to_queues_and_subscriptions(path: str, entity: EntityRef) -> None:
    assert EntityRef.parse(path) == entity


@pytest.mark.parametrize("path", ["", "a/b", "events/Subscriptions/", "/Subscriptions/x"])
def test_an_invalid_entity_path_is_refused(path: str) -> None:
    with pytest.raises(ValueError, match="not an entity path"):
        EntityRef.parse(path)


def _queue(name: str, **fields: object) -> SimpleNamespace:
    values: dict[str, object] = {
        "name": name,
        "duplicate_detection_history_time_window": timedelta(minutes=10),
        "max_message_size_in_kilobytes": None,
        "requires_duplicate_detection": False,
        "requires_session": False,
        "count_details": {"deadLetterMessageCount": 1},
    }
    values.update(fields)
    return SimpleNamespace(**values)


def test_subscriptions_target_their_forward_to_queue_and_never_a_topic() -> None:
    queues = [_queue("billing-endpoint", max_message_size_in_kilobytes=1024), _queue("orders")]
    subscriptions = [
        ("events", SimpleNamespace(name="billing", forward_to="billing-endpoint", count_details=None)),
        ("events", SimpleNamespace(name="audit", forward_to=None, count_details=None)),
        ("events", SimpleNamespace(name="relay", forward_to="other-topic", count_details=None)),
    ]

    plans = {plan.source.path: plan for plan in plan_entities(queues, subscriptions)}

    assert plans["orders"].target == Target("orders")
    assert plans["events/Subscriptions/billing"].target == Target(
        "billing-endpoint", max_message_size_bytes=1 << 20
    )
    assert plans["events/Subscriptions/audit"].target is None
    assert plans["events/Subscriptions/audit"].no_target_reason == "no forward-to queue"
    assert (
        plans["events/Subscriptions/relay"].no_target_reason
        == "forwards to other-topic, which is not a queue"
    )


def test_selection_by_pattern_skips_known_empty_dead_letter_queues_and_reports_unmatched_patterns() -> None:
    plans = plan_entities(
        [_queue("orders"), _queue("empty", count_details={"deadLetterMessageCount": 0}), _queue("other")], []
    )

    found = select(plans, ["ord*", "empty", "nothing-*"])

    assert [p.source.path for p in found.plans] == ["orders"]
    assert found.unmatched == ["nothing-*"]


def test_a_hold_queues_dead_letters_go_back_to_its_ordered_endpoints_queue() -> None:
    # A parked message that failed while its key was released is dead-lettered in the hold queue; sent back
    # to the endpoint's queue it is recognised there as its key's blocker (shared.ordering.ordered).
    queues = [_queue("team/crm", requires_session=True), _queue("team/crm.held", requires_session=True)]

    plans = {plan.source.path: plan for plan in plan_entities(queues, [])}

    ordered = Target("team/crm", requires_session=True, holds_keys=True)
    assert plans["team/crm.held"].target == ordered
    assert plans["team/crm"].target == ordered
