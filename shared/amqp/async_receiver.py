"""An :class:`~shared.amqp.receiver.EntityReceiver` for asyncio code (devhost's trigger listeners).

proton's ``BlockingConnection`` blocks its caller, so each receiver lives on a thread of its own (a
one-worker executor) and every call on it runs there, one after another: the event loop never waits on the
wire, and no two calls share the connection at once (settlements asked for in one turn of the loop go
together, as one call) (the session lock's renewing thread takes the
receiver's own lock, as with the blocking receiver). A call awaited by a task that is cancelled still runs
to its end on that thread; one that opened a receiver closes it again, so a cancelled session accept never
leaves a session locked.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from datetime import datetime
from types import TracebackType
from typing import Any

from shared.amqp.connection import Namespace, WireError
from shared.amqp.deliveries import ABANDON, COMPLETE, DEFER, Outcome, dead_letter
from shared.amqp.received import ReceivedMessage
from shared.amqp.receiver import MORE_MESSAGES_WAIT, EntityReceiver, NextAvailableSession
from shared.amqp.session_lock import MAX_LOCK_RENEWAL_SECONDS


def _close_if_opened(opening: concurrent.futures.Future[EntityReceiver]) -> None:
    if not opening.cancelled() and opening.exception() is None:
        opening.result().close()


class AsyncSession:
    """The session an :class:`AsyncEntityReceiver` holds, with the SDK's ``ServiceBusSession`` calls."""

    def __init__(self, receiver: AsyncEntityReceiver, session_id: str) -> None:
        self.session_id = session_id
        self._receiver = receiver

    async def get_state(self) -> bytes | None:
        """The session's state."""
        return await self._receiver.call(EntityReceiver.get_session_state)

    async def set_state(self, state: bytes | None) -> None:
        """Set (``None``: clear) the session's state."""
        await self._receiver.call(EntityReceiver.set_session_state, state)

    async def renew_lock(self) -> datetime:
        """Renew the session's lock now; its new expiry."""
        return await self._receiver.call(EntityReceiver.renew_session_lock)


class AsyncEntityReceiver:
    """A peek-lock receiver whose calls are awaited (see the module docstring). Open with :meth:`open`."""

    def __init__(self, receiver: EntityReceiver, executor: concurrent.futures.ThreadPoolExecutor) -> None:
        self._receiver = receiver
        self._executor = executor
        self.address = receiver.address
        self.session = None if receiver.session_id is None else AsyncSession(self, receiver.session_id)
        self._settling: list[tuple[ReceivedMessage, Outcome, asyncio.Future[WireError | None]]] = []

    @classmethod
    async def open(
        cls,
        namespace: Namespace,
        address: str,
        session_id: str | NextAvailableSession | None = None,
        *,
        session_wait: float | None = None,
        lock_renewal_seconds: float = MAX_LOCK_RENEWAL_SECONDS,
    ) -> AsyncEntityReceiver:
        """Connect and attach as :class:`EntityReceiver` does, on the receiver's own thread."""
        executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"busbar-receive-{address}")
        opening = executor.submit(
            EntityReceiver,
            namespace,
            address,
            session_id,
            session_wait=session_wait,
            lock_renewal_seconds=lock_renewal_seconds,
        )
        try:
            receiver = await asyncio.wrap_future(opening)
        except BaseException:
            opening.add_done_callback(_close_if_opened)  # cancelled while it opens: closed once open
            executor.shutdown(wait=False)
            raise
        return cls(receiver, executor)

    async def call[R](self, method: Callable[..., R], *args: Any) -> R:
        """Run ``method(receiver, *args)`` on the receiver's thread."""
        return await asyncio.wrap_future(self._submit(method, self._receiver, *args))

    def _submit[R](self, method: Callable[..., R], *args: Any) -> concurrent.futures.Future[R]:
        try:
            return self._executor.submit(method, *args)
        except RuntimeError:  # the executor is shut down: the receiver was closed
            raise WireError(f"the receiver of {self.address} is closed") from None

    async def receive_messages(
        self, max_message_count: int = 1, max_wait_time: float = 5.0, rest_wait: float = MORE_MESSAGES_WAIT
    ) -> list[ReceivedMessage]:
        """Up to ``max_message_count`` messages, locked; the first awaited up to ``max_wait_time``, the rest
        up to ``rest_wait``."""
        return await self.call(EntityReceiver.receive_messages, max_message_count, max_wait_time, rest_wait)

    async def complete_message(self, message: ReceivedMessage) -> None:
        """Remove ``message`` from its entity."""
        await self._settle(message, COMPLETE)

    async def abandon_message(self, message: ReceivedMessage) -> None:
        """Give ``message`` back, its delivery count raised."""
        await self._settle(message, ABANDON)

    async def defer_message(self, message: ReceivedMessage) -> None:
        """Set ``message`` aside, to be received by sequence number only."""
        await self._settle(message, DEFER)

    async def dead_letter_message(
        self, message: ReceivedMessage, reason: str | None = None, error_description: str | None = None
    ) -> None:
        """Move ``message`` to the dead-letter queue with ``reason`` and ``error_description``."""
        await self._settle(message, dead_letter(reason, error_description))

    async def _settle(self, message: ReceivedMessage, outcome: Outcome) -> None:
        """Settle ``message``, together with the settlements asked for in the same turn of the loop (tasks
        gathered, say): one call on the receiver's thread, one round trip to Service Bus for all of them."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[WireError | None] = loop.create_future()
        self._settling.append((message, outcome, answer))
        if len(self._settling) == 1:
            loop.call_soon(self._send_settlements)
        error = await answer
        if error is not None:
            raise error

    def _send_settlements(self) -> None:
        batch, self._settling = self._settling, []
        try:
            sent = self._submit(
                EntityReceiver.settle_messages,
                self._receiver,
                [(message, outcome) for message, outcome, _ in batch],
            )
        except WireError as closed:  # each caller gets the error, none waits for an answer never coming
            for _, _, waiting in batch:
                if not waiting.done():
                    waiting.set_exception(closed)
            return

        def answer(done: asyncio.Future[list[WireError | None]]) -> None:
            failure = None if done.cancelled() else done.exception()
            for index, (_, _, waiting) in enumerate(batch):
                if waiting.done():
                    continue
                if done.cancelled():
                    waiting.cancel()
                elif failure is not None:
                    waiting.set_exception(failure)
                else:
                    waiting.set_result(done.result()[index])

        asyncio.wrap_future(sent).add_done_callback(answer)

    async def renew_message_lock(self, message: ReceivedMessage) -> datetime:
        """Renew ``message``'s lock; its new expiry."""
        return await self.call(EntityReceiver.renew_message_lock, message)

    async def close(self) -> None:
        """Close the receiver (its locked messages and session are released by Service Bus)."""
        try:
            await asyncio.wrap_future(self._submit(self._receiver.close))
        finally:
            self._executor.shutdown(wait=False)

    async def __aenter__(self) -> AsyncEntityReceiver:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()


__all__ = ["AsyncEntityReceiver", "AsyncSession"]
