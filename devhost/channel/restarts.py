"""How long a worker process may take to start and how often it may be restarted, as the Functions host
bounds its language workers (pure: the caller supplies the clock).

Start-up: the Python worker imports and indexes the app while it answers the host's
``FunctionsMetadataRequest``, which the host waits for 1 minute (``GrpcWorkerChannel._functionLoadTimeout``);
with ``PYTHON_ENABLE_INIT_INDEXING`` it does so while answering ``WorkerInitRequest``, bounded by
``InitializationTimeout`` (10 s). A restarted worker imports the app while answering the function load
requests, bounded by the larger of 1 minute and functionTimeout (not at all if functionTimeout is unbounded).

Restarts: every worker error (a process exit with a code other than 0 and 200, a start-up timeout or
failure) is an error event; the errors are counted until a gap of more than 30 minutes since the last one
resets the count (``AddOrUpdateErrorBucket``). While fewer than ``3 * process count`` errors are counted the
worker is restarted, one restart at a time and the next no sooner than ``ProcessRestartInterval`` (10 s)
after the previous one finished starting; at the threshold the host gives up and recycles itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

# GrpcWorkerChannel._functionLoadTimeout: the function metadata (worker indexing) and load responses.
FUNCTION_LOAD_TIMEOUT = timedelta(minutes=1)
# WorkerProcessCountOptions.InitializationTimeout: WorkerInitRequest -> WorkerInitResponse.
INITIALIZATION_TIMEOUT = timedelta(seconds=10)
# WorkerProcessCountOptions.ProcessRestartInterval: how long a restart holds the restart lock after it.
PROCESS_RESTART_INTERVAL = timedelta(seconds=10)
# RpcFunctionInvocationDispatcher.ErrorEventsThreshold = 3 * ProcessCount (devhost runs one worker).
ERROR_EVENTS_THRESHOLD = 3
# WorkerConstants.WorkerRestartErrorIntervalThresholdInMinutes.
ERROR_WINDOW = timedelta(minutes=30)
# WorkerConstants.IntentionalRestartExitCode: the worker asks to be restarted; not an error.
INTENTIONAL_RESTART_EXIT_CODE = 200

INIT_INDEXING_SETTING = "PYTHON_ENABLE_INIT_INDEXING"
EXCEEDED_MESSAGE = (
    "Exceeded language worker restart retry count for runtime:python. "
    "Shutting down and proactively recycling the Functions Host to recover"
)


@dataclass(frozen=True, slots=True)
class WorkerLimits:
    """The bounds on a worker process; the defaults are the Functions host's. ``startup_timeout`` None
    means the host's for the settings (see :func:`startup_timeout`); set, it bounds every start."""

    startup_timeout: timedelta | None = None
    restart_interval: timedelta = PROCESS_RESTART_INTERVAL
    error_threshold: int = ERROR_EVENTS_THRESHOLD
    error_window: timedelta = ERROR_WINDOW


def _true_like(value: str | None) -> bool:
    # azure_functions_worker.utils.common.is_true_like
    return value is not None and value.lower().strip() in {"1", "true", "t", "yes", "y"}


def startup_timeout(
    limits: WorkerLimits,
    settings: Mapping[str, str],
    function_timeout: timedelta | None,
    *,
    restart: bool,
) -> timedelta | None:
    """How long a worker may take to import and index the app (None: unbounded, as the host is for a
    restarted worker when functionTimeout is unbounded)."""
    if limits.startup_timeout is not None:
        return limits.startup_timeout
    if _true_like(settings.get(INIT_INDEXING_SETTING)):
        return INITIALIZATION_TIMEOUT
    if not restart:
        return FUNCTION_LOAD_TIMEOUT
    if function_timeout is None:
        return None
    return max(FUNCTION_LOAD_TIMEOUT, function_timeout)


def timeout_phase(settings: Mapping[str, str], *, restart: bool) -> str:
    """The host's request whose response the worker failed to send in time (named in the error)."""
    if _true_like(settings.get(INIT_INDEXING_SETTING)):
        return "Initializing worker process failed"
    return "Loading function failed" if restart else "Requesting metadata from worker failed"


class WorkerErrors:
    """The host's error bucket: worker errors since the last quiet gap longer than the window."""

    def __init__(self, limits: WorkerLimits) -> None:
        self._limits = limits
        self._times: list[float] = []

    @property
    def count(self) -> int:
        """Errors counted now."""
        return len(self._times)

    def record(self, now: float) -> int:
        """Count an error at monotonic time ``now`` (seconds); return the count."""
        if self._times and now - self._times[-1] > self._limits.error_window.total_seconds():
            self._times.clear()
        self._times.append(now)
        return len(self._times)

    def may_restart(self) -> bool:
        """Whether the host would start another worker (fewer errors than the threshold)."""
        return len(self._times) < self._limits.error_threshold
