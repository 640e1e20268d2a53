"""How the host talks to the worker that runs the function code: a :class:`WorkerChannel`.

Everything that crosses it is a ``devhost.worker_protocol`` value or a FunctionRpc message. Two channels:
by default ``devhost.process_worker.ProcessWorker`` (the worker in its own process, as in Azure) and, for
debuggers and tests that read the app's in-memory state, ``devhost.in_process_worker.InProcessWorker``
(same process, every value pickled on the way).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Protocol

from devhost.worker_protocol import FunctionMetadata, InvocationOutcome, InvocationRequest
from devhost.worker_restarts import WorkerLimits


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """What a worker needs to start: the app, the app settings (its environment; the host resolves the
    ``%expr%`` bindings against them), host.json's functionTimeout, ``PYTHON_THREADPOOL_THREAD_COUNT``
    (the in-process worker's pool; a worker process's runtime reads the setting) and the bounds on a
    worker process's start-up and restarts (the Functions host's unless a test shortens them)."""

    app_path: Path
    settings: dict[str, str]
    function_timeout: timedelta | None = None
    thread_count: int | None = None
    limits: WorkerLimits = field(default_factory=WorkerLimits)


class WorkerChannel(Protocol):
    """The worker as the host sees it."""

    @property
    def shares_loop(self) -> bool:
        """Whether coroutine functions run on the host's own event loop (in-process): a settlement they
        ask for over gRPC must then wait until they return, the loop being busy with them."""
        ...

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
