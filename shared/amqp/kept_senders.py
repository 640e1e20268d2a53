"""Senders kept open by entity, for the callers that send many copies over time: the router's bridge (one
per destination, for the router's life), the re-drive (one per target, for a run) and the Spark replay (one
per target, for a task). See :class:`KeptSenders`."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shared.amqp.connection import Namespace
    from shared.amqp.outgoing import OutgoingMessage
    from shared.amqp.sender import EntitySender

log = logging.getLogger(__name__)


class KeptSenders:
    """Senders to one ``namespace`` kept open by entity (paths compared case-insensitively, as Service Bus
    does), each opened on first use: opening one costs a connection, a CBS token and a link attach, which a
    router bridging every event or a run sending many batches should not pay per message.

    A sender that went stale (its link or connection lost, or idle past its token) is replaced on its next
    use, and one whose use raised is closed and dropped (a link the broker detached is never reused). A sender
    is not thread-safe, so each entity is used under its own lock (the Functions runtime may run invocations
    on several threads)."""

    def __init__(self, namespace: Namespace) -> None:
        self.namespace = namespace
        self._senders: dict[str, EntitySender] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    @contextlib.contextmanager
    def sending(self, entity_path: str) -> Iterator[EntitySender]:
        """The kept sender to ``entity_path``, held for the caller alone; dropped if the caller raises."""
        key = entity_path.lower()
        with self._lock(key):
            sender = self._senders.get(key)
            if sender is not None and sender.stale:
                self._drop(key)
                sender = None
            if sender is None:
                from shared.amqp.sender import EntitySender  # proton loads its C library only when one opens

                sender = self._senders[key] = EntitySender(self.namespace, entity_path)
            try:
                yield sender
            except BaseException:
                self._drop(key)
                raise

    def send(self, entity_path: str, message: OutgoingMessage) -> None:
        """Send ``message`` to ``entity_path`` on its kept sender; raises what says why it was not taken."""
        with self.sending(entity_path) as sender:
            sender.send(message)

    def open_count(self) -> int:
        """How many senders are open now."""
        return len(self._senders)

    def close(self) -> None:
        """Close every kept sender; a later use opens new ones."""
        with self._guard:
            keys = list(self._senders)
        for key in keys:
            with self._lock(key):
                self._drop(key)

    def _lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def _drop(self, key: str) -> None:
        sender = self._senders.pop(key, None)
        if sender is None:
            return
        try:
            sender.close()
        except Exception:  # closing a broken link must not hide the caller's own error, nor stop the others
            log.debug("closing the sender to %s failed", sender.entity_path, exc_info=True)


__all__ = ["KeptSenders"]
