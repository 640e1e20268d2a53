"""What a receiver gets of an AmqpAnnotatedMessage: the lock token in the delivery annotations of a peek-lock
delivery (``x-opt-lock-token``, which the Functions Service Bus extension reads), the sender's own delivery
annotations, and every other section as sent, in peek-lock and receive-and-delete alike."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from azure.servicebus import ServiceBusReceiveMode
from azure.servicebus.amqp import (
    AmqpAnnotatedMessage,
    AmqpMessageBodyType,
    AmqpMessageHeader,
    AmqpMessageProperties,
)

from tests.emulator.backends import Backend
from tests.emulator.sdk_helpers import sdk_client

_BROKER_ANNOTATIONS = {"x-opt-sequence-number", "x-opt-enqueued-time"}


def _decoded(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def _send_and_receive(backend: Backend, message: AmqpAnnotatedMessage, mode: ServiceBusReceiveMode) -> Any:
    queue = backend.create_queue()
    with sdk_client(backend) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(message)
        with client.get_queue_receiver(queue, receive_mode=mode, max_wait_time=5) as receiver:
            received: Any  # it gets an attribute of ours, below
            (received,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            received.lock_token_at_receipt = received.lock_token  # the SDK forgets it once settled
            if mode == ServiceBusReceiveMode.PEEK_LOCK:
                receiver.complete_message(received)
            return received


def test_a_peek_lock_delivery_carries_its_lock_token_in_the_delivery_annotations(
    backend: Backend,
) -> None:
    received = _send_and_receive(
        backend, AmqpAnnotatedMessage(data_body=b"x"), ServiceBusReceiveMode.PEEK_LOCK
    )
    annotations = received.raw_amqp_message.delivery_annotations
    assert annotations is not None
    assert isinstance(received.lock_token_at_receipt, uuid.UUID)
    assert annotations[b"x-opt-lock-token"] == received.lock_token_at_receipt


def test_a_receive_and_delete_delivery_has_no_lock_token(backend: Backend) -> None:
    received = _send_and_receive(
        backend, AmqpAnnotatedMessage(data_body=b"x"), ServiceBusReceiveMode.RECEIVE_AND_DELETE
    )
    assert b"x-opt-lock-token" not in (received.raw_amqp_message.delivery_annotations or {})


def test_a_receive_and_delete_delivery_has_no_tag_and_an_empty_delivery_annotations_section(
    backend: Backend,
) -> None:
    # Azure's settled deliveries have an empty delivery tag and always carry the delivery-annotations
    # section; the SDK's legacy view shows None and {} (SDK test
    # test_message_backcompat_receive_and_delete_databody).
    received = _send_and_receive(
        backend, AmqpAnnotatedMessage(data_body=b"x"), ServiceBusReceiveMode.RECEIVE_AND_DELETE
    )
    assert received.raw_amqp_message.delivery_annotations == {}
    assert received.message.delivery_annotations == {}
    assert received.message.delivery_tag is None


@pytest.mark.parametrize(
    ("mode", "broker_annotations"),
    [
        (ServiceBusReceiveMode.PEEK_LOCK, {*_BROKER_ANNOTATIONS, "x-opt-locked-until"}),
        (ServiceBusReceiveMode.RECEIVE_AND_DELETE, _BROKER_ANNOTATIONS),
    ],
)
def test_a_message_sent_to_the_queue_has_no_enqueue_sequence_number_annotation(
    backend: Backend, mode: ServiceBusReceiveMode, broker_annotations: set[str]
) -> None:
    # Azure stamps the sequence number and enqueued time (and the lock's end) and no
    # x-opt-enqueue-sequence-number on a message sent straight to the entity (SDK tests
    # test_message_backcompat_*_databody count the annotations and the encoded size).
    sent = AmqpAnnotatedMessage(data_body=b"x", annotations={"x-opt-partition-key": "p"})
    received = _send_and_receive(backend, sent, mode)
    names = {_decoded(k) for k in received.raw_amqp_message.annotations}
    assert names == broker_annotations | {"x-opt-partition-key"}
    assert received.enqueued_sequence_number is None
    assert received.sequence_number is not None


@pytest.mark.parametrize("mode", [ServiceBusReceiveMode.PEEK_LOCK, ServiceBusReceiveMode.RECEIVE_AND_DELETE])
def test_every_section_of_an_annotated_message_round_trips(
    backend: Backend, mode: ServiceBusReceiveMode
) -> None:
    sent = AmqpAnnotatedMessage(
        data_body=[b"part-1", b"part-2"],
        header=AmqpMessageHeader(priority=7, durable=True, time_to_live=60_000),
        delivery_annotations={"sender-da": "from-the-sender"},
        annotations={"x-custom-annotation": "kept"},
        properties=AmqpMessageProperties(message_id="sections-1", subject="all", content_type="text/plain"),
        application_properties={"tenant": "contoso", "n": 3},
        footer={"footer-key": "footer-value"},
    )
    received = _send_and_receive(backend, sent, mode).raw_amqp_message
    assert received.body_type == AmqpMessageBodyType.DATA
    assert list(received.body) == [b"part-1", b"part-2"]
    assert received.header.priority == 7
    assert received.header.durable is True
    assert received.header.time_to_live == 60_000
    assert _decoded(received.delivery_annotations[b"sender-da"]) == "from-the-sender"
    assert _decoded(received.annotations[b"x-custom-annotation"]) == "kept"
    assert _decoded(received.properties.message_id) == "sections-1"
    assert _decoded(received.properties.subject) == "all"
    assert {_decoded(k): _decoded(v) for k, v in received.application_properties.items()} == {
        "tenant": "contoso",
        "n": 3,
    }
    assert {_decoded(k): _decoded(v) for k, v in (received.footer or {}).items()} == {
        "footer-key": "footer-value"
    }


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        ({"value_body": {"nested": [1, 2]}}, AmqpMessageBodyType.VALUE),
        ({"sequence_body": [[1, "a"], [2, "b"]]}, AmqpMessageBodyType.SEQUENCE),
    ],
)
def test_value_and_sequence_bodies_round_trip(backend: Backend, body: dict[str, Any], kind: Any) -> None:
    received = _send_and_receive(backend, AmqpAnnotatedMessage(**body), ServiceBusReceiveMode.PEEK_LOCK)
    raw = received.raw_amqp_message
    assert raw.body_type == kind
    if kind == AmqpMessageBodyType.VALUE:
        assert {_decoded(k): v for k, v in raw.body.items()} == {"nested": [1, 2]}
    else:
        assert [[_decoded(x) for x in part] for part in raw.body] == [[1, "a"], [2, "b"]]
    # The legacy view the SDK still exposes works too.
    assert received.message is not None
