"""Send routing for a namespace: admission checks, duplicate detection, topic fan-out, auto-forwarding
chains, scheduling on topics and the placement of dead letters. A :class:`Router` is held by the namespace,
which it reaches only through :class:`RoutingHost`."""

from __future__ import annotations

from typing import Protocol

from emulator.broker import errors
from emulator.broker.entities import MessageEntity, QueueEntity, SubscriptionEntity, TopicEntity
from emulator.broker.errors import BrokerError
from emulator.broker.message import SCHEDULED_ENQUEUE_TIME, MessageState, StoredMessage, with_ttl
from emulator.broker.queue import MessageQueue
from emulator.broker.rules import MessageFacts, Rule, copies_for
from emulator.broker.store import Store
from emulator.filters.sql_lexer import FilterEvaluationError
from emulator.limits import MAX_MESSAGE_ID_LENGTH, MAX_TRANSFER_HOPS
from shared.amqp.encoding.sections import ParsedMessage, PropertiesField

Target = QueueEntity | TopicEntity

# Dead-letter reasons Azure documents (service-bus-dead-letter-queues.md, "Moving messages to the DLQ").
HOPS_EXCEEDED = "MaxTransferHopCountExceeded"
HOPS_EXCEEDED_DESCRIPTION = (
    "The maximum number of allowed hops when forwarding between queues has been exceeded. "
    f"This value is set to {MAX_TRANSFER_HOPS}."
)
SESSION_ID_NULL = "Session ID is null."
SESSION_ID_NULL_DESCRIPTION = (
    "Session enabled entity doesn't allow a message whose session identifier is null."
)
FILTER_EXCEPTION = "FilterEvaluationException"
# A transfer refused by its destination: Azure names such broker-raised failures by the exception's type,
# with its message as the description (as for filter evaluation errors). The .NET exception each AMQP
# condition maps to (Azure.Messaging.ServiceBus / Microsoft.ServiceBus.Messaging).
TRANSFER_FAILURE_REASONS = {
    errors.NOT_FOUND: "MessagingEntityNotFoundException",
    errors.ENTITY_DISABLED: "MessagingEntityDisabledException",
    errors.RESOURCE_LIMIT_EXCEEDED: "QuotaExceededException",
    errors.MESSAGE_SIZE_EXCEEDED: "MessageSizeExceededException",
    errors.NOT_ALLOWED: "InvalidOperationException",
}


class RoutingHost(Protocol):
    """What a :class:`Router` needs of its namespace: its name, store, clock and entity lookup."""

    @property
    def name(self) -> str: ...

    @property
    def store(self) -> Store: ...

    def now_ms(self) -> int: ...

    def send_target(self, path: str) -> Target | None:
        """The queue or topic at ``path``, or ``None``."""
        ...

    def entity_for(self, path: str) -> Target:
        """The queue or topic at ``path``; raises :class:`BrokerError` (not-found) when there is none."""
        ...


class Router:
    """Where sent messages go."""

    def __init__(self, host: RoutingHost) -> None:
        self.host = host

    def check_send(self, target: Target, messages: list[ParsedMessage]) -> None:
        """Refuse a send the way Azure does: disabled entity, bad ids, message too large, entity full."""
        kind = "Topic" if isinstance(target, TopicEntity) else "Queue"
        if target.send_disabled():
            raise BrokerError(
                errors.ENTITY_DISABLED,
                f"Messaging entity '{self.host.name}:{kind}:{target.name}' is currently disabled.",
            )
        limit = target.max_message_bytes
        requires_session = isinstance(target, QueueEntity) and target.props.requires_session
        for msg in messages:
            session_id = msg.prop(PropertiesField.GROUP_ID)
            if session_id is not None and not isinstance(session_id, str):
                # group-id is a string in AMQP; Azure's codec refuses any other type (amqp:invalid-field).
                raise BrokerError(errors.INVALID_FIELD, errors.non_string_session_id(session_id))
            if requires_session and session_id is None:
                raise BrokerError(
                    errors.NOT_ALLOWED,
                    "The SessionId was not set on a message, and it cannot be sent to the entity. Entities "
                    "that have session support enabled can only receive messages that have the SessionId set "
                    "to a valid value.",
                )
            for name, value in (
                ("MessageId", msg.prop(PropertiesField.MESSAGE_ID)),
                ("SessionId", session_id),
            ):
                if value is not None and len(str(value)) > MAX_MESSAGE_ID_LENGTH:
                    raise BrokerError(
                        errors.ARGUMENT_OUT_OF_RANGE,
                        f"The {name} is longer than the maximum of {MAX_MESSAGE_ID_LENGTH} characters.",
                    )
            if msg.size > limit:
                raise BrokerError(
                    errors.MESSAGE_SIZE_EXCEEDED,
                    f"The received message (size: {msg.size} bytes) exceeds the limit ({limit} bytes) "
                    "currently allowed on the link.",
                    413,
                )
        incoming = sum(m.size for m in messages)
        if target.size_bytes + incoming > target.max_size_bytes:
            raise BrokerError(
                errors.RESOURCE_LIMIT_EXCEEDED,
                f"The maximum entity size has been reached or exceeded for {kind}: "
                f"'{self.host.name.upper()}:{kind.upper()}:{target.name.upper()}'. Size of entity in bytes:"
                f"{target.size_bytes}, Max entity size in bytes: {target.max_size_bytes}.",
                403,
            )

    def send(self, path: str, messages: list[ParsedMessage]) -> list[int]:
        """Accept messages sent to ``path`` durably, or raise the error the sender gets.

        Returns the sequence numbers assigned (0 where a message was dropped as a duplicate or has no
        number of its own at the target, like a message published to a topic)."""
        target = self.host.entity_for(path)
        self.check_send(target, messages)
        with self.host.store.transaction():
            return self._deliver(target, messages, hops=0)

    def _deliver(
        self, target: Target, messages: list[ParsedMessage], hops: int, dead_letter_source: str | None = None
    ) -> list[int]:
        now = self.host.now_ms()
        fresh = self._deduplicate(target, messages, now)
        if isinstance(target, TopicEntity):
            numbers: dict[int, int] = {}
            for parsed in fresh:
                scheduled = parsed.message_annotations.get(SCHEDULED_ENQUEUE_TIME)
                if scheduled is not None and int(scheduled) > now:
                    # A topic holds scheduled messages itself and routes them when they are due.
                    msg = StoredMessage(parsed=parsed)
                    target.scheduled.prepare(msg, now)
                    target.scheduled.accept([msg])
                    numbers[id(parsed)] = msg.sequence_number
                else:
                    self._publish(target, parsed, hops, dead_letter_source)
            return [numbers.get(id(p), 0) for p in messages]
        numbers = self._enqueue(target, fresh, hops, now, dead_letter_source)
        return [numbers.get(id(p), 0) for p in messages]

    def _deduplicate(self, target: Target, messages: list[ParsedMessage], now: int) -> list[ParsedMessage]:
        history = target.duplicates
        if not history.enabled:
            return messages
        fresh: list[ParsedMessage] = []
        remembered: list[tuple[str, int]] = []
        for parsed in messages:
            raw_id = parsed.prop(PropertiesField.MESSAGE_ID)
            message_id = None if raw_id is None else str(raw_id)
            if not history.first_sighting(message_id, now, self.host.store):
                continue  # a duplicate inside the window is accepted and dropped, as in Azure
            fresh.append(parsed)
            if message_id is not None:
                remembered.append((message_id, history.seen[message_id]))
        if remembered:
            self.host.store.remember_message_ids(history.key, remembered)
            if len(history.seen) > 10_000:
                history.prune(self.host.store, now)
        return fresh

    def publish_due(self, topic: TopicEntity, msg: StoredMessage) -> None:
        """A message scheduled on a topic is due: route it now."""
        self._publish(topic, msg.parsed, 0, None)

    def _publish(
        self, topic: TopicEntity, parsed: ParsedMessage, hops: int, dead_letter_source: str | None
    ) -> None:
        """Fan one message out to the subscriptions whose rules match it."""
        default_ttl = topic.props.default_message_time_to_live
        ceiling = None if default_ttl is None else int(default_ttl.total_seconds() * 1000)
        if ceiling is not None:
            parsed = with_ttl(parsed, ceiling)
        facts = MessageFacts.of(parsed, parsed.size)
        try:
            matches = topic.index.matches(facts)
        except Exception:
            # A subscription's filter failed on this message: evaluate rule by rule so each failing
            # subscription dead-letters (or drops) it with its own error, and the others still route.
            matches = self._matches_one_by_one(topic, facts)
        if not matches:
            topic.unrouted_count += 1
            return
        now = self.host.now_ms()
        for key, rules in matches.items():
            subscription = topic.subscriptions[key]
            try:
                copies = copies_for(facts, rules)
            except FilterEvaluationError as exc:
                # A rule's action failed on this message ("Action fails if non-existent system properties
                # were referenced"): rule evaluation failed, which the subscription dead-letters when it
                # dead-letters on filter evaluation exceptions (SubscriptionProperties
                # .EnableDeadLetteringOnFilterEvaluationExceptions: "forwarded to dead-letter sub queue when
                # subscription rule evaluation fails"), or drops; the other subscriptions still get theirs.
                if subscription.props.dead_lettering_on_filter_evaluation_exceptions:
                    self._dead_letter_new(subscription, [facts.parsed], FILTER_EXCEPTION, str(exc), hops)
                continue
            self._enqueue(subscription, copies, hops, now, dead_letter_source, ceiling)

    def _matches_one_by_one(self, topic: TopicEntity, facts: MessageFacts) -> dict[str, list[Rule]]:
        matches: dict[str, list[Rule]] = {}
        for key, subscription in topic.subscriptions.items():
            for rule in subscription.rules.values():
                try:
                    hit = rule.matches(facts)
                except Exception as exc:
                    matches.pop(key, None)
                    if subscription.props.dead_lettering_on_filter_evaluation_exceptions:
                        self._dead_letter_new(subscription, [facts.parsed], FILTER_EXCEPTION, str(exc))
                    break
                if hit:
                    matches.setdefault(key, []).append(rule)
        return matches

    def _enqueue(
        self,
        entity: MessageEntity,
        messages: list[ParsedMessage],
        hops: int,
        now: int,
        dead_letter_source: str | None = None,
        ttl_ceiling_ms: int | None = None,
    ) -> dict[int, int]:
        """Store ``messages`` in ``entity`` (or forward them); the sequence number each got, by the
        identity of its parsed message as passed in (the broker may replace a message's parsed form)."""
        if entity.props.requires_session and isinstance(entity, SubscriptionEntity):
            orphans = [p for p in messages if p.prop(PropertiesField.GROUP_ID) is None]
            if orphans:
                self._dead_letter_new(entity, orphans, SESSION_ID_NULL, SESSION_ID_NULL_DESCRIPTION, hops)
                messages = [p for p in messages if p.prop(PropertiesField.GROUP_ID) is not None]
        if entity.props.forward_to:
            self._forward(entity, entity.props.forward_to, messages, hops, dead_letter_source)
            return {}
        stored = []
        numbers: dict[int, int] = {}
        for parsed in messages:
            msg = StoredMessage(parsed=parsed)
            entity.main.prepare(msg, now, ttl_ceiling_ms)
            msg.dead_letter_source = dead_letter_source
            stored.append(msg)
            numbers[id(parsed)] = msg.sequence_number
        entity.main.accept(stored)
        entity.main.dispatch()
        return numbers

    def _forward(
        self,
        source: MessageEntity,
        target_name: str,
        messages: list[ParsedMessage],
        hops: int,
        dead_letter_source: str | None,
    ) -> None:
        """Auto-forward to ``target_name``; failures dead-letter in the source's dead-letter queue, as Azure
        does (service-bus-dead-letter-queues.md, "Dead-lettering in auto forward scenarios": more than four
        hops, a disabled or deleted destination, a full one). The transfer dead-letter queue is for send-via
        (transactional) transfers, which the emulator does not offer, so it stays empty."""
        if not messages:
            return
        if hops >= MAX_TRANSFER_HOPS:
            self._dead_letter_new(source, messages, HOPS_EXCEEDED, HOPS_EXCEEDED_DESCRIPTION, hops)
            return
        target = self.host.send_target(target_name)
        try:
            if target is None:
                raise errors.entity_not_found(target_name, self.host.name)
            self.check_send(target, messages)
        except BrokerError as exc:
            reason = TRANSFER_FAILURE_REASONS.get(exc.condition, exc.condition)
            self._dead_letter_new(source, messages, reason, exc.description, hops)
            return
        self._deliver(target, messages, hops + 1, dead_letter_source)

    def _dead_letter_new(
        self,
        entity: MessageEntity,
        messages: list[ParsedMessage],
        reason: str,
        description: str,
        hops: int = 0,
    ) -> None:
        """Dead-letter messages the broker could not place (they have no lock or sequence number yet);
        ``hops``: the transfers the messages have made so far."""
        now = self.host.now_ms()
        for parsed in messages:
            msg = StoredMessage(parsed=parsed)
            entity.main.prepare(msg, now)  # a number from the entity's sequence, shared with its DLQ
            msg.set_application_properties(
                {"DeadLetterReason": reason, "DeadLetterErrorDescription": description}
            )
            self._place_dead_letter(entity, msg, hops)

    def dead_lettered(self, source: MessageQueue, msg: StoredMessage) -> None:
        """Place a message that ``source`` dead-lettered (inside the caller's store transaction)."""
        assert isinstance(source.owner, MessageEntity)
        self._place_dead_letter(source.owner, msg)

    def _place_dead_letter(self, entity: MessageEntity, msg: StoredMessage, hops: int = 0) -> None:
        """Into the entity's dead-letter queue, or where its dead letters are forwarded.

        Forwarding a dead letter is a transfer like any other and counts as a hop: a message that has
        used up its hops stays in this dead-letter queue. That ends every loop a forwarding graph can
        hold, even a queue that forwards its messages and its dead letters to itself."""
        target_name = entity.props.forward_dead_lettered_messages_to if hops < MAX_TRANSFER_HOPS else None
        target = self.host.send_target(target_name) if target_name else None
        if target is not None:
            try:
                self.check_send(target, [msg.parsed])
            except BrokerError:
                target = None  # the destination cannot take it: it stays in the dead-letter queue
        if target is not None:
            # DeadLetterSource names where a message was dead-lettered, on messages forwarded out of it.
            self._deliver(target, [msg.parsed], hops=hops + 1, dead_letter_source=entity.path)
            return
        # Dead-letter queues observe neither TTL nor scheduling.
        msg.expires_ms = None
        msg.state = MessageState.ACTIVE
        msg.scheduled_ms = None
        dlq = entity.dead_letter
        dlq.last_sequence = max(dlq.last_sequence, msg.sequence_number)
        dlq.accept([msg])
        dlq.dispatch()
