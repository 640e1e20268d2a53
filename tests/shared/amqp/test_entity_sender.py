"""Busbar's own AMQP sender (shared/amqp/sender.py, python-qpid-proton's public API) against the emulator: a
message is sent as azure-servicebus sends a ServiceBusMessage (system properties, TimeToLive, partition key,
one data body), every application property keeps its AMQP type on the wire and is read back typed by
Busbar's receiver, a refused send raises with the broker's own condition and description, and a message
larger than the link allows is refused before anything is sent."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from azure.core.credentials import AccessToken
from azure.identity import ManagedIdentityCredential
from azure.servicebus import ServiceBusClient

from shared.amqp.connection import Namespace
from shared.amqp.outgoing import OutgoingMessage
from shared.amqp.receiver import EntityReceiver
from shared.amqp.sender import EntitySender, MessageTooLarge, SendRefused
from shared.envelope.properties import Char, Described, PropertyTypeError, amqp_type
from tests.shared.envelope.wire_types import (
    DESCRIBED,
    DESCRIBED_EXACT,
    EXACT,
    SENT,
    stored_properties,
    types_of,
)

pytestmark = pytest.mark.timeout(90)

TYPED = {**SENT, **DESCRIBED, "grade": Char("A"), "price": Decimal("19.99"), "big": Decimal("-1E-28")}
TYPED_EXACT = {**EXACT, **DESCRIBED_EXACT, "grade": "char", "price": "decimal128", "big": "decimal128"}


def _namespace(emulator: Any) -> Namespace:
    return Namespace.from_connection_string(emulator.connection_string)


def _receive(emulator: Any, queue: str, count: int) -> list[Any]:
    with EntityReceiver(_namespace(emulator), queue) as receiver:
        received: list[Any] = []
        while len(received) < count:
            batch = receiver.receive_messages(max_message_count=count, max_wait_time=5)
            assert batch, f"only {len(received)} of {count} messages arrived"
            received += batch
        for message in received:
            receiver.complete_message(message)
        return received


def test_every_application_property_keeps_its_amqp_type_on_the_wire_and_is_read_back_typed(
    emulator: Any,
) -> None:
    queue = emulator.create_queue()
    with EntitySender(_namespace(emulator), queue) as sender:
        sender.send(OutgoingMessage(body=b'{"a":1}', message_id="typed-1", application_properties=TYPED))
    [on_wire] = stored_properties(emulator, queue)
    assert types_of(on_wire) == TYPED_EXACT
    [message] = _receive(emulator, queue, 1)
    assert message.application_properties == TYPED
    assert {name: amqp_type(value) for name, value in message.application_properties.items()} == {
        name: amqp_type(value) for name, value in TYPED.items()
    }


def test_the_system_properties_ttl_and_body_arrive_as_the_sdk_sends_them(emulator: Any) -> None:
    queue = emulator.create_queue(requires_session=True)
    sent = OutgoingMessage(
        body=b"payload",
        message_id="m-1",
        session_id="s-1",
        partition_key="s-1",
        correlation_id="c-1",
        subject="Orders.Placed",
        content_type="application/json",
        to="somewhere",
        reply_to="replies",
        reply_to_session_id="r-1",
        time_to_live=timedelta(seconds=90, milliseconds=500),
    )
    with EntitySender(_namespace(emulator), queue) as sender:
        sender.send(sent)
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        client.get_queue_receiver(queue, session_id="s-1", max_wait_time=5) as receiver,
    ):
        [message] = receiver.receive_messages(max_wait_time=5)
        receiver.complete_message(message)
    assert b"".join(message.body) == b"payload"
    assert str(message.body_type.value) == "data"
    assert (message.message_id, message.session_id, message.partition_key) == ("m-1", "s-1", "s-1")
    assert (message.correlation_id, message.subject, message.content_type) == (
        "c-1",
        "Orders.Placed",
        "application/json",
    )
    assert (message.to, message.reply_to, message.reply_to_session_id) == ("somewhere", "replies", "r-1")
    # The SDK's TimeToLive setter keeps whole seconds (int(value.total_seconds()) * 1000).
    assert message.time_to_live == timedelta(seconds=90)
    properties = message.raw_amqp_message.properties
    assert properties is not None
    expires, created = properties.absolute_expiry_time, properties.creation_time
    assert expires is not None and created is not None and expires - created == 90_000


def test_a_property_that_cannot_be_sent_is_refused_naming_it_before_anything_is_sent() -> None:
    with pytest.raises(PropertyTypeError, match=r"'bad'.*not an AMQP scalar"):
        OutgoingMessage(application_properties={"good": 1, "bad": object()})
    with pytest.raises(PropertyTypeError, match=r"'nan'.*finite"):
        OutgoingMessage(application_properties={"nan": Decimal("NaN")})
    with pytest.raises(ValueError, match="partition_key"):
        OutgoingMessage(session_id="s-1", partition_key="other")
    with pytest.raises(ValueError, match="message_id cannot be longer than 128"):
        OutgoingMessage(message_id="x" * 129)


def test_a_batch_sends_in_order_and_reports_each_messages_own_outcome_when_the_entity_fills_up(
    emulator: Any,
) -> None:
    queue = emulator.create_queue(max_size_in_megabytes=1)
    chunk = b"x" * (200 * 1024)
    messages = [OutgoingMessage(body=chunk, message_id=f"m-{n}") for n in range(8)]
    with EntitySender(_namespace(emulator), queue) as sender:
        outcomes = sender.send_all(messages)
    sent = [outcome.message.message_id for outcome in outcomes if outcome.sent]
    refused = [outcome.error for outcome in outcomes if not outcome.sent]
    assert sent and refused, "a 1 MB queue takes some of eight 200 KB messages and refuses the rest"
    assert sent == [f"m-{n}" for n in range(len(sent))]
    for error in refused:
        assert isinstance(error, SendRefused)
        assert error.condition == "amqp:resource-limit-exceeded"
        assert "maximum entity size" in str(error)
    received = _receive(emulator, queue, len(sent))
    assert [message.message_id for message in received] == sent


def test_a_send_to_an_entity_that_does_not_exist_is_refused_with_the_brokers_reason(emulator: Any) -> None:
    with pytest.raises(SendRefused) as refused:
        EntitySender(_namespace(emulator), "no-such-queue-anywhere")
    assert refused.value.condition == "amqp:not-found"
    assert "no-such-queue-anywhere" in str(refused.value).lower()


def test_a_message_larger_than_the_link_allows_is_refused_precisely_and_nothing_is_sent(
    emulator: Any,
) -> None:
    queue = emulator.create_queue(max_message_size_in_kilobytes=1024)
    with EntitySender(_namespace(emulator), queue) as sender:
        limit = sender.max_message_size
        assert limit == 1024 * 1024
        too_large = OutgoingMessage(body=b"x" * limit, message_id="big")
        with pytest.raises(
            MessageTooLarge, match=f"larger than {queue}'s maximum message size \\({limit} bytes"
        ):
            sender.send(too_large)
        outcomes = sender.send_all([OutgoingMessage(body=b"small", message_id="small"), too_large])
    assert [outcome.sent for outcome in outcomes] == [True, False]
    assert isinstance(outcomes[1].error, MessageTooLarge) and outcomes[1].error.size > limit
    assert [message.message_id for message in _receive(emulator, queue, 1)] == ["small"]
    with EntityReceiver(_namespace(emulator), queue) as receiver:
        assert receiver.peek_messages(max_message_count=10) == []


def test_a_described_value_round_trips_with_its_descriptor(emulator: Any) -> None:
    queue = emulator.create_queue()
    value = Described("example:grade", Char("B"))
    with EntitySender(_namespace(emulator), queue) as sender:
        sender.send(OutgoingMessage(body=b"{}", application_properties={"graded": value}))
    [message] = _receive(emulator, queue, 1)
    assert message.application_properties["graded"] == value
    assert isinstance(message.application_properties["graded"].value, Char)


def test_a_managed_identitys_token_is_put_as_a_jwt_and_sends(managed_identity: Any) -> None:
    queue = managed_identity.create_queue()
    sas = Namespace.from_connection_string(managed_identity.connection_string)
    # The emulator listens on plain AMQP here; Azure's namespace is AMQPS on 5671 (Namespace.from_credential).
    namespace = Namespace(sas.host, secure=False, credential=ManagedIdentityCredential())
    with EntitySender(namespace, queue) as sender:
        sender.send(OutgoingMessage(body=b"{}", message_id="by-identity", application_properties=TYPED))
    [message] = _receive(managed_identity, queue, 1)
    assert (message.message_id, message.application_properties) == ("by-identity", TYPED)


def test_a_token_the_namespace_did_not_issue_is_refused_before_anything_is_sent(emulator: Any) -> None:
    class Forged:
        def get_token(self, *scopes: str) -> AccessToken:
            return AccessToken(
                "eyJhbGciOiJIUzI1NiJ9.eyJhdWQiOiJodHRwczovL3NlcnZpY2VidXMuYXp1cmUubmV0In0.c2ln", 2**31
            )

    queue = emulator.create_queue()
    sas = Namespace.from_connection_string(emulator.connection_string)
    with pytest.raises(SendRefused, match=r"put-token .* refused \(401\)") as refused:
        EntitySender(Namespace(sas.host, secure=False, credential=Forged()), queue)
    assert refused.value.condition == "amqp:unauthorized-access"
