"""Service Bus trigger listeners for session-enabled entities (``isSessionsEnabled``), as the Functions
host's extension serves them: up to ``maxConcurrentSessions`` sessions at once, each accepted by a worker
of its own; one message at a time per session, in order (batch functions: a batch at a time, with a
minimum-batch cache of the session's own); a session released after ``sessionIdleTimeout`` without
messages, or when the function calls ``release_session``. The session's lock (a session message has none
of its own) is renewed from the session's acceptance for up to ``maxAutoLockRenewalDuration``, however many
messages it hands over meanwhile, as the host's ServiceBusSessionProcessor does
(``SessionReceiverManager.RenewSessionLock``): a session held longer than that loses its lock (the receiver
renews it: :mod:`shared.amqp.session_lock`). Everything
else -- invoking, settling, autoComplete and abandon on failure -- is the plain listener's.
"""

from __future__ import annotations

import asyncio

from devhost.servicebus.listener import POLL_SECONDS, ServiceBusListener, logger
from devhost.servicebus.settlement import REGISTRY
from shared.amqp.async_receiver import AsyncEntityReceiver, AsyncSession
from shared.amqp.receiver import NoSessionAvailable
from shared.amqp.session_lock import SessionCannotBeLocked

DEFAULT_SESSION_IDLE_SECONDS = 60.0  # clientRetryOptions.tryTimeout, the host's fallback


class SessionListener(ServiceBusListener):
    """Receives for one session-enabled function until stopped; see the module docstring."""

    def _start_receiving(self) -> None:
        for index in range(self.options.max_concurrent_sessions):
            self._workers.append(
                asyncio.create_task(
                    self._supervised(self._session_worker), name=f"{self.function.name}-s{index}"
                )
            )

    async def _session_worker(self) -> None:
        idle_limit = (
            DEFAULT_SESSION_IDLE_SECONDS
            if self.options.session_idle_timeout is None
            else self.options.session_idle_timeout.total_seconds()
        )
        while not self._stopping.is_set():
            accept = asyncio.current_task()
            assert accept is not None
            self._accepting.add(accept)
            try:
                receiver = await self._open_receiver(session=True)
            except (NoSessionAvailable, SessionCannotBeLocked):
                continue  # none free within the wait, or taken by another worker first: ask again
            except asyncio.CancelledError:
                return  # the host stops (a session taken meanwhile is let go as soon as it is)
            except Exception as exc:
                logger.warning("Functions.%s: accepting a session failed (%s)", self.function.name, exc)
                await asyncio.sleep(POLL_SECONDS)
                continue
            finally:
                self._accepting.discard(accept)
            async with receiver:
                await self._serve_session(receiver, idle_limit)

    async def _serve_session(self, receiver: AsyncEntityReceiver, idle_limit: float) -> None:
        session = receiver.session
        assert session is not None
        REGISTRY.register_session(session.session_id, receiver, asyncio.get_running_loop())
        try:
            await self._session_loop(receiver, session, idle_limit)
        finally:
            REGISTRY.close_session(session.session_id, receiver)

    async def _session_loop(
        self, receiver: AsyncEntityReceiver, session: AsyncSession, idle_limit: float
    ) -> None:
        idle = 0.0
        cache = self._batch_cache()  # a session's own, as the extension makes one per accepted session
        while not self._stopping.is_set() and idle < idle_limit:
            if REGISTRY.release_requested(session.session_id):
                break  # the function called release_session: close the session now
            wait = self._batch_wait(cache, min(POLL_SECONDS, idle_limit - idle))
            limit = self.options.max_message_batch_size if self.shape.batch else 1
            try:
                messages = await receiver.receive_messages(max_message_count=limit, max_wait_time=wait)
            except Exception as exc:  # the session's lock lost, the connection gone
                # As the host: messages waiting for a minimum batch are dropped with the session (their
                # locks lapse and the broker redelivers them).
                logger.warning(
                    "Functions.%s: session %s lost (%s)", self.function.name, session.session_id, exc
                )
                return
            if not messages:
                idle += wait
                if self.shape.batch:
                    await self._dispatch_batch(receiver, cache, [])
                continue
            idle = 0.0
            if self.shape.batch:
                await self._dispatch_batch(receiver, cache, messages)
            else:
                for message in messages:  # one at a time per session: order preserved
                    await self._process_one(receiver, message, settle_inline=True)
        # The session ran dry, was released or the host stops: what waits for a minimum batch goes out.
        await self._dispatch_waiting(receiver, cache)
