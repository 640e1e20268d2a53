"""Every invocation, logged the way the Functions host logs it and kept for tests and the status page.

The host writes ``Executing 'Functions.<name>' (Reason='...', Id=<guid>)`` and
``Executed 'Functions.<name>' (Succeeded|Failed, Id=<guid>, Duration=<n>ms)``; devhost writes the same.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

logger = logging.getLogger("devhost.Function")

SUCCEEDED = "Succeeded"
FAILED = "Failed"
# Records kept for tests and the status page. A devhost left running (``make run``) finishes invocations
# for days; keeping every record would grow without bound, so the oldest go (the count stays exact).
RETAINED_RECORDS = 10_000


@dataclass(frozen=True, slots=True)
class InvocationRecord:
    """One finished invocation."""

    function_name: str
    invocation_id: str
    reason: str
    outcome: str  # Succeeded | Failed
    duration_ms: float
    error: str | None = None
    finished_at: float = 0.0  # time.time() when it ended
    # What the function was given, parameter -> the bound value's class ("module.QualName"), so a test can
    # check which binding a function really got (the host logs no such thing; devhost keeps it for tests).
    bound: tuple[tuple[str, str], ...] = ()
    # The Settlement gRPC calls the function made for its messages, in order ("Complete", "Deadletter", ...).
    settlement_calls: tuple[str, ...] = ()

    @property
    def started_at(self) -> float:
        """time.time() when it began."""
        return self.finished_at - self.duration_ms / 1000

    @property
    def succeeded(self) -> bool:
        """Whether the function returned without raising."""
        return self.outcome == SUCCEEDED


class InvocationLog:
    """Thread-safe record of finished invocations (the last ``retain`` kept); other threads can wait."""

    def __init__(self, retain: int = RETAINED_RECORDS) -> None:
        if retain < 1:
            raise ValueError(f"retain must be at least 1, got {retain}")
        self._records: deque[InvocationRecord] = deque(maxlen=retain)
        self._count = 0
        self._changed = threading.Condition()
        # What blocked waiters wait for: each finished invocation wakes them only when a count target is
        # reached or a predicate waits (a waiter woken per invocation contends with the host for the GIL).
        self._count_targets: list[int] = []
        self._predicate_waiters = 0

    def started(self, function_name: str, invocation_id: str, reason: str) -> float:
        """Log the start; returns the start time for :meth:`finished`."""
        logger.info("Executing 'Functions.%s' (Reason='%s', Id=%s)", function_name, reason, invocation_id)
        return time.perf_counter()

    def finished(
        self,
        function_name: str,
        invocation_id: str,
        reason: str,
        started_at: float,
        error: str | None,
        *,
        bound: tuple[tuple[str, str], ...] = (),
        settlement_calls: tuple[str, ...] = (),
    ) -> InvocationRecord:
        """Log and keep the outcome; ``error`` is a failure's ``Type: message`` text."""
        duration_ms = (time.perf_counter() - started_at) * 1000
        outcome = SUCCEEDED if error is None else FAILED
        detail = error
        record = InvocationRecord(
            function_name,
            invocation_id,
            reason,
            outcome,
            duration_ms,
            detail,
            time.time(),
            bound,
            settlement_calls,
        )
        if error is None:
            logger.info(
                "Executed 'Functions.%s' (%s, Id=%s, Duration=%dms)",
                function_name,
                outcome,
                invocation_id,
                duration_ms,
            )
        else:
            logger.error(
                "Executed 'Functions.%s' (%s, Id=%s, Duration=%dms) %s",
                function_name,
                outcome,
                invocation_id,
                duration_ms,
                detail,
            )
        with self._changed:
            self._records.append(record)
            self._count += 1
            if self._predicate_waiters or any(self._count >= target for target in self._count_targets):
                self._changed.notify_all()
        return record

    @property
    def records(self) -> list[InvocationRecord]:
        """A snapshot of the kept invocations (the last ``retain``), oldest first."""
        with self._changed:
            return list(self._records)

    @property
    def count(self) -> int:
        """How many invocations have finished, kept or not."""
        with self._changed:
            return self._count

    def wait_for(
        self, condition: int | Callable[[list[InvocationRecord]], bool], timeout: float = 30.0
    ) -> list[InvocationRecord]:
        """Block until ``condition`` holds -- a count of finished invocations, or a predicate over the kept
        records -- and return the kept records; TimeoutError if it does not within ``timeout``."""
        deadline = time.monotonic() + timeout

        def satisfied() -> bool:
            if isinstance(condition, int):
                return self._count >= condition
            return condition(list(self._records))

        with self._changed:
            if isinstance(condition, int):
                self._count_targets.append(condition)
            else:
                self._predicate_waiters += 1
            try:
                while not satisfied():
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise TimeoutError(
                            f"invocations did not reach the expected state within {timeout} s; "
                            f"have {self._count}: {list(self._records)[-5:]}"
                        )
                    self._changed.wait(remaining)
            finally:
                if isinstance(condition, int):
                    self._count_targets.remove(condition)
                else:
                    self._predicate_waiters -= 1
            return list(self._records)
