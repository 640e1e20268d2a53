"""The worker channel that runs the worker in this process -- and the one host-side module that may import
``devhost.worker``.

The host reads its index from the runtime's ``RpcFunctionMetadata`` as with a worker process
(``devhost.function_indexing``; serialised on the way), and every request and outcome goes through
``pickle.loads(pickle.dumps(...))``, so nothing but plain protocol values can cross (an SDK object or a
live reference would fail or be copied here, as it would between processes), and running the worker in
its own process only swaps the transport. What this channel adds, the host never learns in Azure: which
functions are coroutines and which parameter settles messages itself, because here they run on the
host's own loop (their gRPC settlements must wait until they return, and the Settlement service must run).
"""

from __future__ import annotations

import pickle
from dataclasses import replace

from devhost.function_indexing import index_functions
from devhost.rpc.protos import load as load_protos
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

    def __init__(self, worker: FunctionWorker, functions: list[FunctionMetadata]) -> None:
        self._worker = worker
        self._functions = functions

    def functions(self) -> list[FunctionMetadata]:
        """The app's functions, as the host read them from what the runtime indexed."""
        return list(self._functions)

    async def invoke(self, request: InvocationRequest) -> InvocationOutcome:
        """Run one invocation on the worker."""
        return across(await self._worker.invoke(across(request)))

    async def close(self) -> None:
        """Stop the worker's threads."""
        self._worker.close()


def _with_loop_facts(function: FunctionMetadata, worker: FunctionWorker) -> FunctionMetadata:
    """``function`` with what the in-process host needs of its code: a coroutine? a settling parameter?"""
    [spec] = [spec for spec in worker.functions() if spec.name == function.name]
    service_bus = function.service_bus
    if service_bus is not None:
        service_bus = replace(service_bus, actions_arg=spec.runtime.settlement_client_arg)
    return replace(function, is_async=spec.is_async, service_bus=service_bus)


def start_worker(options: WorkerOptions) -> InProcessWorker:
    """Import and index the app in a worker, and read the host's index from what it indexed; raises
    AppLoadError or BindingError as with a worker process."""
    worker = FunctionWorker.load(
        options.app_path, timeout=options.function_timeout, thread_count=options.thread_count
    )
    protos = load_protos()
    try:
        # Serialised and parsed back, as the metadata crosses from a worker process.
        metadata = [protos.RpcFunctionMetadata.FromString(m.SerializeToString()) for m in worker.indexed()]
        indexed = index_functions(metadata, options.settings)
    except BaseException:
        worker.close()
        raise
    return InProcessWorker(worker, [_with_loop_facts(function, worker) for function in indexed])
