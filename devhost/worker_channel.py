"""How the host talks to the worker that runs the function code: a :class:`WorkerChannel`.

Everything that crosses it is a ``devhost.worker_protocol`` value. Today the only channel is
``devhost.in_process_worker.InProcessWorker`` (same process, every value pickled on the way); running the
worker in its own process, as in Azure, only needs another channel.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Protocol

from devhost.worker_protocol import FunctionMetadata, InvocationOutcome, InvocationRequest


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """What a worker needs to start: the app, the settings its ``%expr%`` bindings resolve against,
    host.json's functionTimeout and ``PYTHON_THREADPOOL_THREAD_COUNT``."""

    app_path: Path
    settings: dict[str, str]
    function_timeout: timedelta | None = None
    thread_count: int | None = None


class WorkerChannel(Protocol):
    """The worker as the host sees it."""

    def functions(self) -> list[FunctionMetadata]:
        """The app's functions, as the worker indexed them."""
        ...

    async def invoke(self, request: InvocationRequest) -> InvocationOutcome:
        """Run one invocation. A failing function is a failed outcome, not an exception; cancelling the
        call cancels the invocation."""
        ...

    def close(self) -> None:
        """Stop the worker (running functions finish first)."""
        ...
