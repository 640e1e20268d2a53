"""The namespace: entity registry, send routing (topic fan-out, auto-forwarding chains, dead-letter
forwarding), quotas, and the timers that drive scheduled activation and TTL expiry."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, TypeVar

from emulator.broker import definitions, errors
from emulator.broker.entities import MessageEntity, QueueEntity, SubscriptionEntity, TopicEntity
from emulator.broker.errors import BrokerError
from emulator.broker.message import StoredMessage
from emulator.broker.properties import QueueProperties, RuleConfig, SubscriptionProperties, TopicProperties
from emulator.broker.queue import MessageQueue
from emulator.broker.routing import Router, Target
from emulator.broker.rules import Rule, compile_rule, default_rule
from emulator.broker.store import Store
from emulator.limits import (
    CORRELATION_FILTERS_PER_TOPIC,
    ENTITIES_PER_NAMESPACE,
    SQL_FILTERS_PER_TOPIC,
    SUBSCRIPTIONS_PER_TOPIC,
)
from emulator.tier import Sku, default_max_message_size_in_kilobytes
from shared.amqp.encoding.sections import ParsedMessage

DEAD_LETTER_SUFFIX = "/$deadletterqueue"
TRANSFER_DEAD_LETTER_SUFFIX = "/$transfer/$deadletterqueue"
SUBSCRIPTIONS_SEGMENT = "/subscriptions/"

log = logging.getLogger("emulator")
_Sized = TypeVar("_Sized", QueueProperties, TopicProperties)


def _rule_key(subscription: SubscriptionEntity, name: str) -> str:
    return f"{subscription.path}/Rules/{name}"


class Namespace:
    """All entities of one emulated Service Bus namespace."""

    def __init__(
        self, name: str, store: Store, clock: Callable[[], float] = time.time, sku: Sku = Sku.STANDARD
    ) -> None:
        self.name = name
        self.sku = sku
        self.store = store
        self._clock = clock
        self.queues: dict[str, QueueEntity] = {}
        self.topics: dict[str, TopicEntity] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake_handle: asyncio.TimerHandle | None = None
        self._wake_ms: int | None = None
        # The queues the timer sweep must visit: those with scheduled or expiring messages. Sweeping every
        # queue cost 40 ms per wake-up with 10,000 entities, on the only event loop.
        self._timed: dict[MessageQueue, None] = {}
        self._sweep_all = False
        self._origins: dict[str, str] = {}
        self.routing = Router(self)

    # --------------------------------------------------------------------------------------- routing

    def send(self, path: str, messages: list[ParsedMessage]) -> list[int]:
        """Send ``messages`` to the queue or topic at ``path``: :meth:`Router.send`."""
        return self.routing.send(path, messages)

    def dead_lettered(self, source: MessageQueue, msg: StoredMessage) -> None:
        """A message of ``source`` was dead-lettered: :meth:`Router.dead_lettered`."""
        self.routing.dead_lettered(source, msg)

    # ------------------------------------------------------------------------------------------ time

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    def call_at_ms(self, when_ms: int, callback: Callable[..., None], *args: Any) -> asyncio.TimerHandle:
        assert self._loop is not None, "namespace not bound to an event loop"
        return self._loop.call_later(max(0.0, (when_ms - self.now_ms()) / 1000), callback, *args)

    def wake_at(self, when_ms: int, queue: MessageQueue | None = None) -> None:
        """Make sure the timer sweep runs no later than ``when_ms``, for ``queue`` (None: for every queue)."""
        if queue is None:
            self._sweep_all = True
        else:
            self._timed[queue] = None
        self._arm(when_ms)

    def _arm(self, when_ms: int) -> None:
        if self._loop is None:
            return  # restored messages: start() sweeps the queues registered meanwhile
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
        upcoming: list[int] = []
        queues = list(self.message_queues()) if self._sweep_all else list(self._timed)
        self._sweep_all = False
        for queue in queues:
            queue.on_timer(now)
            due = queue.next_due()
            if due is None:
                self._timed.pop(queue, None)
            else:
                upcoming.append(due)
                self._timed[queue] = None
        # Re-arm for what is still pending: wake_at keeps only the earliest request, so the sweep itself
        # must schedule the next one.
        if upcoming:
            self._arm(max(min(upcoming), now + 1))

    def start(self) -> None:
        """Re-arm timers for restored messages (call once the loop is bound)."""
        self._on_wake()

    def message_queues(self) -> Iterator[MessageQueue]:
        for entity in self.message_entities():
            yield from entity.queues()
        for topic in list(self.topics.values()):
            yield topic.scheduled

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
            # The config loader has checked targets across the whole file, whatever the order. Entities
            # restored at start skip this check (``restoring``) and keep a destination the config no longer
            # defines (the start-up warns).
            return
        for target in (props.forward_to, props.forward_dead_lettered_messages_to):
            if target and self.send_target(target) is None:
                raise BrokerError(
                    errors.NOT_FOUND,
                    f"The auto-forwarding destination '{target}' of '{source}' does not exist. "
                    "The destination must exist when the source is created.",
                    400,
                )

    def create_queue(
        self, name: str, props: QueueProperties, origin: str = "config", *, restoring: bool = False
    ) -> QueueEntity:
        """Create a queue; ``restoring``: re-created from its row in the store, which stays as it is, and its
        forwarding targets were checked when it was first created (and may have been deleted since, which
        Azure allows)."""
        self._check_new_name(name, "Queue")
        if not restoring:
            self._check_forward_targets(props, name, origin)
        props = self._sized(props)
        entity = QueueEntity(self, name, props)
        self.queues[name.lower()] = entity
        if not restoring:
            self.store.save_entity(name, "queue", origin, definitions.dumps(props))
        for queue in entity.queues():
            queue.restore()
        return entity

    def create_topic(
        self, name: str, props: TopicProperties, origin: str = "config", *, restoring: bool = False
    ) -> TopicEntity:
        """Create a topic; ``restoring``: re-created from its row in the store, which stays as it is."""
        self._check_new_name(name, "Topic")
        props = self._sized(props)
        topic = TopicEntity(self, name, props)
        topic.scheduled.on_activate = lambda msg: self.routing.publish_due(topic, msg)
        topic.scheduled.restore()
        self.topics[name.lower()] = topic
        if not restoring:
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

    def put_rule(
        self, topic_name: str, subscription_name: str, config: RuleConfig, origin: str = "arm"
    ) -> Rule:
        """Create or replace a rule; a SQL syntax error raises SqlSyntaxError before anything changes."""
        topic = self.topic_for(topic_name)
        subscription = self.subscription_for(topic, subscription_name)
        rule = compile_rule(config)
        self._check_rule_quota(topic, [rule], subscription.rules.get(config.name.lower()))
        topic.add_rule(subscription, rule)
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
        self._timed.pop(topic.scheduled, None)
        self.store.drop_entity_messages(topic.scheduled.key)
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
                self._timed.pop(queue, None)  # a deleted entity's messages neither activate nor expire
                for consumer in list(queue.consumers):
                    consumer.entity_deleted()  # its receiver is detached, as Azure's are
                self.store.drop_entity_messages(queue.key)
            self.store.delete_entity(key)

    # ------------------------------------------------------------------------------------------ updates

    def _sized(self, props: _Sized) -> _Sized:
        """``props`` with an unset maximum message size replaced by this tier's default, as Azure stores and
        reports it (256 KB on Standard, 1024 KB on Premium)."""
        if props.max_message_size_in_kilobytes is not None:
            return props
        return replace(props, max_message_size_in_kilobytes=default_max_message_size_in_kilobytes(self.sku))

    def _origin(self, path: str) -> str:
        return self._origins.get(path.lower(), "arm")

    def update_queue(self, name: str, props: QueueProperties) -> QueueEntity:
        """Apply new properties to a live queue (immutable ones must not change)."""
        entity = self.queues.get(name.lower())
        if entity is None:
            raise errors.entity_not_found(name, self.name)
        _immutable(entity.props, props, ("requires_session", "requires_duplicate_detection"), name)
        self._check_forward_targets(props, name, "arm")
        props = self._sized(props)
        entity.props = props
        entity.main.configure(props)
        entity.duplicates.window_ms = definitions_ms(props.duplicate_detection_history_time_window)
        self.store.save_entity(entity.name, "queue", self._origin(name), definitions.dumps(props))
        entity.main.dispatch()
        return entity

    def update_topic(self, name: str, props: TopicProperties) -> TopicEntity:
        topic = self.topic_for(name)
        _immutable(topic.props, props, ("requires_duplicate_detection",), name)
        props = self._sized(props)
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
        """Re-create entities created at run time (management API) that the config does not define.

        One pass in dependency order (queues and topics, then subscriptions, then rules). Forwarding targets
        are not checked again: they were checked when the entity was created, and a target deleted since
        then leaves the source in place, forwarding to nothing, as in Azure; the source and its stored
        messages must not vanish on restart. (Retrying until targets appear made start-up quadratic.)
        """
        rows = self.store.entities()
        self._origins = {path.lower(): origin for path, _kind, origin, _d in rows}
        order = {"queue": 0, "topic": 0, "subscription": 1, "rule": 2}
        runtime = sorted((row for row in rows if row[2] != "config"), key=lambda row: order.get(row[1], 3))
        for path, kind, origin, definition in runtime:
            try:
                self._restore(path, kind, origin, definition)
            except BrokerError as exc:
                if exc.condition != errors.NOT_FOUND:
                    raise
                # A subscription or rule whose topic or subscription the config no longer defines.
                log.warning("Not restoring %s '%s': %s", kind, path, exc.description)

    def _restore(self, path: str, kind: str, origin: str, definition: str) -> None:
        if kind == "queue" and path.lower() not in self.queues:
            self.create_queue(path, definitions.loads(QueueProperties, definition), origin, restoring=True)
        elif kind == "topic" and path.lower() not in self.topics:
            self.create_topic(path, definitions.loads(TopicProperties, definition), origin, restoring=True)
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
            # Auto-forwarding transfers inside the send, so nothing ever waits in `$Transfer`.
            "transferMessageCount": 0,
            "transferDeadLetterMessageCount": len(entity.transfer_dead_letter.messages),
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
        sub_queue: str | None = None
        for suffix in (TRANSFER_DEAD_LETTER_SUFFIX, DEAD_LETTER_SUFFIX):
            if lowered.endswith(suffix):
                trimmed = trimmed[: -len(suffix)]
                lowered = lowered[: -len(suffix)]
                sub_queue = suffix
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
        if sub_queue == TRANSFER_DEAD_LETTER_SUFFIX:
            return entity, entity.transfer_dead_letter
        return entity, entity.dead_letter if sub_queue == DEAD_LETTER_SUFFIX else entity.main


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
