"""Behaviour specs for authentication: CBS put-token with Shared Access Signatures, through the real SDK.

The SDK authenticates every connection with one CBS put-token whose audience is ``sb://host:port/<entity>``
(amqp-dialect.md 3.2-3.4). The emulator must check the token's key name, signature, expiry and resource
(``sr``) against its configured key, the way Service Bus does, and the SDK must surface a refusal as
``ServiceBusAuthenticationError``. Where the refusal is the emulator's alone, the test also checks that the
refused sender delivered nothing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
import uuid
from typing import Any
from urllib.parse import quote_plus, urlencode

import pytest
from azure.core.credentials import AccessToken, AzureNamedKeyCredential, AzureSasCredential
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.exceptions import ServiceBusAuthenticationError

DEFAULT_KEY_NAME = "RootManageSharedAccessKey"
DEFAULT_KEY = "SAS_KEY_VALUE"


# ---------------------------------------------------------------------------------------------- helpers


def sas_token(uri: str, key_name: str, key: str, expiry: int, *, signed_expiry: int | None = None) -> str:
    """A SAS token exactly as the SDK builds one (``_pyamqp/utils.py generate_sas_token``).

    ``signed_expiry`` signs a different expiry than the one stated in ``se`` (a tampered token).
    """
    encoded_uri = quote_plus(uri)
    signed = expiry if signed_expiry is None else signed_expiry
    digest = hmac.new(key.encode("utf-8"), f"{encoded_uri}\n{signed}".encode(), hashlib.sha256).digest()
    signature = base64.b64encode(digest).decode("utf-8")
    return "SharedAccessSignature " + urlencode(
        {"sr": uri, "sig": signature, "se": str(expiry), "skn": quote_plus(key_name)}
    )


def audience(port: int, entity: str = "") -> str:
    return f"sb://localhost:{port}/{entity}"


def connection_string(port: int, *, key_name: str = DEFAULT_KEY_NAME, key: str = DEFAULT_KEY) -> str:
    return (
        f"Endpoint=sb://localhost:{port};SharedAccessKeyName={key_name};SharedAccessKey={key};"
        "UseDevelopmentEmulator=true"
    )


def sas_connection_string(port: int, token: str) -> str:
    return f"Endpoint=sb://localhost:{port};SharedAccessSignature={token};UseDevelopmentEmulator=true"


def client_for(port: int, credential: Any) -> ServiceBusClient:
    return ServiceBusClient(f"localhost:{port}", credential, use_tls=False, retry_total=0)


class FixedTokenCredential:
    """A credential that hands the SDK a fixed SAS token but claims it is valid for another hour.

    The SDK checks expiry only against what the credential reports, so this isolates the emulator's own
    check of the token's ``se`` field.
    """

    token_type = b"servicebus.windows.net:sastoken"

    def __init__(self, token: str) -> None:
        self.token = token

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken(self.token, int(time.time()) + 3600)


def send_one(client: ServiceBusClient, queue: str, body: str = "payload") -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage(body, message_id=str(uuid.uuid4())))


def receive_bodies(client: ServiceBusClient, queue: str, count: int, **receiver_kwargs: Any) -> list[str]:
    bodies: list[str] = []
    with client.get_queue_receiver(queue, **receiver_kwargs) as receiver:
        deadline = time.monotonic() + 10
        while len(bodies) < count and time.monotonic() < deadline:
            for message in receiver.receive_messages(max_message_count=count - len(bodies), max_wait_time=5):
                receiver.complete_message(message)
                bodies.append(str(message))
    return bodies


def assert_round_trip(client: ServiceBusClient, queue: str) -> None:
    body = f"round-trip-{uuid.uuid4()}"
    send_one(client, queue, body)
    assert receive_bodies(client, queue, 1) == [body]


def assert_queue_empty(
    port: int, queue: str, *, key_name: str = DEFAULT_KEY_NAME, key: str = DEFAULT_KEY
) -> None:
    """Nothing was delivered to ``queue`` (checked with valid credentials)."""
    with (
        ServiceBusClient.from_connection_string(
            connection_string(port, key_name=key_name, key=key), retry_total=0
        ) as client,
        client.get_queue_receiver(queue) as receiver,
    ):
        assert receiver.peek_messages(max_message_count=10) == []


def assert_send_refused(client: ServiceBusClient, queue: str) -> None:
    with client, pytest.raises(ServiceBusAuthenticationError):
        send_one(client, queue)


def assert_receive_refused(client: ServiceBusClient, queue: str) -> None:
    with client, pytest.raises(ServiceBusAuthenticationError):  # noqa: SIM117 - raises must wrap the open
        with client.get_queue_receiver(queue) as receiver:
            receiver.receive_messages(max_message_count=1, max_wait_time=2)


# ---------------------------------------------------------------------------------------------- keys


@pytest.mark.emulator_only
def test_default_key_works_from_the_connection_string_and_as_named_key_credential(emulator: Any) -> None:
    queue = emulator.create_queue()

    with ServiceBusClient.from_connection_string(emulator.connection_string, retry_total=0) as client:
        send_one(client, queue, "sent with the connection string")
    with client_for(emulator.amqp_port, AzureNamedKeyCredential(DEFAULT_KEY_NAME, DEFAULT_KEY)) as client:
        assert receive_bodies(client, queue, 1) == ["sent with the connection string"]


@pytest.mark.emulator_only
def test_wrong_shared_access_key_is_refused_for_send(emulator: Any) -> None:
    queue = emulator.create_queue()
    client = ServiceBusClient.from_connection_string(
        connection_string(emulator.amqp_port, key="not-the-key"), retry_total=0
    )

    assert_send_refused(client, queue)
    assert_queue_empty(emulator.amqp_port, queue)


@pytest.mark.emulator_only
def test_wrong_shared_access_key_is_refused_for_receive(emulator: Any) -> None:
    queue = emulator.create_queue()
    client = ServiceBusClient.from_connection_string(
        connection_string(emulator.amqp_port, key="not-the-key"), retry_total=0
    )

    assert_receive_refused(client, queue)


@pytest.mark.emulator_only
def test_unknown_shared_access_key_name_is_refused(emulator: Any) -> None:
    queue = emulator.create_queue()
    client = ServiceBusClient.from_connection_string(
        connection_string(emulator.amqp_port, key_name="NoSuchPolicy"), retry_total=0
    )

    assert_send_refused(client, queue)


@pytest.mark.emulator_only
def test_unknown_key_name_with_the_right_key_value_is_refused(emulator: Any) -> None:
    queue = emulator.create_queue()
    credential = AzureNamedKeyCredential("SomeOtherPolicy", DEFAULT_KEY)

    assert_send_refused(client_for(emulator.amqp_port, credential), queue)


# ---------------------------------------------------------------------------------------------- tokens


@pytest.mark.emulator_only
def test_valid_entity_token_in_connection_string_works(emulator: Any) -> None:
    queue = emulator.create_queue()
    port = emulator.amqp_port
    token = sas_token(audience(port, queue), DEFAULT_KEY_NAME, DEFAULT_KEY, int(time.time()) + 600)

    with ServiceBusClient.from_connection_string(sas_connection_string(port, token), retry_total=0) as client:
        assert_round_trip(client, queue)


@pytest.mark.emulator_only
def test_expired_token_in_connection_string_is_refused(emulator: Any) -> None:
    queue = emulator.create_queue()
    port = emulator.amqp_port
    token = sas_token(audience(port, queue), DEFAULT_KEY_NAME, DEFAULT_KEY, int(time.time()) - 60)
    client = ServiceBusClient.from_connection_string(sas_connection_string(port, token), retry_total=0)

    assert_send_refused(client, queue)


@pytest.mark.emulator_only
def test_expired_token_is_refused_by_the_emulator_itself(emulator: Any) -> None:
    """The credential claims the token is still valid, so only the emulator can notice ``se`` is past."""
    queue = emulator.create_queue()
    port = emulator.amqp_port
    token = sas_token(audience(port, queue), DEFAULT_KEY_NAME, DEFAULT_KEY, int(time.time()) - 60)

    assert_send_refused(client_for(port, FixedTokenCredential(token)), queue)


@pytest.mark.emulator_only
def test_tampered_expiry_is_refused(emulator: Any) -> None:
    """A token whose ``se`` was pushed into the future after signing has an invalid signature."""
    queue = emulator.create_queue()
    port = emulator.amqp_port
    now = int(time.time())
    token = sas_token(
        audience(port, queue), DEFAULT_KEY_NAME, DEFAULT_KEY, now + 3600, signed_expiry=now + 60
    )

    assert_send_refused(client_for(port, AzureSasCredential(token)), queue)


@pytest.mark.emulator_only
def test_token_signed_with_another_key_is_refused(emulator: Any) -> None:
    queue = emulator.create_queue()
    port = emulator.amqp_port
    token = sas_token(audience(port, queue), DEFAULT_KEY_NAME, "some-other-key", int(time.time()) + 600)

    assert_send_refused(client_for(port, AzureSasCredential(token)), queue)


@pytest.mark.emulator_only
def test_token_for_another_entity_is_refused_for_send(emulator: Any) -> None:
    queue = emulator.create_queue()
    port = emulator.amqp_port
    token = sas_token(audience(port, "other-queue"), DEFAULT_KEY_NAME, DEFAULT_KEY, int(time.time()) + 600)

    assert_send_refused(client_for(port, AzureSasCredential(token)), queue)
    assert_queue_empty(port, queue)


@pytest.mark.emulator_only
def test_token_for_another_entity_is_refused_for_receive(emulator: Any) -> None:
    queue = emulator.create_queue()
    other = emulator.create_queue()
    port = emulator.amqp_port
    token = sas_token(audience(port, other), DEFAULT_KEY_NAME, DEFAULT_KEY, int(time.time()) + 600)

    assert_receive_refused(client_for(port, AzureSasCredential(token)), queue)


@pytest.mark.emulator_only
def test_entity_token_does_not_cover_a_queue_whose_name_merely_starts_with_it(emulator: Any) -> None:
    """``sr`` scopes a path and its children (``q/...``), not every name with the same prefix (``q-x``)."""
    queue = emulator.create_queue()
    longer = emulator.create_queue(name=queue + "-extra")
    port = emulator.amqp_port
    token = sas_token(audience(port, queue), DEFAULT_KEY_NAME, DEFAULT_KEY, int(time.time()) + 600)

    assert_send_refused(client_for(port, AzureSasCredential(token)), longer)
    assert_queue_empty(port, longer)


@pytest.mark.emulator_only
def test_entity_token_covers_the_entitys_dead_letter_queue(emulator: Any) -> None:
    queue = emulator.create_queue()
    port = emulator.amqp_port
    token = sas_token(audience(port, queue), DEFAULT_KEY_NAME, DEFAULT_KEY, int(time.time()) + 600)

    with client_for(port, AzureSasCredential(token)) as client:
        send_one(client, queue, "to the DLQ")
        with client.get_queue_receiver(queue) as receiver:
            messages = receiver.receive_messages(max_message_count=1, max_wait_time=10)
            assert len(messages) == 1
            receiver.dead_letter_message(messages[0], reason="test", error_description="auth test")
        dead = receive_bodies(client, queue, 1, sub_queue=ServiceBusSubQueue.DEAD_LETTER)

    assert dead == ["to the DLQ"]


@pytest.mark.emulator_only
def test_namespace_wide_token_works_for_any_queue(emulator: Any) -> None:
    first = emulator.create_queue()
    second = emulator.create_queue()
    port = emulator.amqp_port
    token = sas_token(audience(port), DEFAULT_KEY_NAME, DEFAULT_KEY, int(time.time()) + 600)

    with client_for(port, AzureSasCredential(token)) as client:
        send_one(client, first, "to the first queue")
        send_one(client, second, "to the second queue")
        assert receive_bodies(client, first, 1) == ["to the first queue"]
        assert receive_bodies(client, second, 1) == ["to the second queue"]


# ---------------------------------------------------------------------------------------------- custom key


@pytest.mark.emulator_only
def test_custom_key_works_and_the_default_key_then_fails(make_emulator: Any) -> None:
    private = make_emulator(key_name="MyPolicy", key="secret")
    queue = private.create_queue()
    port = private.amqp_port

    assert "SharedAccessKeyName=MyPolicy;" in private.connection_string
    assert "SharedAccessKey=secret;" in private.connection_string
    with client_for(port, AzureNamedKeyCredential("MyPolicy", "secret")) as client:
        send_one(client, queue, "named key")
    with ServiceBusClient.from_connection_string(private.connection_string, retry_total=0) as client:
        assert receive_bodies(client, queue, 1) == ["named key"]

    assert_send_refused(
        ServiceBusClient.from_connection_string(connection_string(port), retry_total=0), queue
    )
    # The right key name with the default key value is refused too.
    assert_send_refused(client_for(port, AzureNamedKeyCredential("MyPolicy", DEFAULT_KEY)), queue)
