"""A kept receiver puts a fresh CBS token before its token expires (shared/amqp/receiver.py,
``TOKEN_REFRESH_SECONDS``), as azure-servicebus refreshes its CBS token before expiry: Azure detaches an
entity link whose token ran out (the emulator does the same: ``emulator/amqp/connection.py``
``enforce_token_expiry``). With Busbar's token lifetime (``shared.amqp.connection.TOKEN_SECONDS``) cut to a
few seconds, a receiver that refreshes at each use keeps receiving past its first token's expiry, and one
that does not is cut off with ``amqp:unauthorized-access``; a session receiver left unused keeps its token
fresh through its session lock's renewals."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from shared.amqp import connection, receiver
from shared.amqp.connection import Namespace, WireError
from shared.amqp.receiver import EntityReceiver

pytestmark = pytest.mark.timeout(60)

SHORT_TOKEN_SECONDS = 3


def _send(connection_string: str, queue: str, message_id: str, session_id: str | None = None) -> None:
    with (
        ServiceBusClient.from_connection_string(connection_string) as client,
        client.get_queue_sender(queue) as sender,
    ):
        sender.send_messages(
            ServiceBusMessage(message_id.encode(), message_id=message_id, session_id=session_id)
        )


def _receive_one(entity_receiver: EntityReceiver) -> str:
    [message] = entity_receiver.receive_messages(max_message_count=1, max_wait_time=5)
    entity_receiver.complete_message(message)
    return str(message.message_id)


def _past_expiry_of_a_token_put_now() -> None:
    time.sleep(SHORT_TOKEN_SECONDS + 1)


def _used_until_a_token_put_now_has_expired(kept: EntityReceiver) -> None:
    """Use ``kept`` about every half second (an empty receive) for longer than a token lives: the receiver
    is never idle for a token's whole life, as a trigger listener's receive loop is not."""
    until = time.monotonic() + 2 * SHORT_TOKEN_SECONDS
    while time.monotonic() < until:
        assert kept.receive_messages(max_message_count=1, max_wait_time=0.5) == []


def test_a_receiver_refreshing_its_token_at_each_use_keeps_receiving_past_the_first_tokens_expiry(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connection, "TOKEN_SECONDS", SHORT_TOKEN_SECONDS)
    # Longer than a token lives: every use of the receiver puts a fresh one first.
    monkeypatch.setattr(receiver, "TOKEN_REFRESH_SECONDS", SHORT_TOKEN_SECONDS + 60)
    queue = emulator.create_queue()
    _send(emulator.connection_string, queue, "t-1")
    with EntityReceiver(Namespace.from_connection_string(emulator.connection_string), queue) as kept:
        assert _receive_one(kept) == "t-1"
        _used_until_a_token_put_now_has_expired(kept)
        _send(emulator.connection_string, queue, "t-2")
        assert _receive_one(kept) == "t-2"


def test_a_receiver_whose_token_expires_unrefreshed_loses_its_link(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The counterpart, so that the test above can fail: refreshed only once expired, which is too late.
    monkeypatch.setattr(connection, "TOKEN_SECONDS", SHORT_TOKEN_SECONDS)
    monkeypatch.setattr(receiver, "TOKEN_REFRESH_SECONDS", 0.0)
    queue = emulator.create_queue()
    _send(emulator.connection_string, queue, "u-1")
    with EntityReceiver(Namespace.from_connection_string(emulator.connection_string), queue) as kept:
        assert _receive_one(kept) == "u-1"
        _past_expiry_of_a_token_put_now()
        _send(emulator.connection_string, queue, "u-2")
        with pytest.raises(WireError, match="unauthorized") as cut_off:
            kept.receive_messages(max_message_count=1, max_wait_time=5)
    assert cut_off.value.condition == "amqp:unauthorized-access"


def test_a_session_receiver_left_idle_keeps_its_token_fresh_through_its_session_lock_renewals(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A listener's receiver of a session sits unused while its handler runs; the session's lock is renewed
    # meanwhile, and each renewal refreshes the token, as azure-servicebus 7.15's renewal does
    # (_pyamqp/client.py ``mgmt_request`` calls ``auth_complete``, whose ``handle_token`` refreshes it).
    monkeypatch.setattr(connection, "TOKEN_SECONDS", SHORT_TOKEN_SECONDS)
    monkeypatch.setattr(receiver, "TOKEN_REFRESH_SECONDS", SHORT_TOKEN_SECONDS + 60)
    queue = emulator.create_queue(requires_session=True, lock_duration=timedelta(seconds=5))
    _send(emulator.connection_string, queue, "s-1", session_id="s")
    namespace = Namespace.from_connection_string(emulator.connection_string)
    with EntityReceiver(namespace, queue, session_id="s") as kept:
        assert _receive_one(kept) == "s-1"
        time.sleep(2 * SHORT_TOKEN_SECONDS + 1)  # idle: only the session lock's renewals use the connection
        _send(emulator.connection_string, queue, "s-2", session_id="s")
        assert _receive_one(kept) == "s-2"
        assert kept.session is not None and kept.session.error is None
