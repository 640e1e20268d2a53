"""The management port: ``GET /health`` (``/health/details`` adds broker counts), the ARM REST subset (see
:mod:`emulator.arm.routes`) and the namespace's own ATOM management API (see :mod:`emulator.admin.api`),
over plain HTTP and, when asked, also over HTTPS on a second port with a certificate generated at start.
The plain port also serves the managed-identity token endpoint (:mod:`emulator.identity_endpoint`).

The HTTPS listeners also take AMQP over TLS (a connection opening with ``AMQP``), as a namespace's host
does on 5671: with ``amqps_port`` a third listener, on the port the SDK's AMQP client always uses for a
fully qualified namespace, serves both, so one ``host:port`` names the namespace for both clients. They take
plain AMQP too (:mod:`emulator.arm.tls_or_plain_amqp`), which ``UseDevelopmentEmulator=true`` makes the SDK
speak to the connection string's port, so one connection string serves both clients as well.

The two APIs share paths (a queue may be called ``subscriptions``), so a request goes by its credential:
a ``SharedAccessSignature`` or a Service Bus JWT is the ATOM API's, anything else ARM's bearer token."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emulator.admin.api import AdminApi
from emulator.arm.certifi_trust import write_certifi_trust
from emulator.arm.http import HttpServer, ProtocolSwitch, Request, Response
from emulator.arm.metadata import Metadata
from emulator.arm.routes import ArmApi, ArmSettings
from emulator.arm.tls import CA_FILE_NAME, create_tls
from emulator.auth import SasAuthority, TokenRejected
from emulator.broker.namespace import Namespace
from emulator.identity import MANAGEMENT_RESOURCE, IdentityAuthority
from emulator.identity_endpoint import is_token_request, token_response

HEALTH = {"status": "healthy", "message": "Service is healthy."}


def health_details(namespace: Namespace) -> dict[str, Any]:
    """What the broker counts that Azure shows only as metrics: messages each topic dropped because no
    subscription matched them (topics that dropped none are left out)."""
    topics = namespace.topics.values()
    unmatched = {topic.name: topic.unrouted_count for topic in topics if topic.unrouted_count}
    return {"namespace": namespace.name, "unmatchedTopicMessages": unmatched}


@dataclass(frozen=True, slots=True)
class ManagementOptions:
    host: str
    port: int
    token: str
    tls: bool = False
    tls_port: int = 5301
    amqps_port: int | None = None  # HTTPS + AMQPS on one port (needs tls); None: no such listener
    data_dir: Path | None = None  # where the CA file and ARM metadata go; None: a temporary directory
    subscription_id: str | None = None  # None: any
    resource_group: str | None = None  # None: any


class ManagementServer:
    """Owns the management listeners of one emulator."""

    def __init__(
        self,
        namespace: Namespace,
        options: ManagementOptions,
        endpoint: Callable[[], str],
        authority: SasAuthority | None = None,
        identity: IdentityAuthority | None = None,
        amqp: Callable[[], asyncio.Protocol] | None = None,
    ) -> None:
        self.options = options
        self.namespace = namespace
        self.metadata = Metadata(options.data_dir)
        settings = ArmSettings(options.token, options.subscription_id, options.resource_group)
        self.identity = identity or IdentityAuthority.load(None)
        self.api = ArmApi(namespace, settings, self.metadata, endpoint, self._check_management_jwt)
        self.admin = AdminApi(namespace, self.metadata, authority or SasAuthority(), self.identity)
        self.port = options.port
        self.tls_port: int | None = None
        self.amqps_port: int | None = None
        self.ca_file: Path | None = None
        self.certifi_trust: Path | None = None  # PYTHONPATH entry trusting ca_file for certifi users
        self.http = HttpServer(self.handle)
        self.https: HttpServer | None = None
        self.namespace_host: HttpServer | None = None
        self._switch = None if amqp is None else ProtocolSwitch(b"AMQP", amqp)
        self._temporary: str | None = None

    def handle(self, request: Request) -> Response:
        if AdminApi.accepts(request):
            return self.admin.handle(request)
        if request.scheme == "http" and is_token_request(request):
            return token_response(request, self.identity, time.time)
        path = request.path.rstrip("/") or "/"
        if path in ("/health", "/health/details"):
            if request.method not in ("GET", "HEAD"):
                return Response.json(
                    405,
                    {"error": {"code": "MethodNotAllowed", "message": f"Use GET {path}."}},
                    [("Allow", "GET, HEAD")],
                )
            if path == "/health":
                return Response.json(200, HEALTH)
            return Response.json(200, HEALTH | {"details": health_details(self.namespace)})
        if path.lower().split("/")[1] == "subscriptions":
            return self.api.handle(request)
        return Response.json(404, {"error": {"code": "NotFound", "message": "No such resource."}})

    def _check_management_jwt(self, token: str) -> str | None:
        """None if ``token`` is the emulator's own for ARM, else why it is refused."""
        try:
            self.identity.check(token, MANAGEMENT_RESOURCE, time.time())
        except TokenRejected as exc:
            return str(exc)
        return None

    async def start(self) -> None:
        self.port = await self.http.start(self.options.host, self.options.port)
        if self.options.tls:
            directory = self.options.data_dir
            if directory is None:
                self._temporary = tempfile.mkdtemp(prefix="busbar-management-")
                directory = Path(self._temporary)
            material = create_tls(directory / CA_FILE_NAME, self.options.host)
            self.https = HttpServer(self.handle, material.context, self._switch)
            self.tls_port = await self.https.start(self.options.host, self.options.tls_port)
            self.ca_file = material.ca_file
            self.certifi_trust = write_certifi_trust(directory, material.ca_file)
            if self.options.amqps_port is not None:
                self.namespace_host = HttpServer(self.handle, material.context, self._switch)
                self.amqps_port = await self.namespace_host.start(self.options.host, self.options.amqps_port)

    async def stop(self) -> None:
        await self.http.close()
        for server in (self.https, self.namespace_host):
            if server is not None:
                await server.close()
        if self._temporary is not None:
            shutil.rmtree(self._temporary, ignore_errors=True)
            self._temporary = None
