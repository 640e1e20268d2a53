"""Run a devhost in-process for tests: ``with running_host(app, settings=...) as host: ...``.

The host runs on its own event-loop thread, so the test thread can use the synchronous SDK and HTTP
clients against it. Every host starts its own worker process, which imports the app (this process never
does). Hosts running at the same time share ``os.environ`` (see :mod:`devhost.host`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from devhost.channel.restarts import WorkerLimits
from devhost.host import FunctionsHost, HostOptions, StartupHook
from devhost.host_config import load_host_config
from devhost.invocation_log import InvocationLog, InvocationRecord
from devhost.local_settings import ConfiguredKeys


class HostHandle:
    """A host running on a background thread."""

    def __init__(
        self, host: FunctionsHost, loop: asyncio.AbstractEventLoop, thread: threading.Thread
    ) -> None:
        self._host = host
        self._loop = loop
        self._thread = thread
        self._stopped = False

    @property
    def host(self) -> FunctionsHost:
        """The host object itself (for introspection)."""
        return self._host

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The host's event loop (tests schedule work on it with ``call_soon_threadsafe``)."""
        return self._loop

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        assert self._host.http is not None
        return self._host.http.base_url

    @property
    def master_key(self) -> str:
        """The master key (admin endpoints and admin-level functions)."""
        assert self._host.keys is not None
        return self._host.keys.master

    @property
    def host_key(self) -> str:
        """The default host key (any function-level function)."""
        assert self._host.keys is not None
        return self._host.keys.host

    def function_key(self, name: str) -> str:
        """The default key of function ``name``."""
        assert self._host.keys is not None
        return self._host.keys.function_key(name)

    @property
    def log(self) -> InvocationLog:
        """The invocation log."""
        return self._host.log

    @property
    def invocations(self) -> list[InvocationRecord]:
        """Finished invocations so far, oldest first."""
        return self._host.log.records

    def wait_for_invocations(
        self, condition: int | Callable[[list[InvocationRecord]], bool], timeout: float = 30.0
    ) -> list[InvocationRecord]:
        """Block until ``condition`` (a count or a predicate over all records) holds."""
        return self._host.log.wait_for(condition, timeout)

    def stop(self) -> None:
        """Shut down gracefully (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        try:
            asyncio.run_coroutine_threadsafe(self._host.stop(), self._loop).result(120)
        finally:
            _close_loop(self._loop, self._thread)


def start_host(
    app: Path,
    *,
    settings: Mapping[str, str],
    host_json: Mapping[str, Any] | Path | None = None,
    http_port: int = 0,
    keys: ConfiguredKeys | None = None,
    drain_seconds: float = 30.0,
    startup_hook: StartupHook | None = None,
    worker_limits: WorkerLimits | None = None,
) -> HostHandle:
    """Start a host on a new loop thread and wait until it runs; raise its start-up error if any. The
    function code runs in the host's worker process (never in this one); ``worker_limits`` shortens the
    worker process's start-up and restart bounds (the host's by default)."""
    options = HostOptions(
        app_path=Path(app),
        settings=dict(settings),
        host_config=load_host_config(host_json if host_json is not None else {"version": "2.0"}),
        keys=keys or ConfiguredKeys(),
        http_port=http_port,
        drain_seconds=drain_seconds,
        startup_hook=startup_hook,
        worker_limits=worker_limits or WorkerLimits(),
    )
    host = FunctionsHost(options)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="devhost", daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(host.start(), loop).result(120)
    except BaseException:
        _close_loop(loop, thread)
        raise
    return HostHandle(host, loop, thread)


PENDING_WAIT_SECONDS = 10.0


async def _cancel_pending() -> None:
    """As ``asyncio.run`` does on exit: cancel what is still pending and run it to its end."""
    current = asyncio.current_task()
    pending = [task for task in asyncio.all_tasks() if task is not current]
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending, timeout=PENDING_WAIT_SECONDS)
    await asyncio.get_running_loop().shutdown_asyncgens()


def _close_loop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    """Stop and close the host's loop. A task left pending (a worker's reader past its wait on a busy
    machine, an SDK link task) would otherwise be destroyed by the garbage collector mid-``await``, in
    whichever test runs then, with its socket still open."""
    if loop.is_running():
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(_cancel_pending(), loop).result(PENDING_WAIT_SECONDS + 5)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(30)
    loop.close()


@contextmanager
def running_host(
    app: Path,
    *,
    settings: Mapping[str, str],
    host_json: Mapping[str, Any] | Path | None = None,
    http_port: int = 0,
    keys: ConfiguredKeys | None = None,
    drain_seconds: float = 30.0,
    startup_hook: StartupHook | None = None,
    worker_limits: WorkerLimits | None = None,
) -> Iterator[HostHandle]:
    """A running host for the ``with`` block; stopped (gracefully) on exit."""
    handle = start_host(
        app,
        settings=settings,
        host_json=host_json,
        http_port=http_port,
        keys=keys,
        drain_seconds=drain_seconds,
        startup_hook=startup_hook,
        worker_limits=worker_limits,
    )
    try:
        yield handle
    finally:
        handle.stop()
