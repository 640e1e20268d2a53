"""Behaviour specs for topic routing, through the real azure-servicebus SDK.

Which subscriptions get a copy of a published message, and what that copy looks like:

* a subscription created without rules gets ``$Default`` (a TrueFilter, ``1=1``);
* correlation filters match system properties (CorrelationId, MessageId, To, ReplyTo, Subject/Label,
  SessionId, ReplyToSessionId, ContentType) and application properties by exact, typed equality, all
  conditions of one filter AND-ed;
* TrueFilter / FalseFilter; SQL filters over system and application properties;
* rule actions (SET, REMOVE): each matching rule WITH an action yields its own copy, stamped with the
  application property ``RuleName`` (this emulator's decision); matching rules without an action are OR-ed
  into one copy;
* a message no subscription wants is dropped, and counted in ``TopicEntity.unrouted_count``;
* a SQL filter that fails while evaluating a message dead-letters it in that subscription only when
  ``dead_lettering_on_filter_evaluation_exceptions`` is set (the default), and never disturbs the others;
* quotas: 2,000 subscriptions per topic; a SQL filter or action with a syntax error is refused when the
  rule is created, with the position of the error.

Entities are created directly on the shared emulator's namespace (the management API is another suite);
messages only ever travel through the SDK. The emulator routes a message before it acknowledges the
send, so a peek right after ``send_messages`` sees the outcome.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest
from azure.servicebus import (
    ServiceBusMessage,
    ServiceBusSubQueue,
)

from emulator.broker.errors import BrokerError
from emulator.broker.properties import RuleConfig, SubscriptionProperties, TopicProperties
from emulator.filters.sql import SqlSyntaxError
from tests.emulator.sdk_helpers import (
    SendProperties,
    app_properties,
    correlation_rule,
    create_subscription,
    create_topic,
    decoded,
    opened,
    peek,
    sdk_client,
    sorted_bodies,
    sql_rule,
    unrouted_count,
)

if TYPE_CHECKING:
    from emulator.testing import EmulatorHandle
    from tests.emulator.backends import Backend

DLQ = ServiceBusSubQueue.DEAD_LETTER


# --------------------------------------------------------------------------------------------- helpers
#
# The SDK spends about half a second opening a link and as much closing it (its fixed idle waits), so each
# test opens all the senders and receivers it needs at once, in threads, and closes them the same way.


# -------------------------------------------------------------------------------------------- $Default


@pytest.mark.emulator_only
def test_subscription_created_without_rules_gets_the_default_true_rule(emulator: EmulatorHandle) -> None:
    topic = create_topic(emulator)
    sub = create_subscription(emulator, topic, "everything")
    ns = emulator.emulator.namespace
    rules = emulator.call(
        lambda: [(r.name, r.config.filter_type) for r in ns.topics[topic].subscriptions[sub].rules.values()]
    )
    assert rules == [("$Default", "True")]

    with sdk_client(emulator) as client:
        sender = client.get_topic_sender(topic)
        receiver = client.get_subscription_receiver(topic, sub)
        with opened(sender, receiver):
            sender.send_messages(
                [
                    ServiceBusMessage("bare"),
                    ServiceBusMessage("labelled", subject="anything", correlation_id="c-1"),
                    ServiceBusMessage("with-props", application_properties={"x": 1, "flag": False}),
                ]
            )
            assert sorted_bodies(peek(receiver)) == ["bare", "labelled", "with-props"]
    assert unrouted_count(emulator, topic) == 0


@pytest.mark.emulator_only
def test_subscription_created_with_rules_has_no_default_rule(emulator: EmulatorHandle) -> None:
    topic = create_topic(emulator)
    sub = create_subscription(emulator, topic, "only-red", [sql_rule("red", "color = 'red'")])
    with sdk_client(emulator) as client:
        sender = client.get_topic_sender(topic)
        receiver = client.get_subscription_receiver(topic, sub)
        with opened(sender, receiver):
            sender.send_messages(
                [
                    ServiceBusMessage("red", application_properties={"color": "red"}),
                    ServiceBusMessage("blue", application_properties={"color": "blue"}),
                    ServiceBusMessage("none"),
                ]
            )
            assert sorted_bodies(peek(receiver)) == ["red"]
    assert unrouted_count(emulator, topic) == 2


# ----------------------------------------------------------------------------------------- correlation


_SYSTEM_FIELDS = [
    # (correlation-filter field, ServiceBusMessage keyword)
    ("correlation_id", "correlation_id"),
    ("message_id", "message_id"),
    ("to", "to"),
    ("reply_to", "reply_to"),
    ("subject", "subject"),
    ("session_id", "session_id"),
    ("reply_to_session_id", "reply_to_session_id"),
    ("content_type", "content_type"),
]


def _with_system_field(body: str, keyword: str, value: str) -> ServiceBusMessage:
    # keyword is one of ServiceBusMessage's str keywords (_SYSTEM_FIELDS), named at run time.
    fields: dict[str, Any] = {keyword: value}
    return ServiceBusMessage(body, **fields)


@pytest.mark.emulator_only
def test_correlation_filters_match_each_system_property_exactly(emulator: EmulatorHandle) -> None:
    """One subscription per system property; each message sets one property, to one of three values."""
    topic = create_topic(emulator)
    for field, _keyword in _SYSTEM_FIELDS:
        create_subscription(
            emulator,
            topic,
            field.replace("_", "-"),
            [correlation_rule("match", **{field: f"{field}-wanted"})],
        )
    messages = []
    for field, keyword in _SYSTEM_FIELDS:
        messages += [
            _with_system_field(f"{field}:hit", keyword, f"{field}-wanted"),
            _with_system_field(f"{field}:other", keyword, f"{field}-other"),
            _with_system_field(f"{field}:prefix", keyword, field),
            # The same name and value as an application property is not the system property.
            ServiceBusMessage(f"{field}:app", application_properties={field: f"{field}-wanted"}),
        ]
    with sdk_client(emulator) as client:
        sender = client.get_topic_sender(topic)
        receivers = [client.get_subscription_receiver(topic, f.replace("_", "-")) for f, _ in _SYSTEM_FIELDS]
        with opened(sender, *receivers):
            sender.send_messages(messages)
            for (field, keyword), receiver in zip(_SYSTEM_FIELDS, receivers, strict=True):
                received = peek(receiver)
                assert sorted_bodies(received) == [f"{field}:hit"], field
                assert decoded(getattr(received[0], keyword)) == f"{field}-wanted"
    assert unrouted_count(emulator, topic) == 3 * len(_SYSTEM_FIELDS)


def test_correlation_filter_label_is_the_message_subject(backend: Backend) -> None:
    topic = create_topic(backend)
    sub = create_subscription(
        backend, topic, "by-label", [correlation_rule("label", subject="Shipping.OrderAccepted")]
    )
    with sdk_client(backend) as client:
        sender = client.get_topic_sender(topic)
        receiver = client.get_subscription_receiver(topic, sub)
        with opened(sender, receiver):
            sender.send_messages(
                [
                    ServiceBusMessage("accepted", subject="Shipping.OrderAccepted"),
                    ServiceBusMessage("accepted-v2", subject="Shipping.OrderAcceptedV2"),
                    ServiceBusMessage("lowercase", subject="shipping.orderaccepted"),
                ]
            )
            received = peek(receiver)
    assert sorted_bodies(received) == ["accepted"]
    assert received[0].subject == "Shipping.OrderAccepted"


@pytest.mark.also_over_arm
def test_correlation_filter_conditions_are_all_required(backend: Backend) -> None:
    topic = create_topic(backend)
    rule = correlation_rule(
        "all-three",
        correlation_id="order-7",
        subject="OrderAccepted",
        properties={"region": "eu", "priority": 2},
    )
    sub = create_subscription(backend, topic, "strict", [rule])
    full: SendProperties = {"region": "eu", "priority": 2}
    with sdk_client(backend) as client:
        sender = client.get_topic_sender(topic)
        receiver = client.get_subscription_receiver(topic, sub)
        with opened(sender, receiver):
            sender.send_messages(
                [
                    ServiceBusMessage(
                        "all", correlation_id="order-7", subject="OrderAccepted", application_properties=full
                    ),
                    ServiceBusMessage(
                        "all-plus-extra",
                        correlation_id="order-7",
                        subject="OrderAccepted",
                        application_properties={**full, "extra": "ignored"},
                    ),
                    ServiceBusMessage("no-subject", correlation_id="order-7", application_properties=full),
                    ServiceBusMessage(
                        "wrong-id",
                        correlation_id="order-8",
                        subject="OrderAccepted",
                        application_properties=full,
                    ),
                    ServiceBusMessage(
                        "missing-priority",
                        correlation_id="order-7",
                        subject="OrderAccepted",
                        application_properties={"region": "eu"},
                    ),
                    ServiceBusMessage(
                        "wrong-region",
                        correlation_id="order-7",
                        subject="OrderAccepted",
                        application_properties={"region": "us", "priority": 2},
                    ),
                ]
            )
            assert sorted_bodies(peek(receiver)) == ["all", "all-plus-extra"]


@pytest.mark.emulator_only
def test_correlation_filter_application_properties_compare_values_and_types(emulator: EmulatorHandle) -> None:
    topic = create_topic(emulator)
    text = create_subscription(emulator, topic, "text", [correlation_rule("t", properties={"code": "5"})])
    number = create_subscription(emulator, topic, "number", [correlation_rule("n", properties={"code": 5})])
    boolean = create_subscription(
        emulator, topic, "boolean", [correlation_rule("b", properties={"Shipping.OrderAccepted": True})]
    )
    region = create_subscription(
        emulator, topic, "region", [correlation_rule("r", properties={"region": "eu"})]
    )
    with sdk_client(emulator) as client:
        sender = client.get_topic_sender(topic)
        receivers = [client.get_subscription_receiver(topic, s) for s in (text, number, boolean, region)]
        with opened(sender, *receivers):
            sender.send_messages(
                [
                    ServiceBusMessage("code-text", application_properties={"code": "5"}),
                    ServiceBusMessage("code-int", application_properties={"code": 5}),
                    ServiceBusMessage("code-other-int", application_properties={"code": 6}),
                    ServiceBusMessage("flag-true", application_properties={"Shipping.OrderAccepted": True}),
                    ServiceBusMessage("flag-false", application_properties={"Shipping.OrderAccepted": False}),
                    ServiceBusMessage("flag-text", application_properties={"Shipping.OrderAccepted": "True"}),
                    ServiceBusMessage("flag-one", application_properties={"Shipping.OrderAccepted": 1}),
                    ServiceBusMessage("region-eu", application_properties={"region": "eu"}),
                    ServiceBusMessage("region-EU", application_properties={"region": "EU"}),
                    ServiceBusMessage("region-eu-west", application_properties={"region": "eu-west"}),
                ]
            )
            assert [sorted_bodies(peek(r)) for r in receivers] == [
                ["code-text"],
                ["code-int"],
                ["flag-true"],
                ["region-eu"],
            ]
    assert unrouted_count(emulator, topic) == 6


# ---------------------------------------------------------------------------------- true / false / sql


@pytest.mark.emulator_only
def test_true_filter_takes_everything_and_false_filter_nothing(emulator: EmulatorHandle) -> None:
    topic = create_topic(emulator)
    everything = create_subscription(emulator, topic, "all", [RuleConfig(name="all", filter_type="True")])
    nothing = create_subscription(emulator, topic, "none", [RuleConfig(name="$Default", filter_type="False")])
    with sdk_client(emulator) as client:
        sender = client.get_topic_sender(topic)
        all_receiver = client.get_subscription_receiver(topic, everything)
        none_receiver = client.get_subscription_receiver(topic, nothing)
        none_dlq = client.get_subscription_receiver(topic, nothing, sub_queue=DLQ)
        with opened(sender, all_receiver, none_receiver, none_dlq):
            sender.send_messages(
                [
                    ServiceBusMessage("one"),
                    ServiceBusMessage("two", subject="x", application_properties={"a": 1}),
                ]
            )
            assert sorted_bodies(peek(all_receiver)) == ["one", "two"]
            assert peek(none_receiver) == []
            assert peek(none_dlq) == []
    assert unrouted_count(emulator, topic) == 0


@pytest.mark.emulator_only
def test_sql_filters_over_system_and_application_properties(emulator: EmulatorHandle) -> None:
    topic = create_topic(emulator)
    subs = [
        create_subscription(
            emulator,
            topic,
            "big-eu",
            [sql_rule("big-eu", "sys.Label = 'order' AND region = 'eu' AND qty > 10")],
        ),
        create_subscription(
            emulator, topic, "listed", [sql_rule("listed", "region IN ('us', 'ca') OR EXISTS(vip)")]
        ),
        create_subscription(emulator, topic, "like", [sql_rule("like", "sys.CorrelationId LIKE 'batch-%'")]),
    ]
    with sdk_client(emulator) as client:
        sender = client.get_topic_sender(topic)
        receivers = [client.get_subscription_receiver(topic, s) for s in subs]
        with opened(sender, *receivers):
            sender.send_messages(
                [
                    ServiceBusMessage(
                        "eu-11", subject="order", application_properties={"region": "eu", "qty": 11}
                    ),
                    ServiceBusMessage(
                        "eu-10", subject="order", application_properties={"region": "eu", "qty": 10}
                    ),
                    ServiceBusMessage("eu-no-label", application_properties={"region": "eu", "qty": 50}),
                    ServiceBusMessage("us", application_properties={"region": "us"}),
                    ServiceBusMessage("vip", application_properties={"vip": False}),
                    ServiceBusMessage("batch", correlation_id="batch-42"),
                    ServiceBusMessage("not-batch", correlation_id="single-42"),
                ]
            )
            assert [sorted_bodies(peek(r)) for r in receivers] == [["eu-11"], ["us", "vip"], ["batch"]]
    assert unrouted_count(emulator, topic) == 3  # eu-10, eu-no-label, not-batch


# ---------------------------------------------------------------------------------- OR-ing and actions


def test_a_message_matching_several_rules_without_action_arrives_once(backend: Backend) -> None:
    topic = create_topic(backend)
    rules = [
        sql_rule("by-type", "[NServiceBus.EnclosedMessageTypes] LIKE '%Shipping.OrderAccepted%'"),
        sql_rule("by-interface", "[NServiceBus.EnclosedMessageTypes] LIKE '%Shipping.IOrderAccepted%'"),
        correlation_rule("by-flag", properties={"Shipping.OrderAccepted": True}),
        RuleConfig(name="$Default", filter_type="True"),
    ]
    sub = create_subscription(backend, topic, "endpoint", rules)
    header = "Shipping.OrderAccepted, Shared;Shipping.IOrderAccepted, Shared"
    with sdk_client(backend) as client:
        sender = client.get_topic_sender(topic)
        receiver = client.get_subscription_receiver(topic, sub)
        with opened(sender, receiver):
            sender.send_messages(
                ServiceBusMessage(
                    "accepted",
                    application_properties={
                        "NServiceBus.EnclosedMessageTypes": header,
                        "Shipping.OrderAccepted": True,
                    },
                )
            )
            received = peek(receiver)
    assert sorted_bodies(received) == ["accepted"]
    assert "RuleName" not in app_properties(received[0])


@pytest.mark.also_over_arm
def test_each_matching_rule_with_an_action_yields_its_own_stamped_copy(backend: Backend) -> None:
    topic = create_topic(backend)
    rules = [
        sql_rule("plain", "kind = 'order'"),
        sql_rule("also-plain", "amount > 0"),
        sql_rule("to-billing", "kind = 'order'", "SET route = 'billing'"),
        sql_rule("to-audit", "amount > 100", "SET route = 'audit'; SET sys.Label = 'audited'"),
        sql_rule("never", "kind = 'refund'", "SET route = 'refunds'"),
    ]
    fan = create_subscription(backend, topic, "fan", rules)
    only_action = create_subscription(
        backend,
        topic,
        "only-action",
        [sql_rule("plain", "kind = 'refund'"), sql_rule("stamp", "1=1", "SET stamped = TRUE")],
    )
    with sdk_client(backend) as client:
        sender = client.get_topic_sender(topic)
        fan_receiver = client.get_subscription_receiver(topic, fan)
        action_receiver = client.get_subscription_receiver(topic, only_action)
        with opened(sender, fan_receiver, action_receiver):
            sender.send_messages(
                ServiceBusMessage(
                    "big-order", subject="original", application_properties={"kind": "order", "amount": 500}
                )
            )
            received = peek(fan_receiver)
            stamped_only = peek(action_receiver)

    # Two plain rules matched: one unchanged copy. Two action rules matched: a copy each.
    assert sorted_bodies(received) == ["big-order"] * 3
    by_rule = {app_properties(m).get("RuleName"): m for m in received}
    assert set(by_rule) == {None, "to-billing", "to-audit"}
    assert app_properties(by_rule[None]) == {"kind": "order", "amount": 500}
    assert by_rule[None].subject == "original"
    assert app_properties(by_rule["to-billing"]) == {
        "kind": "order",
        "amount": 500,
        "route": "billing",
        "RuleName": "to-billing",
    }
    assert by_rule["to-billing"].subject == "original"
    assert app_properties(by_rule["to-audit"]) == {
        "kind": "order",
        "amount": 500,
        "route": "audit",
        "RuleName": "to-audit",
    }
    assert by_rule["to-audit"].subject == "audited"

    # No plain rule matched: only the action's copy, no unchanged one.
    assert len(stamped_only) == 1
    assert app_properties(stamped_only[0]) == {
        "kind": "order",
        "amount": 500,
        "stamped": True,
        "RuleName": "stamp",
    }


def test_remove_and_computed_set_actions_reshape_the_copy(backend: Backend) -> None:
    topic = create_topic(backend)
    action = "; ".join(
        [
            "REMOVE secret",
            "SET total = qty * price",
            "SET sys.CorrelationId = 'corr-' + ref",
            "SET sys.To = 'billing'",
        ]
    )
    reshaped = create_subscription(backend, topic, "reshaped", [sql_rule("reshape", "1=1", action)])
    untouched = create_subscription(backend, topic, "untouched")
    original: SendProperties = {"secret": "s3cr3t", "qty": 3, "price": 7, "ref": "A1"}
    with sdk_client(backend) as client:
        sender = client.get_topic_sender(topic)
        reshaped_receiver = client.get_subscription_receiver(topic, reshaped)
        untouched_receiver = client.get_subscription_receiver(topic, untouched)
        with opened(sender, reshaped_receiver, untouched_receiver):
            sender.send_messages(
                ServiceBusMessage("line", correlation_id="before", application_properties=original)
            )
            changed = peek(reshaped_receiver)
            plain = peek(untouched_receiver)
    assert len(changed) == 1
    assert app_properties(changed[0]) == {
        "qty": 3,
        "price": 7,
        "ref": "A1",
        "total": 21,
        "RuleName": "reshape",
    }
    assert changed[0].correlation_id == "corr-A1"
    assert changed[0].to == "billing"
    assert str(changed[0]) == "line"
    # The action changed only its own subscription's copy.
    assert len(plain) == 1
    assert app_properties(plain[0]) == original
    assert plain[0].correlation_id == "before"
    assert plain[0].to is None


# -------------------------------------------------------------------------------------------- unrouted


@pytest.mark.emulator_only
def test_a_message_no_subscription_wants_is_dropped_and_counted(emulator: EmulatorHandle) -> None:
    topic = create_topic(emulator)
    subs = [
        create_subscription(emulator, topic, "red", [sql_rule("red", "color = 'red'")]),
        create_subscription(
            emulator, topic, "blue", [correlation_rule("blue", properties={"color": "blue"})]
        ),
        create_subscription(emulator, topic, "never", [RuleConfig(name="$Default", filter_type="False")]),
    ]
    with sdk_client(emulator) as client:
        sender = client.get_topic_sender(topic)
        receivers = [client.get_subscription_receiver(topic, s) for s in subs]
        dead_letters = [client.get_subscription_receiver(topic, s, sub_queue=DLQ) for s in subs]
        with opened(sender, *receivers, *dead_letters):
            sender.send_messages(
                [
                    ServiceBusMessage("red", application_properties={"color": "red"}),
                    ServiceBusMessage("green", application_properties={"color": "green"}),
                    ServiceBusMessage("blue", application_properties={"color": "blue"}),
                    ServiceBusMessage("colorless"),
                ]
            )
            assert [sorted_bodies(peek(r)) for r in receivers] == [["red"], ["blue"], []]
            assert [peek(r) for r in dead_letters] == [[], [], []]
    assert unrouted_count(emulator, topic) == 2


@pytest.mark.emulator_only
def test_a_topic_without_subscriptions_accepts_and_drops_every_message(emulator: EmulatorHandle) -> None:
    topic = create_topic(emulator)
    with sdk_client(emulator) as client, client.get_topic_sender(topic) as sender:
        sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(3)])
        sender.send_messages(ServiceBusMessage("late"))
        assert unrouted_count(emulator, topic) == 4
        # A subscription created afterwards sees none of the earlier messages, only later ones.
        late = create_subscription(emulator, topic, "late")
        sender.send_messages(ServiceBusMessage("after"))
        with client.get_subscription_receiver(topic, late) as receiver:
            assert sorted_bodies(peek(receiver)) == ["after"]
    assert unrouted_count(emulator, topic) == 4


# ------------------------------------------------------------------------------------- filter failures


@pytest.mark.parametrize(
    "expression", ["sys.Nonexistent = 1", "n / 0 = 1"], ids=["unknown-system", "div-zero"]
)
def test_filter_evaluation_failure_dead_letters_only_where_enabled(backend: Backend, expression: str) -> None:
    topic = create_topic(backend)
    loud = create_subscription(
        backend, topic, "loud", [sql_rule("broken", expression)]
    )  # dead-lettering is the default
    quiet = create_subscription(
        backend,
        topic,
        "quiet",
        [sql_rule("broken", expression)],
        dead_lettering_on_filter_evaluation_exceptions=False,
    )
    healthy = create_subscription(backend, topic, "healthy", [sql_rule("int-n", "n = 1")])
    catch_all = create_subscription(backend, topic, "catch-all")
    with sdk_client(backend) as client:
        sender = client.get_topic_sender(topic)
        loud_main, loud_dlq, quiet_main, quiet_dlq, healthy_main, healthy_dlq, catch_all_main = (
            client.get_subscription_receiver(topic, sub, sub_queue=queue)
            for sub, queue in (
                (loud, None),
                (loud, DLQ),
                (quiet, None),
                (quiet, DLQ),
                (healthy, None),
                (healthy, DLQ),
                (catch_all, None),
            )
        )
        with opened(
            sender, loud_main, loud_dlq, quiet_main, quiet_dlq, healthy_main, healthy_dlq, catch_all_main
        ):
            sender.send_messages(ServiceBusMessage("poison", application_properties={"n": 1}))

            assert peek(loud_main) == []
            dead = peek(loud_dlq)
            assert sorted_bodies(dead) == ["poison"]
            assert dead[0].dead_letter_reason  # the broker says why
            assert app_properties(dead[0]) == {
                "n": 1,
                "DeadLetterReason": dead[0].dead_letter_reason,
                "DeadLetterErrorDescription": dead[0].dead_letter_error_description,
            }

            assert peek(quiet_main) == []
            assert peek(quiet_dlq) == []

            assert sorted_bodies(peek(healthy_main)) == ["poison"]
            assert peek(healthy_dlq) == []
            assert sorted_bodies(peek(catch_all_main)) == ["poison"]


def test_a_rule_action_that_fails_dead_letters_in_its_subscription_only_and_the_send_is_accepted_once(
    backend: Backend,
) -> None:
    """Rule evaluation includes the action ("Action fails if non-existent system properties were
    referenced"; SubscriptionProperties.EnableDeadLetteringOnFilterEvaluationExceptions: "forwarded to
    dead-letter sub queue when subscription rule evaluation fails"): the failing subscription dead-letters
    the message (or drops it, where disabled), the others get theirs, and the send succeeds. Sent again with
    the same MessageId into a topic with duplicate detection, it is a duplicate: the first send was
    accepted (the emulator once failed the send, closing the connection, yet remembered the id, so the SDK's
    retry was dropped and the message lost everywhere)."""
    window = timedelta(minutes=1)
    topic = create_topic(
        backend, requires_duplicate_detection=True, duplicate_detection_history_time_window=window
    )
    loud = create_subscription(backend, topic, "loud", [sql_rule("halve", "1=1", "SET n = n / 0")])
    quiet = create_subscription(
        backend,
        topic,
        "quiet",
        [sql_rule("halve", "1=1", "SET n = n / 0")],
        dead_lettering_on_filter_evaluation_exceptions=False,
    )
    healthy = create_subscription(backend, topic, "healthy")
    with sdk_client(backend) as client:
        sender = client.get_topic_sender(topic)
        loud_main, loud_dlq, quiet_main, quiet_dlq, healthy_main = (
            client.get_subscription_receiver(topic, sub, sub_queue=queue)
            for sub, queue in ((loud, None), (loud, DLQ), (quiet, None), (quiet, DLQ), (healthy, None))
        )
        with opened(sender, loud_main, loud_dlq, quiet_main, quiet_dlq, healthy_main):
            for _ in range(2):
                sender.send_messages(
                    ServiceBusMessage("poison", message_id="m-1", application_properties={"n": 1})
                )

            assert peek(loud_main) == []
            dead = peek(loud_dlq)
            assert sorted_bodies(dead) == ["poison"]
            assert dead[0].dead_letter_reason
            assert "division by zero" in (dead[0].dead_letter_error_description or "")
            assert peek(quiet_main) == []
            assert peek(quiet_dlq) == []
            assert sorted_bodies(peek(healthy_main)) == ["poison"]


def test_each_failing_subscription_dead_letters_with_its_own_error(backend: Backend) -> None:
    topic = create_topic(backend)
    unknown = create_subscription(backend, topic, "unknown", [sql_rule("unknown", "sys.Nonexistent = 1")])
    division = create_subscription(backend, topic, "division", [sql_rule("division", "n / 0 = 1")])
    healthy = create_subscription(backend, topic, "healthy")
    with sdk_client(backend) as client:
        sender = client.get_topic_sender(topic)
        unknown_dlq = client.get_subscription_receiver(topic, unknown, sub_queue=DLQ)
        division_dlq = client.get_subscription_receiver(topic, division, sub_queue=DLQ)
        healthy_main = client.get_subscription_receiver(topic, healthy)
        with opened(sender, unknown_dlq, division_dlq, healthy_main):
            sender.send_messages(ServiceBusMessage("poison", application_properties={"n": 1}))
            unknown_dead = peek(unknown_dlq)
            division_dead = peek(division_dlq)
            assert sorted_bodies(peek(healthy_main)) == ["poison"]
    assert sorted_bodies(unknown_dead) == ["poison"]
    assert sorted_bodies(division_dead) == ["poison"]
    assert "Nonexistent" in (unknown_dead[0].dead_letter_error_description or "")
    # The division failure is described as such, not with the other subscription's error.
    assert "Nonexistent" not in (division_dead[0].dead_letter_error_description or "")


def test_a_filter_that_fails_only_for_some_messages_routes_the_others_normally(
    backend: Backend,
) -> None:
    topic = create_topic(backend)
    sub = create_subscription(backend, topic, "ratio", [sql_rule("ratio", "n / d > 1")])
    with sdk_client(backend) as client:
        sender = client.get_topic_sender(topic)
        main = client.get_subscription_receiver(topic, sub)
        dlq = client.get_subscription_receiver(topic, sub, sub_queue=DLQ)
        with opened(sender, main, dlq):
            sender.send_messages(
                [
                    ServiceBusMessage("four-halves", application_properties={"n": 4, "d": 2}),
                    ServiceBusMessage("one-half", application_properties={"n": 1, "d": 2}),
                    ServiceBusMessage("no-divisor", application_properties={"n": 4}),
                    ServiceBusMessage("zero", application_properties={"n": 4, "d": 0}),
                ]
            )
            assert sorted_bodies(peek(main)) == ["four-halves"]
            assert sorted_bodies(peek(dlq)) == ["zero"]


# ------------------------------------------------------------------------------ creation-time refusals


@pytest.mark.emulator_only
def test_a_sql_filter_or_action_with_a_syntax_error_is_refused_at_creation_with_its_position(
    emulator: EmulatorHandle,
) -> None:
    topic = create_topic(emulator)
    ns = emulator.emulator.namespace
    with pytest.raises(SqlSyntaxError) as refused:
        emulator.call(
            lambda: ns.create_subscription(
                topic, "bad", SubscriptionProperties(), [sql_rule("bad", "color = = 'red'")], origin="arm"
            )
        )
    assert refused.value.position == 9
    assert "position 9" in str(refused.value)
    assert emulator.call(lambda: "bad" in ns.topics[topic].subscriptions) is False

    with pytest.raises(SqlSyntaxError) as refused_action:
        emulator.call(
            lambda: ns.create_subscription(
                topic, "bad", SubscriptionProperties(), [sql_rule("bad", "1=1", "SET = 1")], origin="arm"
            )
        )
    assert refused_action.value.position == 5
    assert "position 5" in str(refused_action.value)
    assert emulator.call(lambda: "bad" in ns.topics[topic].subscriptions) is False

    # Nothing half-created: the name is free for a correct rule, which then routes.
    sub = create_subscription(emulator, topic, "bad", [sql_rule("good", "color = 'red'")])
    with sdk_client(emulator) as client:
        sender = client.get_topic_sender(topic)
        receiver = client.get_subscription_receiver(topic, sub)
        with opened(sender, receiver):
            sender.send_messages(ServiceBusMessage("red", application_properties={"color": "red"}))
            assert sorted_bodies(peek(receiver)) == ["red"]


@pytest.mark.emulator_only
def test_a_topic_accepts_2000_subscriptions_and_refuses_the_2001st(make_emulator: Any) -> None:
    private: EmulatorHandle = make_emulator()
    ns = private.emulator.namespace
    topic = "crowded"
    private.call(lambda: ns.create_topic(topic, TopicProperties(), origin="arm"))

    def create_2000() -> None:
        for i in range(2000):
            ns.create_subscription(topic, f"s{i:04d}", SubscriptionProperties(), None, origin="arm")

    private.call(create_2000)
    with pytest.raises(BrokerError) as refused:
        private.call(
            lambda: ns.create_subscription(topic, "s2000", SubscriptionProperties(), None, origin="arm")
        )
    assert refused.value.condition == "amqp:resource-limit-exceeded"
    assert "2000" in refused.value.description
    assert private.call(lambda: len(ns.topics[topic].subscriptions)) == 2000

    # Every one of the 2,000 subscriptions gets its copy.
    with sdk_client(private) as client:
        sender = client.get_topic_sender(topic)
        first = client.get_subscription_receiver(topic, "s0000")
        last = client.get_subscription_receiver(topic, "s1999")
        with opened(sender, first, last):
            sender.send_messages(ServiceBusMessage("to-all"))
            assert sorted_bodies(peek(first)) == ["to-all"]
            assert sorted_bodies(peek(last)) == ["to-all"]
    active = private.call(
        lambda: {ns.counts(s)["activeMessageCount"] for s in ns.topics[topic].subscriptions.values()}
    )
    assert active == {1}
