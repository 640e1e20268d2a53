"""The router's senders: one per destination, opened on first use and kept for the router's life.

A bridged copy goes to a dedicated topic or straight to a subscriber's forwarding queue. Opening a sender per
message costs a link attach (and, on a new connection, a CBS token) for every routed event; the router keeps
one per destination instead, as :class:`~shared.topology.publisher.Publisher` keeps one per topic. An
azure-servicebus sender is not thread-safe ("the clients are not thread-safe", the SDK's README), and the
Functions runtime may run invocations on several threads, so each destination sends under its own lock. A
send that fails closes and drops its sender (the next message opens a fresh one: a link the broker detached
is never reused) and raises, so the broker redelivers the message.
"""

from __future__ import annotations

import logging
import threading
from enum import StrEnum

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSender

log = logging.getLogger(__name__)


class Destination(StrEnum):
    """Where a bridged copy goes."""

    TOPIC = "topic"
    QUEUE = "queue"


class BridgeSenders:
    """Cached senders of one ``client`` by destination (names compared case-insensitively, as Service Bus
    does); :meth:`close` closes them all (the client stays open: it belongs to the caller)."""

    def __init__(self, client: ServiceBusClient) -> None:
        self.client = client
        self._senders: dict[tuple[Destination, str], ServiceBusSender] = {}
        self._locks: dict[tuple[Destination, str], threading.Lock] = {}
        self._guard = threading.Lock()

    def send(self, kind: Destination, name: str, message: ServiceBusMessage) -> None:
        """Send ``message`` to the topic or queue ``name`` on its kept sender (opened on first use)."""
        key = (kind, name.lower())
        with self._lock(key):
            sender = self._senders.get(key)
            if sender is None:
                sender = (
                    self.client.get_topic_sender(name)
                    if kind is Destination.TOPIC
                    else self.client.get_queue_sender(name)
                )
                self._senders[key] = sender
            try:
                sender.send_messages(message)
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


def _close_quietly(sender: ServiceBusSender) -> None:
    try:
        sender.close()
    except Exception:  # closing a broken link must not hide the send's own error, nor stop the others
        log.debug("closing a bridge sender failed", exc_info=True)
