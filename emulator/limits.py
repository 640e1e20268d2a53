"""Azure Service Bus limits, as the CLOUD service (Standard/Premium tiers) enforces them.

These are deliberately the cloud limits, not the official emulator's much tighter quotas (50 entities,
MaxDeliveryCount <= 10, TTL <= 1 h ...): a topology that loads here should also deploy to Azure.
Where the emulator departs from the cloud on purpose, the constant says so.

Sources (Microsoft Learn):
  [quotas]   service-bus-quotas (includes/service-bus-quotas-table.md, ms.date 03/17/2025)
  [dotnet]   Azure.Messaging.ServiceBus.Administration CreateQueueOptions / QueueProperties API docs
  [dedup]    duplicate-detection.md (ms.date 06/08/2023)
  [expiry]   message-expiration.md
  [forward]  service-bus-auto-forwarding.md
  [naming]   ARM naming rules for Microsoft.ServiceBus (namespace 6-50 chars)
  [premium]  service-bus-premium-messaging.md "Large messages support"; the 400 Azure answers for a value out
             of range (quoted in emulator.tier)
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

# --- names ----------------------------------------------------------------------------------------

# [quotas] "Size of a queue or topic name (path)": 260 characters.
MAX_ENTITY_PATH_LENGTH: Final = 260
# [quotas] "Size of a namespace, subscription, or subscription rule name": 50 characters.
MAX_ENTITY_NAME_LENGTH: Final = 50
# [naming] A namespace name is 6-50 characters long.
MIN_NAMESPACE_NAME_LENGTH: Final = 6
MAX_NAMESPACE_NAME_LENGTH: Final = MAX_ENTITY_NAME_LENGTH

# --- entity properties ----------------------------------------------------------------------------

# [dotnet] LockDuration: "Max value is 5 minutes. Default value is 60 seconds."  The 5 s minimum is what the
# service accepts (and what the official emulator adopted in 1.1.2).
LOCK_DURATION_MIN: Final = timedelta(seconds=5)
LOCK_DURATION_MAX: Final = timedelta(minutes=5)
LOCK_DURATION_DEFAULT: Final = timedelta(seconds=60)

# [dotnet] MaxDeliveryCount: default 10, minimum 1; the property is an Int32, so int.MaxValue is the ceiling.
MAX_DELIVERY_COUNT_MIN: Final = 1
MAX_DELIVERY_COUNT_MAX: Final = 2147483647
MAX_DELIVERY_COUNT_DEFAULT: Final = 10

# [dedup] Duplicate detection window: default 10 minutes, minimum 20 seconds, maximum 7 days.
DUPLICATE_DETECTION_WINDOW_MIN: Final = timedelta(seconds=20)
DUPLICATE_DETECTION_WINDOW_MAX: Final = timedelta(days=7)
DUPLICATE_DETECTION_WINDOW_DEFAULT: Final = timedelta(minutes=10)

# [expiry] DefaultMessageTimeToLive: Standard/Premium default is TimeSpan.MaxValue (None = infinite here);
# the smallest value the service accepts is 1 second.
DEFAULT_TTL_MIN: Final = timedelta(seconds=1)
DEFAULT_TTL_DEFAULT: Final[timedelta | None] = None

# [quotas] Queue/topic size: 1-5 GB Standard, 80 GB Premium (81920 MB); default 1024 MB.
# DELIBERATE DEPARTURE: the cloud only accepts 1024/2048/3072/4096/5120 (Standard) or up to 81920 (Premium);
# the emulator accepts any size from 1 MB so tests can fill a queue and observe QuotaExceeded cheaply.
MAX_SIZE_IN_MEGABYTES_MIN: Final = 1
MAX_SIZE_IN_MEGABYTES_MAX: Final = 81920
MAX_SIZE_IN_MEGABYTES_DEFAULT: Final = 1024

# [quotas] Max message size: 256 KB Standard (fixed); Premium 1 MB by default, up to 100 MB (102400 KB) per
# entity ([premium]: "MaxMessageSizeInKilobytes ... between 1024 and 102400"; emulator.tier has the rules).
# DELIBERATE DEPARTURE: Config.json (and the test handle) may set any 1..102400 KB on either tier, so tests
# can provoke a size refusal cheaply; the management planes (ARM, ATOM) accept only what Azure accepts.
MAX_MESSAGE_SIZE_IN_KILOBYTES_MIN: Final = 1
MAX_MESSAGE_SIZE_IN_KILOBYTES_MAX: Final = 102400
STANDARD_MAX_MESSAGE_SIZE_IN_KILOBYTES: Final = 256
PREMIUM_MAX_MESSAGE_SIZE_IN_KILOBYTES_MIN: Final = 1024
PREMIUM_MAX_MESSAGE_SIZE_IN_KILOBYTES_DEFAULT: Final = 1024

# [expiry] AutoDeleteOnIdle: minimum 5 minutes; default TimeSpan.MaxValue (None = never).
AUTO_DELETE_ON_IDLE_MIN: Final = timedelta(minutes=5)
AUTO_DELETE_ON_IDLE_DEFAULT: Final[timedelta | None] = None

# [dotnet] UserMetadata: "Cannot be null. Max length is 1024 chars."
MAX_USER_METADATA_LENGTH: Final = 1024

# --- per-topic / per-namespace quotas ----------------------------------------------------------------------

# [quotas] Subscriptions per topic: 2,000 (Standard and Premium).
SUBSCRIPTIONS_PER_TOPIC: Final = 2000
# [quotas] SQL filters per topic: 2,000.
SQL_FILTERS_PER_TOPIC: Final = 2000
# [quotas] Correlation filters per topic: 100,000.
CORRELATION_FILTERS_PER_TOPIC: Final = 100000
# [quotas] Topics + queues per namespace: 10,000 (Basic/Standard; Premium 1,000 per messaging unit).
ENTITIES_PER_NAMESPACE: Final = 10000

# --- rules ----------------------------------------------------------------------------------------

# [quotas] Size of SQL filter condition string: 1,024 characters.
MAX_FILTER_EXPRESSION_LENGTH: Final = 1024
# [quotas] Size of SQL rule action string: 1,024 characters.
MAX_ACTION_EXPRESSION_LENGTH: Final = 1024
# [quotas] Number of expressions per rule action: 32.
MAX_ACTION_STATEMENTS: Final = 32

# --- messages -------------------------------------------------------------------------------------

# [quotas] Message ID maximum size: 128.
MAX_MESSAGE_ID_LENGTH: Final = 128
# [quotas] Session ID maximum size: 128.
MAX_SESSION_ID_LENGTH: Final = 128

# [forward] "This value is set to 4": at most 4 auto-forward hops, then MaxTransferHopCountExceeded (DLQ).
MAX_TRANSFER_HOPS: Final = 4
