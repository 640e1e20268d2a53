"""One connection string for both clients: the emulator's HTTPS ports take plain AMQP too.

With ``UseDevelopmentEmulator=true``, azure-servicebus opens AMQP *without* TLS to the port its ``Endpoint``
names (``ServiceBusClient.from_connection_string`` sets ``use_tls = not emulator``; ``_pyamqp/_connection.py``
keeps the URL's port only when ``use_tls`` is off), while ``ServiceBusAdministrationClient`` speaks HTTPS to
that same ``host:port`` whatever the flag (``management/_management_client.py``: ``"https://" +
fully_qualified_namespace``). Each port that serves HTTPS therefore tells a TLS ClientHello (``0x16``) from
AMQP's header (``AMQP``) by the first byte; anything else, or nothing at all, is closed cleanly (a FIN, not a
reset) and the port keeps serving everyone else.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.aio.management import ServiceBusAdministrationClient as AsyncAdministrationClient
from azure.servicebus.management import (
    CorrelationRuleFilter,
    ServiceBusAdministrationClient,
    SqlRuleAction,
    SqlRuleFilter,
)

from emulator.testing import EmulatorHandle, start_emulator

SASL_HEADER = b"AMQP\x03\x01\x00\x00"  # AMQP 1.0 5.3.1: the SASL security layer's protocol header
pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def namespace() -> Iterator[EmulatorHandle]:
    handle = start_emulator(management_tls=True, management_tls_port=0, amqps_port=0)
    yield handle
    handle.stop()


def ca_file(handle: EmulatorHandle) -> str:
    assert handle.emulator.management_ca_file is not None
    return str(handle.emulator.management_ca_file)


def https_ports(handle: EmulatorHandle) -> dict[str, int]:
    """The management HTTPS port (the admin connection string's) and the namespace's TLS port (5671's)."""
    emulator = handle.emulator
    assert emulator.management_tls_port is not None and emulator.amqps_port is not None
    return {"management": emulator.management_tls_port, "namespace": emulator.amqps_port}


def connection_string(handle: EmulatorHandle, port: int) -> str:
    """What the emulator prints as its admin connection string, for ``port``."""
    options = handle.emulator.options
    return (
        f"Endpoint=sb://localhost:{port};SharedAccessKeyName={options.key_name};"
        f"SharedAccessKey={options.key};UseDevelopmentEmulator=true;"
    )


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def provision_filtered_topic(admin: ServiceBusAdministrationClient) -> str:
    """A topic whose subscription ``red`` takes Color = 'Red' (stamped by an action) and ``urgent`` the
    correlation id ``urgent``: what the SDK's rule sample sets up."""
    topic = fresh("t")
    admin.create_topic(topic)
    admin.create_subscription(topic, "red")
    admin.delete_rule(topic, "red", "$Default")
    admin.create_rule(
        topic, "red", "red", filter=SqlRuleFilter("Color = 'Red'"), action=SqlRuleAction("SET Seen = 1")
    )
    admin.create_subscription(topic, "urgent")
    admin.delete_rule(topic, "urgent", "$Default")
    admin.create_rule(topic, "urgent", "urgent", filter=CorrelationRuleFilter(correlation_id="urgent"))
    return topic


def messages() -> list[ServiceBusMessage]:
    return [
        ServiceBusMessage("red", application_properties={"Color": "Red"}),
        ServiceBusMessage("blue urgent", application_properties={"Color": "Blue"}, correlation_id="urgent"),
        ServiceBusMessage("green", application_properties={"Color": "Green"}),
    ]


@pytest.mark.parametrize("port_name", ["management", "namespace"])
def test_the_admin_connection_string_serves_the_admin_client_and_service_bus_client_on_one_port(
    namespace: EmulatorHandle, port_name: str
) -> None:
    conn_str = connection_string(namespace, https_ports(namespace)[port_name])
    with ServiceBusAdministrationClient.from_connection_string(
        conn_str, connection_verify=ca_file(namespace)
    ) as admin:
        topic = provision_filtered_topic(admin)
        with ServiceBusClient.from_connection_string(conn_str, retry_total=0) as client:
            with client.get_topic_sender(topic) as sender:
                sender.send_messages(messages())
            received: dict[str, list[str]] = {}
            for subscription in ("red", "urgent"):
                with client.get_subscription_receiver(topic, subscription, max_wait_time=5) as receiver:
                    batch = receiver.receive_messages(max_message_count=10, max_wait_time=5)
                    for message in batch:
                        receiver.complete_message(message)
                    received[subscription] = [str(m) for m in batch]
                    if subscription == "red":
                        assert [(m.application_properties or {}).get(b"Seen") for m in batch] == [1]
        assert received == {"red": ["red"], "urgent": ["blue urgent"]}
        # Completed over AMQP, counted over HTTPS: both clients saw one namespace.
        for subscription in ("red", "urgent"):
            counts = admin.get_subscription_runtime_properties(topic, subscription)
            assert counts.active_message_count == 0


def test_the_async_clients_share_the_admin_connection_string_too(namespace: EmulatorHandle) -> None:
    conn_str = connection_string(namespace, https_ports(namespace)["management"])

    async def scenario() -> tuple[list[str], int | None]:
        verify = ca_file(namespace)
        async with AsyncAdministrationClient.from_connection_string(
            conn_str, connection_verify=verify
        ) as admin:
            queue = fresh("q")
            await admin.create_queue(queue)
            async with AsyncServiceBusClient.from_connection_string(conn_str, retry_total=0) as client:
                async with client.get_queue_sender(queue) as sender:
                    await sender.send_messages([ServiceBusMessage("one"), ServiceBusMessage("two")])
                async with client.get_queue_receiver(queue, max_wait_time=5) as receiver:
                    first = await receiver.receive_messages(max_message_count=1, max_wait_time=5)
                    for message in first:
                        await receiver.complete_message(message)
            left = (await admin.get_queue_runtime_properties(queue)).active_message_count
        return [str(m) for m in first], left

    assert asyncio.run(scenario()) == (["one"], 1)


@pytest.mark.parametrize("port_name", ["management", "namespace"])
def test_the_amqp_header_sent_in_the_clear_is_answered_in_the_clear(
    namespace: EmulatorHandle, port_name: str
) -> None:
    port = https_ports(namespace)[port_name]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        raw.sendall(SASL_HEADER)
        assert receive_exactly(raw, len(SASL_HEADER)) == SASL_HEADER


def receive_exactly(raw: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = raw.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def receive_until_closed(raw: socket.socket) -> bytes:
    """Everything the server sends until it closes; a reset instead of a clean close raises."""
    data = b""
    while chunk := raw.recv(4096):
        data += chunk
    return data


MALFORMED_OPENINGS = {
    "an HTTP request in the clear": b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n",
    "zero bytes": b"\x00\x00\x00\x00\x00\x00\x00\x00",
    "a TLS record type with garbage after it": b"\x16\x00garbage that is no handshake",
    "a single unknown byte": b"\xff",
}


@pytest.mark.parametrize("opening", list(MALFORMED_OPENINGS), ids=list(MALFORMED_OPENINGS))
@pytest.mark.parametrize("port_name", ["management", "namespace"])
def test_a_connection_opening_with_neither_tls_nor_amqp_is_closed_cleanly_and_the_port_keeps_serving(
    namespace: EmulatorHandle, port_name: str, opening: str
) -> None:
    port = https_ports(namespace)[port_name]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        raw.sendall(MALFORMED_OPENINGS[opening])
        answer = receive_until_closed(raw)
    # Nothing an HTTP or TLS client could mistake for an answer: no HTTP response, no ServerHello.
    assert not answer.startswith((b"HTTP/", b"\x16\x03")), answer
    assert_port_serves_both_clients(namespace, port)


@pytest.mark.parametrize("port_name", ["management", "namespace"])
def test_a_connection_closed_before_its_first_byte_is_closed_and_the_port_keeps_serving(
    namespace: EmulatorHandle, port_name: str
) -> None:
    port = https_ports(namespace)[port_name]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        raw.shutdown(socket.SHUT_WR)
        assert receive_until_closed(raw) == b""
    assert_port_serves_both_clients(namespace, port)


def test_an_amqp_header_of_an_unknown_version_gets_amqps_answer_and_a_close(
    namespace: EmulatorHandle,
) -> None:
    port = https_ports(namespace)["management"]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        raw.sendall(b"AMQP\x09\x09\x09\x09")
        # AMQP 1.0 2.2: a header the server does not support is answered with one it does, then closed.
        assert receive_until_closed(raw) == SASL_HEADER
    assert_port_serves_both_clients(namespace, port)


def assert_port_serves_both_clients(handle: EmulatorHandle, port: int) -> None:
    conn_str = connection_string(handle, port)
    with ServiceBusAdministrationClient.from_connection_string(
        conn_str, connection_verify=ca_file(handle), retry_total=0
    ) as admin:
        queue = fresh("q")
        admin.create_queue(queue)
        with (
            ServiceBusClient.from_connection_string(conn_str, retry_total=0) as client,
            client.get_queue_sender(queue) as sender,
        ):
            sender.send_messages(ServiceBusMessage("still serving"))
        assert admin.get_queue_runtime_properties(queue).active_message_count == 1
