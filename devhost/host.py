"""The host: loads settings and the app, starts the triggers and the HTTP server, and shuts down
gracefully (stop receiving, let in-flight invocations finish within a bound, settle, close).

App settings become environment variables while the host runs (the app reads them through
``os.environ``), and are restored when it stops. Two hosts running at the same time in one process
therefore share one environment: give them the same values for names they both use.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import azure.functions as func

from devhost.bindings import resolve_connection
from devhost.channel.process_worker import ProcessWorker, WorkerOptions
from devhost.channel.protocol import FunctionMetadata, ManualServiceBusInput
from devhost.channel.restarts import WorkerLimits
from devhost.dispatcher import Dispatcher
from devhost.host_config import HostConfig
from devhost.http.key_store import KeyStore
from devhost.http.keys import HostKeys, generate_key
from devhost.http.server import HttpRoute, HttpServer, check_route_conflicts, http_route
from devhost.invocation_log import InvocationLog
from devhost.local_settings import ConfiguredKeys
from devhost.servicebus.listener import ServiceBusListener
from devhost.servicebus.session_listener import SessionListener
from devhost.servicebus.settlement import worker_arguments
from devhost.servicebus.settlement_service import LoopSettlementServer
from devhost.startup_problems import StartupProblems
from devhost.timer_trigger import TimerListener, schedule_zone

logger = logging.getLogger("devhost.Host")

StartupHook = Callable[[Mapping[str, str]], Any]

# host.json logging.logLevel categories -> devhost loggers; .NET level names -> logging levels.
_CATEGORIES = {"default": "devhost", "Function": "devhost.Function", "Host.Results": "devhost.Function"}
_LEVELS = {
    "trace": logging.DEBUG,
    "debug": logging.DEBUG,
    "information": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "none": logging.CRITICAL + 10,
}


def apply_log_levels(levels: Mapping[str, str]) -> None:
    """Set devhost's loggers from host.json ``logging.logLevel`` (unknown categories are ignored)."""
    for category, level in levels.items():
        logger_name = _CATEGORIES.get(category) or (
            "devhost.Function" if category.startswith("Function.") else None
        )
        value = _LEVELS.get(level.lower())
        if logger_name is not None and value is not None:
            logging.getLogger(logger_name).setLevel(value)


@dataclass(slots=True)
class HostOptions:
    """Everything a host run needs; ``settings`` are the effective app settings."""

    app_path: Path
    settings: Mapping[str, str]
    host_config: HostConfig = field(default_factory=HostConfig)
    keys: ConfiguredKeys = field(default_factory=ConfiguredKeys)
    # Where keys not fixed in ``keys`` are kept across restarts (devhost.http.key_store); None: new each
    # start.
    secrets_dir: Path | None = None
    http_host: str = "127.0.0.1"
    http_port: int = 7071
    drain_seconds: float = 30.0
    startup_hook: StartupHook | None = None
    # The worker process's start-up and restart bounds: the Functions host's, unless a test shortens them.
    worker_limits: WorkerLimits = field(default_factory=WorkerLimits)


class FunctionsHost:
    """One running app. ``await start()``, then ``await stop()``."""

    def __init__(self, options: HostOptions, log: InvocationLog | None = None) -> None:
        self.options = options
        self.log = log or InvocationLog()
        self.functions: list[FunctionMetadata] = []
        self.keys: HostKeys | None = None
        self.http: HttpServer | None = None
        self.worker: ProcessWorker | None = None
        self.dispatcher: Dispatcher | None = None
        self.settlement: LoopSettlementServer | None = None  # the worker process's Settlement service
        self._service_bus: list[ServiceBusListener] = []
        self._timers: dict[str, TimerListener] = {}
        self._by_name: dict[str, FunctionMetadata] = {}
        self._admin_tasks: set[asyncio.Task[Any]] = set()
        self._saved_environment: dict[str, str | None] = {}
        self._started_at = time.monotonic()
        self.state = "Default"
        # Set when the worker failed as often as the Functions host tolerates: that host then stops itself
        # (StopApplication) to be recycled; devhost's main stops on it.
        self.recycle_requested = asyncio.Event()

    # ------------------------------------------------------------------------------- lifecycle

    def _apply_environment(self) -> None:
        for name, value in self.options.settings.items():
            self._saved_environment.setdefault(name, os.environ.get(name))
            os.environ[name] = value

    def _restore_environment(self) -> None:
        for name, value in self._saved_environment.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved_environment.clear()

    async def start(self) -> None:
        """Run the startup hook, import the app, start HTTP and the triggers. Raises on bad config."""
        options = self.options
        settings = options.settings
        self.state = "Initialized"
        apply_log_levels(options.host_config.log_levels)
        self._apply_environment()
        problems = StartupProblems()  # every one at once, not one per start (see devhost.startup_problems)
        try:
            if options.startup_hook is not None:
                logger.info("Running the startup hook")
                with problems.collect("the startup hook"):
                    await asyncio.to_thread(options.startup_hook, dict(settings))
            worker_options = WorkerOptions(
                app_path=options.app_path,
                settings=dict(settings),
                function_timeout=options.host_config.function_timeout,
                limits=options.worker_limits,
            )
            # Started first, as the Functions host's gRPC server: its port is a worker argument.
            self.settlement = await LoopSettlementServer.start()
            worker: ProcessWorker | None = None
            with problems.collect("the app"):
                worker = await ProcessWorker.start(
                    worker_options, worker_arguments(self.settlement.port), self.recycle_requested.set
                )
            if worker is None:  # nothing more to index: report what is known
                problems.raise_any()
                raise RuntimeError("the worker did not start")  # not reached: its failure was collected
            self.worker = worker
            self.dispatcher = Dispatcher(self.worker, self.log)
            self.functions = self.worker.functions()
            self._by_name = {spec.name.lower(): spec for spec in self.functions}
            names = [spec.name for spec in self.functions]
            configured = options.keys
            if options.secrets_dir is not None:
                configured = KeyStore(options.secrets_dir).resolve(configured, names, generate_key)
            self.keys = HostKeys(configured, names)
            routes: list[HttpRoute] = []
            zone = schedule_zone(settings)
            for spec in self.functions:
                if spec.trigger_type == "httpTrigger":
                    routes.append(http_route(spec))
                elif spec.trigger_type == "timerTrigger":
                    with problems.collect(f"Functions.{spec.name} (schedule)"):
                        self._timers[spec.name.lower()] = TimerListener(spec, self.dispatcher, zone)
                else:
                    # Worded as the host logs it: the extension's message inside its indexing error.
                    where = (
                        f"The '{spec.name}' function is in error: Microsoft.Azure.WebJobs.Host: "
                        f"Error indexing method 'Functions.{spec.name}'. "
                        "Microsoft.Azure.WebJobs.Extensions.ServiceBus"
                    )
                    with problems.collect(f"Functions.{spec.name} (connection)"):
                        connection = resolve_connection(spec.trigger.get("connection"), settings, where=where)
                        sessions = spec.service_bus is not None and spec.service_bus.sessions
                        kind = SessionListener if sessions else ServiceBusListener
                        self._service_bus.append(
                            kind(spec, options.host_config.service_bus, connection, self.dispatcher)
                        )
            problems.raise_any()
            check_route_conflicts(routes)
            self.http = HttpServer(
                routes,
                keys=self.keys,
                dispatcher=self.dispatcher,
                admin=self,
                route_prefix=options.host_config.route_prefix,
                host=options.http_host,
                port=options.http_port,
            )
            await self.http.start()
            for listener in self._service_bus:
                await listener.start()
            for timer in self._timers.values():
                await timer.start()
        except BaseException:
            await self.stop()
            raise
        self.state = "Running"
        logger.info("Host started: %d functions, HTTP on %s", len(self.functions), self.http.base_url)

    async def stop(self) -> None:
        """Drain and close everything; safe to call twice."""
        if self.state == "Stopped":
            return
        self.state = "Stopping"
        drain = self.options.drain_seconds
        await asyncio.gather(
            *(listener.stop(drain) for listener in self._service_bus),
            *(timer.stop(drain) for timer in self._timers.values()),
            return_exceptions=True,
        )
        if self._admin_tasks:
            await asyncio.wait(self._admin_tasks, timeout=drain)
        if self.http is not None:
            await self.http.stop()
        if self.worker is not None:
            await self.worker.close()
        if self.settlement is not None:
            await self.settlement.stop()
        self._restore_environment()
        self.state = "Stopped"
        logger.info("Host stopped")

    # --------------------------------------------------------------------------------- admin

    def status(self) -> Mapping[str, Any]:
        """``GET /admin/host/status``."""
        return {
            "id": "devhost",
            "state": self.state,
            "version": f"devhost (azure-functions {getattr(func, '__version__', '?')})",
            "processUptime": int((time.monotonic() - self._started_at) * 1000),
            "functions": [spec.name for spec in self.functions],
            "invocations": self.log.count,
            "utcNow": datetime.now(UTC).isoformat(),
        }

    def non_http_function(self, name: str) -> Callable[[str | None], Awaitable[Any]] | None:
        """A starter for ``POST /admin/functions/{name}``, None for unknown or HTTP functions."""
        spec = self._by_name.get(name.lower())
        if spec is None or spec.trigger_type == "httpTrigger":
            return None
        timer = self._timers.get(name.lower())

        async def start_invocation(input_value: str | None) -> None:
            if timer is not None:
                work: Awaitable[Any] = timer.invoke_now(
                    reason="This function was programmatically called via the host APIs."
                )
            else:
                work = self._invoke_service_bus_manually(spec, input_value)
            task = asyncio.ensure_future(work)
            self._admin_tasks.add(task)
            task.add_done_callback(self._admin_tasks.discard)

        return start_invocation

    async def _invoke_service_bus_manually(self, spec: FunctionMetadata, input_value: str | None) -> None:
        """A manual run of a Service Bus function: the input is the body of a message that no broker holds
        (so there is nothing to settle), as with the host's admin API."""
        manual = ManualServiceBusInput(
            body=(input_value or "").encode("utf-8"),
            message_id=str(uuid.uuid4()),
            enqueued_time_utc=datetime.now(UTC),
            batch=str(spec.trigger.get("cardinality", "ONE")).upper() == "MANY",
        )
        assert self.dispatcher is not None
        await self.dispatcher.invoke(
            spec, manual, reason="This function was programmatically called via the host APIs."
        )

    # --------------------------------------------------------------------------------- output

    def describe(self, with_master_key: Collection[str] = ()) -> list[str]:
        """Core Tools-style lines listing the functions and their URLs. The HTTP functions named in
        ``with_master_key`` are listed with ``?code=<master key>``, the URL that opens them in a browser (as
        ``func azure functionapp publish`` prints a deployed function's "Invoke url" with ``?code=<key>``,
        Microsoft's Python quickstart shows)."""
        lines: list[str] = []
        assert self.http is not None and self.keys is not None
        prefix = self.options.host_config.route_prefix
        opened = {name.lower() for name in with_master_key}  # function names are case-insensitive
        for spec in self.functions:
            if spec.trigger_type == "httpTrigger":
                route = http_route(spec)
                path = "/".join(p for p in (prefix, route.template.template.strip("/")) if p)
                methods = ",".join(sorted(route.methods))
                url, auth = f"{self.http.base_url}/{path}", f"auth: {route.auth_level.lower()}"
                if spec.name.lower() in opened:
                    url, auth = f"{url}?code={self.keys.master}", f"{auth}; opens with the master key"
                lines.append(f"{spec.name}: [{methods}] {url} ({auth})")
            else:
                lines.append(f"{spec.name}: {spec.trigger_type}")
        return lines
