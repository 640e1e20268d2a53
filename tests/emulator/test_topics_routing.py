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

import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pytest
from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
    ServiceBusReceiver,
    ServiceBusSender,
    ServiceBusSubQueue,
)

from emulator.broker.errors import BrokerError
from emulator.config import (
    CorrelationFilterConfig,
    RuleConfig,
    SubscriptionProperties,
    TopicProperties,
)
from emulator.filters.sql import SqlSyntaxError

if TYPE_CHECKING:
    from tests.conftest import EmulatorHandle

DLQ = ServiceBusSubQueue.DEAD_LETTER


# --------------------------------------------------------------------------------------------- helpers
#
# The SDK spends about half a second opening a link and as much closing it (its fixed idle waits), so each
# test opens all the senders and receivers it needs at once, in threads, and closes them the same way.


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _topic(emulator: EmulatorHandle, **props: Any) -> str:
    name = _name("t")
    ns = emulator.emulator.namespace
    emulator.call(lambda: ns.create_topic(name, TopicProperties(**props), origin="arm"))
    return name


def _sub(
    emulator: EmulatorHandle, topic: str, name: str, rules: Sequence[RuleConfig] | None = None, **props: Any
) -> str:
    ns = emulator.emulator.namespace
    emulator.call(
        lambda: ns.create_subscription(
            topic, name, SubscriptionProperties(**props), list(rules) if rules else None, origin="arm"
        )
    )
    return name


def _sql(name: str, expression: str, action: str | None = None) -> RuleConfig:
    return RuleConfig(name=name, filter_type="Sql", sql_expression=expression, action_sql=action)


def _correlation(name: str, **fields: Any) -> RuleConfig:
    return RuleConfig(name=name, filter_type="Correlation", correlation=CorrelationFilterConfig(**fields))


def _client(emulator: EmulatorHandle) -> ServiceBusClient:
    return ServiceBusClient.from_connection_string(emulator.connection_string)


Handler = ServiceBusSender | ServiceBusReceiver


def _in_parallel(action: Callable[[Handler], object], handlers: Sequence[Handler]) -> list[BaseException]:
    with ThreadPoolExecutor(max_workers=max(1, len(handlers))) as pool:
        futures = [pool.submit(action, handler) for handler in handlers]
    return [error for future in futures if (error := future.exception()) is not None]


@contextmanager
def _opened(*handlers: Handler) -> Iterator[None]:
    """Open every sender and receiver at once; close them all at once on the way out."""
    errors = _in_parallel(lambda h: h.__enter__(), handlers)
    try:
        if errors:
            raise errors[0]
        yield
    finally:
        _in_parallel(lambda h: h.__exit__(None, None, None), handlers)


def _peek(receiver: ServiceBusReceiver) -> list[ServiceBusReceivedMessage]:
    """Everything the receiver's entity holds, without receiving it."""
    return receiver.peek_messages(max_message_count=250, sequence_number=1)


def _bodies(messages: Sequence[ServiceBusReceivedMessage]) -> list[str]:
    return sorted(str(m) for m in messages)


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def _props(message: ServiceBusReceivedMessage) -> dict[str, Any]:
    """Application properties with the SDK's bytes keys and string values decoded."""
    return {_text(k): _text(v) for k, v in (message.application_properties or {}).items()}


def _unrouted(emulator: EmulatorHandle, topic: str) -> int:
    ns = emulator.emulator.namespace
    count = emulator.call(lambda: ns.topics[topic.lower()].unrouted_count)
    assert isinstance(count, int)
    return count


# -------------------------------------------------------------------------------------------- $Default


def test_subscription_created_without_rules_gets_the_default_true_rule(emulator: EmulatorHandle) -> None:
    topic = _topic(emulator)
    sub = _sub(emulator, topic, "everything")
    ns = emulator.emulator.namespace
    rules = emulator.call(
        lambda: [(r.name, r.config.filter_type) for r in ns.topics[topic].subscriptions[sub].rules.values()]
    )
    assert rules == [("$Default", "True")]

    with _client(emulator) as client:
        sender = client.get_topic_sender(topic)
        receiver = client.get_subscription_receiver(topic, sub)
        with _opened(sender, receiver):
            sender.send_messages(
                [
                    ServiceBusMessage("bare"),
                    ServiceBusMessage("labelled", subject="anything", correlation_id="c-1"),
                    ServiceBusMessage("with-props", application_properties={"x": 1, "flag": False}),
                ]
            )
            assert _bodies(_peek(receiver)) == ["bare", "labelled", "with-props"]
    assert _unrouted(emulator, topic) == 0


def test_subscription_created_with_rules_has_no_default_rule(emulator: EmulatorHandle) -> None:
    topic = _topic(emulator)
    sub = _sub(emulator, topic, "only-red", [_sql("red", "color = 'red'")])
    with _client(emulator) as client:
        sender = client.get_topic_sender(topic)
        receiver = client.get_subscription_receiver(topic, sub)
        with _opened(sender, receiver):
            sender.send_messages(
                [
                    ServiceBusMessage("red", application_properties={"color": "red"}),
                    ServiceBusMessage("blue", application_properties={"color": "blue"}),
                    ServiceBusMessage("none"),
                ]
            )
            assert _bodies(_peek(receiver)) == ["red"]
    assert _unrouted(emulator, topic) == 2


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


def test_correlation_filters_match_each_system_property_exactly(emulator: EmulatorHandle) -> None:
    """One subscription per system property; each message sets one property, to one of three values."""
    topic = _topic(emulator)
    for field, _keyword in _SYSTEM_FIELDS:
        _sub(emulator, topic, field.replace("_", "-"), [_correlation("match", **{field: f"{field}-wanted"})])
    messages = []
    for field, keyword in _SYSTEM_FIELDS:
        messages += [
            ServiceBusMessage(f"{field}:hit", **{keyword: f"{field}-wanted"}),
            ServiceBusMessage(f"{field}:other", **{keyword: f"{field}-other"}),
            ServiceBusMessage(f"{field}:prefix", **{keyword: field}),
            # The same name and value as an application property is not the system property.
            ServiceBusMessage(f"{field}:app", application_properties={field: f"{field}-wanted"}),
        ]
    with _client(emulator) as client:
        sender = client.get_topic_sender(topic)
        receivers = [client.get_subscription_receiver(topic, f.replace("_", "-")) for f, _ in _SYSTEM_FIELDS]
        with _opened(sender, *receivers):
            sender.send_messages(messages)
            for (field, keyword), receiver in zip(_SYSTEM_FIELDS, receivers, strict=True):
                received = _peek(receiver)
                assert _bodies(received) == [f"{field}:hit"], field
                assert _text(getattr(received[0], keyword)) == f"{field}-wanted"
    assert _unrouted(emulator, topic) == 3 * len(_SYSTEM_FIELDS)


def test_correlation_filter_label_is_the_message_subject(emulator: EmulatorHandle) -> None:
    topic = _topic(emulator)
    sub = _sub(emulator, topic, "by-label", [_correlation("label", subject="Shipping.OrderAccepted")])
    with _client(emulator) as client:
        sender = client.get_topic_sender(topic)
        receiver = client.get_subscription_receiver(topic, sub)
        with _opened(sender, receiver):
            sender.send_messages(
                [
                    ServiceBusMessage("accepted", subject="Shipping.OrderAccepted"),
                    ServiceBusMessage("accepted-v2", subject="Shipping.OrderAcceptedV2"),
                    ServiceBusMessage("lowercase", subject="shipping.orderaccepted"),
                ]
            )
            received = _peek(receiver)
    assert _bodies(received) == ["accepted"]
    assert received[0].subject == "Shipping.OrderAccepted"


def test_correlation_filter_conditions_are_all_required(emulator: EmulatorHandle) -> None:
    topic = _topic(emulator)
    rule = _correlation(
        "all-three",
        correlation_id="order-7",
        subject="OrderAccepted",
        properties={"region": "eu", "priority": 2},
    )
    sub = _sub(emulator, topic, "strict", [rule])
    full = {"region": "eu", "priority": 2}
    with _client(emulator) as client:
        sender = client.get_topic_sender(topic)
        receiver = client.get_subscription_receiver(topic, sub)
        with _opened(sender, receiver):
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
            assert _bodies(_peek(receiver)) == ["all", "all-plus-extra"]


def test_correlation_filter_application_properties_compare_values_and_types(emulator: EmulatorHandle) -> None:
    topic = _topic(emulator)
    text = _sub(emulator, topic, "text", [_correlation("t", properties={"code": "5"})])
    number = _sub(emulator, topic, "number", [_correlation("n", properties={"code": 5})])
    boolean = _sub(
        emulator, topic, "boolean", [_correlation("b", properties={"Shipping.OrderAccepted": True})]
    )
    region = _sub(emulator, topic, "region", [_correlation("r", properties={"region": "eu"})])
    with _client(emulator) as client:
        sender = client.get_topic_sender(topic)
        receivers = [client.get_subscription_receiver(topic, s) for s in (text, number, boolean, region)]
        with _opened(sender, *receivers):
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
            assert [_bodies(_peek(r)) for r in receivers] == [
                ["code-text"],
                ["code-int"],
                ["flag-true"],
                ["region-eu"],
            ]
    assert _unrouted(emulator, topic) == 6


# ---------------------------------------------------------------------------------- true / false / sql


def test_true_filter_takes_everything_and_false_filter_nothing(emulator: EmulatorHandle) -> None:
    topic = _topic(emulator)
    everything = _sub(emulator, topic, "all", [RuleConfig(name="all", filter_type="True")])
    nothing = _sub(emulator, topic, "none", [RuleConfig(name="$Default", filter_type="False")])
    with _client(emulator) as client:
        sender = client.get_topic_sender(topic)
        all_receiver = client.get_subscription_receiver(topic, everything)
        none_receiver = client.get_subscription_receiver(topic, nothing)
        none_dlq = client.get_subscription_receiver(topic, nothing, sub_queue=DLQ)
        with _opened(sender, all_receiver, none_receiver, none_dlq):
            sender.send_messages(
                [
                    ServiceBusMessage("one"),
                    ServiceBusMessage("two", subject="x", application_properties={"a": 1}),
                ]
            )
            assert _bodies(_peek(all_receiver)) == ["one", "two"]
            assert _peek(none_receiver) == []
            assert _peek(none_dlq) == []
    assert _unrouted(emulator, topic) == 0


def test_sql_filters_over_system_and_application_properties(emulator: EmulatorHandle) -> None:
    topic = _topic(emulator)
    subs = [
        _sub(
            emulator, topic, "big-eu", [_sql("big-eu", "sys.Label = 'order' AND region = 'eu' AND qty > 10")]
        ),
        _sub(emulator, topic, "listed", [_sql("listed", "region IN ('us', 'ca') OR EXISTS(vip)")]),
        _sub(emulator, topic, "like", [_sql("like", "sys.CorrelationId LIKE 'batch-%'")]),
    ]
    with _client(emulator) as client:
        sender = client.get_topic_sender(topic)
        receivers = [client.get_subscription_receiver(topic, s) for s in subs]
        with _opened(sender, *receivers):
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
            assert [_bodies(_peek(r)) for r in receivers] == [["eu-11"], ["us", "vip"], ["batch"]]
    assert _unrouted(emulator, topic) == 3  # eu-10, eu-no-label, not-batch


# ---------------------------------------------------------------------------------- OR-ing and actions


def test_a_message_matching_several_rules_without_action_arrives_once(emulator: EmulatorHandle) -> None:
    topic = _topic(emulator)
    rules = [
        _sql("by-type", "[NServiceBus.EnclosedMessageTypes] LIKE '%Shipping.OrderAccepted%'"),
        _sql("by-interface", "[NServiceBus.EnclosedMessageTypes] LIKE '%Shipping.IOrderAccepted%'"),
        _correlation("by-flag", properties={"Shipping.OrderAccepted": True}),
        RuleConfig(name="$Default", filter_type="True"),
    ]
    sub = _sub(emulator, topic, "endpoint", rules)
    header = "Shipping.OrderAccepted, Shared;Shipping.IOrderAccepted, Shared"
    with _client(emulator) as client:
        sender = client.get_topic_sender(topic)
        receiver = client.get_subscription_receiver(topic, sub)
        with _opened(sender, receiver):
            sender.send_messages(
                ServiceBusMessage(
                    "accepted",
                    application_properties={
                        "NServiceBus.EnclosedMessageTypes": header,
                        "Shipping.OrderAccepted": True,
                    },
                )
            )
            received = _peek(receiver)
    assert _bodies(received) == ["accepted"]
    assert "RuleName" not in _props(received[0])


def test_each_matching_rule_with_an_action_yields_its_own_stamped_copy(emulator: EmulatorHandle) -> None:
    topic = _topic(emulator)
    rules = [
        _sql("plain", "kind = 'order'"),
        _sql("also-plain", "amount > 0"),
        _sql("to-billing", "kind = 'order'", "SET route = 'billing'"),
        _sql("to-audit", "amount > 100", "SET route = 'audit'; SET sys.Label = 'audited'"),
        _sql("never", "kind = 'refund'", "SET route = 'refunds'"),
    ]
    fan = _sub(emulator, topic, "fan", rules)
    only_action = _sub(
        emulator,
        topic,
        "only-action",
        [_sql("plain", "kind = 'refund'"), _sql("stamp", "1=1", "SET stamped = TRUE")],
    )
    with _client(emulator) as client:
        sender = client.get_topic_sender(topic)
        fan_receiver = client.get_subscription_receiver(topic, fan)
        action_receiver = client.get_subscription_receiver(topic, only_action)
        with _opened(sender, fan_receiver, action_receiver):
            sender.send_messages(
                ServiceBusMessage(
                    "big-order", subject="original", application_properties={"kind": "order", "amount": 500}
                )
            )
            received = _peek(fan_receiver)
            stamped_only = _peek(action_receiver)

    # Two plain rules matched: one unchanged copy. Two action rules matched: a copy each.
    assert _bodies(received) == ["big-order"] * 3
    by_rule = {_props(m).get("RuleName"): m for m in received}
    assert set(by_rule) == {None, "to-billing", "to-audit"}
    assert _props(by_rule[None]) == {"kind": "order", "amount": 500}
    assert by_rule[None].subject == "original"
    assert _props(by_rule["to-billing"]) == {
        "kind": "order",
        "amount": 500,
        "route": "billing",
        "RuleName": "to-billing",
    }
    assert by_rule["to-billing"].subject == "original"
    assert _props(by_rule["to-audit"]) == {
        "kind": "order",
        "amount": 500,
        "route": "audit",
        "RuleName": "to-audit",
    }
    assert by_rule["to-audit"].subject == "audited"

    # No plain rule matched: only the action's copy, no unchanged one.
    assert len(stamped_only) == 1
    assert _props(stamped_only[0]) == {"kind": "order", "amount": 500, "stamped": True, "RuleName": "stamp"}


def test_remove_and_computed_set_actions_reshape_the_copy(emulator: EmulatorHandle) -> None:
    topic = _topic(emulator)
    action = "; ".join(
        [
            "REMOVE secret",
            "SET total = qty * price",
            "SET sys.CorrelationId = 'corr-' + ref",
            "SET sys.To = 'billing'",
        ]
    )
    reshaped = _sub(emulator, topic, "reshaped", [_sql("reshape", "1=1", action)])
    untouched = _sub(emulator, topic, "untouched")
    original = {"secret": "s3cr3t", "qty": 3, "price": 7, "ref": "A1"}
    with _client(emulator) as client:
        sender = client.get_topic_sender(topic)
        reshaped_receiver = client.get_subscription_receiver(topic, reshaped)
        untouched_receiver = client.get_subscription_receiver(topic, untouched)
        with _opened(sender, reshaped_receiver, untouched_receiver):
            sender.send_messages(
                ServiceBusMessage("line", correlation_id="before", application_properties=original)
            )
            changed = _peek(reshaped_receiver)
            plain = _peek(untouched_receiver)
    assert len(changed) == 1
    assert _props(changed[0]) == {"qty": 3, "price": 7, "ref": "A1", "total": 21, "RuleName": "reshape"}
    assert changed[0].correlation_id == "corr-A1"
    assert changed[0].to == "billing"
    assert str(changed[0]) == "line"
    # The action changed only its own subscription's copy.
    assert len(plain) == 1
    assert _props(plain[0]) == original
    assert plain[0].correlation_id == "before"
    assert plain[0].to is None


# -------------------------------------------------------------------------------------------- unrouted


def test_a_message_no_subscription_wants_is_dropped_and_counted(emulator: EmulatorHandle) -> None:
    topic = _topic(emulator)
    subs = [
        _sub(emulator, topic, "red", [_sql("red", "color = 'red'")]),
        _sub(emulator, topic, "blue", [_correlation("blue", properties={"color": "blue"})]),
        _sub(emulator, topic, "never", [RuleConfig(name="$Default", filter_type="False")]),
    ]
    with _client(emulator) as client:
        sender = client.get_topic_sender(topic)
        receivers = [client.get_subscription_receiver(topic, s) for s in subs]
        dead_letters = [client.get_subscription_receiver(topic, s, sub_queue=DLQ) for s in subs]
        with _opened(sender, *receivers, *dead_letters):
            sender.send_messages(
                [
                    ServiceBusMessage("red", application_properties={"color": "red"}),
                    ServiceBusMessage("green", application_properties={"color": "green"}),
                    ServiceBusMessage("blue", application_properties={"color": "blue"}),
                    ServiceBusMessage("colorless"),
                ]
            )
            assert [_bodies(_peek(r)) for r in receivers] == [["red"], ["blue"], []]
            assert [_peek(r) for r in dead_letters] == [[], [], []]
    assert _unrouted(emulator, topic) == 2


def test_a_topic_without_subscriptions_accepts_and_drops_every_message(emulator: EmulatorHandle) -> None:
    topic = _topic(emulator)
    with _client(emulator) as client, client.get_topic_sender(topic) as sender:
        sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(3)])
        sender.send_messages(ServiceBusMessage("late"))
        assert _unrouted(emulator, topic) == 4
        # A subscription created afterwards sees none of the earlier messages, only later ones.
        late = _sub(emulator, topic, "late")
        sender.send_messages(ServiceBusMessage("after"))
        with client.get_subscription_receiver(topic, late) as receiver:
            assert _bodies(_peek(receiver)) == ["after"]
    assert _unrouted(emulator, topic) == 4


# ------------------------------------------------------------------------------------- filter failures


@pytest.mark.parametrize(
    "expression", ["sys.Nonexistent = 1", "n / 0 = 1"], ids=["unknown-system", "div-zero"]
)
def test_filter_evaluation_failure_dead_letters_only_where_enabled(
    emulator: EmulatorHandle, expression: str
) -> None:
    topic = _topic(emulator)
    loud = _sub(emulator, topic, "loud", [_sql("broken", expression)])  # dead-lettering is the default
    quiet = _sub(
        emulator,
        topic,
        "quiet",
        [_sql("broken", expression)],
        dead_lettering_on_filter_evaluation_exceptions=False,
    )
    healthy = _sub(emulator, topic, "healthy", [_sql("int-n", "n = 1")])
    catch_all = _sub(emulator, topic, "catch-all")
    with _client(emulator) as client:
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
        with _opened(
            sender, loud_main, loud_dlq, quiet_main, quiet_dlq, healthy_main, healthy_dlq, catch_all_main
        ):
            sender.send_messages(ServiceBusMessage("poison", application_properties={"n": 1}))

            assert _peek(loud_main) == []
            dead = _peek(loud_dlq)
            assert _bodies(dead) == ["poison"]
            assert dead[0].dead_letter_reason  # the broker says why
            assert _props(dead[0]) == {
                "n": 1,
                "DeadLetterReason": dead[0].dead_letter_reason,
                "DeadLetterErrorDescription": dead[0].dead_letter_error_description,
            }

            assert _peek(quiet_main) == []
            assert _peek(quiet_dlq) == []

            assert _bodies(_peek(healthy_main)) == ["poison"]
            assert _peek(healthy_dlq) == []
            assert _bodies(_peek(catch_all_main)) == ["poison"]


def test_each_failing_subscription_dead_letters_with_its_own_error(emulator: EmulatorHandle) -> None:
    topic = _topic(emulator)
    unknown = _sub(emulator, topic, "unknown", [_sql("unknown", "sys.Nonexistent = 1")])
    division = _sub(emulator, topic, "division", [_sql("division", "n / 0 = 1")])
    healthy = _sub(emulator, topic, "healthy")
    with _client(emulator) as client:
        sender = client.get_topic_sender(topic)
        unknown_dlq = client.get_subscription_receiver(topic, unknown, sub_queue=DLQ)
        division_dlq = client.get_subscription_receiver(topic, division, sub_queue=DLQ)
        healthy_main = client.get_subscription_receiver(topic, healthy)
        with _opened(sender, unknown_dlq, division_dlq, healthy_main):
            sender.send_messages(ServiceBusMessage("poison", application_properties={"n": 1}))
            unknown_dead = _peek(unknown_dlq)
            division_dead = _peek(division_dlq)
            assert _bodies(_peek(healthy_main)) == ["poison"]
    assert _bodies(unknown_dead) == ["poison"]
    assert _bodies(division_dead) == ["poison"]
    assert "Nonexistent" in (unknown_dead[0].dead_letter_error_description or "")
    # The division failure is described as such, not with the other subscription's error.
    assert "Nonexistent" not in (division_dead[0].dead_letter_error_description or "")


def test_a_filter_that_fails_only_for_some_messages_routes_the_others_normally(
    emulator: EmulatorHandle,
) -> None:
    topic = _topic(emulator)
    sub = _sub(emulator, topic, "ratio", [_sql("ratio", "n / d > 1")])
    with _client(emulator) as client:
        sender = client.get_topic_sender(topic)
        main = client.get_subscription_receiver(topic, sub)
        dlq = client.get_subscription_receiver(topic, sub, sub_queue=DLQ)
        with _opened(sender, main, dlq):
            sender.send_messages(
                [
                    ServiceBusMessage("four-halves", application_properties={"n": 4, "d": 2}),
                    ServiceBusMessage("one-half", application_properties={"n": 1, "d": 2}),
                    ServiceBusMessage("no-divisor", application_properties={"n": 4}),
                    ServiceBusMessage("zero", application_properties={"n": 4, "d": 0}),
                ]
            )
            assert _bodies(_peek(main)) == ["four-halves"]
            assert _bodies(_peek(dlq)) == ["zero"]


# ------------------------------------------------------------------------------ creation-time refusals


def test_a_sql_filter_or_action_with_a_syntax_error_is_refused_at_creation_with_its_position(
    emulator: EmulatorHandle,
) -> None:
    topic = _topic(emulator)
    ns = emulator.emulator.namespace
    with pytest.raises(SqlSyntaxError) as refused:
        emulator.call(
            lambda: ns.create_subscription(
                topic, "bad", SubscriptionProperties(), [_sql("bad", "color = = 'red'")], origin="arm"
            )
        )
    assert refused.value.position == 9
    assert "position 9" in str(refused.value)
    assert emulator.call(lambda: "bad" in ns.topics[topic].subscriptions) is False

    with pytest.raises(SqlSyntaxError) as refused_action:
        emulator.call(
            lambda: ns.create_subscription(
                topic, "bad", SubscriptionProperties(), [_sql("bad", "1=1", "SET = 1")], origin="arm"
            )
        )
    assert refused_action.value.position == 5
    assert "position 5" in str(refused_action.value)
    assert emulator.call(lambda: "bad" in ns.topics[topic].subscriptions) is False

    # Nothing half-created: the name is free for a correct rule, which then routes.
    sub = _sub(emulator, topic, "bad", [_sql("good", "color = 'red'")])
    with _client(emulator) as client:
        sender = client.get_topic_sender(topic)
        receiver = client.get_subscription_receiver(topic, sub)
        with _opened(sender, receiver):
            sender.send_messages(ServiceBusMessage("red", application_properties={"color": "red"}))
            assert _bodies(_peek(receiver)) == ["red"]


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
    with _client(private) as client:
        sender = client.get_topic_sender(topic)
        first = client.get_subscription_receiver(topic, "s0000")
        last = client.get_subscription_receiver(topic, "s1999")
        with _opened(sender, first, last):
            sender.send_messages(ServiceBusMessage("to-all"))
            assert _bodies(_peek(first)) == ["to-all"]
            assert _bodies(_peek(last)) == ["to-all"]
    active = private.call(
        lambda: {ns.counts(s)["activeMessageCount"] for s in ns.topics[topic].subscriptions.values()}
    )
    assert active == {1}
