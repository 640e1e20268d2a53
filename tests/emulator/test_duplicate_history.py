"""Duplicate detection's memory follows the store's transactions: an id is remembered only with a send
the broker accepted. A send whose transaction rolls back was refused, and the sender's retry (the same
MessageId, as every SDK retries) must be taken as a first sighting, or the message is lost while the
retry is answered as accepted."""

from __future__ import annotations

from datetime import timedelta

import pytest

from emulator.broker.entities import DuplicateHistory
from emulator.broker.store import Store

WINDOW = timedelta(seconds=20)


class Refused(Exception):
    """Something failed after the id was recorded, inside the send's transaction."""


def test_an_id_recorded_by_a_send_that_rolled_back_is_a_first_sighting_again() -> None:
    store = Store(None)
    history = DuplicateHistory(store, "queue", True, WINDOW)
    with pytest.raises(Refused), store.transaction():
        assert history.first_sighting("m-1", 0, store)
        raise Refused
    assert history.first_sighting("m-1", 1, store)  # the retry is accepted as new...
    assert not history.first_sighting("m-1", 2, store)  # ... and its own copies are duplicates


def test_an_id_recorded_by_a_committed_send_stays_remembered_after_a_later_rollback() -> None:
    store = Store(None)
    history = DuplicateHistory(store, "queue", True, WINDOW)
    with store.transaction():
        assert history.first_sighting("m-1", 0, store)
    with pytest.raises(Refused), store.transaction():
        assert history.first_sighting("m-2", 1, store)
        assert not history.first_sighting("m-1", 1, store)
        raise Refused
    assert not history.first_sighting("m-1", 2, store)
    assert history.first_sighting("m-2", 2, store)


def test_a_rollback_restores_the_window_of_an_id_seen_again_after_it_expired() -> None:
    store = Store(None)
    history = DuplicateHistory(store, "queue", True, WINDOW)
    window_ms = int(WINDOW.total_seconds() * 1000)
    with store.transaction():
        assert history.first_sighting("m-1", 0, store)
    with pytest.raises(Refused), store.transaction():
        assert history.first_sighting("m-1", window_ms, store)  # expired: a first sighting again
        raise Refused
    assert history.seen["m-1"] == window_ms  # the old, expired entry, not the refused send's
    assert history.first_sighting("m-1", window_ms + 1, store)
