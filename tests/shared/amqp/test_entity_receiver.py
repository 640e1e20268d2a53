"""Busbar's own AMQP receiver (shared/amqp/receiver.py, python-qpid-proton's public API) against the emulator:
it authenticates with the connection string's SAS key, receives and peeks every application property with
its AMQP type, and settles as azure-servicebus does (complete, abandon, defer, dead-letter with a reason),
which the emulator applies as Service Bus does."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from azure.core.credentials import AccessToken
from azure.identity import ManagedIdentityCredential
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from shared.amqp.connection import Namespace, WireError
from shared.amqp.outgoing import OutgoingMessage, outgoing_message
from shared.amqp.receiver import EntityReceiver
from shared.envelope import Envelope, PartitionKeyPolicy
from shared.envelope.properties import Char, amqp_type
from tests.shared.amqp.typed_send import send_typed
from tests.shared.envelope.wire_types import DESCRIBED, SENT

pytestmark = pytest.mark.timeout(60)

TYPED = {**SENT, **DESCRIBED, "grade": Char("A"), "price": Decimal("19.99")}


def _send(connection_string: str, queue: str, *messages: ServiceBusMessage | OutgoingMessage) -> None:
    typed = [message for message in messages if isinstance(message, OutgoingMessage)]
    if typed:  # a char is sent by Busbar's own sender only (azure-servicebus has no char)
        send_typed(connection_string, queue, *typed)
        return
    with (
        ServiceBusClient.from_connection_string(connection_string) as client,
        client.get_queue_sender(queue) as sender,
    ):
        sender.send_messages([m for m in messages if isinstance(m, ServiceBusMessage)])


def _typed(message_id: str) -> OutgoingMessage:
    envelope = Envelope(
        body=b'{"a":1}', message_id=message_id, subject="Orders.Placed", application_properties=TYPED
    )
    return outgoing_message(envelope, PartitionKeyPolicy.REFUSE)


def test_a_received_message_has_every_application_property_with_its_amqp_type(emulator: Any) -> None:
    queue = emulator.create_queue()
    _send(emulator.connection_string, queue, _typed("typed-1"))
    namespace = Namespace.from_connection_string(emulator.connection_string)
    with EntityReceiver(namespace, queue) as receiver:
        [message] = receiver.receive_messages(max_message_count=5, max_wait_time=5)
        receiver.complete_message(message)
    assert message.body == b'{"a":1}'
    assert (message.message_id, message.subject, message.sequence_number) == ("typed-1", "Orders.Placed", 1)
    assert message.enqueued_time_utc is not None and message.delivery_count == 0
    assert message.application_properties == TYPED
    assert {name: amqp_type(value) for name, value in message.application_properties.items()} == {
        name: amqp_type(value) for name, value in TYPED.items()
    }


def test_a_message_sent_without_a_content_type_has_none_received_or_peeked(emulator: Any) -> None:
    # proton reads an absent content-type as the symbol "None"; the SDK's content_type (and the .NET SDK's
    # ContentType, which devhost's trigger metadata carries) is null.
    queue = emulator.create_queue()
    _send(
        emulator.connection_string,
        queue,
        ServiceBusMessage(b"1", message_id="bare"),
        ServiceBusMessage(b"2", message_id="typed", content_type="application/json"),
    )
    namespace = Namespace.from_connection_string(emulator.connection_string)
    with EntityReceiver(namespace, queue) as receiver:
        peeked = receiver.peek_messages(max_message_count=2)
        received = receiver.receive_messages(max_message_count=2, max_wait_time=5)
        for message in received:
            receiver.complete_message(message)
    assert [(m.message_id, m.content_type) for m in peeked] == [("bare", None), ("typed", "application/json")]
    assert [(m.message_id, m.content_type) for m in received] == [
        ("bare", None),
        ("typed", "application/json"),
    ]


def _sdk_peek(connection_string: str, queue: str, **options: Any) -> list[Any]:
    with (
        ServiceBusClient.from_connection_string(connection_string) as client,
        client.get_queue_receiver(queue, **options) as receiver,
    ):
        return list(receiver.peek_messages(max_message_count=10))


def test_complete_removes_the_message_and_abandon_gives_it_back_with_its_delivery_count_raised(
    emulator: Any,
) -> None:
    queue = emulator.create_queue()
    _send(
        emulator.connection_string,
        queue,
        ServiceBusMessage(b"1", message_id="m-1"),
        ServiceBusMessage(b"2", message_id="m-2"),
    )
    namespace = Namespace.from_connection_string(emulator.connection_string)
    with EntityReceiver(namespace, queue) as receiver:
        first, second = receiver.receive_messages(max_message_count=2, max_wait_time=5)
        receiver.complete_message(first)
        receiver.abandon_message(second)
        [again] = receiver.receive_messages(max_message_count=2, max_wait_time=5)
        receiver.complete_message(again)
    assert (first.message_id, second.message_id, again.message_id) == ("m-1", "m-2", "m-2")
    assert (second.delivery_count, again.delivery_count) == (0, 1)
    assert _sdk_peek(emulator.connection_string, queue) == []


def test_dead_letter_moves_the_message_with_its_reason_and_description(emulator: Any) -> None:
    queue = emulator.create_queue()
    _send(emulator.connection_string, queue, _typed("typed-dl"))
    namespace = Namespace.from_connection_string(emulator.connection_string)
    with EntityReceiver(namespace, queue) as receiver:
        [message] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.dead_letter_message(message, reason="Poison", error_description="cannot parse the order")
    with EntityReceiver(namespace, f"{queue}/$deadletterqueue") as dead_letters:
        [dead] = dead_letters.receive_messages(max_message_count=1, max_wait_time=5)
        dead_letters.complete_message(dead)
    assert (dead.message_id, dead.dead_letter_reason, dead.dead_letter_error_description) == (
        "typed-dl",
        "Poison",
        "cannot parse the order",
    )
    properties = {k: v for k, v in dead.application_properties.items() if not k.startswith("DeadLetter")}
    assert properties == TYPED


def test_defer_sets_the_message_aside_for_a_receive_by_sequence_number(emulator: Any) -> None:
    queue = emulator.create_queue()
    _send(emulator.connection_string, queue, ServiceBusMessage(b"later", message_id="m-defer"))
    namespace = Namespace.from_connection_string(emulator.connection_string)
    with EntityReceiver(namespace, queue) as receiver:
        [message] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.defer_message(message)
        assert receiver.receive_messages(max_message_count=1, max_wait_time=0.5) == []
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        client.get_queue_receiver(queue) as sdk_receiver,
    ):
        [deferred] = sdk_receiver.receive_deferred_messages([message.sequence_number])
        sdk_receiver.complete_message(deferred)
    assert deferred.message_id == "m-defer"


def test_a_message_is_settled_once_by_the_receiver_that_received_it(emulator: Any) -> None:
    queue = emulator.create_queue()
    _send(emulator.connection_string, queue, ServiceBusMessage(b"once", message_id="m-once"))
    namespace = Namespace.from_connection_string(emulator.connection_string)
    with EntityReceiver(namespace, queue) as receiver:
        [message] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.complete_message(message)
        with pytest.raises(WireError, match="not received locked"):
            receiver.complete_message(message)
        left = receiver.peek_messages(max_message_count=1)
    assert left == []


def test_peek_reads_a_subscriptions_dead_letter_queue_typed_from_a_sequence_number_and_locks_nothing(
    emulator: Any,
) -> None:
    topic = emulator.create_topic()
    subscription = emulator.create_subscription(topic, "watch")
    send_typed(emulator.connection_string, topic, _typed("p-1"), _typed("p-2"), _typed("p-3"))
    namespace = Namespace.from_connection_string(emulator.connection_string)
    with EntityReceiver(namespace, f"{topic}/subscriptions/{subscription}") as subscription_receiver:
        for message in subscription_receiver.receive_messages(max_message_count=3, max_wait_time=5):
            subscription_receiver.dead_letter_message(message, reason="Held")
    address = f"{topic}/subscriptions/{subscription}/$deadletterqueue"
    with EntityReceiver(namespace, address) as receiver:
        everything = receiver.peek_messages(max_message_count=10)
        later = receiver.peek_messages(max_message_count=10, sequence_number=everything[1].sequence_number)
        past = receiver.peek_messages(
            max_message_count=10, sequence_number=everything[-1].sequence_number + 1
        )
        received = receiver.receive_messages(max_message_count=3, max_wait_time=5)
    assert [m.message_id for m in everything] == ["p-1", "p-2", "p-3"]
    assert [m.message_id for m in later] == ["p-2", "p-3"]
    assert past == []
    assert [m.dead_letter_reason for m in everything] == ["Held"] * 3
    assert all(m.application_properties.keys() >= TYPED.keys() for m in everything)
    assert {k: everything[0].application_properties[k] for k in TYPED} == TYPED
    assert [m.message_id for m in received] == ["p-1", "p-2", "p-3"]  # peeking locked none of them


def test_a_wrong_key_is_refused_when_the_token_is_put(emulator: Any) -> None:
    queue = emulator.create_queue()
    wrong = Namespace.from_connection_string(emulator.connection_string).key or ""
    connection_string = emulator.connection_string.replace(wrong, "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXk=")
    with pytest.raises(WireError, match=r"put-token .* refused \(401\)"):
        EntityReceiver(Namespace.from_connection_string(connection_string), queue)


def test_a_connection_string_without_a_key_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="no sharedaccesskey"):
        Namespace.from_connection_string(
            "Endpoint=sb://127.0.0.1:5672/;SharedAccessKeyName=RootManageSharedAccessKey"
        )


def test_a_managed_identitys_token_is_put_as_a_jwt_and_receives(managed_identity: Any) -> None:
    queue = managed_identity.create_queue()
    _send(managed_identity.connection_string, queue, _typed("by-identity"))
    sas = Namespace.from_connection_string(managed_identity.connection_string)
    # The emulator listens on plain AMQP here; Azure's namespace is AMQPS on 5671 (Namespace.from_credential).
    namespace = Namespace(sas.host, secure=False, credential=ManagedIdentityCredential())
    assert namespace.token(namespace.audience(queue))[1] == "jwt"
    with EntityReceiver(namespace, queue) as receiver:
        [message] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.complete_message(message)
    assert (message.message_id, message.application_properties) == ("by-identity", TYPED)


def test_a_token_the_namespace_did_not_issue_is_refused(emulator: Any) -> None:
    class Forged:
        def get_token(self, *scopes: str) -> AccessToken:
            return AccessToken(
                "eyJhbGciOiJIUzI1NiJ9.eyJhdWQiOiJodHRwczovL3NlcnZpY2VidXMuYXp1cmUubmV0In0.c2ln", 2**31
            )

    queue = emulator.create_queue()
    sas = Namespace.from_connection_string(emulator.connection_string)
    with pytest.raises(WireError, match=r"put-token .* refused \(401\)"):
        EntityReceiver(Namespace(sas.host, secure=False, credential=Forged()), queue)


def test_the_url_is_amqps_on_5671_for_azure_and_plain_amqp_for_the_emulator() -> None:
    azure = Namespace.from_connection_string(
        "Endpoint=sb://contoso.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=a2V5"
    )
    local = Namespace.from_connection_string(
        "Endpoint=sb://127.0.0.1:5672/;SharedAccessKeyName=k;SharedAccessKey=a2V5;UseDevelopmentEmulator=true"
    )
    identity = Namespace.from_credential("contoso.servicebus.windows.net", ManagedIdentityCredential())
    assert (azure.url, local.url, identity.url) == (
        "amqps://contoso.servicebus.windows.net:5671",
        "amqp://127.0.0.1:5672",
        "amqps://contoso.servicebus.windows.net:5671",
    )
    assert azure.audience("orders/$deadletterqueue") == "sb://contoso.servicebus.windows.net/orders"


def test_a_settlement_after_the_lock_expired_is_refused_and_the_message_stays(emulator: Any) -> None:
    queue = emulator.create_queue(lock_duration=timedelta(seconds=5))
    _send(emulator.connection_string, queue, ServiceBusMessage(b"slow", message_id="m-slow"))
    namespace = Namespace.from_connection_string(emulator.connection_string)
    with EntityReceiver(namespace, queue) as receiver:
        [message] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert message.locked_until_utc is not None
        # Past the lock the broker stated on the message (no timing is asserted: only that it has passed).
        while datetime.now(UTC) <= message.locked_until_utc + timedelta(seconds=1):
            time.sleep(0.2)
        with pytest.raises(WireError, match="refused"):
            receiver.complete_message(message)
        [again] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.complete_message(again)
    assert again.message_id == "m-slow" and again.delivery_count == 1
