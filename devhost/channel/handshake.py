"""How the host starts a worker and learns the app, in FunctionRpc messages, as the Functions host's
``GrpcWorkerChannel`` does (azure-functions-host, ``src/WebJobs.Script.Grpc/Channel/GrpcWorkerChannel.cs``):

1. ``WorkerInitRequest`` (the app's directory): the worker starts; the Python runtime imports and indexes
   the app here. A failed ``WorkerInitResponse`` is logged as the host logs it ("Initializing worker
   process failed", with the worker's exception as ``RpcException`` formats it) and refuses start-up.
2. ``FunctionsMetadataRequest``: the worker's ``RpcFunctionMetadata`` per function, which the host reads
   into its own index (:mod:`devhost.channel.function_indexing`).
3. A ``FunctionLoadRequest`` per function: the worker loads it; a failure refuses start-up too.

``exchange`` sends one ``StreamingMessage`` and returns the worker's answer; it is the channel's.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devhost.channel.function_indexing import AppLoadError, index_functions
from devhost.channel.protocol import FunctionMetadata
from devhost.channel.protos import load as load_protos

logger = logging.getLogger("devhost.Worker")

# The Functions host version devhost's behaviour follows (what a worker is told it talks to).
HOST_VERSION = "4.1040.0"

Exchange = Callable[[Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class IndexedApp:
    """What the host learned from a started worker: the runtime that runs the app, and its functions."""

    runtime_version: str  # the worker's version: azure-functions-runtime's, for Python 3.13+
    python_version: str
    functions: list[FunctionMetadata]


def _request(**content: Any) -> Any:
    return load_protos().StreamingMessage(request_id=str(uuid.uuid4()), **content)


def _failure(result: Any) -> str | None:
    """The worker's exception message if ``result`` (a ``StatusResult``) says it failed, else None."""
    protos = load_protos()
    if result.status == protos.StatusResult.Success:
        return None
    if result.status == protos.StatusResult.Cancelled:
        return "the operation was cancelled"
    return str(result.exception.message)


def _rpc_exception(result: Any) -> str:
    """The text of the host's ``RpcException`` for a failed ``StatusResult``."""
    status = load_protos().StatusResult.Status.Name(result.status)
    return f"Result: {status}\nException: {result.exception.message}\nStack: {result.exception.stack_trace}"


async def start_worker(
    exchange: Exchange,
    app_path: Path,
    settings: Mapping[str, str],
    log_categories: Mapping[str, int] | None = None,
) -> IndexedApp:
    """Init the worker on ``app_path``'s directory, read its functions, load each. ``log_categories``:
    the host's log levels (``RpcLog.Level`` by category) the worker is told. Raises AppLoadError when the
    worker cannot index or load the app, BindingError or AppLoadError when the host refuses what it
    indexed."""
    protos = load_protos()
    directory = str(app_path.resolve().parent)
    init = (
        await exchange(
            _request(
                worker_init_request=protos.WorkerInitRequest(
                    host_version=HOST_VERSION,
                    function_app_directory=directory,
                    log_categories=dict(log_categories or {}),
                )
            )
        )
    ).worker_init_response
    failure = _failure(init.result)
    if failure is not None:
        logger.error("Initializing worker process failed\n%s", _rpc_exception(init.result))
        raise AppLoadError(f"indexing {app_path.resolve()} failed: {failure}")
    answer = (
        await exchange(
            _request(
                functions_metadata_request=protos.FunctionsMetadataRequest(function_app_directory=directory)
            )
        )
    ).function_metadata_response
    failure = _failure(answer.result)
    if failure is not None:
        logger.error("Worker failed to index functions\n%s", _rpc_exception(answer.result))
        raise AppLoadError(f"indexing {app_path.resolve()} failed: {failure}")
    functions = index_functions(list(answer.function_metadata_results), settings)
    for metadata in answer.function_metadata_results:
        loaded = (
            await exchange(
                _request(
                    function_load_request=protos.FunctionLoadRequest(
                        function_id=metadata.function_id, metadata=metadata
                    )
                )
            )
        ).function_load_response
        failure = _failure(loaded.result)
        if failure is not None:
            logger.error("Loading function failed.\n%s", _rpc_exception(loaded.result))
            raise AppLoadError(f"The '{metadata.name}' function is in error: {failure}")
    worker = init.worker_metadata
    return IndexedApp(str(worker.worker_version), str(worker.runtime_version), functions)
