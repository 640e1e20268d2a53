"""Serialising provisioning changes per endpoint and per shared topic, across every function instance.

``PUT /api/endpoints/{endpoint}/subscriptions`` plans against the namespace and then applies the plan. Two
requests for one endpoint that interleave apply plans made from the same starting point, and the namespace
ends in a state neither asked for. An in-process lock does not help in Azure, where requests land on
different instances, so the lock is a **Service Bus session lock**: holding key ``K`` means holding session
``K`` of the session-enabled queue ``BUSBAR_PROVISIONING_LOCK_QUEUE``. Service Bus grants a session to one
receiver at a time, namespace-wide, so the lock holds across instances (and across apps sharing the
namespace), with nothing but the Service Bus connection the app already has. No message is ever sent.

The lock queue's lock duration is Service Bus's maximum, 5 minutes (:data:`LOCK_DURATION`): longer than
any HTTP request lives in Azure (230 s), so a holder never needs to renew, and a crashed holder blocks the
endpoint for at most that long. Keys are taken in sorted order within one :meth:`ProvisioningLocks.hold`,
and endpoint keys are always taken before topic keys, so two requests never wait for each other in a
cycle. A request that cannot take its keys within the wait budget gets
:class:`LockTimeout` (the API answers 409 with a retry hint).
"""

from __future__ import annotations

import contextlib
import hashlib
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import timedelta

from azure.core.exceptions import HttpResponseError
from azure.mgmt.servicebus.models import SBQueue, SBQueueProperties
from azure.servicebus import ServiceBusClient, ServiceBusReceiver
from azure.servicebus.exceptions import (
    MessagingEntityNotFoundError,
    ServiceBusAuthenticationError,
    SessionCannotBeLockedError,
)

from shared.app_settings import AppSetting, read_seconds
from shared.management import ManagementClient, SettingsError
from shared.servicebus_errors import is_entity_not_found

LOCK_QUEUE = AppSetting(
    "BUSBAR_PROVISIONING_LOCK_QUEUE",
    "Session-enabled queue whose session locks serialise provisioning per endpoint and per topic across "
    "function instances (created on first use; no message is ever sent to it).",
    default="busbar-provisioning-locks",
)
LOCK_WAIT_SECONDS = AppSetting(
    "BUSBAR_PROVISIONING_LOCK_WAIT_SECONDS",
    "How long a provisioning request waits for another one on the same endpoint or topic before it "
    "answers 409 with a retry hint.",
    default="60",
)

SETTINGS: tuple[AppSetting, ...] = (LOCK_QUEUE, LOCK_WAIT_SECONDS)

LOCK_DURATION = timedelta(minutes=5)
"""Lock duration of the lock queue: how long a crashed holder blocks others."""
MAX_SESSION_ID_LENGTH = 128


class LockTimeout(Exception):
    """Another request held one of the keys for the whole wait budget."""

    def __init__(self, key: str, waited_seconds: float) -> None:
        super().__init__(f"{key} stayed locked by another provisioning request for {waited_seconds:.0f} s")
        self.key = key
        self.waited_seconds = waited_seconds


def session_id(key: str) -> str:
    """The session that stands for ``key``: the key in lower case (entity names are case-insensitive),
    hashed when it would not fit a session id."""
    lowered = key.lower()
    if len(lowered) <= MAX_SESSION_ID_LENGTH:
        return lowered
    return "sha256:" + hashlib.sha256(lowered.encode("utf-8")).hexdigest()


def endpoint_key(queue: str) -> str:
    return f"endpoint:{queue}"


def topic_key(topic: str) -> str:
    return f"topic:{topic}"


class ProvisioningLocks:
    """Session-lock based mutual exclusion (see the module docstring).

    ``connect`` opens a new client (one per :meth:`hold`: the SDK's clients are not thread-safe);
    ``ensure_queue`` creates the lock queue when Service Bus says it does not exist."""

    def __init__(
        self,
        connect: Callable[[], ServiceBusClient],
        queue: str,
        ensure_queue: Callable[[], None],
        wait_seconds: float,
        poll_seconds: float = 0.2,
    ) -> None:
        self.connect = connect
        self.queue = queue
        self.ensure_queue = ensure_queue
        self.wait_seconds = wait_seconds
        self.poll_seconds = poll_seconds

    @contextlib.contextmanager
    def hold(self, keys: Iterable[str]) -> Iterator[None]:
        """Hold every key of ``keys`` for the ``with`` block (:class:`LockTimeout` when one stays taken)."""
        sessions = sorted({session_id(k): k for k in keys}.items())
        deadline = time.monotonic() + self.wait_seconds
        with contextlib.ExitStack() as stack:
            client = stack.enter_context(self.connect())
            for sid, key in sessions:
                # Closing the receiver releases the session at once (ExitStack: in reverse order).
                stack.push(self._acquire(client, sid, key, deadline).__exit__)
            yield

    def _acquire(self, client: ServiceBusClient, sid: str, key: str, deadline: float) -> ServiceBusReceiver:
        created_queue = False
        started = time.monotonic()
        while True:
            # prefetch_count=1 with keep_alive=None: otherwise the SDK runs a keep-alive thread whose join
            # makes every release take up to a second. No message is ever sent here, so none is prefetched.
            receiver = client.get_queue_receiver(
                self.queue, session_id=sid, max_wait_time=1, prefetch_count=1, keep_alive=None
            )
            try:
                receiver.__enter__()  # the session is accepted (locked) when the link attaches
                return receiver
            except SessionCannotBeLockedError:
                receiver.close()
                if time.monotonic() >= deadline:
                    raise LockTimeout(key, time.monotonic() - started) from None
            except (MessagingEntityNotFoundError, ServiceBusAuthenticationError) as error:
                receiver.close()
                if created_queue or not is_entity_not_found(error):
                    raise
                self.ensure_queue()
                created_queue = True
                continue
            # Jitter, so waiters released together do not all retry in lockstep.
            time.sleep(self.poll_seconds * (0.5 + random.random()))


def lock_wait_seconds(env: Mapping[str, str]) -> float:
    """``BUSBAR_PROVISIONING_LOCK_WAIT_SECONDS`` as a number (a settings error otherwise)."""
    return read_seconds(LOCK_WAIT_SECONDS, env, SettingsError)


def create_lock_queue(management: ManagementClient, name: str) -> None:
    """The session-enabled lock queue (a concurrent creation by another instance is fine)."""
    try:
        management.queues.create_or_update(
            *management.scope,
            name,
            SBQueue(
                properties=SBQueueProperties(
                    requires_session=True,
                    lock_duration=LOCK_DURATION,
                    max_size_in_megabytes=1024,
                )
            ),
        )
    except HttpResponseError as error:
        if error.status_code != 409:
            raise
