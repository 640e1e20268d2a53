"""Helpers the emulator's SDK tests share: clients, entity creation, concurrent link opening, receiving
and peeking, and decoding what the azure-servicebus SDK hands back.

The SDK spends about half a second opening a link and as much closing it (its fixed idle waits), so tests
open all the senders and receivers they need at once, in threads, with ``opened``, and close them the same
way.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from azure.servicebus import (
    ServiceBusClient,
    ServiceBusReceivedMessage,
    ServiceBusReceiver,
    ServiceBusSender,
    ServiceBusSubQueue,
)
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient

from emulator.broker.properties import (
    DEFAULT_NAMESPACE_NAME,
    CorrelationFilterConfig,
    EmulatorConfig,
    NamespaceConfig,
    QueueConfig,
    QueueProperties,
    RuleConfig,
)

if TYPE_CHECKING:
    from emulator.testing import EmulatorHandle
    from tests.emulator.backends import Backend

Handler = ServiceBusSender | ServiceBusReceiver

# What ServiceBusMessage's ``application_properties`` is annotated to take. A dict is invariant in its key
# type, so a test that builds the properties before the message declares them as this.
SendProperties = dict[str | bytes, int | float | bytes | bool | str | uuid.UUID]

# --------------------------------------------------------------------------------------------- clients


def sdk_client(emulator: Backend, **options: Any) -> ServiceBusClient:
    """A sync SDK client for ``emulator``; ``options`` go to ``from_connection_string``."""
    return ServiceBusClient.from_connection_string(emulator.connection_string, **options)


def async_sdk_client(emulator: Backend, **options: Any) -> AsyncServiceBusClient:
    """An ``aio`` SDK client for ``emulator``; ``options`` go to ``from_connection_string``."""
    return AsyncServiceBusClient.from_connection_string(emulator.connection_string, **options)


def no_retry_client(emulator: Backend, **options: Any) -> ServiceBusClient:
    """``sdk_client`` with ``retry_total=0`` unless ``options`` say otherwise.

    MessageNotFoundError and SessionCannotBeLockedError are retryable in the SDK; without retries a
    refusal is reported at once instead of after seconds of back-off."""
    options.setdefault("retry_total", 0)
    return sdk_client(emulator, **options)


def no_retry_async_client(emulator: Backend, **options: Any) -> AsyncServiceBusClient:
    """``async_sdk_client`` with ``retry_total=0`` unless ``options`` say otherwise."""
    options.setdefault("retry_total", 0)
    return async_sdk_client(emulator, **options)


# -------------------------------------------------------------------------------------------- entities


def unique_name(prefix: str) -> str:
    """``prefix`` followed by ten random hex digits."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topic(backend: Backend, **props: Any) -> str:
    """Create a topic with a fresh name and the given TopicProperties fields, through ``backend``."""
    return backend.create_topic(unique_name("t"), **props)


def create_subscription(
    backend: Backend, topic: str, name: str, rules: Sequence[RuleConfig] | None = None, **props: Any
) -> str:
    """Create subscription ``name`` of ``topic`` with ``rules`` (or the default rule) and the given
    SubscriptionProperties fields, through ``backend``."""
    return backend.create_subscription(topic, name, rules, **props)


def sql_rule(name: str, expression: str, action: str | None = None) -> RuleConfig:
    """A SQL filter rule, with an optional SQL action."""
    return RuleConfig(name=name, filter_type="Sql", sql_expression=expression, action_sql=action)


def correlation_rule(name: str, **fields: Any) -> RuleConfig:
    """A correlation filter rule; ``fields`` are CorrelationFilterConfig fields."""
    return RuleConfig(name=name, filter_type="Correlation", correlation=CorrelationFilterConfig(**fields))


def unrouted_count(emulator: EmulatorHandle, topic: str) -> int:
    """How many messages ``topic`` dropped because no subscription wanted them."""
    ns = emulator.emulator.namespace
    count = emulator.call(lambda: ns.topics[topic.lower()].unrouted_count)
    assert isinstance(count, int)
    return count


def single_queue_config(name: str, **properties: Any) -> EmulatorConfig:
    """An emulator config whose namespace holds one queue, ``name``, with the given QueueProperties fields."""
    queue = QueueConfig(name, QueueProperties(**properties))
    return EmulatorConfig(namespace=NamespaceConfig(name=DEFAULT_NAMESPACE_NAME, queues=(queue,), topics=()))


# --------------------------------------------------------------------------------------------- handlers


def in_parallel(action: Callable[[Handler], object], handlers: Sequence[Handler]) -> list[BaseException]:
    """Run ``action`` on every handler at once, in threads; return the errors raised."""
    with ThreadPoolExecutor(max_workers=max(1, len(handlers))) as pool:
        futures = [pool.submit(action, handler) for handler in handlers]
    return [error for future in futures if (error := future.exception()) is not None]


@contextmanager
def opened(*handlers: Handler) -> Iterator[None]:
    """Open every sender and receiver at once; close them all at once on the way out."""
    errors = in_parallel(lambda h: h.__enter__(), handlers)
    try:
        if errors:
            raise errors[0]
        yield
    finally:
        in_parallel(lambda h: h.__exit__(None, None, None), handlers)


def receive(receiver: ServiceBusReceiver, count: int, wait: float) -> list[ServiceBusReceivedMessage]:
    """Up to ``count`` messages (unsettled); stops early only when a receive waiting ``wait`` seconds comes
    back empty."""
    received: list[ServiceBusReceivedMessage] = []
    while len(received) < count:
        batch = receiver.receive_messages(max_message_count=count - len(received), max_wait_time=wait)
        if not batch:
            break
        received.extend(batch)
    return received


def drain(receiver: ServiceBusReceiver, expected: int | None, wait: float) -> list[ServiceBusReceivedMessage]:
    """Receive and complete messages until ``expected`` arrived, or until a receive comes back empty
    (``expected`` None). Asking for exactly what is expected leaves no credit to drain on close."""
    received: list[ServiceBusReceivedMessage] = []
    while expected is None or len(received) < expected:
        wanted = 50 if expected is None else expected - len(received)
        batch = receiver.receive_messages(max_message_count=wanted, max_wait_time=wait)
        if not batch:
            break
        for message in batch:
            receiver.complete_message(message)
        received.extend(batch)
    return received


def peek(receiver: ServiceBusReceiver) -> list[ServiceBusReceivedMessage]:
    """Everything the receiver's entity holds, whatever its state, without receiving it."""
    return receiver.peek_messages(max_message_count=250, sequence_number=1)


def peek_queue(
    emulator: Backend, queue: str, sub_queue: ServiceBusSubQueue | None = None
) -> list[ServiceBusReceivedMessage]:
    """Everything the queue (or sub-queue) holds, whatever its state, without receiving it."""
    with sdk_client(emulator) as client, client.get_queue_receiver(queue, sub_queue=sub_queue) as receiver:
        return peek(receiver)


# ---------------------------------------------------------------------------------------------- decoding


def sorted_bodies(messages: Sequence[ServiceBusReceivedMessage]) -> list[str]:
    """The messages' bodies as text, sorted."""
    return sorted(str(m) for m in messages)


def decoded(value: Any) -> Any:
    """``value`` decoded to text if the SDK handed it back as bytes; otherwise ``value`` itself."""
    return value.decode() if isinstance(value, bytes) else value


def sequence_number(message: ServiceBusReceivedMessage) -> int:
    """The broker's sequence number of a received or peeked message (typed optional: unset before sending)."""
    assert message.sequence_number is not None
    return message.sequence_number


def message_id(message: ServiceBusReceivedMessage) -> str:
    """The MessageId of a received or peeked message (typed optional; the broker always sets one)."""
    assert message.message_id is not None
    return message.message_id


def app_properties(message: ServiceBusReceivedMessage) -> dict[str, Any]:
    """Application properties with the SDK's bytes keys and string values decoded."""
    return {decoded(k): decoded(v) for k, v in (message.application_properties or {}).items()}


# ------------------------------------------------------------------------------------------------- time


def seconds_from_now(moment: datetime | None) -> float:
    """Seconds until ``moment`` (negative once it has passed); ``moment`` must be set."""
    assert moment is not None
    return (moment - datetime.now(UTC)).total_seconds()


def sleep_until(moment: datetime) -> None:
    """Sleep until ``moment`` (not at all if it has passed)."""
    time.sleep(max(0.0, (moment - datetime.now(UTC)).total_seconds()))
