"""Behaviour specs for signing in as a managed identity, as an app on App Service / Azure Functions does, and
for the namespace's TLS port that serves the admin API and AMQP alike.

``DefaultAzureCredential`` with only ``IDENTITY_ENDPOINT`` / ``IDENTITY_HEADER`` in its environment asks the
emulator's token endpoint (App Service's protocol, api-version 2019-08-01) for a JWT; the admin client
(sync and ``aio``) presents it as ``Bearer`` over HTTPS and ``ServiceBusClient`` with CBS put-token type
``jwt`` over AMQP. Both go to one ``host:port``: the fully qualified namespace. A token the emulator did not
sign, or one that has expired, is refused as Service Bus refuses it: 401 with the ATOM error body on HTTP,
``ServiceBusAuthenticationError`` (CBS status 401) on AMQP.

The SDK's AMQP client always uses port 5671 for a namespace name; these tests listen on a free port instead
and point the client there with ``custom_endpoint_address`` (tests/devhost/test_make_run_samples.py runs the
SDK's samples unedited against 5671)."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import ssl
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.core.credentials import AccessToken, AzureNamedKeyCredential
from azure.core.exceptions import ClientAuthenticationError
from azure.identity import DefaultAzureCredential, ManagedIdentityCredential
from azure.identity.aio import DefaultAzureCredential as AsyncDefaultAzureCredential
from azure.mgmt.servicebus import ServiceBusManagementClient
from azure.servicebus import ServiceBusClient, ServiceBusMessage, TransportType
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.aio.management import ServiceBusAdministrationClient as AsyncAdministrationClient
from azure.servicebus.exceptions import ServiceBusAuthenticationError, ServiceBusConnectionError
from azure.servicebus.management import ServiceBusAdministrationClient

from emulator.auth import TokenRejected
from emulator.identity import SERVICE_BUS_RESOURCE, TOKEN_LIFETIME_SECONDS, IdentityAuthority
from emulator.testing import EmulatorHandle, start_emulator

SCOPE = "https://servicebus.azure.net//.default"  # what the SDK asks for (azure.servicebus JWT_TOKEN_SCOPE)


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def namespace() -> Iterator[EmulatorHandle]:
    handle = start_emulator(management_tls=True, management_tls_port=0, amqps_port=0)
    yield handle
    handle.stop()


@pytest.fixture
def managed_identity(namespace: EmulatorHandle, monkeypatch: pytest.MonkeyPatch) -> EmulatorHandle:
    """The environment Azure's host gives an app with a managed identity, and nothing else that would
    steer DefaultAzureCredential (no AZURE_* service principal, workload identity or other MSI source)."""
    for name in list(os.environ):
        if name.startswith("AZURE_") or name in ("IDENTITY_SERVER_THUMBPRINT", "MSI_ENDPOINT", "MSI_SECRET"):
            monkeypatch.delenv(name)
    monkeypatch.delenv("IMDS_ENDPOINT", raising=False)
    monkeypatch.setenv("IDENTITY_ENDPOINT", namespace.emulator.identity_endpoint)
    monkeypatch.setenv("IDENTITY_HEADER", namespace.emulator.identity_header)
    return namespace


def fqns(handle: EmulatorHandle) -> str:
    value = handle.emulator.fully_qualified_namespace
    assert value is not None
    return value


def ca_file(handle: EmulatorHandle) -> str:
    assert handle.emulator.management_ca_file is not None
    return str(handle.emulator.management_ca_file)


def amqp_options(handle: EmulatorHandle, port: int | None = None) -> dict[str, Any]:
    """AMQP over TLS to the namespace's port (the SDK would use 5671) trusting the emulator's CA."""
    port = handle.emulator.amqps_port if port is None else port
    return {
        "custom_endpoint_address": f"sb://localhost:{port}",
        "transport_type": TransportType.Amqp,
        "connection_verify": ca_file(handle),
        "retry_total": 0,
    }


class StaticToken:
    """A credential that presents one fixed token (one the emulator did not issue, or an expired one)."""

    def __init__(self, token: str) -> None:
        self.token = token

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        # A far expiry, so the SDK presents the token rather than asking for a new one.
        return AccessToken(self.token, int(time.time()) + 3600)


def test_default_azure_credential_gets_a_service_bus_token_from_the_identity_endpoint(
    managed_identity: EmulatorHandle,
) -> None:
    token = DefaultAzureCredential().get_token(SCOPE)

    assert token.expires_on > time.time() + TOKEN_LIFETIME_SECONDS - 600
    grant = managed_identity.emulator.identity.check(token.token, SERVICE_BUS_RESOURCE, time.time())
    assert grant.expires_at == token.expires_on


def test_the_admin_client_manages_entities_with_the_managed_identity(
    managed_identity: EmulatorHandle,
) -> None:
    queue, topic = fresh("q"), fresh("t")
    with ServiceBusAdministrationClient(
        fqns(managed_identity), DefaultAzureCredential(), connection_verify=ca_file(managed_identity)
    ) as admin:
        admin.create_queue(queue, max_delivery_count=4)
        admin.create_topic(topic)
        admin.create_subscription(topic, "s", forward_to=queue)  # sends a Bearer supplementary token too

        assert admin.get_queue(queue).max_delivery_count == 4
        assert admin.get_subscription(topic, "s").forward_to is not None
        assert queue in [q.name for q in admin.list_queues()]
        admin.delete_topic(topic)
        admin.delete_queue(queue)


def test_the_async_admin_client_manages_entities_with_the_managed_identity(
    managed_identity: EmulatorHandle,
) -> None:
    queue = fresh("q")

    async def scenario() -> list[str]:
        async with (
            AsyncDefaultAzureCredential() as credential,
            AsyncAdministrationClient(
                fqns(managed_identity), credential, connection_verify=ca_file(managed_identity)
            ) as admin,
        ):
            await admin.create_queue(queue)
            names = [q.name async for q in admin.list_queues()]
            await admin.delete_queue(queue)
            return names

    assert queue in asyncio.run(scenario())


def test_service_bus_client_sends_and_receives_with_the_managed_identity_on_the_admin_apis_port(
    managed_identity: EmulatorHandle,
) -> None:
    queue = managed_identity.create_queue()
    credential = DefaultAzureCredential()
    with ServiceBusClient(fqns(managed_identity), credential, **amqp_options(managed_identity)) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage("signed in as the app", message_id="m-1"))
        with client.get_queue_receiver(queue, max_wait_time=5) as receiver:
            received = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            assert [str(m) for m in received] == ["signed in as the app"]
            receiver.complete_message(received[0])


def test_the_async_service_bus_client_sends_and_receives_with_the_managed_identity(
    managed_identity: EmulatorHandle,
) -> None:
    queue = managed_identity.create_queue()

    async def scenario() -> list[str]:
        async with (
            AsyncDefaultAzureCredential() as credential,
            AsyncServiceBusClient(
                fqns(managed_identity), credential, **amqp_options(managed_identity)
            ) as client,
        ):
            async with client.get_queue_sender(queue) as sender:
                await sender.send_messages(ServiceBusMessage("async"))
            async with client.get_queue_receiver(queue, max_wait_time=5) as receiver:
                received = await receiver.receive_messages(max_message_count=1, max_wait_time=5)
                for message in received:
                    await receiver.complete_message(message)
                return [str(m) for m in received]

    assert asyncio.run(scenario()) == ["async"]


def test_the_https_management_port_takes_amqp_over_tls_too(namespace: EmulatorHandle) -> None:
    # SAS over TLS on the admin connection string's port: the one port the 7.11 samples' namespace names.
    queue = namespace.create_queue()
    port = namespace.emulator.management_tls_port
    assert port is not None
    credential = AzureNamedKeyCredential("RootManageSharedAccessKey", "SAS_KEY_VALUE")
    with ServiceBusClient(f"localhost:{port}", credential, **amqp_options(namespace, port)) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage("over TLS"))
        with client.get_queue_receiver(queue, max_wait_time=5) as receiver:
            assert [str(m) for m in receiver.receive_messages(max_wait_time=5)] == ["over TLS"]
    # ... while HTTPS on that port is unchanged.
    context = ssl.create_default_context(cafile=ca_file(namespace))
    with urllib.request.urlopen(f"https://localhost:{port}/health", context=context, timeout=10) as response:
        assert json.loads(response.read())["status"] == "healthy"


def test_the_arm_client_manages_the_namespace_with_a_management_token_from_the_identity(
    managed_identity: EmulatorHandle,
) -> None:
    # azure-mgmt-servicebus asks for https://management.azure.com/.default; ARM is on the HTTPS port too.
    port = managed_identity.emulator.management_tls_port
    with ServiceBusManagementClient(
        DefaultAzureCredential(),
        "00000000-0000-0000-0000-000000000000",
        base_url=f"https://localhost:{port}",
        connection_verify=ca_file(managed_identity),
    ) as arm:
        namespace = arm.namespaces.get("rg", managed_identity.namespace_name)
    assert namespace.name == managed_identity.namespace_name


def test_arm_refuses_a_forged_management_token_with_401(namespace: EmulatorHandle) -> None:
    forged = IdentityAuthority(b"not the emulator's key".ljust(32, b"!"), "x").issue(
        "https://management.azure.com", time.time()
    )
    with (
        ServiceBusManagementClient(
            StaticToken(forged.access_token),
            "00000000-0000-0000-0000-000000000000",
            base_url=f"https://localhost:{namespace.emulator.management_tls_port}",
            connection_verify=ca_file(namespace),
            retry_total=0,
        ) as arm,
        pytest.raises(ClientAuthenticationError, match="InvalidSignature") as refused,
    ):
        arm.namespaces.get("rg", namespace.namespace_name)
    assert refused.value.status_code == 401


# ------------------------------------------------------------------------------------------ refusals


def forged_token() -> str:
    """A well-formed token for Service Bus, signed with a key that is not the emulator's."""
    return (
        IdentityAuthority(b"not the emulator's key".ljust(32, b"!"), "x")
        .issue(SERVICE_BUS_RESOURCE, time.time())
        .access_token
    )


def expired_token(handle: EmulatorHandle) -> str:
    issued = time.time() - TOKEN_LIFETIME_SECONDS - 60
    return handle.emulator.identity.issue(SERVICE_BUS_RESOURCE, issued).access_token


@pytest.mark.parametrize("kind", ["forged", "expired"])
def test_the_admin_api_refuses_a_forged_or_expired_token_with_401(
    namespace: EmulatorHandle, kind: str
) -> None:
    token = forged_token() if kind == "forged" else expired_token(namespace)
    queue = fresh("q")
    with (
        ServiceBusAdministrationClient(
            fqns(namespace), StaticToken(token), connection_verify=ca_file(namespace), retry_total=0
        ) as admin,
        pytest.raises(ClientAuthenticationError) as refused,
    ):
        admin.create_queue(queue)
    assert refused.value.status_code == 401
    assert ("InvalidSignature" if kind == "forged" else "ExpiredToken") in str(refused.value)
    assert namespace.call(lambda: namespace.emulator.namespace.queues.get(queue.lower())) is None


@pytest.mark.parametrize("kind", ["forged", "expired"])
def test_cbs_refuses_a_forged_or_expired_jwt_and_nothing_is_delivered(
    namespace: EmulatorHandle, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    token = forged_token() if kind == "forged" else expired_token(namespace)
    queue = namespace.create_queue()
    caplog.set_level(logging.INFO, logger="emulator.amqp")
    # The SDK reports a refused put-token as ServiceBusAuthenticationError, or, when the client was given a
    # custom_endpoint_address (as here), as ServiceBusConnectionError ("for uamqp parity").
    with (
        ServiceBusClient(fqns(namespace), StaticToken(token), **amqp_options(namespace)) as client,
        pytest.raises(ServiceBusConnectionError),
        client.get_queue_sender(queue) as sender,
    ):
        sender.send_messages(ServiceBusMessage("must not arrive"))
    reason = "InvalidSignature" if kind == "forged" else "ExpiredToken"
    assert any(f"put-token refused: {reason}" in r.getMessage() for r in caplog.records), caplog.text
    with (
        ServiceBusClient.from_connection_string(namespace.connection_string) as client,
        client.get_queue_receiver(queue, max_wait_time=1) as receiver,
    ):
        assert receiver.peek_messages(max_message_count=1) == []


def test_cbs_refusal_reaches_a_client_without_custom_endpoint_as_an_authentication_error(
    namespace: EmulatorHandle,
) -> None:
    # A fully qualified namespace on the emulator's plain AMQP port (use_tls=False, as the connection
    # string's UseDevelopmentEmulator sets it): the SDK's own mapping of a 401 put-token, unaltered.
    queue = namespace.create_queue()
    with (
        ServiceBusClient(
            f"localhost:{namespace.amqp_port}", StaticToken(forged_token()), use_tls=False, retry_total=0
        ) as client,
        pytest.raises(ServiceBusAuthenticationError),
        client.get_queue_sender(queue) as sender,
    ):
        sender.send_messages(ServiceBusMessage("must not arrive"))


def test_the_token_endpoint_refuses_a_wrong_identity_header(managed_identity: EmulatorHandle) -> None:
    request = urllib.request.Request(
        f"{managed_identity.emulator.identity_endpoint}?api-version=2019-08-01&resource={SERVICE_BUS_RESOURCE}",
        headers={"X-IDENTITY-HEADER": "not-the-secret"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 401
    assert "IDENTITY_HEADER" in json.loads(refused.value.read())["message"]


def test_the_token_endpoint_issues_no_token_for_another_resource(managed_identity: EmulatorHandle) -> None:
    with pytest.raises(ClientAuthenticationError, match="issues no tokens for resource"):
        ManagedIdentityCredential().get_token("https://vault.azure.net/.default")


# ------------------------------------------------------------------------------------------ the identity


def test_the_identity_survives_a_restart_on_the_same_data_directory(tmp_path: Path) -> None:
    # An exported IDENTITY_HEADER keeps working, and tokens clients cached stay valid, as on Azure.
    first = IdentityAuthority.load(tmp_path)
    token = first.issue(SERVICE_BUS_RESOURCE, time.time()).access_token
    again = IdentityAuthority.load(tmp_path)

    assert again.identity_header == first.identity_header
    assert again.check(token, SERVICE_BUS_RESOURCE, time.time()).resource == ""
    assert (tmp_path / "identity.json").stat().st_mode & 0o077 == 0  # the signing key is private


def test_a_token_for_another_audience_is_refused() -> None:
    authority = IdentityAuthority.load(None)
    arm_token = authority.issue("https://management.azure.com/", time.time()).access_token

    with pytest.raises(TokenRejected, match="InvalidAudience"):
        authority.check(arm_token, SERVICE_BUS_RESOURCE, time.time())


def test_a_token_is_refused_from_the_second_it_expires() -> None:
    authority = IdentityAuthority.load(None)
    issued = authority.issue(SERVICE_BUS_RESOURCE, 1_000_000)

    assert authority.check(issued.access_token, SERVICE_BUS_RESOURCE, issued.expires_on - 1)
    with pytest.raises(TokenRejected, match="ExpiredToken"):
        authority.check(issued.access_token, SERVICE_BUS_RESOURCE, issued.expires_on)


def test_a_token_with_its_claims_altered_is_refused() -> None:
    authority = IdentityAuthority.load(None)
    header, payload, signature = authority.issue(SERVICE_BUS_RESOURCE, time.time()).access_token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["exp"] += 365 * 24 * 3600
    altered = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()

    with pytest.raises(TokenRejected, match="InvalidSignature"):
        authority.check(f"{header}.{altered}.{signature}", SERVICE_BUS_RESOURCE, time.time())
