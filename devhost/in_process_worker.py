"""The worker channel that runs the worker in this process -- and the one host-side module that may import
``devhost.worker``.

Every request and outcome goes through ``pickle.loads(pickle.dumps(...))``, so nothing but plain protocol
values can cross (an SDK object or a live reference would fail or be copied here, as it would between
processes), and running the worker in its own process only swaps the transport.
"""

from __future__ import annotations

import pickle

from devhost.worker.function_worker import FunctionWorker
from devhost.worker_channel import WorkerOptions
from devhost.worker_protocol import FunctionMetadata, InvocationOutcome, InvocationRequest


def across[T](value: T) -> T:
    """``value`` as the other side receives it: pickled and unpickled."""
    copy: T = pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    return copy


class InProcessWorker:
    """A :class:`~devhost.worker_channel.WorkerChannel` to a :class:`FunctionWorker` in this process."""

    shares_loop = True  # coroutine functions run on the host's loop

    def __init__(self, worker: FunctionWorker) -> None:
        self._worker = worker

    def functions(self) -> list[FunctionMetadata]:
        """The app's functions, as the worker indexed them."""
        return across(self._worker.functions())

    async def invoke(self, request: InvocationRequest) -> InvocationOutcome:
        """Run one invocation on the worker."""
        return across(await self._worker.invoke(across(request)))

    async def close(self) -> None:
        """Stop the worker's threads."""
        self._worker.close()


def start_worker(options: WorkerOptions) -> InProcessWorker:
    """Import and index the app in a worker; raises the worker's start-up error (AppLoadError,
    BindingError, ValueError) as the host reports it."""
    worker = FunctionWorker.load(
        options.app_path,
        options.settings,
        timeout=options.function_timeout,
        thread_count=options.thread_count,
    )
    return InProcessWorker(worker)
