"""Connecting to a Service Bus namespace over AMQP with python-qpid-proton, authenticated as every Service
Bus client is: SASL ANONYMOUS, then a token put on the ``$cbs`` node for each entity before a link to it
("AMQP 1.0 in Azure Service Bus: claims-based authorization", put-token with ``type``
``servicebus.windows.net:sastoken`` for a SAS token, ``jwt`` for a Microsoft Entra ID token).

A namespace comes from a SAS connection string (``Endpoint=sb://...;SharedAccessKeyName=...;
SharedAccessKey=...``; with ``UseDevelopmentEmulator=true`` over plain AMQP on the endpoint's port, as the
azure-servicebus SDK does) or from a fully qualified namespace and an azure-identity credential (its public
``get_token`` for ``https://servicebus.azure.net/.default``), over AMQPS on 5671.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote_plus

import proton
from proton.reactor import ReceiverOption
from proton.utils import BlockingConnection

TOKEN_SECONDS = 3600
"""How long a put token is valid: far longer than any receive of the re-drive or the console."""
SERVICE_BUS_SCOPE = "https://servicebus.azure.net/.default"
CONNECT_TIMEOUT = 30.0


class WireError(Exception):
    """Service Bus refused a request over AMQP (a token, a management operation, a settlement, a send).
    ``condition`` is the AMQP error condition when Service Bus gave one (``amqp:not-found``, ...)."""

    def __init__(self, message: str, condition: str | None = None) -> None:
        super().__init__(message)
        self.condition = condition


_STATUS_CONDITIONS = {401: "amqp:unauthorized-access", 403: "amqp:unauthorized-access", 404: "amqp:not-found"}
"""A refused put-token's status as the AMQP condition it means (Azure answers 404 for a missing entity)."""


class TokenCredential(Protocol):
    """azure-core's public ``TokenCredential`` (azure-identity's credentials are ones)."""

    def get_token(self, *scopes: str) -> Any:
        """An access token (``.token``, ``.expires_on``) for ``scopes``."""


def sas_token(audience: str, key_name: str, key: str, expiry: int) -> str:
    """A SAS token for ``audience`` (Azure Service Bus, "Service Bus access control with Shared Access
    Signatures": ``sr`` the URL-encoded resource, ``sig`` the HMAC-SHA256 of it and the expiry)."""
    resource = quote_plus(audience)
    digest = hmac.new(key.encode("utf-8"), f"{resource}\n{expiry}".encode(), hashlib.sha256).digest()
    signature = quote_plus(base64.b64encode(digest).decode("ascii"))
    return f"SharedAccessSignature sr={resource}&sig={signature}&se={expiry}&skn={quote_plus(key_name)}"


@dataclass(frozen=True, slots=True)
class Namespace:
    """Where and how to connect: ``host`` (with a port for the emulator), and a SAS key or a credential."""

    host: str
    secure: bool
    key_name: str | None = None
    key: str | None = None
    credential: TokenCredential | None = None

    @classmethod
    def from_connection_string(cls, connection_string: str) -> Namespace:
        """A namespace from a SAS connection string; raises ``ValueError`` naming what is missing."""
        parts = (part.split("=", 1) for part in connection_string.split(";") if "=" in part)
        settings = {key.strip().lower(): value.strip() for key, value in parts}
        missing = [
            name for name in ("endpoint", "sharedaccesskeyname", "sharedaccesskey") if not settings.get(name)
        ]
        if missing:
            raise ValueError(f"the Service Bus connection string has no {', '.join(missing)}")
        host = settings["endpoint"].split("://", 1)[-1].rstrip("/")
        emulator = settings.get("usedevelopmentemulator", "").lower() == "true"
        return cls(host, not emulator, settings["sharedaccesskeyname"], settings["sharedaccesskey"])

    @classmethod
    def from_credential(cls, fully_qualified_namespace: str, credential: TokenCredential) -> Namespace:
        """A namespace reached with a Microsoft Entra ID ``credential`` (a managed identity in Azure)."""
        host = fully_qualified_namespace.split("://", 1)[-1].rstrip("/")
        return cls(host, True, credential=credential)

    @classmethod
    def from_settings(cls, values: Mapping[str, str], connection: str = "ServiceBusConnection") -> Namespace:
        """The app's namespace, as its Service Bus clients take it: the connection string in ``connection``
        (local), or ``<connection>__fullyQualifiedNamespace`` with the managed identity
        (``DefaultAzureCredential``, Azure). Raises ``ValueError`` when neither is set."""
        connection_string = (values.get(connection) or "").strip()
        if connection_string:
            return cls.from_connection_string(connection_string)
        namespace = (values.get(f"{connection}__fullyQualifiedNamespace") or "").strip()
        if not namespace:
            raise ValueError(f"missing app setting: {connection} or {connection}__fullyQualifiedNamespace")
        from azure.identity import DefaultAzureCredential  # heavy; only in Azure

        return cls.from_credential(namespace, DefaultAzureCredential())

    @property
    def url(self) -> str:
        """The AMQP URL: plain AMQP for the emulator, AMQPS on 5671 otherwise."""
        return (
            f"amqps://{self.host}:5671"
            if self.secure and ":" not in self.host
            else (f"{'amqps' if self.secure else 'amqp'}://{self.host}")
        )

    def audience(self, entity_path: str) -> str:
        """The put-token audience of an entity (a sub-queue is covered by its entity's)."""
        return f"sb://{self.host.split(':')[0]}/{entity_path.split('/$')[0]}"

    def token(self, audience: str) -> tuple[str, str, float]:
        """(token, put-token type, expiry in epoch seconds) for ``audience``."""
        if self.credential is not None:
            access = self.credential.get_token(SERVICE_BUS_SCOPE)
            return str(access.token), "jwt", float(access.expires_on)
        assert self.key_name is not None and self.key is not None
        expiry = int(time.time()) + TOKEN_SECONDS
        return sas_token(audience, self.key_name, self.key, expiry), "servicebus.windows.net:sastoken", expiry

    def connect(self, entity_path: str) -> BlockingConnection:
        """An open connection authorised for ``entity_path`` (and its sub-queues); the caller closes it."""
        return self.connect_until(entity_path)[0]

    def connect_until(self, entity_path: str) -> tuple[BlockingConnection, float]:
        """:meth:`connect`, and when the token it put expires (epoch seconds)."""
        connection = BlockingConnection(
            self.url,
            timeout=CONNECT_TIMEOUT,
            allowed_mechs="ANONYMOUS",
            sasl_enabled=True,
            virtual_host=self.host.split(":")[0],
        )
        try:
            expiry = self.authorize(connection, entity_path)
        except BaseException:
            connection.close()
            raise
        return connection, expiry

    def authorize(self, connection: BlockingConnection, entity_path: str) -> float:
        """Put a fresh token for ``entity_path`` on ``connection`` (a connection kept open renews its token
        so before it expires); its expiry in epoch seconds."""
        audience = self.audience(entity_path)
        token, kind, expiry = self.token(audience)
        put_token(connection, audience, token, kind, expiry)
        return expiry


def put_token(connection: BlockingConnection, audience: str, token: str, kind: str, expiry: float) -> None:
    """Put ``token`` on ``$cbs`` for ``audience``; raises :class:`WireError` when Service Bus refuses it."""
    reply = request(
        connection,
        "$cbs",
        proton.Message(
            body=token,
            properties={
                "operation": "put-token",
                "type": kind,
                "name": audience,
                "expiration": proton.timestamp(int(expiry * 1000)),
            },
        ),
    )
    status, description = reply_status(reply)
    if status not in (200, 202):
        raise WireError(
            f"put-token for {audience} refused ({status}): {description}",
            _STATUS_CONDITIONS.get(status or 0),
        )


def request(connection: BlockingConnection, node: str, message: proton.Message) -> proton.Message:
    """Send ``message`` to the request/response ``node`` (``$cbs``, ``<entity>/$management``) and wait for
    its response (matched by correlation id; the reply link's target is the request's ``reply-to``)."""
    reply_to = f"busbar-reply-{uuid.uuid4()}"
    message.id = str(uuid.uuid4())
    message.reply_to = reply_to
    sender = connection.create_sender(node)
    replies = connection.create_receiver(node, credit=1, options=_Target(reply_to))
    try:
        sender.send(message)
        while True:
            reply = replies.receive(timeout=CONNECT_TIMEOUT)
            if reply.correlation_id == message.id:
                return reply
    finally:
        replies.close()  # type: ignore[no-untyped-call]
        sender.close()  # type: ignore[no-untyped-call]


def management_request(
    connection: BlockingConnection,
    entity: str,
    operation: str,
    body: dict[str, Any],
    link_name: str | None = None,
) -> proton.Message:
    """The response of ``entity``'s ``$management`` node to ``operation`` with ``body`` (whatever its
    status), the request tied to the receive link ``link_name`` when given (``associated-link-name``, as
    azure-servicebus sends it for a receiver's own operations: ``_base_handler.py``
    ``_mgmt_request_response``)."""
    properties: dict[str, Any] = {"operation": operation}
    if link_name is not None:
        properties["associated-link-name"] = link_name
    return request(connection, f"{entity}/$management", proton.Message(body=body, properties=properties))


class _Target(ReceiverOption):
    """A receive link's target address: where Service Bus sends a request's response (its ``reply-to``)."""

    def __init__(self, address: str) -> None:
        self.address = address

    def apply(self, link: proton.Link) -> None:
        link.target.address = self.address


def reply_properties(reply: proton.Message) -> dict[str, Any]:
    """A response's application properties by name."""
    raw: dict[Any, Any] = dict(reply.properties or {})
    return {str(key): value for key, value in raw.items()}


def reply_status(reply: proton.Message) -> tuple[int | None, str]:
    """A response's status code and description: ``$cbs`` answers them as ``status-code`` /
    ``status-description``, a ``$management`` node as ``statusCode`` / ``statusDescription``."""
    properties = reply_properties(reply)
    status = properties.get("status-code", properties.get("statusCode"))
    description = properties.get("status-description", properties.get("statusDescription", ""))
    return (None if status is None else int(status)), str(description)


__all__ = [
    "Namespace",
    "TokenCredential",
    "WireError",
    "management_request",
    "put_token",
    "reply_properties",
    "reply_status",
    "request",
    "sas_token",
]
