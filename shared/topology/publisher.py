"""Publishing events through ``azure-servicebus``: route, stamp, batch per topic, and the NServiceBus
behaviour on a missing topic (warn and drop, or raise when ``throw_on_missing_topic``)."""

from __future__ import annotations

import contextvars
import logging
import threading
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSender
from azure.servicebus.exceptions import (
    MessageSizeExceededError,
    MessagingEntityNotFoundError,
    ServiceBusAuthenticationError,
)

from shared.contracts import Event
from shared.servicebus_errors import is_entity_not_found
from shared.telemetry.operations import producing
from shared.topology.messages import build_message
from shared.topology.options import TopologyOptions
from shared.topology.routing import PublishRoute, publish_route

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PublishedMessage:
    """One event of a publish call: its contract, destination topic and message id (the
    ``NServiceBus.MessageId`` header and the broker ``MessageId`` alike: :func:`build_message`)."""

    event: str
    topic: str
    message_id: str


@dataclass(slots=True)
class PublishResult:
    """What a publish call did: ``sent`` reached a topic; ``dropped`` did not because the topic does not
    exist (only without ``throw_on_missing_topic``); ``missing_topics`` names those topics."""

    sent: list[PublishedMessage] = field(default_factory=list)
    dropped: list[PublishedMessage] = field(default_factory=list)
    missing_topics: list[str] = field(default_factory=list)


class Publisher:
    """Publishes events of one endpoint to their topics. Senders are opened once per topic and reused
    (opening an AMQP link costs far more than a send); use as a context manager or call :meth:`close`.

    Thread-safe: a lock per topic serialises use of its sender."""

    def __init__(
        self,
        client: ServiceBusClient,
        options: TopologyOptions,
        *,
        endpoint_name: str,
        throw_on_missing_topic: bool = False,
    ) -> None:
        self.client = client
        self.options = options
        self.endpoint_name = endpoint_name
        self.throw_on_missing_topic = throw_on_missing_topic
        self.max_parallel_topics = 8
        self._senders: dict[str, ServiceBusSender] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def route(self, event: Event) -> PublishRoute:
        return publish_route(self.options, type(event))

    def publish(
        self,
        events: Sequence[Event],
        *,
        correlation_id: str | None = None,
        conversation_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        message_ids: Sequence[str] | None = None,
    ) -> PublishResult:
        """Publish ``events``: every route is resolved first (an unmapped event raises before anything is
        sent), then each topic's messages go out in as few batches as fit. One conversation id is shared
        by the whole call unless given.

        ``message_ids``: the id of each event, in order (deterministic ids, so that the broker's duplicate
        detection drops a retried publish: :mod:`shared.topology.message_ids`); ``None``: fresh ones. A
        count that differs from the events' raises ``ValueError`` before anything is sent."""
        if message_ids is not None and len(message_ids) != len(events):
            raise ValueError(f"{len(message_ids)} message ids for {len(events)} events")
        conversation_id = conversation_id or str(uuid.uuid4())
        by_topic: dict[str, list[tuple[PublishedMessage, ServiceBusMessage]]] = {}
        for index, event in enumerate(events):
            route = self.route(event)
            message_id = str(uuid.uuid4()) if message_ids is None else message_ids[index]
            message = build_message(
                event,
                route.routing_mode,
                endpoint_name=self.endpoint_name,
                message_id=message_id,
                correlation_id=correlation_id,
                conversation_id=conversation_id,
                headers=headers,
            )
            record = PublishedMessage(type(event).contract_name, route.topic, message_id)
            by_topic.setdefault(route.topic, []).append((record, message))
        result = PublishResult()
        groups = list(by_topic.items())
        if not groups:
            return result
        if len(groups) == 1:
            outcomes = [self._publish_topic(*groups[0])]
        else:
            # Topics go out in parallel: a first send on a topic opens an AMQP link, which takes far longer
            # than the send itself, and a missing topic takes longest to be refused.
            with ThreadPoolExecutor(max_workers=min(self.max_parallel_topics, len(groups))) as pool:
                # Each in a copy of the caller's context, so every topic's publish span has the same parent.
                futures = [
                    pool.submit(contextvars.copy_context().run, self._publish_topic, topic, items)
                    for topic, items in groups
                ]
            errors = [error for f in futures if (error := f.exception()) is not None]
            if errors:
                raise errors[0]
            outcomes = [f.result() for f in futures]
        for (topic, items), delivered in zip(groups, outcomes, strict=True):
            records = [record for record, _ in items]
            if delivered:
                result.sent.extend(records)
            else:
                result.dropped.extend(records)
                result.missing_topics.append(topic)
        return result

    def _publish_topic(self, topic: str, items: list[tuple[PublishedMessage, ServiceBusMessage]]) -> bool:
        """Send one topic's messages; False when the topic does not exist and that is not an error."""
        with self._lock(topic):
            try:
                messages = [m for _, m in items]
                with producing(topic, messages):  # the publish span; each message carries it
                    self._send(topic, messages)
            except (MessagingEntityNotFoundError, ServiceBusAuthenticationError) as error:
                if not is_entity_not_found(error):
                    raise
                self._discard(topic)
                if self.throw_on_missing_topic:
                    raise
                if len(items) == 1:
                    log.warning(
                        "Publishing message with message ID '%s' to topic %s failed because the "
                        "destination does not exist.",
                        items[0][0].message_id,
                        topic,
                    )
                else:
                    log.warning(
                        "Skipping publishing messages to topic %s because the destination does not exist.",
                        topic,
                    )
                return False
        return True

    def _send(self, topic: str, messages: list[ServiceBusMessage]) -> None:
        sender = self._sender(topic)
        if len(messages) == 1:
            sender.send_messages(messages[0])
            return
        batch = sender.create_message_batch()
        for message in messages:
            try:
                batch.add_message(message)
            except MessageSizeExceededError:
                if len(batch) == 0:
                    sender.send_messages(message)  # too large for any batch: alone (the broker decides)
                    continue
                sender.send_messages(batch)
                batch = sender.create_message_batch()
                try:
                    batch.add_message(message)
                except MessageSizeExceededError:
                    sender.send_messages(message)
        if len(batch) > 0:
            sender.send_messages(batch)

    def _lock(self, topic: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(topic.lower(), threading.Lock())

    def _sender(self, topic: str) -> ServiceBusSender:
        key = topic.lower()
        sender = self._senders.get(key)
        if sender is None:
            sender = self.client.get_topic_sender(topic)
            self._senders[key] = sender
        return sender

    def _discard(self, topic: str) -> None:
        sender = self._senders.pop(topic.lower(), None)
        if sender is not None:
            _close_quietly(sender)

    def close(self) -> None:
        """Close every cached sender, all at once (the client stays open: it belongs to the caller)."""
        with self._guard:
            senders, self._senders = list(self._senders.values()), {}
        if not senders:
            return
        with ThreadPoolExecutor(max_workers=min(8, len(senders))) as pool:
            list(pool.map(_close_quietly, senders))

    def __enter__(self) -> Publisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _close_quietly(sender: ServiceBusSender) -> None:
    try:
        sender.close()
    except Exception:  # a sender whose link was refused may fail to close; it is gone either way
        log.debug("closing a sender failed", exc_info=True)
