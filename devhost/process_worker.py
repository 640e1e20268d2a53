"""The worker channel that runs the function code in its own process, as the Functions host runs the
Python worker: ``python -m devhost.worker --host 127.0.0.1 --port <Settlement gRPC port>
--functions-grpc-max-message-length <n>``, plus a socket pair of its own (``devhost.worker_frames``).

The worker gets the app settings as its environment and in its start frame, imports and indexes the app
and runs invocations concurrently; this side matches outcomes to invocations by id. If the process dies,
every invocation in flight fails with :class:`WorkerProcessExited` (so its messages are abandoned, as for
any failure: nothing is lost) and a new worker is started, as the host restarts a language worker. The
function code then shares no interpreter (nor GIL) with the receive loops, HTTP server and gRPC service.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from devhost.worker_channel import WorkerOptions
from devhost.worker_frames import (
    CHANNEL_FD_ARGUMENT,
    CancelInvocation,
    InvocationDone,
    ShutdownWorker,
    StartWorker,
    WorkerLog,
    WorkerReady,
    WorkerStartFailed,
    encode,
    read_frame,
)
from devhost.worker_protocol import FunctionMetadata, InvocationOutcome, InvocationRequest

logger = logging.getLogger("devhost.Worker")

EXIT_WAIT_SECONDS = 10.0  # after ShutdownWorker (in-flight invocations are drained before): then killed
# The directory holding the devhost package: the worker imports it however the host was started.
_SOURCE_ROOT = str(Path(__file__).resolve().parents[1])


class WorkerProcessExited(RuntimeError):
    """The worker process ended while the invocation ran (crashed, killed, or exited)."""


class _Process:
    """One worker process and its end of the channel."""

    def __init__(
        self, popen: subprocess.Popen[bytes], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.popen = popen
        self.reader = reader
        self.writer = writer
        self.pending: dict[str, asyncio.Future[InvocationOutcome]] = {}
        self.alive = True

    def send(self, value: object) -> None:
        if self.alive and not self.writer.is_closing():
            self.writer.write(encode(value))

    async def exit_code(self, wait: float) -> int | None:
        """The process's exit code, waiting up to ``wait`` seconds for it."""
        try:
            return await asyncio.to_thread(self.popen.wait, wait)
        except subprocess.TimeoutExpired:
            return None


def _environment(settings: dict[str, str]) -> dict[str, str]:
    environment = {**os.environ, **settings}
    python_path = environment.get("PYTHONPATH")
    environment["PYTHONPATH"] = os.pathsep.join(p for p in (_SOURCE_ROOT, python_path) if p)
    return environment


class ProcessWorker:
    """A :class:`~devhost.worker_channel.WorkerChannel` to a worker process (restarted if it dies)."""

    shares_loop = False  # the functions run on the worker's loop, not the host's

    def __init__(self, options: WorkerOptions, worker_arguments: list[str]) -> None:
        self._options = options
        self._arguments = worker_arguments
        self._functions: list[FunctionMetadata] = []
        self._current: asyncio.Task[_Process] | None = None
        self._readers: set[asyncio.Task[None]] = set()
        self._closing = False
        self.restarts = 0

    @classmethod
    async def start(cls, options: WorkerOptions, worker_arguments: list[str]) -> ProcessWorker:
        """Start the worker process and wait until it has indexed the app; raises its start-up error
        (AppLoadError, BindingError, ValueError) as the worker raised it."""
        channel = cls(options, worker_arguments)
        channel._current = asyncio.ensure_future(channel._spawn())
        await channel._current
        return channel

    def functions(self) -> list[FunctionMetadata]:
        """The app's functions, as the worker indexed them."""
        return list(self._functions)

    @property
    def pid(self) -> int | None:
        """The current worker process's id (None while none runs)."""
        current = self._current
        if current is None or not current.done() or current.cancelled() or current.exception() is not None:
            return None
        return current.result().popen.pid

    async def _spawn(self) -> _Process:
        options = self._options
        host_end, worker_end = socket.socketpair()
        try:
            popen = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "devhost.worker",
                    *self._arguments,
                    CHANNEL_FD_ARGUMENT,
                    str(worker_end.fileno()),
                ],
                pass_fds=(worker_end.fileno(),),
                env=_environment(options.settings),
            )
        except BaseException:
            host_end.close()
            raise
        finally:
            worker_end.close()
        try:
            return await self._handshake(popen, host_end)
        except BaseException:
            if popen.poll() is None:  # cancelled or failed half-way: no orphan worker
                popen.kill()
            raise

    async def _handshake(self, popen: subprocess.Popen[bytes], host_end: socket.socket) -> _Process:
        options = self._options
        reader, writer = await asyncio.open_connection(sock=host_end)
        process = _Process(popen, reader, writer)
        timeout = options.function_timeout
        process.send(
            StartWorker(
                app_path=str(options.app_path),
                settings=dict(options.settings),
                function_timeout_seconds=None if timeout is None else timeout.total_seconds(),
                thread_count=options.thread_count,
                log_level=logging.getLogger().getEffectiveLevel(),
                logger_levels=_logger_levels(),
            )
        )
        while True:
            frame = await read_frame(reader)
            if isinstance(frame, WorkerLog):
                _relog(frame)
                continue
            break
        if isinstance(frame, WorkerReady):
            self._functions = frame.functions
            reading = asyncio.create_task(self._read(process), name=f"devhost-worker-{popen.pid}")
            self._readers.add(reading)
            reading.add_done_callback(self._readers.discard)
            logger.info("Worker process %d started", popen.pid)
            return process
        writer.close()
        code = await process.exit_code(EXIT_WAIT_SECONDS)
        if isinstance(frame, WorkerStartFailed):
            raise frame.error
        raise WorkerProcessExited(f"the worker process exited with code {code} before it indexed the app")

    async def _read(self, process: _Process) -> None:
        """Hand outcomes to their invocations until the process goes away; then fail what is left."""
        while True:
            frame = await read_frame(process.reader)
            if frame is None:
                break
            if isinstance(frame, InvocationDone):
                future = process.pending.pop(frame.invocation_id, None)
                if future is not None and not future.done():
                    future.set_result(frame.outcome)
            elif isinstance(frame, WorkerLog):
                _relog(frame)
        process.alive = False
        process.writer.close()
        restarting = not self._closing
        if restarting:  # at once: invocations arriving meanwhile wait for the new worker
            self.restarts += 1
            self._current = asyncio.ensure_future(self._spawn())
            self._current.add_done_callback(_log_restart_failure)
        code = await process.exit_code(EXIT_WAIT_SECONDS)
        lost = list(process.pending.values())
        process.pending.clear()
        if restarting:
            reason = f"the worker process exited with code {code} while the invocation ran"
            # As the Functions host restarts a language worker that died.
            logger.error(
                "Worker process %d exited with code %s; %d invocation(s) in flight failed; "
                "starting a new one",
                process.popen.pid,
                code,
                len(lost),
            )
        else:
            reason = f"the worker process stopped (exit code {code}) while the invocation ran"
        for future in lost:
            if not future.done():
                future.set_exception(WorkerProcessExited(reason))

    async def _process(self) -> _Process:
        current = self._current
        if current is None or self._closing:
            raise WorkerProcessExited("the worker is closed")
        if current.done() and (current.cancelled() or current.exception() is not None):
            # The last restart failed: try again for this invocation.
            current = self._current = asyncio.ensure_future(self._spawn())
        return await asyncio.shield(current)

    async def invoke(self, request: InvocationRequest) -> InvocationOutcome:
        """Run one invocation in the worker process; cancelling it cancels the invocation there."""
        process = await self._process()
        if not process.alive:  # it died a moment ago; its restart is under way
            process = await self._process()
        if not process.alive:
            raise WorkerProcessExited("the worker process exited before the invocation started")
        future: asyncio.Future[InvocationOutcome] = asyncio.get_running_loop().create_future()
        process.pending[request.invocation_id] = future
        process.send(request)
        try:
            return await future
        except asyncio.CancelledError:
            process.pending.pop(request.invocation_id, None)
            process.send(CancelInvocation(request.invocation_id))
            raise

    async def close(self) -> None:
        """Stop the worker process: running functions finish first (up to a bound), then it is killed."""
        self._closing = True
        current = self._current
        if current is None:
            return
        if not current.done():
            current.cancel()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            process = await current
            process.send(ShutdownWorker())
            if await process.exit_code(EXIT_WAIT_SECONDS) is None:
                logger.warning("Worker process %d did not stop; killing it", process.popen.pid)
                process.popen.kill()
                await process.exit_code(EXIT_WAIT_SECONDS)
        if self._readers:
            await asyncio.wait(self._readers, timeout=EXIT_WAIT_SECONDS)


def _logger_levels() -> dict[str, int]:
    loggers = list(logging.Logger.manager.loggerDict.items())
    return {
        name: logger.level
        for name, logger in loggers
        if isinstance(logger, logging.Logger) and logger.level != logging.NOTSET
    }


def _relog(frame: WorkerLog) -> None:
    logging.getLogger(frame.logger).log(frame.level, "%s", frame.message)


def _log_restart_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("Restarting the worker process failed: %s", task.exception())
