"""The worker process's side of the channel: the runtime answers the host's start-up requests, then runs
invocations as the host sends them.

As Azure's Python proxy worker does, the process hands the host's FunctionRpc requests to
``azure_functions_runtime`` (``devhost.rpc.runtime_driver``): ``worker_init_request`` (the runtime imports
and indexes the app), ``functions_metadata_request`` (what it indexed) and ``function_load_request``. Then
it runs on its own event loop: every invocation becomes a task, run by the runtime's ``invocation_request``
(``devhost.rpc.runtime_invocation``; coroutine functions on this loop, plain ones in the runtime's thread
pool; functionTimeout as devhost bounds it), and each outcome goes back tagged with its invocation id as
soon as it is known, in whatever order invocations finish. Log records are forwarded to the host, which
logs them as its own (the Python worker streams them to the host in Azure). The process's ``sys.argv``
carries the worker arguments the host started it with (``--host``/``--port``/
``--functions-grpc-max-message-length``): the binding extension's ``ServiceBusMessageActions`` reads them
to reach the host's Settlement service.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from datetime import timedelta

from devhost.rpc.runtime_driver import RuntimeDriver
from devhost.rpc.runtime_invocation import RuntimeInvocations, current_invocation
from devhost.worker_frames import (
    CancelInvocation,
    InvocationDone,
    RpcMessage,
    ShutdownWorker,
    StartWorker,
    WorkerLog,
    encode,
    read_frame,
)
from devhost.worker_protocol import InvocationOutcome, InvocationRequest

logger = logging.getLogger("devhost.worker")


# The Python worker's system log categories (azure_functions_worker/logging.py, is_system_log_category):
# the worker's own loggers and the library/runtime's ("azure.functions"); everything else is the app's.
_SYSTEM_LOG_PREFIXES = ("azure_functions_worker", "azure.functions")


def is_system_log(logger_name: str) -> bool:
    """Whether a record of ``logger_name`` is a system log (the host keeps those off the console)."""
    return logger_name.lower().startswith(_SYSTEM_LOG_PREFIXES)


class _ForwardLogs(logging.Handler):
    """Sends each record to the host; callable from any thread (writes happen on the loop)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, writer: asyncio.StreamWriter) -> None:
        super().__init__()
        self._loop = loop
        self._writer = writer

    def emit(self, record: logging.LogRecord) -> None:
        try:
            invocation = current_invocation()
            frame = encode(
                WorkerLog(
                    record.name,
                    record.levelno,
                    self.format(record),
                    invocation_id=None if invocation is None else invocation[0],
                    function_name=None if invocation is None else invocation[1],
                    system=is_system_log(record.name),
                )
            )
            self._loop.call_soon_threadsafe(self._write, frame)
        except RuntimeError:  # the loop has closed: the process is exiting
            pass
        except Exception:
            self.handleError(record)

    def _write(self, frame: bytes) -> None:
        if not self._writer.is_closing():
            self._writer.write(frame)


class _Serving:
    """One connection to the host."""

    def __init__(self, writer: asyncio.StreamWriter, timeout: timedelta | None) -> None:
        self.writer = writer
        self.timeout = timeout
        self.driver = RuntimeDriver()
        self.invocations: RuntimeInvocations | None = None  # once the runtime has indexed the app
        self.running: dict[str, asyncio.Task[None]] = {}

    async def answer(self, frame: RpcMessage) -> None:
        """Hand one host request to the runtime and send its answer back."""
        protos = self.driver.protos
        message = protos.StreamingMessage.FromString(frame.data)
        if not self.driver.handles(message):
            logger.warning("Ignoring a %s the worker does not handle", message.WhichOneof("content"))
            return
        answer = await self.driver.handle(message)
        if answer.WhichOneof("content") == "function_metadata_response" and self.invocations is None:
            indexed = answer.function_metadata_response.function_metadata_results
            self.invocations = RuntimeInvocations(list(indexed), timeout=self.timeout)
        if not self.writer.is_closing():
            self.writer.write(encode(RpcMessage(answer.SerializeToString())))

    def start(self, request: InvocationRequest) -> None:
        task = asyncio.create_task(self._run(request), name=f"invocation-{request.invocation_id}")
        self.running[request.invocation_id] = task
        task.add_done_callback(lambda _: self.running.pop(request.invocation_id, None))

    async def _run(self, request: InvocationRequest) -> None:
        if self.invocations is None:
            outcome = InvocationOutcome(False, "the app is not indexed", "LookupError")
        else:
            outcome = await self.invocations.invoke(request)
        if not self.writer.is_closing():
            self.writer.write(encode(InvocationDone(request.invocation_id, outcome)))

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
    start = await read_frame(reader)
    if not isinstance(start, StartWorker):
        return False
    root = logging.getLogger()
    root.setLevel(start.log_level)
    for name, level in start.logger_levels.items():
        logging.getLogger(name).setLevel(level)
    root.addHandler(_ForwardLogs(asyncio.get_running_loop(), writer))
    timeout = (
        None if start.function_timeout_seconds is None else timedelta(seconds=start.function_timeout_seconds)
    )
    serving = _Serving(writer, timeout)
    stopped = False
    while True:
        frame = await read_frame(reader)
        if isinstance(frame, InvocationRequest):
            serving.start(frame)
        elif isinstance(frame, RpcMessage):
            await serving.answer(frame)
        elif isinstance(frame, CancelInvocation):
            serving.cancel(frame.invocation_id)
        elif isinstance(frame, ShutdownWorker):
            stopped = True
            break
        elif frame is None:
            break
    if stopped:  # running functions finish first, and their outcomes still go out
        await asyncio.gather(*serving.running.values(), return_exceptions=True)
        serving.close()
        with contextlib.suppress(ConnectionError):
            await writer.drain()
    else:  # the host is gone: nobody waits for an outcome
        for task in list(serving.running.values()):
            task.cancel()
    writer.close()
    return stopped


def run(channel_fd: int) -> None:
    """The process's main: serve, then exit (at once if the host went away, not waiting for threads
    stuck in function code)."""
    stopped = asyncio.run(serve(channel_fd))
    if not stopped:
        logging.shutdown()
        os._exit(0)
