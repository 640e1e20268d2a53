"""Behaviour specs for the management port itself: the health check, bearer-token authentication,
which subscription ids / resource groups / namespaces it answers for, HTTP/1.1 details (keep-alive,
chunked bodies, api-version) and HTTPS with the CA file the emulator writes.

The SDK always sends a token, so the few cases it cannot express (no Authorization header, raw HTTP
framing) use ``http.client``.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from azure.core.exceptions import ClientAuthenticationError, ServiceRequestError
from azure.mgmt.servicebus.models import SBQueue, SBSubscription, SBTopic

from tests.emulator.arm_client import SUBSCRIPTION_ID, Arm, arm, make_client, refusal, unique

if TYPE_CHECKING:
    from emulator.testing import EmulatorHandle

NAMESPACE_PATH = (
    f"/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/rg"
    "/providers/Microsoft.ServiceBus/namespaces/sbemulatorns"
)
API = "api-version=2026-01-01"


@pytest.fixture
def api(emulator: EmulatorHandle) -> Iterator[Arm]:
    client = arm(emulator.management_port, emulator.emulator.management_token)
    yield client
    client.close()


def _request(
    port: int, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def _bearer(emulator: EmulatorHandle) -> dict[str, str]:
    return {"Authorization": f"Bearer {emulator.emulator.management_token}"}


# ---------------------------------------------------------------------------------------------- health


def test_health_answers_without_a_token(emulator: EmulatorHandle) -> None:
    status, headers, body = _request(emulator.management_port, "GET", "/health")

    assert status == 200
    assert headers["Content-Type"].startswith("application/json")
    assert json.loads(body) == {"status": "healthy", "message": "Service is healthy."}
    assert _request(emulator.management_port, "GET", "/nothing-here")[0] == 404


# ---------------------------------------------------------------------------------------------- auth


def test_missing_authorization_is_401_and_changes_nothing(api: Arm, emulator: EmulatorHandle) -> None:
    name = unique("q")
    path = f"{NAMESPACE_PATH}/queues/{name}?{API}"

    status, headers, body = _request(emulator.management_port, "PUT", path, b'{"properties": {}}')

    assert status == 401
    assert json.loads(body)["error"]["code"] == "AuthenticationFailed"
    assert headers["WWW-Authenticate"].startswith("Bearer ")
    assert refusal(lambda: api.queues.get(*api.scope, name)).status_code == 404


@pytest.mark.parametrize("authorization", ["Basic dXNlcjpwYXNz", "Bearer", "Bearer "])
def test_malformed_authorization_is_401(emulator: EmulatorHandle, authorization: str) -> None:
    status, _, body = _request(
        emulator.management_port, "GET", f"{NAMESPACE_PATH}?{API}", headers={"Authorization": authorization}
    )

    assert status == 401
    assert json.loads(body)["error"]["code"] == "AuthenticationFailed"


def test_wrong_token_is_401_and_changes_nothing(api: Arm, emulator: EmulatorHandle) -> None:
    intruder = arm(emulator.management_port, "not-the-token")
    queue, topic = unique("q"), unique("t")
    api.topics.create_or_update(*api.scope, topic, SBTopic())
    try:
        calls: tuple[Callable[[], object], ...] = (
            lambda: intruder.queues.create_or_update(*intruder.scope, queue, SBQueue()),
            lambda: intruder.topics.delete(*intruder.scope, topic),
            lambda: intruder.subscriptions.create_or_update(*intruder.scope, topic, "s", SBSubscription()),
            lambda: intruder.queues.get(*intruder.scope, queue),
        )
        for call in calls:
            with pytest.raises(ClientAuthenticationError) as caught:
                call()
            assert caught.value.status_code == 401
            assert caught.value.error is not None
            assert caught.value.error.code == "InvalidAuthenticationToken"
    finally:
        intruder.close()

    assert refusal(lambda: api.queues.get(*api.scope, queue)).status_code == 404
    assert [s.name for s in api.subscriptions.list_by_topic(*api.scope, topic)] == []


def test_token_is_generated_when_none_is_given(make_emulator: Callable[..., EmulatorHandle]) -> None:
    first, second = make_emulator(), make_emulator()

    tokens = {first.emulator.management_token, second.emulator.management_token}
    assert len(tokens) == 2 and all(len(t) >= 32 for t in tokens)
    client = arm(first.management_port, first.emulator.management_token)
    try:
        assert client.namespaces.get(*client.scope).name == "sbemulatorns"
        other = arm(first.management_port, second.emulator.management_token)
        with pytest.raises(ClientAuthenticationError):
            other.namespaces.get(*other.scope)
        other.close()
    finally:
        client.close()


def test_configured_token_is_used(make_emulator: Callable[..., EmulatorHandle]) -> None:
    handle = make_emulator(management_token="dev-token")

    assert handle.emulator.management_token == "dev-token"
    client = arm(handle.management_port, "dev-token")
    try:
        assert client.namespaces.get(*client.scope).name == "sbemulatorns"
    finally:
        client.close()


def test_https_is_enforced_by_the_sdk_unless_disabled(emulator: EmulatorHandle) -> None:
    client = make_client(f"http://127.0.0.1:{emulator.management_port}", emulator.emulator.management_token)
    try:
        with pytest.raises(ServiceRequestError, match="non-TLS"):
            client.namespaces.get("rg", "sbemulatorns")
        assert client.namespaces.get("rg", "sbemulatorns", enforce_https=False).name == "sbemulatorns"
    finally:
        client.close()


# ---------------------------------------------------------------------------------------------- scope


def test_any_subscription_id_and_resource_group_are_accepted_by_default(emulator: EmulatorHandle) -> None:
    name = unique("q")
    token = emulator.emulator.management_token
    one = arm(emulator.management_port, token, resource_group="group-one")
    other = arm(emulator.management_port, token, resource_group="group-two", subscription_id="1" * 32)
    try:
        one.queues.create_or_update(*one.scope, name, SBQueue())
        seen = other.queues.get(*other.scope, name)
    finally:
        one.close()
        other.close()

    assert seen.id == (
        f"/subscriptions/{'1' * 32}/resourceGroups/group-two/providers/Microsoft.ServiceBus"
        f"/namespaces/sbemulatorns/queues/{name}"
    )


def test_unknown_namespace_is_not_found(emulator: EmulatorHandle) -> None:
    client = arm(emulator.management_port, emulator.emulator.management_token, namespace="otherns")
    try:
        for call in (
            lambda: client.namespaces.get(*client.scope),
            lambda: client.queues.create_or_update(*client.scope, "q", SBQueue()),
            lambda: list(client.topics.list_by_namespace(*client.scope)),
        ):
            error = refusal(call)
            assert error.status_code == 404
            assert error.error is not None and error.error.code == "ResourceNotFound"
    finally:
        client.close()


def test_namespace_name_is_case_insensitive(emulator: EmulatorHandle) -> None:
    client = arm(emulator.management_port, emulator.emulator.management_token, namespace="SBEmulatorNS")
    try:
        assert client.namespaces.get(*client.scope).name == "sbemulatorns"
    finally:
        client.close()


def test_configured_subscription_id_and_resource_group_are_enforced(
    make_emulator: Callable[..., EmulatorHandle],
) -> None:
    handle = make_emulator(
        management_token="t", arm_subscription_id=SUBSCRIPTION_ID, arm_resource_group="rg-1"
    )
    right = arm(handle.management_port, "t", resource_group="RG-1")
    wrong_group = arm(handle.management_port, "t", resource_group="rg-2")
    wrong_subscription = arm(handle.management_port, "t", resource_group="rg-1", subscription_id="1" * 32)
    try:
        right.queues.create_or_update(*right.scope, "kept", SBQueue())

        error = refusal(lambda: wrong_group.queues.create_or_update(*wrong_group.scope, "q", SBQueue()))
        assert error.status_code == 404 and error.error is not None
        assert error.error.code == "ResourceGroupNotFound"
        error = refusal(lambda: wrong_subscription.queues.delete(*wrong_subscription.scope, "kept"))
        assert error.status_code == 404 and error.error is not None
        assert error.error.code == "SubscriptionNotFound"

        assert [q.name for q in right.queues.list_by_namespace(*right.scope)] == ["kept"]
    finally:
        for client in (right, wrong_group, wrong_subscription):
            client.close()


# ---------------------------------------------------------------------------------------------- HTTP


def test_connection_is_kept_alive_across_requests(emulator: EmulatorHandle) -> None:
    name = unique("q")
    connection = http.client.HTTPConnection("127.0.0.1", emulator.management_port, timeout=10)
    try:
        connection.request("GET", "/health")
        first = connection.getresponse()
        assert first.status == 200 and first.getheader("Connection") == "keep-alive"
        first.read()
        socket_before = connection.sock

        connection.request("PUT", f"{NAMESPACE_PATH}/queues/{name}?{API}", b"{}", _bearer(emulator))
        created = connection.getresponse()
        assert created.status == 200
        assert json.loads(created.read())["name"] == name
        connection.request("DELETE", f"{NAMESPACE_PATH}/queues/{name}?{API}", headers=_bearer(emulator))
        deleted = connection.getresponse()
        deleted.read()
        assert deleted.status == 200
        connection.request("DELETE", f"{NAMESPACE_PATH}/queues/{name}?{API}", headers=_bearer(emulator))
        again = connection.getresponse()
        again.read()
        assert again.status == 204

        assert connection.sock is socket_before
    finally:
        connection.close()


def test_sdk_reuses_its_connection(api: Arm, emulator: EmulatorHandle) -> None:
    api.namespaces.get(*api.scope)
    before = emulator.emulator.management.http.accepted

    for _ in range(5):
        api.namespaces.get(*api.scope)
        list(api.queues.list_by_namespace(*api.scope))

    assert emulator.emulator.management.http.accepted == before


def test_chunked_request_body_is_accepted(emulator: EmulatorHandle) -> None:
    name = unique("q")
    connection = http.client.HTTPConnection("127.0.0.1", emulator.management_port, timeout=10)
    try:
        body = iter([b'{"properties": ', b'{"maxDeliveryCount": 7}}'])
        connection.request(
            "PUT",
            f"{NAMESPACE_PATH}/queues/{name}?{API}",
            body=body,
            headers=_bearer(emulator),
            encode_chunked=True,
        )
        response = connection.getresponse()
        document = json.loads(response.read())
    finally:
        connection.close()

    assert response.status == 200
    assert document["properties"]["maxDeliveryCount"] == 7


def test_api_version_is_required(emulator: EmulatorHandle) -> None:
    status, _, body = _request(emulator.management_port, "GET", NAMESPACE_PATH, headers=_bearer(emulator))
    assert status == 400
    assert json.loads(body)["error"]["code"] == "MissingApiVersionParameter"

    status, _, body = _request(
        emulator.management_port, "GET", f"{NAMESPACE_PATH}?api-version=latest", headers=_bearer(emulator)
    )
    assert status == 400
    assert json.loads(body)["error"]["code"] == "InvalidApiVersionParameter"


def test_unsupported_methods_and_paths(emulator: EmulatorHandle) -> None:
    status, headers, body = _request(
        emulator.management_port, "DELETE", f"{NAMESPACE_PATH}?{API}", headers=_bearer(emulator)
    )
    assert status == 405 and headers["Allow"] == "GET"
    assert json.loads(body)["error"]["code"] == "MethodNotAllowed"

    status, _, body = _request(
        emulator.management_port,
        "GET",
        f"{NAMESPACE_PATH}/authorizationRules?{API}",
        headers=_bearer(emulator),
    )
    assert status == 404
    assert json.loads(body)["error"]["code"] == "NotFound"


def test_malformed_request_line_is_400(emulator: EmulatorHandle) -> None:
    import socket

    with socket.create_connection(("127.0.0.1", emulator.management_port), timeout=10) as sock:
        sock.sendall(b"NONSENSE\r\n\r\n")
        reply = sock.recv(4096)

    assert reply.startswith(b"HTTP/1.1 400 ")


# ---------------------------------------------------------------------------------------------- HTTPS


def test_https_with_the_ca_file_the_emulator_writes(
    make_emulator: Callable[..., EmulatorHandle], tmp_path: Path
) -> None:
    handle = make_emulator(
        data_dir=tmp_path, management_token="tls-token", management_tls=True, management_tls_port=0
    )
    emulator = handle.emulator
    assert emulator.management_tls_port is not None and emulator.management_ca_file is not None
    assert emulator.management_ca_file.parent == tmp_path
    assert emulator.management_ca_file.read_text().startswith("-----BEGIN CERTIFICATE-----")

    for host in ("localhost", "127.0.0.1"):
        secure = make_client(
            f"https://{host}:{emulator.management_tls_port}",
            "tls-token",
            connection_verify=str(emulator.management_ca_file),
        )
        try:
            queue = secure.queues.create_or_update("rg", "sbemulatorns", f"over-tls-{host}", SBQueue())
            assert queue.name == f"over-tls-{host}"
        finally:
            secure.close()

    unverified = make_client(f"https://localhost:{emulator.management_tls_port}", "tls-token")
    try:
        with pytest.raises(ServiceRequestError):
            unverified.namespaces.get("rg", "sbemulatorns")
    finally:
        unverified.close()
    plain = arm(handle.management_port, "tls-token")
    try:
        assert {q.name for q in plain.queues.list_by_namespace(*plain.scope)} == {
            "over-tls-localhost",
            "over-tls-127.0.0.1",
        }
    finally:
        plain.close()


def test_https_without_a_data_directory_writes_a_temporary_ca_file(
    make_emulator: Callable[..., EmulatorHandle],
) -> None:
    handle = make_emulator(management_tls=True, management_tls_port=0)
    ca_file = handle.emulator.management_ca_file

    assert ca_file is not None and ca_file.exists()
    handle.thread.stop()
    assert not ca_file.exists()


def test_stopping_drops_a_connection_whose_tls_handshake_never_finishes(
    make_emulator: Callable[..., EmulatorHandle],
) -> None:
    """A client that sends its ClientHello and then nothing has no request handler yet. Since Python 3.12 the
    server's close waits for every connection it accepted; the stop drops this one instead of waiting for the
    TLS handshake timeout (60 s, past the stop's own 30 s bound, so a hang fails ``stop``)."""
    handle = make_emulator(management_tls=True, management_tls_port=0)
    port = handle.emulator.management_tls_port
    assert port is not None
    client = ssl.create_default_context()
    client.check_hostname = False
    client.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = client.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with pytest.raises(ssl.SSLWantReadError):
            tls.do_handshake()
        raw.sendall(outgoing.read())
        assert raw.recv(65536)  # the ServerHello: the emulator accepted the connection and is mid-handshake

        handle.thread.stop()

        try:
            rest = raw.recv(65536)
        except ConnectionResetError:
            rest = b""
        assert rest == b"", "the emulator closed the connection"
