"""Deterministic message ids: an ``Idempotency-Key`` names one publish of one event type, and a handler's
outgoing messages are named by the endpoint, the message it handled and their position."""

from __future__ import annotations

import uuid

import pytest

from shared.topology.message_ids import (
    MAX_IDEMPOTENCY_KEY_LENGTH,
    idempotency_key_problem,
    idempotent_message_id,
    outgoing_message_id,
)


def test_the_same_key_and_event_type_always_give_the_same_message_id() -> None:
    first = idempotent_message_id("Shipping.OrderAccepted", "order-42")
    assert first == idempotent_message_id("Shipping.OrderAccepted", "order-42")
    # Pinned: the id must not change between releases, or a client retrying across an upgrade publishes twice.
    assert first == str(
        uuid.uuid5(uuid.UUID("6f1c1d0e-5b1a-4c55-9a53-7d2f3b1e8a01"), "Shipping.OrderAccepted\norder-42")
    )
    assert uuid.UUID(first).version == 5


def test_another_key_or_another_event_type_gives_another_message_id() -> None:
    ids = {
        idempotent_message_id("Shipping.OrderAccepted", "order-42"),
        idempotent_message_id("Shipping.OrderAccepted", "order-43"),
        idempotent_message_id("Shipping.OrderDeclined", "order-42"),
    }
    assert len(ids) == 3


def test_outgoing_ids_depend_on_the_endpoint_the_incoming_message_and_the_position() -> None:
    base = outgoing_message_id("billing", "m-1", 0)
    assert base == outgoing_message_id("billing", "m-1", 0)
    others = {
        outgoing_message_id("shipping", "m-1", 0),
        outgoing_message_id("billing", "m-2", 0),
        outgoing_message_id("billing", "m-1", 1),
    }
    assert base not in others and len(others) == 3
    # An outgoing id never equals a publish id built from the same text.
    assert base != idempotent_message_id("billing", "m-1\n0")


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("", "is empty"),
        ("   ", "is empty"),
        ("k" * (MAX_IDEMPOTENCY_KEY_LENGTH + 1), "129 characters long; at most 128"),
        ("order\n42", "non-printable character U+000A at position 5"),
        ("order\x0042", "non-printable character U+0000"),
    ],
)
def test_a_malformed_or_oversized_key_is_refused_with_its_problem(key: str, problem: str) -> None:
    found = idempotency_key_problem(key)
    assert found is not None and problem in found


def test_a_printable_key_up_to_the_message_id_limit_is_accepted() -> None:
    for key in ("order-42", "k" * MAX_IDEMPOTENCY_KEY_LENGTH, "Bestellung Nr. 42 für Müller", "a b"):
        assert idempotency_key_problem(key) is None
