"""The hold queue's receiver (shared/ordering/parking.py, ``parked_messages``) against the emulator: a key's
parked messages come back in order with every application property's AMQP type (Busbar's own session
receiver, shared/amqp/), an abandoned one comes back first, and a dead-lettered one lands in the hold
queue's dead-letter queue with its reason and description."""

from __future__ import annotations

from typing import Any

import pytest

from shared.amqp.connection import Namespace
from shared.amqp.receiver import EntityReceiver
from shared.amqp.session_lock import SessionCannotBeLocked
from shared.envelope.properties import DATETIME_OFFSET, Binary, Char, Described, ULong, amqp_type
from shared.messages import IncomingMessage
from shared.ordering.parking import park, parked_messages
from shared.topology.names import held_queue
from tests.shared.envelope.wire_types import DESCRIBED

pytestmark = pytest.mark.timeout(60)

TYPED: dict[str, Any] = {
    "attempt": ULong(2**64 - 1),
    "grade": Char("A"),
    "placed_at": DESCRIBED["offset"],
    "digest": Binary(b"\x00\xff\x10"),
}


def _message(key: str, message_id: str, **properties: Any) -> IncomingMessage:
    return IncomingMessage(
        body=b'{"n":1}', message_id=message_id, session_id=key, application_properties=properties
    )


def _held(emulator: Any) -> str:
    queue = emulator.create_queue(requires_session=True)
    return str(
        emulator.create_queue(held_queue(queue), requires_session=True, requires_duplicate_detection=True)
    )


def _park(emulator: Any, held: str, *messages: IncomingMessage) -> None:
    namespace = Namespace.from_connection_string(emulator.connection_string)
    for message in messages:
        park(namespace, held, message)


def test_a_parked_message_comes_back_with_each_property_of_its_amqp_type(emulator: Any) -> None:
    held = _held(emulator)
    _park(emulator, held, _message("k", "m-1", **TYPED), _message("other", "o-1"))
    namespace = Namespace.from_connection_string(emulator.connection_string)
    with parked_messages(namespace, held, "k") as parked:
        item = parked.next()
        assert item is not None
        received, message = item
        parked.complete(received)
        assert parked.next() is None
    assert (message.message_id, message.session_id, message.body) == ("m-1", "k", b'{"n":1}')
    assert message.application_properties == TYPED
    placed_at = message.application_properties["placed_at"]
    assert isinstance(placed_at, Described) and placed_at.descriptor == DATETIME_OFFSET
    typed = {**message.application_properties, "placed_at": placed_at.value}
    assert {name: amqp_type(value) for name, value in typed.items()} == {
        "attempt": "ulong",
        "grade": "char",
        "placed_at": "long",
        "digest": "binary",
    }


def test_an_abandoned_parked_message_comes_back_first_in_its_key(emulator: Any) -> None:
    held = _held(emulator)
    _park(emulator, held, _message("k", "m-1"), _message("k", "m-2"))
    namespace = Namespace.from_connection_string(emulator.connection_string)
    with parked_messages(namespace, held, "k") as parked:
        first = parked.next()
        assert first is not None
        parked.abandon(first[0])
        again = parked.next()
        assert again is not None
        parked.complete(again[0])
        second = parked.next()
        assert second is not None
        parked.complete(second[0])
    assert [item[1].message_id for item in (first, again, second)] == ["m-1", "m-1", "m-2"]
    assert (first[1].delivery_count, again[1].delivery_count) == (0, 1)


def test_a_dead_lettered_parked_message_lands_in_the_hold_queues_dead_letter_queue_with_its_reason(
    emulator: Any,
) -> None:
    held = _held(emulator)
    _park(emulator, held, _message("k", "m-1", **TYPED), _message("k", "m-2"))
    namespace = Namespace.from_connection_string(emulator.connection_string)
    with parked_messages(namespace, held, "k") as parked:
        item = parked.next()
        assert item is not None
        parked.dead_letter(item[0], "HandlerFailed", "m-1 cannot be noted")
        rest = parked.next()
        assert rest is not None and rest[1].message_id == "m-2"
        parked.abandon(rest[0])
    # Read as the re-drive reads it (Busbar's own receiver: the copy carries a char, which azure-servicebus
    # cannot decode).
    with EntityReceiver(namespace, f"{held}/$deadletterqueue") as receiver:
        [dead] = receiver.peek_messages(max_message_count=10)
    assert (dead.message_id, dead.session_id) == ("m-1", "k")
    assert (dead.dead_letter_reason, dead.dead_letter_error_description) == (
        "HandlerFailed",
        "m-1 cannot be noted",
    )


def test_a_key_whose_parked_messages_another_release_holds_is_a_clear_error(emulator: Any) -> None:
    held = _held(emulator)
    _park(emulator, held, _message("k", "m-1"))
    namespace = Namespace.from_connection_string(emulator.connection_string)
    with parked_messages(namespace, held, "k") as parked:
        with pytest.raises(SessionCannotBeLocked, match="'k'"):
            parked_messages(namespace, held, "k").__enter__()
        item = parked.next()  # the first release still holds the key's session
        assert item is not None
        parked.complete(item[0])
    assert item[1].message_id == "m-1"
