"""Entities of a namespace: queues, topics and subscriptions, with their properties, message queues,
duplicate-detection history and rules."""

from __future__ import annotations

from datetime import timedelta

from emulator.broker.properties import EntityStatus, QueueProperties, SubscriptionProperties, TopicProperties
from emulator.broker.queue import MessageQueue, QueueHost
from emulator.broker.rules import Rule, RuleIndex, default_rule
from emulator.broker.store import Store


def ms(value: timedelta | None) -> int | None:
    """A duration in whole milliseconds (None stays None: infinite)."""
    return None if value is None else int(value.total_seconds() * 1000)


def message_size_limit_bytes(props: QueueProperties | TopicProperties) -> int:
    """The largest message an entity takes. The namespace fills in its tier's default before it builds an
    entity, so an unset size here is a bug, not a default."""
    kilobytes = props.max_message_size_in_kilobytes
    if kilobytes is None:
        raise ValueError("the maximum message size was not resolved to the namespace tier's default")
    return kilobytes * 1024


class DuplicateHistory:
    """MessageIds seen inside an entity's duplicate-detection window (persisted)."""

    def __init__(self, store: Store, key: str, enabled: bool, window: timedelta) -> None:
        self.enabled = enabled
        self.window_ms = ms(window) or 600_000
        self.key = key
        self.seen: dict[str, int] = dict(store.message_ids(key)) if enabled else {}

    def first_sighting(self, message_id: str | None, now: int, store: Store) -> bool:
        """Record ``message_id``; False when it is a duplicate inside the window. The record is part of
        ``store``'s current transaction: if it rolls back, the message was not accepted and its id is
        forgotten again, so the sender's retry is not taken for a duplicate."""
        if not self.enabled or message_id is None:
            return True
        until = self.seen.get(message_id)
        if until is not None and until > now:
            return False
        self.seen[message_id] = now + self.window_ms
        store.on_rollback(lambda: self._restore(message_id, until))
        return True

    def _restore(self, message_id: str, until: int | None) -> None:
        if until is None:
            self.seen.pop(message_id, None)
        else:
            self.seen[message_id] = until

    def prune(self, store: Store, now: int) -> None:
        expired = [m for m, until in self.seen.items() if until <= now]
        for message_id in expired:
            del self.seen[message_id]
        if expired:
            store.forget_message_ids(self.key, now)


class MessageEntity:
    """An entity that holds messages: a queue or a subscription (main queue plus dead-letter queue)."""

    kind = "entity"
    props: QueueProperties | SubscriptionProperties

    def __init__(
        self, namespace: QueueHost, path: str, props: QueueProperties | SubscriptionProperties
    ) -> None:
        self.path = path
        self.props = props
        lock_ms = ms(props.lock_duration) or 60_000
        self.dead_letter = MessageQueue(
            namespace,
            path + "/$DeadLetterQueue",
            lock_duration_ms=lock_ms,
            max_delivery_count=None,
            default_ttl_ms=None,
            dead_letter_on_expiration=False,
            dead_letter_queue=None,
        )
        # Messages an auto-forward could not transfer (the `$Transfer/$DeadLetterQueue` sub-queue).
        self.transfer_dead_letter = MessageQueue(
            namespace,
            path + "/$Transfer/$DeadLetterQueue",
            lock_duration_ms=lock_ms,
            max_delivery_count=None,
            default_ttl_ms=None,
            dead_letter_on_expiration=False,
            dead_letter_queue=None,
        )
        self.main = MessageQueue(
            namespace,
            path,
            lock_duration_ms=lock_ms,
            max_delivery_count=props.max_delivery_count,
            default_ttl_ms=ms(props.default_message_time_to_live),
            dead_letter_on_expiration=props.dead_lettering_on_message_expiration,
            dead_letter_queue=self.dead_letter,
            requires_session=props.requires_session,
        )
        self.main.owner = self
        self.dead_letter.owner = self
        self.transfer_dead_letter.owner = self

    @property
    def name(self) -> str:
        return self.path

    @property
    def size_bytes(self) -> int:
        return sum(queue.size_bytes for queue in self.queues())

    def queues(self) -> tuple[MessageQueue, ...]:
        return (self.main, self.dead_letter, self.transfer_dead_letter)

    def send_disabled(self) -> bool:
        return self.props.status in (EntityStatus.DISABLED, EntityStatus.SEND_DISABLED)

    def receive_disabled(self) -> bool:
        return self.props.status in (EntityStatus.DISABLED, EntityStatus.RECEIVE_DISABLED)


class QueueEntity(MessageEntity):
    """A queue."""

    kind = "queue"
    props: QueueProperties

    def __init__(self, namespace: QueueHost, name: str, props: QueueProperties) -> None:
        super().__init__(namespace, name, props)
        self.duplicates = DuplicateHistory(
            namespace.store,
            self.main.key,
            props.requires_duplicate_detection,
            props.duplicate_detection_history_time_window,
        )

    @property
    def max_size_bytes(self) -> int:
        return self.props.max_size_in_megabytes * 1024 * 1024

    @property
    def max_message_bytes(self) -> int:
        return message_size_limit_bytes(self.props)


class SubscriptionEntity(MessageEntity):
    """A subscription of a topic, with its rules."""

    kind = "subscription"
    props: SubscriptionProperties

    def __init__(
        self, namespace: QueueHost, topic: TopicEntity, name: str, props: SubscriptionProperties
    ) -> None:
        super().__init__(namespace, f"{topic.name}/Subscriptions/{name}", props)
        self.topic = topic
        self.subscription_name = name
        self.rules: dict[str, Rule] = {}

    @property
    def key(self) -> str:
        return self.subscription_name.lower()


class TopicEntity:
    """A topic: routes each message to its subscriptions by their rules."""

    kind = "topic"

    def __init__(self, namespace: QueueHost, name: str, props: TopicProperties) -> None:
        self.name = name
        self.path = name
        self.props = props
        self.subscriptions: dict[str, SubscriptionEntity] = {}
        self.index = RuleIndex()
        self.duplicates = DuplicateHistory(
            namespace.store,
            name.lower(),
            props.requires_duplicate_detection,
            props.duplicate_detection_history_time_window,
        )
        # Messages scheduled on the topic wait here until due, then are routed (sequence numbers for
        # scheduling and cancelling are this queue's).
        self.scheduled = MessageQueue(
            namespace,
            name + "/$Scheduled",
            lock_duration_ms=60_000,
            max_delivery_count=None,
            default_ttl_ms=None,
            dead_letter_on_expiration=False,
            dead_letter_queue=None,
        )
        # Messages that matched no subscription and were dropped, as Azure drops them.
        self.unrouted_count = 0
        # Rule counts for the per-topic quotas (correlation filters; SQL, true and false filters).
        self.correlation_rules = 0
        self.sql_rules = 0

    def _count(self, rule: Rule, delta: int) -> None:
        if rule.is_correlation:
            self.correlation_rules += delta
        else:
            self.sql_rules += delta

    @property
    def size_bytes(self) -> int:
        return self.scheduled.size_bytes + sum(s.size_bytes for s in self.subscriptions.values())

    @property
    def max_size_bytes(self) -> int:
        return self.props.max_size_in_megabytes * 1024 * 1024

    @property
    def max_message_bytes(self) -> int:
        return message_size_limit_bytes(self.props)

    def send_disabled(self) -> bool:
        return self.props.status in (EntityStatus.DISABLED, EntityStatus.SEND_DISABLED)

    def add_rule(self, subscription: SubscriptionEntity, rule: Rule) -> None:
        old = subscription.rules.get(rule.name.lower())
        if old is not None:
            self.index.remove(subscription.key, old)
            self._count(old, -1)
        subscription.rules[rule.name.lower()] = rule
        self.index.add(subscription.key, rule)
        self._count(rule, 1)

    def remove_rule(self, subscription: SubscriptionEntity, name: str) -> Rule | None:
        rule = subscription.rules.pop(name.lower(), None)
        if rule is not None:
            self.index.remove(subscription.key, rule)
            self._count(rule, -1)
        return rule

    def add_subscription(self, subscription: SubscriptionEntity, rules: list[Rule]) -> None:
        self.subscriptions[subscription.key] = subscription
        for rule in rules or [default_rule()]:
            self.add_rule(subscription, rule)

    def remove_subscription(self, name: str) -> SubscriptionEntity | None:
        subscription = self.subscriptions.pop(name.lower(), None)
        if subscription is not None:
            self.index.remove_subscription(subscription.key)
            for rule in subscription.rules.values():
                self._count(rule, -1)
        return subscription
