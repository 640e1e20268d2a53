"""Every invocation, logged the way the Functions host logs it and kept for tests and the status page.

The host writes ``Executing 'Functions.<name>' (Reason='...', Id=<guid>)`` and
``Executed 'Functions.<name>' (Succeeded|Failed, Id=<guid>, Duration=<n>ms)``; devhost writes the same.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

logger = logging.getLogger("devhost.Function")

SUCCEEDED = "Succeeded"
FAILED = "Failed"


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
    """Thread-safe record of finished invocations; other threads can wait for them."""

    def __init__(self) -> None:
        self._records: list[InvocationRecord] = []
        self._changed = threading.Condition()

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
            self._changed.notify_all()
        return record

    @property
    def records(self) -> list[InvocationRecord]:
        """A snapshot of every finished invocation, oldest first."""
        with self._changed:
            return list(self._records)

    def wait_for(
        self, condition: int | Callable[[list[InvocationRecord]], bool], timeout: float = 30.0
    ) -> list[InvocationRecord]:
        """Block until ``condition`` (a count, or a predicate over the records) holds; TimeoutError if not."""
        deadline = time.monotonic() + timeout

        def satisfied() -> bool:
            if isinstance(condition, int):  # no copy: waiters must not slow the host down
                return len(self._records) >= condition
            return condition(list(self._records))

        with self._changed:
            while not satisfied():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"invocations did not reach the expected state within {timeout} s; "
                        f"have {len(self._records)}: {self._records[-5:]}"
                    )
                self._changed.wait(remaining)
            return list(self._records)
