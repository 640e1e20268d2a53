"""The host's HTTP front end (aiohttp): HTTP-triggered functions under the route prefix, auth levels and
keys, and the admin endpoints ``GET /admin/host/status``, ``GET /admin/host/ping`` and
``POST /admin/functions/{name}`` (runs a non-HTTP function now; body ``{"input": "..."}``, answers 202).

Unlike Core Tools, which skips authorization locally, devhost enforces auth levels: a request without a
valid key gets 401.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from devhost.channel.protocol import FunctionMetadata, HttpInput, HttpOutput
from devhost.dispatcher import Dispatcher
from devhost.http.keys import ADMIN, ANONYMOUS, FUNCTION, KEY_HEADER, KEY_QUERY, HostKeys
from devhost.http.routes import RouteTemplate, compile_route, decode_request_path, route_conflict

logger = logging.getLogger("devhost.Http")

ALL_METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS")


class AdminBackend(Protocol):
    """What the admin endpoints need from the host."""

    def status(self) -> Mapping[str, Any]: ...

    def non_http_function(self, name: str) -> Callable[[str | None], Awaitable[Any]] | None: ...


@dataclass(frozen=True, slots=True)
class HttpRoute:
    """One HTTP-triggered function."""

    function: FunctionMetadata
    template: RouteTemplate
    methods: frozenset[str]
    auth_level: str


def http_route(function: FunctionMetadata) -> HttpRoute:
    """The route of an HTTP-triggered function (default route: the function name; default level: function)."""
    trigger = function.trigger
    methods = trigger.get("methods") or ALL_METHODS
    level = str(getattr(trigger.get("authLevel"), "value", trigger.get("authLevel") or FUNCTION)).upper()
    if level not in (ANONYMOUS, FUNCTION, ADMIN):
        raise ValueError(f"function '{function.name}': unknown authLevel '{level}'")
    return HttpRoute(
        function=function,
        template=compile_route(str(trigger.get("route") or function.name)),
        methods=frozenset(str(getattr(m, "value", m)).upper() for m in methods),
        auth_level=level,
    )


def check_route_conflicts(routes: list[HttpRoute]) -> None:
    """Refuse two HTTP functions on the same route and method, with the host's message."""
    for index, route in enumerate(routes):
        for earlier in routes[:index]:
            if route_conflict(
                route.template.template, route.methods, earlier.template.template, earlier.methods
            ):
                raise ValueError(
                    f"The '{route.function.name}' function is in error: The route specified conflicts with "
                    f"the route defined by function '{earlier.function.name}'."
                )


def _to_response(output: HttpOutput) -> web.Response:
    """The aiohttp response for what the worker made of the function's return value."""
    if output.content_type is None:
        return web.Response(status=output.status, headers=dict(output.headers))
    response = web.Response(status=output.status, body=output.body, headers=dict(output.headers))
    response.headers["Content-Type"] = output.content_type
    return response


def _problem(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


class HttpServer:
    """Serves the routes; start with :meth:`start`, read :attr:`port`."""

    def __init__(
        self,
        routes: Sequence[HttpRoute],
        *,
        keys: HostKeys,
        dispatcher: Dispatcher,
        admin: AdminBackend,
        route_prefix: str,
        host: str = "127.0.0.1",
        port: int = 7071,
    ) -> None:
        # Most literal segments first, so 'items/new' wins over 'items/{id}' as in ASP.NET routing.
        self.routes = sorted(routes, key=lambda r: -r.template.literal_segments)
        self.keys = keys
        self.dispatcher = dispatcher
        self.admin = admin
        self.prefix = route_prefix.strip("/")
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        """Listen (port 0 picks a free one; :attr:`port` then holds it)."""
        app = web.Application(client_max_size=100 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        # AppRunner.addresses: the public list of the served sockets' addresses (the port port 0 picked).
        addresses = self._runner.addresses
        if addresses:
            self.port = int(addresses[0][1])

    async def stop(self) -> None:
        """Stop listening; requests in progress get up to aiohttp's shutdown timeout."""
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def base_url(self) -> str:
        """``http://host:port``."""
        return f"http://{self.host}:{self.port}"

    # ---------------------------------------------------------------------------------- dispatch

    @staticmethod
    def _key(request: web.Request) -> str | None:
        return request.headers.get(KEY_HEADER) or request.query.get(KEY_QUERY)

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = decode_request_path(request.raw_path).strip("/")
        if path.lower().startswith("admin/"):
            return await self._admin(request, path[len("admin/") :])
        if self.prefix:
            head, _, rest = path.partition("/")
            if head.lower() != self.prefix.lower():
                return _problem(404, "not found")
            path = rest
        for route in self.routes:
            params = route.template.match(path)
            if params is None or request.method.upper() not in route.methods:
                continue
            if not self.keys.authorizes(route.auth_level, route.function.name, self._key(request)):
                return web.Response(status=401)
            return await self._invoke(route, request, params)
        return _problem(404, "not found")

    async def _invoke(self, route: HttpRoute, request: web.Request, params: dict[str, str]) -> web.Response:
        body = await request.read()
        http_input = HttpInput(
            method=request.method.upper(),
            url=str(request.url),
            headers=dict(request.headers),
            params=dict(request.query),
            route_params=params,
            body=body,
        )
        record, outcome = await self.dispatcher.invoke(
            route.function,
            http_input,
            reason=f"This function was triggered by HTTP {request.method} {request.path}.",
        )
        if not record.succeeded:
            return web.Response(status=500)
        if outcome.http is None:  # a succeeded HTTP invocation always has its response
            raise RuntimeError(f"Functions.{route.function.name} succeeded without an HTTP response")
        return _to_response(outcome.http)

    async def _admin(self, request: web.Request, path: str) -> web.Response:
        lowered = path.lower().strip("/")
        if lowered == "host/ping" and request.method in ("GET", "POST", "HEAD"):
            return web.Response(status=200)
        if not self.keys.authorizes(ADMIN, None, self._key(request)):
            return web.Response(status=401)
        if lowered == "host/status" and request.method == "GET":
            return web.json_response(dict(self.admin.status()))
        if lowered.startswith("functions/") and request.method == "POST":
            name = path.strip("/")[len("functions/") :]
            runner = self.admin.non_http_function(name)
            if runner is None:
                return _problem(404, f"no non-HTTP function named '{name}'")
            raw = await request.read()
            input_value: str | None = None
            if raw.strip():
                try:
                    document = json.loads(raw)
                except json.JSONDecodeError:
                    return _problem(400, 'the body must be JSON like {"input": "..."}')
                if not isinstance(document, dict):
                    return _problem(400, 'the body must be JSON like {"input": "..."}')
                value = document.get("input")
                input_value = None if value is None else str(value)
            await runner(input_value)
            return web.Response(status=202)
        return _problem(404, "not found")
