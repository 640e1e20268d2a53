"""The worker channel that runs the function code in its own process, as the Functions host runs the
Python worker: ``python -m devhost.worker --host 127.0.0.1 --port <Settlement gRPC port>
--functions-grpc-max-message-length <n>``, plus a socket pair of its own carrying FunctionRpc
``StreamingMessage``s (``devhost.channel.frames``).

The worker gets the app settings as its environment. The host starts it as the Functions host starts a
language worker (``devhost.channel.handshake``: init, functions metadata, a load per function): its runtime
imports and indexes the app, and the host reads its own index from what the runtime indexed. The worker
then runs invocations concurrently (``InvocationRequest`` out, ``InvocationResponse`` back:
``devhost.channel.invocation_rpc``); this side matches responses to invocations by id, and logs the worker's
``RpcLog``s as the host logs them. :class:`ProcessWorker` is the host's one worker channel: the
dispatcher, the triggers and the HTTP front end reach the function code through it alone.
If the process dies, every invocation in flight fails with :class:`WorkerProcessExited` (so its messages
are abandoned, as for any failure: nothing is lost) and a new worker is started, as the host restarts a
language worker. The function code then shares no interpreter (nor GIL) with the receive loops, HTTP
server and gRPC service.

Both are bounded as the Functions host bounds them (``devhost.channel.restarts``): a worker that has not
indexed the app in time is killed (:class:`WorkerStartTimeout`), restarts are one at a time and spaced, and
at the host's error threshold the worker is no longer restarted: invocations fail with
:class:`WorkerRestartsExhausted` and the host is asked to stop (``on_exhausted``), as the Functions host
recycles itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from devhost.channel.frames import (
    BOUND_ARGUMENTS_CATEGORY,
    CHANNEL_FD_ARGUMENT,
    FrameWriter,
    read_frame,
)
from devhost.channel.function_indexing import AppLoadError
from devhost.channel.handshake import start_worker
from devhost.channel.invocation_rpc import (
    cancel_message,
    invocation_message,
    invocation_outcome,
    terminate_message,
)
from devhost.channel.logs import log_categories, relog
from devhost.channel.protocol import FunctionMetadata, InvocationOutcome, InvocationRequest
from devhost.channel.restarts import (
    EXCEEDED_MESSAGE,
    INTENTIONAL_RESTART_EXIT_CODE,
    WorkerErrors,
    WorkerLimits,
    startup_timeout,
    timeout_phase,
)
from devhost.dotnet.values import timespan

logger = logging.getLogger("devhost.Worker")

SCRIPT_FILE_SETTING = "PYTHON_SCRIPT_FILE_NAME"
EXIT_WAIT_SECONDS = 10.0  # after WorkerTerminate (in-flight invocations are drained before): then killed
# The directory holding the devhost package: the worker imports it however the host was started.
_SOURCE_ROOT = str(Path(__file__).resolve().parents[2])


class WorkerProcessExited(RuntimeError):
    """The worker process ended while the invocation ran (crashed, killed, or exited)."""


class WorkerRestartsExhausted(WorkerProcessExited):
    """The worker failed as often as the Functions host tolerates: it is not restarted again."""


class WorkerStartTimeout(TimeoutError):
    """The worker process did not import and index the app within the host's bound (it was killed)."""


class _Process:
    """One worker process and its end of the channel."""

    def __init__(
        self, popen: subprocess.Popen[bytes], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.popen = popen
        self.reader = reader
        self.writer = writer
        self._frames = FrameWriter(writer)
        # Invocations in flight, by id: the future of the worker's InvocationResponse, the function's name
        # (what its logs are logged under), the argument classes the worker reported.
        self.pending: dict[str, asyncio.Future[Any]] = {}
        self.names: dict[str, str] = {}
        self.bound: dict[str, tuple[tuple[str, str], ...]] = {}
        self.alive = True
        self.restart_requested = False  # killed by the host (a function timeout): restarted, not counted

    def send(self, message: Any) -> None:
        """Send one ``StreamingMessage``."""
        if self.alive and not self.writer.is_closing():
            self._frames.send(message)

    def forget(self, invocation_id: str) -> None:
        self.pending.pop(invocation_id, None)
        self.names.pop(invocation_id, None)
        self.bound.pop(invocation_id, None)

    async def exit_code(self, wait: float) -> int | None:
        """The process's exit code, waiting up to ``wait`` seconds for it."""
        try:
            return await asyncio.to_thread(self.popen.wait, wait)
        except subprocess.TimeoutExpired:
            return None


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


def _environment(options: WorkerOptions) -> dict[str, str]:
    settings = options.settings
    environment = {**os.environ, **settings}
    python_path = environment.get("PYTHONPATH")
    environment["PYTHONPATH"] = os.pathsep.join(p for p in (_SOURCE_ROOT, python_path) if p)
    # The runtime imports the app's script by this app setting (function_app.py unless set): devhost
    # runs the script it was given, whatever its name.
    environment[SCRIPT_FILE_SETTING] = options.app_path.name
    return environment


class ProcessWorker:
    """The worker as the host sees it: a worker process (restarted if it dies, within the host's bounds)
    that answers the app's functions and runs invocations. ``on_exhausted`` is called once when the
    restarts are given up."""

    def __init__(
        self,
        options: WorkerOptions,
        worker_arguments: list[str],
        on_exhausted: Callable[[], None] | None = None,
    ) -> None:
        self._options = options
        self._arguments = worker_arguments
        self._on_exhausted = on_exhausted
        self._functions: list[FunctionMetadata] = []
        self._by_name: dict[str, FunctionMetadata] = {}
        self._current: asyncio.Future[_Process] | None = None
        self._readers: set[asyncio.Task[None]] = set()
        self._closing = False
        self._errors = WorkerErrors(options.limits)
        self._last_restart: float | None = None  # monotonic time the last restart finished starting
        self.restarts = 0

    @classmethod
    async def start(
        cls,
        options: WorkerOptions,
        worker_arguments: list[str],
        on_exhausted: Callable[[], None] | None = None,
    ) -> ProcessWorker:
        """Start the worker process and wait until its runtime has indexed the app and the host has read
        what it indexed; raises AppLoadError (the runtime's failure, or what the host refuses), BindingError
        or :class:`WorkerStartTimeout`."""
        if not options.app_path.is_file():
            raise AppLoadError(f"function app script not found: {options.app_path.resolve()}")
        channel = cls(options, worker_arguments, on_exhausted)
        channel._current = asyncio.ensure_future(channel._spawn(restart=False))
        await channel._current
        return channel

    def functions(self) -> list[FunctionMetadata]:
        """The app's functions, as the host read them from what the worker's runtime indexed."""
        return list(self._functions)

    @property
    def pid(self) -> int | None:
        """The current worker process's id (None while none runs)."""
        current = self._current
        if current is None or not current.done() or current.cancelled() or current.exception() is not None:
            return None
        return current.result().popen.pid

    @property
    def errors(self) -> int:
        """Worker errors counted towards the restart threshold."""
        return self._errors.count

    def _launch(self) -> tuple[subprocess.Popen[bytes], socket.socket]:
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
                env=_environment(self._options),
            )
        except BaseException:
            host_end.close()
            raise
        finally:
            worker_end.close()
        return popen, host_end

    async def _spawn(self, *, restart: bool) -> _Process:
        options = self._options
        popen, host_end = self._launch()
        try:
            reader, writer = await asyncio.open_connection(sock=host_end)
        except BaseException:
            host_end.close()
            popen.kill()
            raise
        process = _Process(popen, reader, writer)
        bound = startup_timeout(options.limits, options.settings, options.function_timeout, restart=restart)
        deadline = asyncio.timeout(None if bound is None else bound.total_seconds())
        try:
            async with deadline:
                self._functions = await self._handshake(process)
                self._by_name = {function.name.lower(): function for function in self._functions}
        except TimeoutError:
            if not deadline.expired():  # the app's own TimeoutError, raised at import
                writer.close()
                raise
            # As the host disposes of a channel whose worker did not answer in time: the process is killed
            # (and reaped, so no zombie keeps its pid).
            writer.close()
            popen.kill()
            await process.exit_code(EXIT_WAIT_SECONDS)
            assert bound is not None
            phase = timeout_phase(options.settings, restart=restart)
            logger.error("%s. The operation has timed out.", phase)
            raise WorkerStartTimeout(
                f"{phase}: the operation has timed out. The worker process {popen.pid} did not import and "
                f"index {options.app_path} within {bound.total_seconds():g} seconds and was killed. "
                "Check the app's module-level code for a call that blocks: a network call without a timeout, "
                "input(), a lock, an endless loop."
            ) from None
        except BaseException:
            writer.close()
            if popen.poll() is None:  # cancelled or failed half-way: no orphan worker
                popen.kill()
            raise
        reading = asyncio.create_task(self._read(process), name=f"devhost-worker-{popen.pid}")
        self._readers.add(reading)
        reading.add_done_callback(self._readers.discard)
        logger.info("Worker process %d started", popen.pid)
        return process

    async def _handshake(self, process: _Process) -> list[FunctionMetadata]:
        options = self._options

        async def exchange(message: Any) -> Any:
            process.send(message)
            while True:
                answer = await read_frame(process.reader)
                if answer is None:
                    process.writer.close()
                    code = await process.exit_code(EXIT_WAIT_SECONDS)
                    raise WorkerProcessExited(
                        f"the worker process exited with code {code} before it indexed the app"
                    )
                if answer.WhichOneof("content") == "rpc_log":
                    relog(answer.rpc_log, None)
                elif answer.request_id == message.request_id:
                    return answer

        try:
            indexed = await start_worker(exchange, options.app_path, options.settings, log_categories())
        except Exception:  # refused: the worker exits on the closed channel (and is reaped)
            process.writer.close()
            if await process.exit_code(EXIT_WAIT_SECONDS) is None:
                process.popen.kill()
                await process.exit_code(EXIT_WAIT_SECONDS)
            raise
        logger.info(
            "azure-functions-runtime %s runs the app's %d functions (Python %s)",
            indexed.runtime_version,
            len(indexed.functions),
            indexed.python_version,
        )
        return indexed.functions

    async def _read(self, process: _Process) -> None:
        """Hand responses to their invocations until the process goes away; then fail what is left."""
        while True:
            message = await read_frame(process.reader)
            if message is None:
                break
            kind = message.WhichOneof("content")
            if kind == "invocation_response":
                response = message.invocation_response
                future = process.pending.pop(response.invocation_id, None)
                if future is not None and not future.done():
                    future.set_result(response)
            elif kind == "rpc_log":
                log = message.rpc_log
                if log.category == BOUND_ARGUMENTS_CATEGORY:
                    if log.invocation_id in process.pending:
                        process.bound[log.invocation_id] = _bound_arguments(log.properties)
                else:
                    relog(log, process.names.get(log.invocation_id))
        process.alive = False
        process.writer.close()
        restarting = not self._closing
        if restarting:  # invocations arriving from now on wait for the restart (or its giving up)
            self._current = asyncio.ensure_future(self._restart_after(process))
            self._current.add_done_callback(_retrieve)
        code = await process.exit_code(EXIT_WAIT_SECONDS)
        lost = list(process.pending.values())
        process.pending.clear()
        if restarting:
            reason = f"the worker process exited with code {code} while the invocation ran"
            if code == INTENTIONAL_RESTART_EXIT_CODE or process.restart_requested:
                logger.info("Language Worker Process exited and needs to be restarted.")
            else:  # worded as the host's RpcWorkerProcess logs it
                logger.error(
                    "Language Worker Process exited. Pid=%d. python exited with code %s; "
                    "%d invocation(s) in flight failed",
                    process.popen.pid,
                    code,
                    len(lost),
                )
        else:
            reason = f"the worker process stopped (exit code {code}) while the invocation ran"
        for future in lost:
            if not future.done():
                future.set_exception(WorkerProcessExited(reason))

    async def _restart_after(self, process: _Process) -> _Process:
        code = await process.exit_code(EXIT_WAIT_SECONDS)
        if code is None:  # it closed the channel but lingers: it is replaced all the same
            process.popen.kill()
            code = await process.exit_code(EXIT_WAIT_SECONDS)
        # Exit code 200 asks for a restart: a WorkerRestartEvent, not counted as an error; nor is the
        # restart the host itself asked for (a function timeout).
        requested = process.restart_requested
        restarted = await self._restart(counted=code != INTENTIONAL_RESTART_EXIT_CODE and not requested)
        if requested:
            logger.warning("Restart of language worker process(es) completed.")
        return restarted

    async def _restart(self, *, counted: bool) -> _Process:
        """Start a new worker as the host's dispatcher does: each error counted, one restart at a time,
        the next no sooner than the restart interval after the last, until the threshold."""
        while True:
            if counted:
                self._errors.record(time.monotonic())
            if not self._errors.may_restart():
                raise self._give_up()
            if self._last_restart is not None:
                wait = self._last_restart + self._options.limits.restart_interval.total_seconds()
                await asyncio.sleep(max(0.0, wait - time.monotonic()))
            self.restarts += 1
            logger.info(
                "Starting a new worker process (restart %d, %d worker error(s) counted)",
                self.restarts,
                self._errors.count,
            )
            try:
                return await self._spawn(restart=True)
            except Exception as exc:  # a start-up failure or timeout is a worker error too
                logger.error("Restarting the worker process failed: %s: %s", type(exc).__name__, exc)
                counted = True
            finally:
                self._last_restart = time.monotonic()

    def _give_up(self) -> WorkerRestartsExhausted:
        logger.error(EXCEEDED_MESSAGE)
        if self._on_exhausted is not None:
            self._on_exhausted()
        return WorkerRestartsExhausted(
            f"{EXCEEDED_MESSAGE}: the worker process failed {self._errors.count} times (each within "
            f"{self._options.limits.error_window.total_seconds() / 60:g} minutes of the last) and is not "
            "restarted again; see the errors logged before"
        )

    async def _process(self) -> _Process:
        current = self._current
        if current is None or self._closing:
            raise WorkerProcessExited("the worker is closed")
        # A restart that gave up fails every invocation with its error (never restarted per invocation).
        return await asyncio.shield(current)

    async def invoke(self, request: InvocationRequest) -> InvocationOutcome:
        """Run one invocation in the worker process: a failing function is a failed outcome, not an exception;
        cancelling the call cancels the invocation there."""
        function = self._by_name.get(request.function_name.lower())
        if function is None:
            return InvocationOutcome(False, f"no function named '{request.function_name}'", "LookupError")
        message = invocation_message(function, request)
        process = await self._process()
        if not process.alive:  # it died a moment ago; its restart is under way
            process = await self._process()
        if not process.alive:
            raise WorkerProcessExited("the worker process exited before the invocation started")
        invocation_id = request.invocation_id
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        process.pending[invocation_id] = future
        process.names[invocation_id] = function.name
        process.send(message)
        try:
            async with asyncio.timeout(self._timeout_seconds) as deadline:
                response = await asyncio.shield(future)
        except TimeoutError:
            if not deadline.expired():
                raise
            return self._timed_out(process, function.name, invocation_id)
        except asyncio.CancelledError:
            process.forget(invocation_id)
            process.send(cancel_message(invocation_id))
            raise
        except BaseException:
            process.forget(invocation_id)
            raise
        bound = process.bound.pop(invocation_id, ())
        process.names.pop(invocation_id, None)
        return invocation_outcome(function, response, bound)

    @property
    def _timeout_seconds(self) -> float | None:
        timeout = self._options.function_timeout
        return None if timeout is None else timeout.total_seconds()

    def _timed_out(self, process: _Process, name: str, invocation_id: str) -> InvocationOutcome:
        """The host's answer to an invocation past functionTimeout: the invocation fails, and the worker
        process that runs it is restarted (a plain function cannot be stopped otherwise; its other
        invocations fail with it), as azure-functions-host's ``WebScriptHostExceptionHandler.
        OnTimeoutExceptionAsync`` restarts the worker executing the invocation."""
        process.forget(invocation_id)
        assert self._options.function_timeout is not None
        limit = timespan(self._options.function_timeout)
        logger.warning(
            "A function timeout has occurred. Restarting worker process executing invocationId '%s'.",
            invocation_id,
        )
        if process.alive:
            process.restart_requested = True
            process.popen.kill()
        return InvocationOutcome(
            False,
            f"Timeout value of {limit} was exceeded by function: Functions.{name}",
            "FunctionTimeoutException",
        )

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
            process.send(terminate_message())
            if await process.exit_code(EXIT_WAIT_SECONDS) is None:
                logger.warning("Worker process %d did not stop; killing it", process.popen.pid)
                process.popen.kill()
                await process.exit_code(EXIT_WAIT_SECONDS)
        if self._readers:
            await asyncio.wait(self._readers, timeout=EXIT_WAIT_SECONDS)


@functools.lru_cache(maxsize=256)
def _bound_arguments(properties: str) -> tuple[tuple[str, str], ...]:
    """The worker's bound-arguments log, read (the same text invocation after invocation: read once)."""
    return tuple(json.loads(properties).items())


def _retrieve(future: asyncio.Future[Any]) -> None:
    # A restart that gave up is logged there and raised to each invocation; none may be waiting.
    if not future.cancelled():
        future.exception()
