"""Run the emulator in-process for tests: ``with running_emulator() as emu: emu.connection_string``.

The emulator runs on its own event-loop thread, so the test thread can use the synchronous
``azure-servicebus`` and ``azure-mgmt-servicebus`` clients against it. Ports default to 0 (the OS picks
free ones; read them from the handle), data stays in memory unless ``data_dir`` is given, and the
namespace holds what ``config`` declares (the sample namespace without one). Entities can also be created
directly on the handle::

    from azure.servicebus import ServiceBusClient, ServiceBusMessage
    from emulator.testing import running_emulator

    with running_emulator() as emu:
        queue = emu.create_queue(max_delivery_count=3)
        with ServiceBusClient.from_connection_string(emu.connection_string) as client:
            with client.get_queue_sender(queue) as sender:
                sender.send_messages(ServiceBusMessage("hello"))
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from emulator.broker.properties import (
    EmulatorConfig,
    QueueProperties,
    RuleConfig,
    SubscriptionProperties,
    TopicProperties,
    default_config,
)
from emulator.server import Emulator, EmulatorOptions, EmulatorThread

__all__ = ["EmulatorHandle", "running_emulator", "start_emulator"]


def _fresh_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class EmulatorHandle:
    """A running emulator as tests use it: connection details plus entity creation."""

    def __init__(self, thread: EmulatorThread) -> None:
        emulator = thread.emulator
        if emulator is None:
            raise ValueError("the emulator thread has not been started")
        self.thread = thread
        self.emulator: Emulator = emulator

    @property
    def connection_string(self) -> str:
        """The SAS connection string any ``azure-servicebus`` client takes (``UseDevelopmentEmulator``)."""
        return self.emulator.connection_string

    @property
    def amqp_port(self) -> int:
        """The AMQP port the emulator listens on."""
        return self.emulator.amqp_port

    @property
    def management_port(self) -> int:
        """The plain-HTTP port of the emulator's ARM API (``azure-mgmt-servicebus``)."""
        return self.emulator.management_port

    @property
    def management_token(self) -> str:
        """The bearer token the ARM API accepts."""
        return self.emulator.management_token

    @property
    def management_url(self) -> str:
        """``http://<host>:<management port>``, the ``base_url`` for ``ServiceBusManagementClient``."""
        return f"http://{self.emulator.options.host}:{self.management_port}"

    @property
    def namespace_name(self) -> str:
        """The namespace's name (the ARM resource name)."""
        return self.emulator.namespace.name

    def create_queue(self, name: str | None = None, **properties: Any) -> str:
        """Create a queue named ``name`` (a fresh name if None) with the given
        :class:`~emulator.config.QueueProperties` fields; return its name."""
        queue_name = name or _fresh_name("q")
        props = QueueProperties(**properties)
        # Created as the config file's queues are (forwarding targets unchecked, not restored from a data
        # directory on restart), unlike topics and subscriptions below, which are created as ARM would.
        self.call(lambda: self.emulator.namespace.create_queue(queue_name, props))
        return queue_name

    def create_topic(self, name: str | None = None, **properties: Any) -> str:
        """Create a topic named ``name`` (a fresh name if None) with the given
        :class:`~emulator.config.TopicProperties` fields; return its name."""
        topic_name = name or _fresh_name("t")
        props = TopicProperties(**properties)
        self.call(lambda: self.emulator.namespace.create_topic(topic_name, props, origin="arm"))
        return topic_name

    def create_subscription(
        self, topic: str, name: str, rules: Sequence[RuleConfig] | None = None, **properties: Any
    ) -> str:
        """Create subscription ``name`` of ``topic`` with ``rules`` (the default true rule if None or
        empty) and the given :class:`~emulator.config.SubscriptionProperties` fields; return its name."""
        props = SubscriptionProperties(**properties)
        rule_list = list(rules) if rules else None
        self.call(
            lambda: self.emulator.namespace.create_subscription(topic, name, props, rule_list, origin="arm")
        )
        return name

    def call(self, fn: Callable[[], object]) -> object:
        """Run ``fn`` on the emulator's event-loop thread (the broker is not thread-safe) and return its
        result."""
        return self.thread.call(fn)

    def stop(self) -> None:
        """Close every connection and stop the emulator (its data directory, if any, is kept)."""
        self.thread.stop()


def start_emulator(
    config: EmulatorConfig | None = None,
    *,
    data_dir: Path | None = None,
    amqp_port: int = 0,
    management_port: int = 0,
    **options: Any,
) -> EmulatorHandle:
    """Start an emulator on a new loop thread and wait until it listens; raise its start-up error if any.

    ``options`` are further :class:`~emulator.server.EmulatorOptions` fields (``key_name``, ``key``,
    ``management_token``, ``management_tls``, ``max_connections``, ...). Call ``stop()`` when done, or
    use :func:`running_emulator`."""
    thread = EmulatorThread(
        EmulatorOptions(
            config=config or default_config(),
            data_dir=data_dir,
            amqp_port=amqp_port,
            management_port=management_port,
            **options,
        )
    )
    try:
        thread.start()
    except BaseException:
        thread.stop()  # a failed start must not leave its loop thread behind
        raise
    return EmulatorHandle(thread)


@contextmanager
def running_emulator(
    config: EmulatorConfig | None = None,
    *,
    data_dir: Path | None = None,
    amqp_port: int = 0,
    management_port: int = 0,
    **options: Any,
) -> Iterator[EmulatorHandle]:
    """A running emulator for the ``with`` block; stopped on exit. Arguments as :func:`start_emulator`."""
    handle = start_emulator(
        config, data_dir=data_dir, amqp_port=amqp_port, management_port=management_port, **options
    )
    try:
        yield handle
    finally:
        handle.stop()
