"""Service Bus trigger listeners: one per function, receiving through Busbar's AMQP seam (:mod:`shared.amqp`,
python-qpid-proton's public API), which keeps each message as it arrived: its AMQP bytes and every value's
AMQP type, as the host's .NET SDK does.

Semantics as the Functions host (extension 5.x) implements them:

* PEEK_LOCK receive; success -> complete unless ``autoCompleteMessages`` is false; exception -> abandon
  every message the function did not settle itself, whatever ``autoCompleteMessages`` says (the broker
  dead-letters once MaxDeliveryCount is exceeded).
* single-message functions: up to ``maxConcurrentCalls`` invocations at once, each message's lock renewed
  while its invocation runs (up to ``maxAutoLockRenewalDuration``) and no longer: a message the function
  leaves unsettled (``autoCompleteMessages`` false) is redelivered when its lock lapses, as in Azure;
* SDK-type parameters get the binding extension's objects: see ``model_binding_data`` and ``settlement``;
* session functions: see ``session_listener``;
* batch functions (``cardinality="many"``): up to ``maxMessageBatchSize`` messages per invocation, one batch
  at a time, settled together; with ``minMessageBatchSize`` above 1 they wait for that many (or for
  ``maxBatchWaitTime``): see ``batch_cache``.

Receivers are opened once per listener (sessions: once per accepted session), each on a thread of its own
(:class:`~shared.amqp.async_receiver.AsyncEntityReceiver`). ``prefetchCount`` is not applied: a receive asks
Service Bus for as many messages as it can hand over at once and no more (the host's default, 0).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from devhost.bindings import ServiceBusConnection
from devhost.channel.protocol import FunctionMetadata, ServiceBusInput
from devhost.dispatcher import Dispatcher
from devhost.host_config import ServiceBusOptions
from devhost.servicebus.batch_cache import BatchCache
from devhost.servicebus.lock_renewal import LockRenewal, renew_while_invoked
from devhost.servicebus.message_reading import message_data
from devhost.servicebus.model_binding_data import model_binding_content
from devhost.servicebus.settlement import REGISTRY, InvocationSettlement
from shared.amqp.async_receiver import AsyncEntityReceiver
from shared.amqp.connection import Namespace
from shared.amqp.received import ReceivedMessage
from shared.amqp.receiver import NEXT_AVAILABLE_SESSION

logger = logging.getLogger("devhost.ServiceBus")

POLL_SECONDS = 1.0  # how long one receive call waits: bounds how quickly a stop is noticed
RESTART_MIN_SECONDS = 1.0  # back-off before a failed listener starts again, doubling up to the max
RESTART_MAX_SECONDS = 30.0
SHORT_POLL_SECONDS = 0.05  # receive wait while invocations are in flight, so their settlements go out soon
SESSION_ACCEPT_SECONDS = 5.0  # how long a session worker waits for a free session before asking again
INFINITE_RENEWAL_SECONDS = 10 * 365 * 86400.0


def namespace_of(connection: ServiceBusConnection) -> Namespace:
    """Where the listeners connect: a connection string, or a namespace with DefaultAzureCredential."""
    if connection.connection_string is not None:
        return Namespace.from_connection_string(connection.connection_string)
    from azure.identity import DefaultAzureCredential  # heavy; only in Azure

    assert connection.fully_qualified_namespace is not None
    return Namespace.from_credential(connection.fully_qualified_namespace, DefaultAzureCredential())


class ServiceBusListener:
    """Receives for one function until stopped; see the module docstring for the semantics."""

    def __init__(
        self,
        function: FunctionMetadata,
        options: ServiceBusOptions,
        connection: ServiceBusConnection,
        dispatcher: Dispatcher,
    ) -> None:
        if function.service_bus is None:
            raise ValueError(f"function '{function.name}' has no Service Bus trigger")
        self.function = function
        self.options = options
        self.connection = connection
        self.dispatcher = dispatcher
        self.shape = function.service_bus
        binding_auto_complete = self.shape.auto_complete
        self.auto_complete = (
            options.auto_complete_messages if binding_auto_complete is None else binding_auto_complete
        )
        self._namespace: Namespace | None = None
        self._stopping = asyncio.Event()
        self._workers: list[asyncio.Task[None]] = []
        self._in_flight: set[asyncio.Task[None]] = set()
        self._accepting: set[asyncio.Task[None]] = set()
        self._settlements: list[Callable[[], Awaitable[None]]] = []
        self._finished: asyncio.Future[None] | None = None  # what _wait_for_finished waits on

    @property
    def in_flight(self) -> int:
        """Invocations running now."""
        return len(self._in_flight)

    async def _open_receiver(self, *, session: bool) -> AsyncEntityReceiver:
        """A peek-lock receiver on the trigger's entity; for sessions, of the next available session (waited
        for up to :data:`SESSION_ACCEPT_SECONDS`), its lock renewed for ``maxAutoLockRenewalDuration``."""
        assert self._namespace is not None
        shape = self.shape
        if shape.queue_name is not None:
            address = shape.queue_name
        else:
            assert shape.topic_name is not None and shape.subscription_name is not None
            address = f"{shape.topic_name}/subscriptions/{shape.subscription_name}"
        if not session:
            return await AsyncEntityReceiver.open(self._namespace, address)
        return await AsyncEntityReceiver.open(
            self._namespace,
            address,
            NEXT_AVAILABLE_SESSION,
            session_wait=SESSION_ACCEPT_SECONDS,
            lock_renewal_seconds=self._renewal_seconds(),
        )

    def _renewal_seconds(self) -> float:
        duration = self.options.max_auto_lock_renewal_duration
        return INFINITE_RENEWAL_SECONDS if duration is None else duration.total_seconds()

    async def start(self) -> None:
        """Start receiving."""
        self._namespace = namespace_of(self.connection)
        self._start_receiving()
        logger.info(
            "Listening for Functions.%s on %s (%s%s, maxConcurrentCalls=%d)",
            self.function.name,
            self.shape.entity,
            "batch" if self.shape.batch else "single",
            ", sessions" if self.shape.sessions else "",
            self.options.max_concurrent_calls,
        )
        if self.options.prefetch_count > 0:
            # Said rather than silently ignored: a host.json written for Azure keeps working here.
            logger.warning(
                "Functions.%s: prefetchCount %d is not applied by devhost: each receive takes what "
                "Service Bus hands over at once (as with the host's default, 0)",
                self.function.name,
                self.options.prefetch_count,
            )

    def _start_receiving(self) -> None:
        """One receive loop for the entity (sessions: see ``session_listener``)."""
        self._workers.append(
            asyncio.create_task(self._supervised(self._receive_loop), name=f"{self.function.name}-receive")
        )

    async def stop(self, drain_seconds: float) -> None:
        """Stop receiving, let in-flight invocations finish (up to ``drain_seconds``), settle, close."""
        self._stopping.set()
        for task in list(self._accepting):
            task.cancel()  # waiting for a session holds no message: safe to cancel
        _, pending = (
            await asyncio.wait(self._workers, timeout=drain_seconds + POLL_SECONDS * 2)
            if self._workers
            else (set(), set())
        )
        for task in [*pending, *self._in_flight]:
            task.cancel()  # past the drain bound: unsettled messages are redelivered after their lock expires
        if pending:
            logger.warning(
                "Functions.%s: %d invocations did not finish within the drain time",
                self.function.name,
                len(pending),
            )
            await asyncio.gather(*pending, return_exceptions=True)

    # ------------------------------------------------------------------------------------- receiving

    async def _supervised(self, worker: Callable[[], Awaitable[None]]) -> None:
        """Run ``worker``; when it fails (entity missing, connection lost, ...) log why and start it again
        after a back-off, as the host's listeners do, instead of silently losing the trigger. The back-off
        doubles while the worker keeps failing at once and starts again from its minimum once it has run
        longer than the longest back-off (a connection lost after hours is retried after a second)."""
        delay = RESTART_MIN_SECONDS
        loop = asyncio.get_running_loop()
        while not self._stopping.is_set():
            started = loop.time()
            try:
                await worker()
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if loop.time() - started > RESTART_MAX_SECONDS:
                    delay = RESTART_MIN_SECONDS
                logger.error(
                    "Functions.%s: the listener for '%s' failed (%s: %s); retrying in %.0f s",
                    self.function.name,
                    self.shape.entity,
                    type(exc).__name__,
                    exc,
                    delay,
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), delay)
                delay = min(delay * 2, RESTART_MAX_SECONDS)

    async def _receive_loop(self) -> None:
        """Receive, dispatch, and settle -- all link I/O from this one task.

        The receiver performs one call at a time: a settlement queued behind a pending receive would wait
        that receive out. So finished invocations queue their settlement, and settlements over gRPC and
        lock renewals during an invocation queue their call, and this loop performs them between receives
        (a receive waits only briefly while invocations are in flight)."""
        receiver = await self._open_receiver(session=False)
        capacity = self.options.max_concurrent_calls
        cache = self._batch_cache()
        async with receiver:
            while True:
                await self._flush_settlements()
                busy = len(self._in_flight) + len(self._settlements)
                if self._stopping.is_set():
                    if not busy:
                        # As the host on stop: messages waiting for a minimum batch still go out.
                        await self._dispatch_waiting(receiver, cache)
                        break
                    await self._wait_for_finished(SHORT_POLL_SECONDS)
                    continue
                if self.shape.batch:
                    await self._receive_batch(receiver, cache)
                    continue
                free = capacity - busy
                if free <= 0:
                    await self._wait_for_finished(POLL_SECONDS)
                    continue
                # The host's processor hands each message over as it arrives: a receive takes what Service
                # Bus has at once and does not hold it waiting for more.
                messages = await receiver.receive_messages(
                    max_message_count=free,
                    max_wait_time=SHORT_POLL_SECONDS if busy else POLL_SECONDS,
                    rest_wait=0.0,
                )
                for message in messages:
                    self._spawn(self._process_one(receiver, message))

    async def _wait_for_finished(self, timeout: float) -> None:
        """Until an invocation finishes (its settlement is queued) or ``timeout``.

        A bare future and a timer handle rather than ``wait_for(event.wait())``: no task per wait, and the
        finishing invocation wakes this loop directly."""
        if self._settlements:
            return
        loop = asyncio.get_running_loop()
        finished = self._finished = loop.create_future()
        timer = loop.call_later(timeout, _resolve, finished)
        try:
            await finished
        finally:
            timer.cancel()
            self._finished = None

    def _notify_finished(self) -> None:
        if self._finished is not None:
            _resolve(self._finished)

    async def _flush_settlements(self) -> None:
        """Perform the settlements (and link calls) queued so far, together. Those queued meanwhile wait for
        the next pass, after the receive that fills the slots these free: the worker is not left idle while
        invocations finishing one after the other keep the loop settling (they would fall into lockstep:
        all slots received together, run together, settled together)."""
        pending = self._settlements
        if not pending:
            return
        self._settlements = []
        if len(pending) == 1:  # the common case at low concurrency: no gather task
            await pending[0]()
        else:
            await asyncio.gather(*(settle() for settle in pending))

    def _batch_cache(self) -> BatchCache[ReceivedMessage]:
        options = self.options
        return BatchCache(
            max_size=options.max_message_batch_size,
            min_size=options.min_message_batch_size,
            wait_seconds=options.max_batch_wait_time.total_seconds(),
        )

    def _batch_wait(self, cache: BatchCache[ReceivedMessage], longest: float) -> float:
        now = asyncio.get_running_loop().time()
        return cache.receive_wait(longest, now, shortest=SHORT_POLL_SECONDS)

    async def _receive_batch(self, receiver: AsyncEntityReceiver, cache: BatchCache[ReceivedMessage]) -> None:
        messages = await receiver.receive_messages(
            max_message_count=self.options.max_message_batch_size,
            max_wait_time=self._batch_wait(cache, POLL_SECONDS),
        )
        await self._dispatch_batch(receiver, cache, messages)

    async def _dispatch_batch(
        self,
        receiver: AsyncEntityReceiver,
        cache: BatchCache[ReceivedMessage],
        messages: list[ReceivedMessage],
    ) -> None:
        """Invoke with what was received -- through the minimum-batch cache when one is configured."""
        batch = cache.next_batch(messages, now=asyncio.get_running_loop().time())
        if batch:
            await self._process_batch(receiver, batch)

    async def _dispatch_waiting(
        self, receiver: AsyncEntityReceiver, cache: BatchCache[ReceivedMessage]
    ) -> None:
        """Invoke with every message still waiting for a minimum batch (a session ends, the host stops)."""
        while len(cache):
            await self._process_batch(receiver, cache.take(partial=True))

    def _spawn(self, coroutine: Any) -> None:
        task: asyncio.Task[None] = asyncio.create_task(coroutine)
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    # ------------------------------------------------------------------------------------ invoking

    def _input(self, messages: list[ReceivedMessage], *, batch: bool) -> ServiceBusInput:
        """What the worker gets for ``messages``: the ``model_binding_data`` contents for SDK types (as the
        host's extension sends them), else each body with its trigger metadata's fields and properties."""
        kind = self.shape.payload
        if kind == "sdk":
            return ServiceBusInput(
                kind, batch, binding_data=tuple(model_binding_content(m) for m in messages)
            )
        return ServiceBusInput(kind, batch, messages=tuple(message_data(m) for m in messages))

    async def _process_one(
        self, receiver: AsyncEntityReceiver, message: ReceivedMessage, *, settle_inline: bool = False
    ) -> None:
        """Invoke for one message; settle inline (sessions) or queue the settlement for the receive loop."""
        # Beside the concurrent receive loop, every other call on the receiver goes through that loop.
        on_listener = None if settle_inline else self._via_listener
        tracker = self._invocation(receiver, [message], on_listener=on_listener)
        renewal = (
            None if self.shape.sessions else self._renew_during_invocation(receiver, message, on_listener)
        )
        try:
            record, _ = await self.dispatcher.invoke(
                self.function,
                lambda: self._input([message], batch=False),
                reason=f"New ServiceBus message detected on '{self.shape.entity}'.",
                settlement_calls=lambda: tuple(tracker.calls),
            )
        finally:
            REGISTRY.release(tracker)
            if renewal is not None:
                renewal.cancel()  # as the host: the lock is renewed only while the function runs

        async def settle() -> None:
            await self._settle(receiver, [message], tracker, record.succeeded)

        if settle_inline:
            await settle()
            return
        # This invocation no longer occupies a slot. Leave ``_in_flight`` now rather than in the task's
        # done callback: the woken receive loop may run first, and a settlement that needs no broker call
        # (the function settled over gRPC itself) does not yield, so it would count this task as busy
        # and wait out a full poll before receiving the next message.
        current = asyncio.current_task()
        if current is not None:
            self._in_flight.discard(current)
        self._settlements.append(settle)
        self._notify_finished()

    def _invocation(
        self,
        receiver: AsyncEntityReceiver,
        messages: list[ReceivedMessage],
        *,
        on_listener: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]] | None = None,
    ) -> InvocationSettlement:
        invocation = InvocationSettlement(receiver, asyncio.get_running_loop(), on_listener=on_listener)
        REGISTRY.register(invocation, messages)
        return invocation

    def _queue_link_call(self, call: Callable[[], Awaitable[None]]) -> None:
        """Have the receive loop run ``call`` between receives (see :meth:`_receive_loop`)."""
        self._settlements.append(call)
        self._notify_finished()

    async def _via_listener(self, call: Callable[[], Awaitable[Any]]) -> Any:
        """Run ``call`` from the receive loop's task and await its result."""
        result: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        async def job() -> None:
            try:
                value = await call()
            except Exception as exc:
                if not result.done():
                    result.set_exception(exc)
            else:
                if not result.done():
                    result.set_result(value)

        self._queue_link_call(job)
        return await result

    def _renew_during_invocation(
        self,
        receiver: AsyncEntityReceiver,
        message: ReceivedMessage,
        on_listener: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]] | None,
    ) -> LockRenewal | None:
        """Renew ``message``'s lock while its invocation runs (up to ``maxAutoLockRenewalDuration``)."""
        return renew_while_invoked(
            receiver,
            message,
            max_seconds=self._renewal_seconds(),
            function_name=self.function.name,
            via=self._via_listener if on_listener is not None else None,
        )

    async def _process_batch(self, receiver: AsyncEntityReceiver, messages: list[ReceivedMessage]) -> None:
        tracker = self._invocation(receiver, messages)
        try:
            record, _ = await self.dispatcher.invoke(
                self.function,
                lambda: self._input(messages, batch=True),
                reason=f"New ServiceBus messages detected on '{self.shape.entity}'.",
                settlement_calls=lambda: tuple(tracker.calls),
            )
        finally:
            REGISTRY.release(tracker)
        await self._settle(receiver, messages, tracker, record.succeeded)

    async def _settle(
        self,
        receiver: AsyncEntityReceiver,
        messages: list[ReceivedMessage],
        tracker: InvocationSettlement,
        succeeded: bool,
    ) -> None:
        # A success completes only under autoCompleteMessages; a failure abandons whatever the function
        # left unsettled whatever that setting says, as the host does (its MessageProcessor rethrows the
        # failure and the SDK processor abandons an unsettled message; batches: "regardless of the
        # autoCompleteMessages configuration").
        if succeeded and not self.auto_complete:
            return
        for message in messages:
            if tracker.is_settled(message):
                continue
            try:
                if succeeded:
                    await receiver.complete_message(message)
                else:
                    await receiver.abandon_message(message)
            except Exception as exc:
                # The lock was lost (e.g. renewal gave up): the broker redelivers; nothing is lost.
                logger.error(
                    "Functions.%s: could not %s message %s: %s",
                    self.function.name,
                    "complete" if succeeded else "abandon",
                    message.message_id,
                    exc,
                )


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
