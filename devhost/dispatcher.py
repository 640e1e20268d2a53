"""The host's side of an invocation: log ``Executing``, send the request through the worker channel, log
``Executed`` and keep the record (with what the worker bound and the Settlement gRPC calls the host saw).

Never raises for a failing function, for input the host cannot build, or for a channel that fails: each
is a failed invocation (so triggers can abandon). Cancelling it cancels the invocation, logged as failed.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

from devhost.channel.process_worker import ProcessWorker
from devhost.channel.protocol import FunctionMetadata, InvocationInput, InvocationOutcome, InvocationRequest
from devhost.invocation_log import InvocationLog, InvocationRecord


def _failed(exc: Exception) -> InvocationOutcome:
    return InvocationOutcome(False, str(exc), type(exc).__name__)


class Dispatcher:
    """Runs invocations through ``channel`` and records them in ``log``."""

    def __init__(self, channel: ProcessWorker, log: InvocationLog) -> None:
        self.channel = channel
        self.log = log

    async def invoke(
        self,
        function: FunctionMetadata,
        data: InvocationInput | Callable[[], InvocationInput],
        *,
        reason: str,
        settlement_calls: Callable[[], tuple[str, ...]] | None = None,
    ) -> tuple[InvocationRecord, InvocationOutcome]:
        """Invoke ``function`` with ``data`` (or a callable building it, called once the invocation has
        started, so a failure to build it fails the invocation); the record and the worker's outcome."""
        name = function.name
        invocation_id = str(uuid.uuid4())
        started = self.log.started(name, invocation_id, reason)
        try:
            request = InvocationRequest(name, invocation_id, data() if callable(data) else data)
            outcome = await self.channel.invoke(request)
        except asyncio.CancelledError:
            self.log.finished(name, invocation_id, reason, started, "RuntimeError: cancelled")
            raise
        except Exception as exc:
            outcome = _failed(exc)
        record = self.log.finished(
            name,
            invocation_id,
            reason,
            started,
            outcome.error_detail,
            bound=outcome.bound,
            settlement_calls=settlement_calls() if settlement_calls is not None else (),
        )
        return record, outcome
