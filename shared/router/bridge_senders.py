"""The router's senders: one per destination, opened on first use and kept for the router's life.

A bridged copy goes to a dedicated topic or straight to a subscriber's forwarding queue, through Busbar's own
AMQP sender (:class:`~shared.amqp.sender.EntitySender`: every application property keeps its AMQP type).
Opening a sender per message costs a connection, a CBS token and a link attach for every routed event; the
router keeps one per destination instead (each renews its token before it expires), as
:class:`~shared.topology.publisher.Publisher` keeps one per topic. A sender is not thread-safe, and the
Functions runtime may run invocations on several threads, so each destination sends under its own lock. A
send that fails closes and drops its sender (the next message opens a fresh one: a link the broker detached
is never reused) and raises, so the broker redelivers the message.
"""

from __future__ import annotations

import logging
import threading
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shared.amqp.connection import Namespace
    from shared.amqp.outgoing import OutgoingMessage
    from shared.amqp.sender import EntitySender

log = logging.getLogger(__name__)


class Destination(StrEnum):
    """Where a bridged copy goes."""

    TOPIC = "topic"
    QUEUE = "queue"


class BridgeSenders:
    """Kept senders to one ``namespace`` by destination (names compared case-insensitively, as Service Bus
    does); :meth:`close` closes them all."""

    def __init__(self, namespace: Namespace) -> None:
        self.namespace = namespace
        self._senders: dict[tuple[Destination, str], EntitySender] = {}
        self._locks: dict[tuple[Destination, str], threading.Lock] = {}
        self._guard = threading.Lock()

    def send(self, kind: Destination, name: str, message: OutgoingMessage) -> None:
        """Send ``message`` to the topic or queue ``name`` on its kept sender (opened on first use); raises
        what says why it was not taken (:class:`~shared.amqp.connection.WireError`)."""
        from shared.amqp.sender import EntitySender  # proton loads its C library only when the router sends

        key = (kind, name.lower())
        with self._lock(key):
            sender = self._senders.get(key)
            if sender is not None and sender.stale:  # lost, or idle past its token: a fresh one
                del self._senders[key]
                _close_quietly(sender)
                sender = None
            if sender is None:
                sender = self._senders[key] = EntitySender(self.namespace, name)
            try:
                sender.send(message)
            except BaseException:
                del self._senders[key]
                _close_quietly(sender)
                raise

    def open_count(self) -> int:
        """How many senders are open now."""
        return len(self._senders)

    def close(self) -> None:
        """Close every kept sender; a later :meth:`send` opens new ones."""
        with self._guard:
            keys = list(self._senders)
        for key in keys:
            with self._lock(key):
                sender = self._senders.pop(key, None)
            if sender is not None:
                _close_quietly(sender)

    def _lock(self, key: tuple[Destination, str]) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())


def _close_quietly(sender: EntitySender) -> None:
    try:
        sender.close()
    except Exception:  # closing a broken link must not hide the send's own error, nor stop the others
        log.debug("closing a bridge sender failed", exc_info=True)
