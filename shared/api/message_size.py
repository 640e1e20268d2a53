"""The largest message a publish may send: the destination topic's maximum message size, known before
anything is sent.

Service Bus refuses a message larger than its entity's maximum message size: 256 KB on Standard (fixed),
``MaxMessageSizeInKilobytes`` on Premium (1024 KB by default, up to 102400 per entity); the size counts the
whole message, headers and properties included (Microsoft Learn, service-bus-quotas and
service-bus-premium-messaging, "Large messages support"). A body larger than that can never be sent, so
``POST /api/events/{eventType}`` answers it 413 naming the limit without sending
(:mod:`shared.api.publishing`).

**Where the limit comes from.** The topic's ``maxMessageSizeInKilobytes`` read through the management plane
(azure-mgmt-servicebus ``topics.get``): Azure reports it on every tier, 256 on Standard
(terraform-provider-azurerm, servicebus_queue_resource.go: "output of `max_message_size_in_kilobytes` is
also set in non-Premium namespaces, with a value of 256"; the emulator does the same, ``emulator.tier``).
Each topic's answer is kept for :data:`MAX_AGE_SECONDS` (an operator may change a Premium entity's size;
a read per publish would double its cost).

**When it cannot be read** (an app without the ``BUSBAR_*`` management settings, which publishing does not
need, or a read the management plane refuses): no limit is known, the publish goes out, and Service Bus's
own refusal (``MessageSizeExceededError``: the message is not enqueued) is answered with the same 413.
The sender's ``ServiceBusMessageBatch.max_size_in_bytes`` is no substitute: it is the *batch* limit, which
azure-servicebus 7.15 caps at 1 MB on Premium (``_servicebus_sender.py``: the link's
``com.microsoft:max-message-batch-size``), so it would refuse messages a large-message entity takes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from azure.core.exceptions import AzureError, ResourceNotFoundError

from shared.management import ManagementClient

log = logging.getLogger(__name__)

MAX_AGE_SECONDS = 300.0
"""How long a topic's maximum message size (or the failure to read it) is kept before it is read again."""

TopicSizeReader = Callable[[str], int | None]
"""A topic's maximum message size in kilobytes (None: not reported); raises ``AzureError`` when refused."""


def arm_topic_max_message_size(management: ManagementClient) -> TopicSizeReader:
    """The reader of a topic's ``maxMessageSizeInKilobytes`` through ``management`` (ARM)."""

    def read(topic: str) -> int | None:
        kilobytes = management.topics.get(*management.scope, topic).max_message_size_in_kilobytes
        return None if kilobytes is None else int(kilobytes)

    return read


class MessageSizeLimits:
    """Each topic's maximum message size in bytes, read through ``read`` and kept for ``max_age_seconds``.

    Thread-safe; two threads missing the cache at once may both read (harmless: the same answer)."""

    def __init__(
        self,
        read: TopicSizeReader,
        *,
        max_age_seconds: float = MAX_AGE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self._max_age = max_age_seconds
        self._clock = clock
        self._known: dict[str, tuple[float, int | None]] = {}
        self._lock = threading.Lock()

    def max_message_bytes(self, topic: str) -> int | None:
        """The largest message ``topic`` takes, in bytes; None when it cannot be known (see the module)."""
        key = topic.lower()  # entity names are case-insensitive
        now = self._clock()
        with self._lock:
            found = self._known.get(key)
        if found is not None and now - found[0] < self._max_age:
            return found[1]
        kilobytes = self._read_quietly(topic)
        limit = None if kilobytes is None else kilobytes * 1024
        with self._lock:
            self._known[key] = (now, limit)
        return limit

    def _read_quietly(self, topic: str) -> int | None:
        try:
            return self._read(topic)
        except ResourceNotFoundError:
            return None  # no topic: the publish drops the event (or raises) as it always did
        except AzureError as error:
            log.warning(
                "the maximum message size of topic %s could not be read (%s: %s); publishes to it are "
                "checked by Service Bus itself until it can",
                topic,
                type(error).__name__,
                str(error).splitlines()[0] if str(error) else "",
            )
            return None
