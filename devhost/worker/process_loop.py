"""The worker process's side of the channel: FunctionRpc messages from the host, handed to
``azure_functions_runtime`` as Azure's Python proxy worker hands them.

The host's start-up requests go to the runtime's entry points (``devhost.worker.runtime_driver``):
``worker_init_request`` (the runtime imports and indexes the app; the request's ``log_categories`` set
which records this process forwards), ``functions_metadata_request`` (what it indexed) and
``function_load_request``. Then the process runs on its own event loop: every ``InvocationRequest`` becomes
a task, run by the runtime's ``invocation_request`` (``devhost.worker.runtime_invocation``; coroutine
functions on this loop, plain ones in the runtime's thread pool; functionTimeout as devhost bounds it), and
each ``InvocationResponse`` goes back as soon as it is known, in whatever order invocations finish.
``InvocationCancel`` cancels a running invocation's task; ``WorkerTerminate`` lets the running ones finish
and ends the process. Log records go to the host as ``RpcLog``s, tagged with their invocation and marked
system or user as the Python worker marks them. The process's ``sys.argv`` carries the worker arguments the
host started it with (``--host``/``--port``/``--functions-grpc-max-message-length``): the binding
extension's ``ServiceBusMessageActions`` reads them to reach the host's Settlement service.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import socket
from typing import Any

from devhost.channel.frames import (
    BOUND_ARGUMENTS_CATEGORY,
    ROOT_LOG_CATEGORY,
    FrameWriter,
    encode,
    python_level,
    read_frame,
    rpc_level,
)
from devhost.channel.protos import load as load_protos
from devhost.worker.runtime_driver import RuntimeDriver
from devhost.worker.runtime_invocation import RuntimeInvocations, current_invocation

logger = logging.getLogger("devhost.worker")


# The Python worker's system log categories (azure_functions_worker/logging.py, is_system_log_category):
# the worker's own loggers and the library/runtime's ("azure.functions"); everything else is the app's.
_SYSTEM_LOG_PREFIXES = ("azure_functions_worker", "azure.functions")


def is_system_log(logger_name: str) -> bool:
    """Whether a record of ``logger_name`` is a system log (the host keeps those off the console)."""
    return logger_name.lower().startswith(_SYSTEM_LOG_PREFIXES)


class _ForwardLogs(logging.Handler):
    """Sends each record to the host as an ``RpcLog``; callable from any thread (writes happen on the
    loop)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, frames: FrameWriter) -> None:
        super().__init__()
        self._loop = loop
        self._frames = frames
        self._protos = load_protos()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            invocation = current_invocation()
            protos = self._protos
            log = protos.RpcLog(
                invocation_id="" if invocation is None else invocation[0],
                category=record.name,
                level=rpc_level(record.levelno),
                message=self.format(record),
                log_category=protos.RpcLog.System if is_system_log(record.name) else protos.RpcLog.User,
            )
            frame = encode(protos.StreamingMessage(rpc_log=log))
            self._loop.call_soon_threadsafe(self._write, frame)
        except RuntimeError:  # the loop has closed: the process is exiting
            pass
        except Exception:
            self.handleError(record)

    def _write(self, frame: bytes) -> None:
        self._frames.send_frame(frame)


@functools.lru_cache(maxsize=256)
def _bound_json(bound: tuple[tuple[str, str], ...]) -> str:
    """The bound-arguments log's properties (a function binds the same classes invocation after
    invocation: made once)."""
    return json.dumps(dict(bound))


def _apply_log_categories(categories: Any) -> None:
    """Set this process's log levels from the init request's ``log_categories`` (the host's levels)."""
    for category, level in categories.items():
        target = logging.getLogger() if category == ROOT_LOG_CATEGORY else logging.getLogger(category)
        target.setLevel(python_level(level))


class _Serving:
    """One connection to the host."""

    def __init__(self, frames: FrameWriter) -> None:
        self.frames = frames
        self.protos = load_protos()
        self.driver = RuntimeDriver()
        self.invocations: RuntimeInvocations | None = None  # once the runtime has indexed the app
        self.running: dict[str, asyncio.Task[None]] = {}

    def _send(self, message: Any) -> None:
        self.frames.send(message)

    async def answer(self, message: Any) -> None:
        """Hand one host start-up request to the runtime and send its answer back."""
        if message.WhichOneof("content") == "worker_init_request":
            _apply_log_categories(message.worker_init_request.log_categories)
        answer = await self.driver.handle(message)
        if answer.WhichOneof("content") == "function_metadata_response" and self.invocations is None:
            indexed = answer.function_metadata_response.function_metadata_results
            self.invocations = RuntimeInvocations(list(indexed))
        self._send(answer)

    def start(self, message: Any) -> None:
        invocation_id = message.invocation_request.invocation_id
        task = asyncio.create_task(self._run(message), name=f"invocation-{invocation_id}")
        self.running[invocation_id] = task
        task.add_done_callback(lambda _: self.running.pop(invocation_id, None))

    async def _run(self, message: Any) -> None:
        protos = self.protos
        invocation_id = message.invocation_request.invocation_id
        if self.invocations is None:
            failure = protos.RpcException(message="LookupError: the app is not indexed")
            response = protos.InvocationResponse(
                invocation_id=invocation_id,
                result=protos.StatusResult(status=protos.StatusResult.Failure, exception=failure),
            )
            bound: tuple[tuple[str, str], ...] = ()
        else:
            response, bound = await self.invocations.invoke(message)
        if bound:
            log = protos.RpcLog(
                invocation_id=invocation_id,
                category=BOUND_ARGUMENTS_CATEGORY,
                level=protos.RpcLog.Trace,
                properties=_bound_json(bound),
                log_category=protos.RpcLog.System,
            )
            self._send(protos.StreamingMessage(rpc_log=log))
        self._send(protos.StreamingMessage(request_id=message.request_id, invocation_response=response))

    def cancel(self, invocation_id: str) -> None:
        task = self.running.get(invocation_id)
        if task is not None:
            task.cancel()

    def close(self) -> None:
        if self.invocations is not None:
            self.invocations.close()


async def serve(channel_fd: int) -> bool:
    """Serve the host on ``channel_fd`` until it says stop (True) or goes away (False)."""
    sock = socket.socket(fileno=channel_fd)
    reader, writer = await asyncio.open_connection(sock=sock)
    frames = FrameWriter(writer)
    logging.getLogger().addHandler(_ForwardLogs(asyncio.get_running_loop(), frames))
    serving = _Serving(frames)
    stopped = False
    while True:
        message = await read_frame(reader)
        if message is None:
            break
        kind = message.WhichOneof("content")
        if kind == "invocation_request":
            serving.start(message)
        elif kind == "invocation_cancel":
            serving.cancel(message.invocation_cancel.invocation_id)
        elif kind == "worker_terminate":
            stopped = True
            break
        elif serving.driver.handles(message):
            await serving.answer(message)
        else:
            logger.warning("Ignoring a %s the worker does not handle", kind)
    if stopped:  # running functions finish first, and their outcomes still go out
        await asyncio.gather(*serving.running.values(), return_exceptions=True)
        serving.close()
        frames.flush()
        with contextlib.suppress(ConnectionError):
            await writer.drain()
    else:  # the host is gone: nobody waits for an outcome
        for task in list(serving.running.values()):
            task.cancel()
    frames.flush()
    writer.close()
    return stopped


def run(channel_fd: int) -> None:
    """The process's main: serve, then exit (at once if the host went away, not waiting for threads
    stuck in function code)."""
    stopped = asyncio.run(serve(channel_fd))
    if not stopped:
        logging.shutdown()
        os._exit(0)
