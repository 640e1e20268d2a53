"""The namespace: entity registry, send routing (topic fan-out, auto-forwarding chains, dead-letter
forwarding), quotas, and the timers that drive scheduled activation and TTL expiry."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

from emulator.amqp.message import ParsedMessage, PropertiesField
from emulator.broker import definitions, errors
from emulator.broker.entities import MessageEntity, QueueEntity, SubscriptionEntity, TopicEntity
from emulator.broker.errors import BrokerError
from emulator.broker.message import MessageState, StoredMessage
from emulator.broker.queue import MessageQueue
from emulator.broker.rules import MessageFacts, Rule, compile_rule, copies_for, default_rule
from emulator.broker.store import Store
from emulator.config import QueueProperties, RuleConfig, SubscriptionProperties, TopicProperties
from emulator.limits import (
    CORRELATION_FILTERS_PER_TOPIC,
    ENTITIES_PER_NAMESPACE,
    MAX_MESSAGE_ID_LENGTH,
    MAX_TRANSFER_HOPS,
    SQL_FILTERS_PER_TOPIC,
    SUBSCRIPTIONS_PER_TOPIC,
)

DEAD_LETTER_SUFFIX = "/$deadletterqueue"
TRANSFER_DEAD_LETTER_SUFFIX = "/$transfer/$deadletterqueue"
SUBSCRIPTIONS_SEGMENT = "/subscriptions/"

# Dead-letter reasons for auto-forwarding failures. Azure documents the hop limit's reason; the others
# are this emulator's names (descriptions follow Azure's wording).
HOPS_EXCEEDED = "MaxTransferHopCountExceeded"
DESTINATION_MISSING = "TransferDestinationEntityNotFound"
DESTINATION_REFUSED = "TransferDestinationEntityUnavailable"
FILTER_EXCEPTION = "FilterEvaluationException"

Target = QueueEntity | TopicEntity


def _rule_key(subscription: SubscriptionEntity, name: str) -> str:
    return f"{subscription.path}/Rules/{name}"


class Namespace:
    """All entities of one emulated Service Bus namespace."""

    def __init__(self, name: str, store: Store, clock: Callable[[], float] = time.time) -> None:
        self.name = name
        self.store = store
        self._clock = clock
        self.queues: dict[str, QueueEntity] = {}
        self.topics: dict[str, TopicEntity] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake_handle: asyncio.TimerHandle | None = None
        self._wake_ms: int | None = None
        self._origins: dict[str, str] = {}

    # ------------------------------------------------------------------------------------------ time

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    def call_at_ms(self, when_ms: int, callback: Callable[..., None], *args: Any) -> asyncio.TimerHandle:
        assert self._loop is not None, "namespace not bound to an event loop"
        return self._loop.call_later(max(0.0, (when_ms - self.now_ms()) / 1000), callback, *args)

    def wake_at(self, when_ms: int) -> None:
        """Make sure the timer sweep runs no later than ``when_ms``."""
        if self._loop is None:
            return
        if self._wake_ms is not None and self._wake_ms <= when_ms:
            return
        if self._wake_handle is not None:
            self._wake_handle.cancel()
        self._wake_ms = when_ms
        self._wake_handle = self.call_at_ms(when_ms, self._on_wake)

    def _on_wake(self) -> None:
        self._wake_ms = None
        self._wake_handle = None
        now = self.now_ms()
        for queue in self.message_queues():
            queue.on_timer(now)

    def start(self) -> None:
        """Re-arm timers for restored messages (call once the loop is bound)."""
        self._on_wake()

    def message_queues(self) -> Iterator[MessageQueue]:
        for entity in self.message_entities():
            yield from entity.queues()

    def message_entities(self) -> Iterator[MessageEntity]:
        yield from list(self.queues.values())
        for topic in list(self.topics.values()):
            yield from list(topic.subscriptions.values())

    # ------------------------------------------------------------------------------------------ entities

    def _check_new_name(self, name: str, kind: str) -> None:
        key = name.lower()
        if key in self.queues or key in self.topics:
            raise BrokerError(
                "com.microsoft:entity-already-exists",
                f"Entity '{self.name}:{kind}:{name}' already exists.",
                409,
            )
        if len(self.queues) + len(self.topics) >= ENTITIES_PER_NAMESPACE:
            raise BrokerError(
                errors.RESOURCE_LIMIT_EXCEEDED,
                f"The maximum number of entities ({ENTITIES_PER_NAMESPACE}) in namespace '{self.name}' "
                "is reached.",
                403,
            )

    def _check_forward_targets(
        self, props: QueueProperties | SubscriptionProperties, source: str, origin: str
    ) -> None:
        if origin == "config":
            return  # the config loader has checked targets across the whole file, whatever the order
        for target in (props.forward_to, props.forward_dead_lettered_messages_to):
            if target and self.send_target(target) is None:
                raise BrokerError(
                    errors.NOT_FOUND,
                    f"The auto-forwarding destination '{target}' of '{source}' does not exist. "
                    "The destination must exist when the source is created.",
                    400,
                )

    def create_queue(self, name: str, props: QueueProperties, origin: str = "config") -> QueueEntity:
        self._check_new_name(name, "Queue")
        self._check_forward_targets(props, name, origin)
        entity = QueueEntity(self, name, props)
        self.queues[name.lower()] = entity
        self.store.save_entity(name, "queue", origin, definitions.dumps(props))
        for queue in entity.queues():
            queue.restore()
        return entity

    def create_topic(self, name: str, props: TopicProperties, origin: str = "config") -> TopicEntity:
        self._check_new_name(name, "Topic")
        topic = TopicEntity(self, name, props)
        self.topics[name.lower()] = topic
        self.store.save_entity(name, "topic", origin, definitions.dumps(props))
        return topic

    def create_subscription(
        self,
        topic_name: str,
        name: str,
        props: SubscriptionProperties,
        rules: list[RuleConfig] | None = None,
        origin: str = "config",
    ) -> SubscriptionEntity:
        topic = self.topic_for(topic_name)
        if name.lower() in topic.subscriptions:
            raise BrokerError(
                "com.microsoft:entity-already-exists",
                f"Entity '{self.name}:Topic:{topic.name}|{name}' already exists.",
                409,
            )
        if len(topic.subscriptions) >= SUBSCRIPTIONS_PER_TOPIC:
            raise BrokerError(
                errors.RESOURCE_LIMIT_EXCEEDED,
                f"The maximum number of subscriptions ({SUBSCRIPTIONS_PER_TOPIC}) of topic '{topic.name}' "
                "has been reached.",
                403,
            )
        self._check_forward_targets(props, f"{topic.name}/Subscriptions/{name}", origin)
        compiled = [compile_rule(r) for r in rules or []] or [default_rule()]
        self._check_rule_quota(topic, compiled)
        subscription = SubscriptionEntity(self, topic, name, props)
        topic.add_subscription(subscription, compiled)
        with self.store.transaction():
            self.store.save_entity(subscription.path, "subscription", origin, definitions.dumps(props))
            for rule in compiled:
                self.store.save_entity(
                    _rule_key(subscription, rule.name), "rule", origin, definitions.dumps(rule.config)
                )
        for queue in subscription.queues():
            queue.restore()
        return subscription

    def _check_rule_quota(
        self, topic: TopicEntity, new_rules: list[Rule], replacing: Rule | None = None
    ) -> None:
        sql, correlation = topic.sql_rules, topic.correlation_rules
        if replacing is not None:
            if replacing.is_correlation:
                correlation -= 1
            else:
                sql -= 1
        for rule in new_rules:
            if rule.is_correlation:
                correlation += 1
            else:
                sql += 1
        if sql > SQL_FILTERS_PER_TOPIC:
            raise BrokerError(
                errors.RESOURCE_LIMIT_EXCEEDED,
                f"The maximum number of SQL filters per topic ({SQL_FILTERS_PER_TOPIC}) has been reached "
                f"for topic '{topic.name}'.",
                403,
            )
        if correlation > CORRELATION_FILTERS_PER_TOPIC:
            raise BrokerError(
                errors.RESOURCE_LIMIT_EXCEEDED,
                f"The maximum number of correlation filters per topic ({CORRELATION_FILTERS_PER_TOPIC}) "
                f"has been reached for topic '{topic.name}'.",
                403,
            )

    def put_rule(self, topic_name: str, subscription_name: str, config: RuleConfig) -> Rule:
        """Create or replace a rule; a SQL syntax error raises SqlSyntaxError before anything changes."""
        topic = self.topic_for(topic_name)
        subscription = self.subscription_for(topic, subscription_name)
        rule = compile_rule(config)
        self._check_rule_quota(topic, [rule], subscription.rules.get(config.name.lower()))
        topic.add_rule(subscription, rule)
        origin = self._origin(subscription.path)
        self.store.save_entity(_rule_key(subscription, rule.name), "rule", origin, definitions.dumps(config))
        return rule

    def delete_rule(self, topic_name: str, subscription_name: str, rule_name: str) -> None:
        topic = self.topic_for(topic_name)
        subscription = self.subscription_for(topic, subscription_name)
        if topic.remove_rule(subscription, rule_name) is None:
            raise errors.entity_not_found(f"{subscription.path}/Rules/{rule_name}", self.name)
        self.store.delete_entity(_rule_key(subscription, rule_name))

    def delete_queue(self, name: str) -> None:
        entity = self.queues.pop(name.lower(), None)
        if entity is None:
            raise errors.entity_not_found(name, self.name)
        self._drop(entity, name.lower())

    def delete_topic(self, name: str) -> None:
        topic = self.topics.pop(name.lower(), None)
        if topic is None:
            raise errors.entity_not_found(name, self.name)
        for subscription in list(topic.subscriptions.values()):
            self._drop(subscription, subscription.path.lower())
        self.store.delete_entity(name.lower())

    def delete_subscription(self, topic_name: str, name: str) -> None:
        topic = self.topic_for(topic_name)
        subscription = topic.remove_subscription(name)
        if subscription is None:
            raise errors.entity_not_found(f"{topic.name}/Subscriptions/{name}", self.name)
        self._drop(subscription, subscription.path.lower())

    def _drop(self, entity: MessageEntity, key: str) -> None:
        with self.store.transaction():
            if isinstance(entity, SubscriptionEntity):
                for rule in entity.rules.values():
                    self.store.delete_entity(_rule_key(entity, rule.name))
            for queue in entity.queues():
                for consumer in list(queue.consumers):
                    lost = getattr(consumer, "entity_deleted", None)
                    if lost is not None:
                        lost()
                self.store.drop_entity_messages(queue.key)
            self.store.delete_entity(key)

    # ------------------------------------------------------------------------------------------ updates

    def _origin(self, path: str) -> str:
        return self._origins.get(path.lower(), "arm")

    def update_queue(self, name: str, props: QueueProperties) -> QueueEntity:
        """Apply new properties to a live queue (immutable ones must not change)."""
        entity = self.queues.get(name.lower())
        if entity is None:
            raise errors.entity_not_found(name, self.name)
        _immutable(entity.props, props, ("requires_session", "requires_duplicate_detection"), name)
        self._check_forward_targets(props, name, "arm")
        entity.props = props
        entity.main.configure(props)
        entity.duplicates.window_ms = definitions_ms(props.duplicate_detection_history_time_window)
        self.store.save_entity(entity.name, "queue", self._origin(name), definitions.dumps(props))
        entity.main.dispatch()
        return entity

    def update_topic(self, name: str, props: TopicProperties) -> TopicEntity:
        topic = self.topic_for(name)
        _immutable(topic.props, props, ("requires_duplicate_detection",), name)
        topic.props = props
        topic.duplicates.window_ms = definitions_ms(props.duplicate_detection_history_time_window)
        self.store.save_entity(topic.name, "topic", self._origin(name), definitions.dumps(props))
        return topic

    def update_subscription(
        self, topic_name: str, name: str, props: SubscriptionProperties
    ) -> SubscriptionEntity:
        topic = self.topic_for(topic_name)
        subscription = self.subscription_for(topic, name)
        _immutable(subscription.props, props, ("requires_session",), subscription.path)
        self._check_forward_targets(props, subscription.path, "arm")
        subscription.props = props
        subscription.main.configure(props)
        self.store.save_entity(
            subscription.path, "subscription", self._origin(subscription.path), definitions.dumps(props)
        )
        subscription.main.dispatch()
        return subscription

    def restore_runtime_entities(self) -> None:
        """Re-create entities created at run time (management API) that the config does not define."""
        rows = self.store.entities()
        self._origins = {path.lower(): origin for path, _kind, origin, _d in rows}
        runtime = [row for row in rows if row[2] != "config"]
        order = {"queue": 0, "topic": 0, "subscription": 1, "rule": 2}
        pending = sorted(runtime, key=lambda row: order.get(row[1], 3))
        # Queues may forward to each other in any order: retry until no progress.
        while pending:
            remaining = []
            for path, kind, origin, definition in pending:
                try:
                    self._restore(path, kind, origin, definition)
                except BrokerError as exc:
                    if exc.condition == errors.NOT_FOUND:
                        remaining.append((path, kind, origin, definition))
            if len(remaining) == len(pending):
                break
            pending = remaining

    def _restore(self, path: str, kind: str, origin: str, definition: str) -> None:
        if kind == "queue" and path.lower() not in self.queues:
            self.create_queue(path, definitions.loads(QueueProperties, definition), origin)
        elif kind == "topic" and path.lower() not in self.topics:
            self.create_topic(path, definitions.loads(TopicProperties, definition), origin)
        elif kind == "subscription":
            topic_name, name = _split(path, SUBSCRIPTIONS_SEGMENT)
            topic = self.topic_for(topic_name)
            if name.lower() not in topic.subscriptions:
                props = definitions.loads(SubscriptionProperties, definition)
                subscription = SubscriptionEntity(self, topic, name, props)
                topic.subscriptions[subscription.key] = subscription
                for queue in subscription.queues():
                    queue.restore()
        elif kind == "rule":
            owner, _rule = _split(path, "/rules/")
            topic_name, name = _split(owner, SUBSCRIPTIONS_SEGMENT)
            topic = self.topic_for(topic_name)
            subscription = self.subscription_for(topic, name)
            topic.add_rule(subscription, compile_rule(definitions.loads(RuleConfig, definition)))

    def counts(self, entity: MessageEntity) -> dict[str, int]:
        """countDetails of an entity, as the management plane reports them."""
        main = entity.main.counts()
        return {
            "activeMessageCount": main["active"],
            "deadLetterMessageCount": len(entity.dead_letter.messages),
            "scheduledMessageCount": main["scheduled"],
            "transferMessageCount": 0,
            "transferDeadLetterMessageCount": 0,
        }

    # ------------------------------------------------------------------------------------------ lookup

    def topic_for(self, name: str) -> TopicEntity:
        topic = self.topics.get(name.lower())
        if topic is None:
            raise errors.entity_not_found(name, self.name)
        return topic

    def subscription_for(self, topic: TopicEntity, name: str) -> SubscriptionEntity:
        subscription = topic.subscriptions.get(name.lower())
        if subscription is None:
            raise errors.entity_not_found(f"{topic.name}/Subscriptions/{name}", self.name)
        return subscription

    def send_target(self, path: str) -> Target | None:
        """The queue or topic a sender (or a forwarding rule) addresses, or None."""
        key = path.strip("/").lower()
        if key.startswith("sb://"):
            key = key.split("/", 3)[-1]
        return self.queues.get(key) or self.topics.get(key)

    def entity_for(self, path: str) -> Target:
        target = self.send_target(path)
        if target is None:
            raise errors.entity_not_found(path, self.name)
        return target

    def receive_queue(self, path: str) -> tuple[MessageEntity, MessageQueue]:
        """Resolve a receive address (queue or subscription, or its dead-letter sub-queue)."""
        trimmed = path.strip("/")
        lowered = trimmed.lower()
        dead_letter = False
        for suffix in (TRANSFER_DEAD_LETTER_SUFFIX, DEAD_LETTER_SUFFIX):
            if lowered.endswith(suffix):
                trimmed = trimmed[: -len(suffix)]
                lowered = lowered[: -len(suffix)]
                dead_letter = True
                break
        entity: MessageEntity
        if SUBSCRIPTIONS_SEGMENT in lowered:
            at = lowered.index(SUBSCRIPTIONS_SEGMENT)
            topic = self.topic_for(trimmed[:at])
            entity = self.subscription_for(topic, trimmed[at + len(SUBSCRIPTIONS_SEGMENT) :])
        else:
            queue = self.queues.get(lowered)
            if queue is None:
                raise errors.entity_not_found(trimmed, self.name)
            entity = queue
        return entity, entity.dead_letter if dead_letter else entity.main

    # ------------------------------------------------------------------------------------------ sending

    def check_send(self, target: Target, messages: list[ParsedMessage]) -> None:
        """Refuse a send the way Azure does: disabled entity, bad ids, message too large, entity full."""
        kind = "Topic" if isinstance(target, TopicEntity) else "Queue"
        if target.send_disabled():
            raise BrokerError(
                errors.ENTITY_DISABLED,
                f"Messaging entity '{self.name}:{kind}:{target.name}' is currently disabled.",
            )
        limit = target.max_message_bytes
        requires_session = isinstance(target, QueueEntity) and target.props.requires_session
        for msg in messages:
            session_id = msg.prop(PropertiesField.GROUP_ID)
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
                f"'{self.name.upper()}:{kind.upper()}:{target.name.upper()}'. Size of entity in bytes:"
                f"{target.size_bytes}, Max entity size in bytes: {target.max_size_bytes}.",
                403,
            )

    def send(self, path: str, messages: list[ParsedMessage]) -> list[int]:
        """Accept messages sent to ``path`` durably, or raise the error the sender gets.

        Returns the sequence numbers assigned (0 where a message was dropped as a duplicate or routed
        elsewhere)."""
        target = self.entity_for(path)
        self.check_send(target, messages)
        with self.store.transaction():
            return self._deliver(target, messages, hops=0)

    def _deliver(self, target: Target, messages: list[ParsedMessage], hops: int) -> list[int]:
        now = self.now_ms()
        fresh = self._deduplicate(target, messages, now)
        if isinstance(target, TopicEntity):
            for parsed in fresh:
                self._publish(target, parsed, hops)
            return [0] * len(messages)
        stored = self._enqueue(target, fresh, hops, now)
        by_id = {id(m.parsed): m.sequence_number for m in stored}
        return [by_id.get(id(p), 0) for p in messages]

    def _deduplicate(self, target: Target, messages: list[ParsedMessage], now: int) -> list[ParsedMessage]:
        history = target.duplicates
        if not history.enabled:
            return messages
        fresh: list[ParsedMessage] = []
        remembered: list[tuple[str, int]] = []
        for parsed in messages:
            raw_id = parsed.prop(PropertiesField.MESSAGE_ID)
            message_id = None if raw_id is None else str(raw_id)
            if not history.first_sighting(message_id, now):
                continue  # a duplicate inside the window is accepted and dropped, as in Azure
            fresh.append(parsed)
            if message_id is not None:
                remembered.append((message_id, history.seen[message_id]))
        if remembered:
            self.store.remember_message_ids(history.key, remembered)
            if len(history.seen) > 10_000:
                history.prune(self.store, now)
        return fresh

    def _publish(self, topic: TopicEntity, parsed: ParsedMessage, hops: int) -> None:
        """Fan one message out to the subscriptions whose rules match it."""
        facts = MessageFacts.of(parsed, parsed.size)
        try:
            matches = topic.index.matches(facts)
        except Exception as exc:
            failed = topic.subscriptions.get(getattr(exc, "subscription", ""))
            if failed is None:
                raise
            # One subscription's filter failed: the others still route; the failing one dead-letters the
            # message when it is configured to, as Azure does.
            matches = self._matches_without(topic, facts, failed, exc)
        if not matches:
            topic.unrouted_count += 1
            return
        for key, rules in matches.items():
            self._enqueue(topic.subscriptions[key], copies_for(facts, rules), hops, self.now_ms())

    def _matches_without(
        self, topic: TopicEntity, facts: MessageFacts, failed: SubscriptionEntity, exc: Exception
    ) -> dict[str, list[Rule]]:
        if failed.props.dead_lettering_on_filter_evaluation_exceptions:
            self._dead_letter_new(failed, [facts.parsed], FILTER_EXCEPTION, str(exc))
        matches: dict[str, list[Rule]] = {}
        for key, subscription in topic.subscriptions.items():
            if subscription is failed:
                continue
            for rule in subscription.rules.values():
                try:
                    hit = _rule_matches(rule, facts)
                except Exception:
                    if subscription.props.dead_lettering_on_filter_evaluation_exceptions:
                        self._dead_letter_new(subscription, [facts.parsed], FILTER_EXCEPTION, str(exc))
                    break
                if hit:
                    matches.setdefault(key, []).append(rule)
        return matches

    def _enqueue(
        self, entity: MessageEntity, messages: list[ParsedMessage], hops: int, now: int
    ) -> list[StoredMessage]:
        if entity.props.forward_to:
            self._forward(entity, entity.props.forward_to, messages, hops)
            return []
        stored = []
        for parsed in messages:
            msg = StoredMessage(parsed=parsed)
            entity.main.prepare(msg, now)
            stored.append(msg)
        entity.main.accept(stored)
        entity.main.dispatch()
        return stored

    def _forward(
        self, source: MessageEntity, target_name: str, messages: list[ParsedMessage], hops: int
    ) -> None:
        """Auto-forward to ``target_name``; failures dead-letter in the source, as Azure does."""
        if hops >= MAX_TRANSFER_HOPS:
            self._dead_letter_new(
                source,
                messages,
                HOPS_EXCEEDED,
                f"The message exceeded the maximum of {MAX_TRANSFER_HOPS} hops.",
            )
            return
        target = self.send_target(target_name)
        if target is None:
            self._dead_letter_new(
                source, messages, DESTINATION_MISSING, "The transfer destination entity does not exist."
            )
            return
        try:
            self.check_send(target, messages)
        except BrokerError as exc:
            self._dead_letter_new(source, messages, DESTINATION_REFUSED, exc.description)
            return
        self._deliver(target, messages, hops + 1)

    def _dead_letter_new(
        self, entity: MessageEntity, messages: list[ParsedMessage], reason: str, description: str
    ) -> None:
        now = self.now_ms()
        stored = []
        for parsed in messages:
            msg = StoredMessage(parsed=parsed)
            entity.main.prepare(msg, now)
            # Dead-letter queues observe neither TTL nor scheduling.
            msg.expires_ms = None
            msg.state = MessageState.ACTIVE
            msg.scheduled_ms = None
            msg.set_application_properties(
                {"DeadLetterReason": reason, "DeadLetterErrorDescription": description}
            )
            msg.dead_letter_source = entity.path
            stored.append(msg)
        entity.dead_letter.accept(stored)
        entity.dead_letter.dispatch()

    def dead_lettered(self, source: MessageQueue, msg: StoredMessage) -> None:
        """Place a message that ``source`` dead-lettered (inside the caller's store transaction)."""
        entity = source.owner if isinstance(source.owner, MessageEntity) else None
        target_name = entity.props.forward_dead_lettered_messages_to if entity is not None else None
        if target_name:
            target = self.send_target(target_name)
            try:
                if target is not None:
                    self.check_send(target, [msg.parsed])
            except BrokerError:
                target = None
            if target is not None:
                copy = msg.copy_for(0, 0)
                self._deliver(target, [copy.parsed], hops=1)
                return
        dlq = source.dead_letter_queue
        assert dlq is not None
        msg.expires_ms = None  # dead-letter queues do not observe TTL, as in Azure
        dlq.last_sequence = max(dlq.last_sequence, msg.sequence_number)
        dlq.accept([msg])
        dlq.dispatch()


def _rule_matches(rule: Rule, facts: MessageFacts) -> bool:
    if rule.is_correlation:
        keys = set(facts.condition_keys())
        return all(condition in keys for condition in rule.conditions)
    if rule.sql is None:
        return bool(rule.constant)
    return rule.sql.matches(facts.sql_view())


def _immutable(before: object, after: object, fields: tuple[str, ...], path: str) -> None:
    for name in fields:
        if getattr(before, name) != getattr(after, name):
            raise BrokerError(
                errors.NOT_ALLOWED,
                f"The value of '{name}' of '{path}' cannot be changed after the entity is created.",
                400,
            )


def definitions_ms(value: Any) -> int:
    return int(value.total_seconds() * 1000) if value is not None else 600_000


def _split(path: str, segment: str) -> tuple[str, str]:
    """Split ``path`` at the last case-insensitive occurrence of ``segment``."""
    at = path.lower().rindex(segment)
    return path[:at], path[at + len(segment) :]
