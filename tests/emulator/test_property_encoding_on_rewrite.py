"""When the broker changes a message's application properties (dead-lettering stamps the reason, a rule
action SETs and REMOVEs), every property it did not touch keeps its exact AMQP encoding, as on Azure.

Messages go in through azure-servicebus with each property's AMQP type (a .NET sender's ushort, ulong past
2^63, timestamp ...); the types the broker holds afterwards are read from its stored bytes with qpid-proton
(tests/shared/envelope/wire_types.py), and the result is received back through the SDK.
"""

from __future__ import annotations

from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from emulator.broker.properties import RuleConfig
from emulator.encoding.property_map import raw_entries, splice_application_properties
from emulator.testing import EmulatorHandle
from shared.amqp.encoding.sections import parse_message
from shared.amqp.encoding.types import UShort
from shared.envelope.sdk import sdk_application_properties
from tests.shared.envelope.wire_types import EXACT, SENT, decode_section, types_of

STAMPS = {"DeadLetterReason": "string", "DeadLetterErrorDescription": "string"}


def _message() -> ServiceBusMessage:
    properties: Any = sdk_application_properties(SENT)
    return ServiceBusMessage(b"body", message_id="m-1", application_properties=properties)


def _stored(emulator: EmulatorHandle, read: Any) -> list[dict[str, Any]]:
    raws: Any = emulator.call(lambda: [m.parsed.application_properties_raw for m in read().peek(0, 100)])
    return [decode_section(raw) for raw in raws]


def _dead_letters(emulator: EmulatorHandle, queue: str) -> list[dict[str, Any]]:
    return _stored(emulator, lambda: emulator.emulator.namespace.queues[queue].dead_letter)


def _subscription(emulator: EmulatorHandle, topic: str, name: str) -> list[dict[str, Any]]:
    return _stored(emulator, lambda: emulator.emulator.namespace.topics[topic].subscriptions[name].main)


def test_a_dead_lettered_message_keeps_every_property_type_and_gains_string_stamps(
    emulator: EmulatorHandle,
) -> None:
    queue = emulator.create_queue()
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(_message())
        with client.get_queue_receiver(queue, max_wait_time=5) as receiver:
            [message] = receiver.receive_messages(max_wait_time=5)
            receiver.dead_letter_message(message, reason="HandlerFailed", error_description="boom")
        [stored] = _dead_letters(emulator, queue)
        assert types_of(stored) == {**EXACT, **STAMPS}
        assert stored["ulong"] == 2**64 - 1 and stored["DeadLetterReason"] == "HandlerFailed"
        # The SDK receives it (a ulong past 2^63 once closed the connection with amqp:internal-error).
        with client.get_queue_receiver(queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            [dead] = dlq.receive_messages(max_wait_time=5)
            assert (dead.application_properties or {})[b"ulong"] == 2**64 - 1
            assert dead.dead_letter_reason == "HandlerFailed"
            dlq.complete_message(dead)


def test_a_message_past_its_max_delivery_count_keeps_every_property_type(emulator: EmulatorHandle) -> None:
    queue = emulator.create_queue(max_delivery_count=1)
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(_message())
        with client.get_queue_receiver(queue, max_wait_time=5) as receiver:
            [message] = receiver.receive_messages(max_wait_time=5)
            receiver.abandon_message(message)
    [stored] = _dead_letters(emulator, queue)
    assert types_of(stored) == {**EXACT, **STAMPS}
    assert stored["DeadLetterReason"] == "MaxDeliveryCountExceeded"


def test_a_rule_action_changes_only_what_it_sets_and_removes(emulator: EmulatorHandle) -> None:
    topic = emulator.create_topic()
    action = "SET text = 'changed'; SET added = 7; REMOVE flag"
    emulator.create_subscription(topic, "acted", [RuleConfig("stamp", "Sql", "1=1", action_sql=action)])
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_topic_sender(topic) as sender:
            sender.send_messages(_message())
        [stored] = _subscription(emulator, topic, "acted")
        untouched = {name: kind for name, kind in EXACT.items() if name not in ("text", "flag")}
        assert types_of(stored, untouched) == untouched
        assert set(stored) == {*untouched, "text", "added", "RuleName"}
        assert stored["text"] == "changed" and stored["added"] == 7 and stored["RuleName"] == "stamp"
        with client.get_subscription_receiver(topic, "acted") as receiver:
            [received] = receiver.receive_messages(max_wait_time=5)
            assert (received.application_properties or {})[b"ushort"] == 65000
            receiver.complete_message(received)


def test_a_splice_keeps_untouched_entries_byte_for_byte() -> None:
    from shared.amqp.encoding.sections import APPLICATION_PROPERTIES, section

    original = section(APPLICATION_PROPERTIES, {"a": UShort(5), "b": "x", "c": UShort(6)})
    spliced = splice_application_properties(original, {"b": "y", "d": True}, removals={"c"})
    assert dict(raw_entries(spliced))["a"] == dict(raw_entries(original))["a"]
    assert [key for key, _ in raw_entries(spliced)] == ["a", "b", "d"]
    assert parse_message(spliced).application_properties == {"a": 5, "b": "y", "d": True}
    assert splice_application_properties(original, {}, removals={"a", "b", "c"}) == b""
