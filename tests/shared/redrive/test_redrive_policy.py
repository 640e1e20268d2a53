"""The re-drive policy and the decision: pure behaviour specs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.redrive.decision import Outcome, decide
from shared.redrive.entities import EntityPlan, EntityRef, Target
from shared.redrive.message import DeadLetter
from shared.redrive.policy import Action, PolicyError, classify, parse_policy

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
QUEUE = EntityRef.queue("orders")
PLAN = EntityPlan(QUEUE, Target("orders"))


def dead_letter(reason: str | None = "MaxDeliveryCountExceeded", **fields: object) -> DeadLetter:
    values: dict[str, object] = {
        "source": QUEUE,
        "sequence_number": 7,
        "body": b"{}",
        "body_type": "data",
        "application_properties": {},
        "message_id": "m-1",
        "enqueued_time": NOW - timedelta(hours=2),
        "dead_letter_reason": reason,
    }
    values.update(fields)
    return DeadLetter(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("reason", "action"),
    [
        ("MaxDeliveryCountExceeded", Action.REDRIVE),
        ("TTLExpiredException", Action.REDRIVE),
        ("maxdeliverycountexceeded", Action.REDRIVE),
        ("MaxTransferHopCountExceeded", Action.ARCHIVE),
        ("NoMatchingSubscription", Action.ARCHIVE),
        ("Session ID is null.", Action.ARCHIVE),
        ("System.TimeoutException", Action.REDRIVE),
        ("Newtonsoft.Json.JsonException", Action.ARCHIVE),
        ("SomethingNobodyKnows", Action.ARCHIVE),
        (None, Action.ARCHIVE),
    ],
)
def test_the_default_policy_redrives_transient_reasons_and_archives_permanent_and_unknown_ones(
    reason: str | None, action: Action
) -> None:
    assert classify(parse_policy(None), reason).action is action


@pytest.mark.parametrize(
    ("reason", "action"),
    [
        ("QuotaExceededException", Action.REDRIVE),  # the forwarding destination was full
        ("MessagingEntityDisabledException", Action.REDRIVE),  # ... or disabled
        ("MessagingEntityNotFoundException", Action.ARCHIVE),  # ... or deleted
        ("MessageSizeExceededException", Action.ARCHIVE),  # too large for it
    ],
)
def test_the_default_policy_knows_the_reasons_azure_gives_failed_auto_forward_transfers(
    reason: str, action: Action
) -> None:
    found = classify(parse_policy(None), reason)

    assert (found.action, found.rule) == (action, f"reason {reason}")


def test_a_failure_header_exception_type_decides_before_the_reason() -> None:
    policy = parse_policy('{"permanent_exceptions": ["OrderInvalidException"]}')

    found = classify(policy, "MaxDeliveryCountExceeded", "Sales.OrderInvalidException")

    assert found.action is Action.ARCHIVE and found.rule == "exception Sales.OrderInvalidException"


def test_configured_reasons_and_exceptions_extend_and_override_the_defaults() -> None:
    policy = parse_policy(
        '{"reasons": {"TTLExpiredException": "archive", "NeedsHuman": "leave"},'
        ' "transient_exceptions": ["SqlDeadlock", "ValidationError"], "default": "leave"}'
    )

    assert classify(policy, "TTLExpiredException").action is Action.ARCHIVE
    assert classify(policy, "NeedsHuman").action is Action.LEAVE
    assert classify(policy, "Db.SqlDeadlock").action is Action.REDRIVE
    assert classify(policy, "ValidationError").action is Action.REDRIVE  # moved out of the permanent list
    assert classify(policy, "MaxDeliveryCountExceeded").action is Action.REDRIVE  # default kept
    assert classify(policy, "Unheard").action is Action.LEAVE


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not valid JSON"),
        ("[]", "must be a JSON object"),
        ('{"reason": {}}', "unknown key(s) reason"),
        ('{"reasons": {"X": "retry"}}', "reasons['X'] must be redrive | archive | leave, got 'retry'"),
        ('{"default": 3}', "default must be redrive | archive | leave, got 3"),
        ('{"duplicate_window": "schedule"}', "duplicate_window must be hold | archive"),
        ('{"no_private_target": "redrive"}', "no_private_target must be archive | leave"),
        ('{"transient_exceptions": "X"}', "'transient_exceptions' must be a list"),
        ('{"transient_exceptions": ["A"], "permanent_exceptions": ["a"]}', "both transient and permanent: a"),
    ],
)
def test_an_invalid_policy_is_refused_with_a_precise_message(text: str, message: str) -> None:
    with pytest.raises(PolicyError) as raised:
        parse_policy(text)
    assert message in str(raised.value)


def test_a_transient_message_with_a_target_is_redriven() -> None:
    decision = decide(dead_letter(), PLAN, parse_policy(None), 3, NOW)
    assert (decision.outcome, decision.decision) == (Outcome.REDRIVE, "redrive")


def test_a_message_redriven_max_times_is_archived_as_a_redrive_limit() -> None:
    looping = dead_letter(application_properties={"busbar.redrive.count": 3})

    decision = decide(looping, PLAN, parse_policy(None), 3, NOW)

    assert (decision.outcome, decision.decision) == (Outcome.ARCHIVE, "redrive-limit")


def test_a_resend_inside_the_window_is_held_and_one_after_it_is_redriven() -> None:
    target = Target(
        "orders", requires_duplicate_detection=True, duplicate_detection_window=timedelta(minutes=10)
    )
    plan = EntityPlan(QUEUE, target)
    recent = dead_letter(enqueued_time=NOW - timedelta(minutes=9))
    old = dead_letter(enqueued_time=NOW - timedelta(minutes=11))
    recently_redriven = dead_letter(application_properties={"busbar.redrive.at": NOW - timedelta(minutes=1)})
    redriven_as_sdk_timestamp = dead_letter(
        application_properties={"busbar.redrive.at": int((NOW - timedelta(minutes=1)).timestamp() * 1000)}
    )
    without_id = dead_letter(message_id=None, enqueued_time=NOW)
    policy = parse_policy(None)

    assert decide(recent, plan, policy, 3, NOW).outcome is Outcome.HOLD
    assert decide(old, plan, policy, 3, NOW).outcome is Outcome.REDRIVE
    assert decide(recently_redriven, plan, policy, 3, NOW).outcome is Outcome.HOLD
    assert decide(redriven_as_sdk_timestamp, plan, policy, 3, NOW).outcome is Outcome.HOLD
    assert decide(without_id, plan, policy, 3, NOW).outcome is Outcome.REDRIVE
    held = decide(recent, plan, policy, 3, NOW)
    assert held.decision == "duplicate-window" and "until 2026-11-22T12:01:05+00:00" in held.detail


def test_without_a_private_target_the_policy_archives_or_leaves_never_redrives() -> None:
    plan = EntityPlan(EntityRef.subscription("events", "billing"), None, "no forward-to queue")

    archived = decide(dead_letter(), plan, parse_policy(None), 3, NOW)
    left = decide(dead_letter(), plan, parse_policy('{"no_private_target": "leave"}'), 3, NOW)

    assert (archived.outcome, archived.decision, archived.detail) == (
        Outcome.ARCHIVE,
        "no-private-target",
        "no forward-to queue",
    )
    assert (left.outcome, left.decision) == (Outcome.LEAVE, "no-private-target")


def test_a_non_data_body_is_left_alone_whatever_the_policy() -> None:
    value_body = dead_letter("ValidationFailed", body=None, body_type="value")

    decision = decide(value_body, PLAN, parse_policy(None), 3, NOW)

    assert (decision.outcome, decision.detail) == (Outcome.LEAVE, "unsupported body type value")


def test_a_session_target_refuses_a_message_without_session_id() -> None:
    plan = EntityPlan(QUEUE, Target("orders", requires_session=True))

    decision = decide(dead_letter(), plan, parse_policy(None), 3, NOW)

    assert (decision.outcome, decision.decision) == (Outcome.ARCHIVE, "no-session-id")
