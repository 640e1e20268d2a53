"""How the host talks to the worker that runs the function code: a :class:`WorkerChannel`.

Everything that crosses it is a ``devhost.channel.protocol`` value or a FunctionRpc message. The channel is
``devhost.channel.process_worker.ProcessWorker``: the worker in its own process, as in Azure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Protocol

from devhost.channel.protocol import FunctionMetadata, InvocationOutcome, InvocationRequest
from devhost.channel.restarts import WorkerLimits


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """What a worker needs to start: the app, the app settings (its environment; the runtime reads
    ``PYTHON_THREADPOOL_THREAD_COUNT`` there, and the host resolves the ``%expr%`` bindings against them),
    host.json's functionTimeout and the bounds on a worker process's start-up and restarts (the Functions
    host's unless a test shortens them)."""

    app_path: Path
    settings: dict[str, str]
    function_timeout: timedelta | None = None
    limits: WorkerLimits = field(default_factory=WorkerLimits)


class WorkerChannel(Protocol):
    """The worker as the host sees it."""

    def functions(self) -> list[FunctionMetadata]:
        """The app's functions, as the host read them from the worker's ``RpcFunctionMetadata``."""
        ...

    async def invoke(self, request: InvocationRequest) -> InvocationOutcome:
        """Run one invocation. A failing function is a failed outcome, not an exception; cancelling the
        call cancels the invocation."""
        ...

    async def close(self) -> None:
        """Stop the worker (running functions finish first)."""
        ...
