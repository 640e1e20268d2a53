"""Links do not outlive their token: when a CBS token expires and no new one covers the link's entity, the
broker detaches the link with ``amqp:unauthorized-access``, as Azure does. The SDK renews its tokens well
before they expire (a tenth of their life), so its links are never touched; a client holding a fixed SAS
token cannot renew, and its sender stops working once the token runs out."""

from __future__ import annotations

import time
from urllib.parse import quote_plus

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusError

from emulator.auth import DEFAULT_KEY, DEFAULT_KEY_NAME, sign
from emulator.testing import EmulatorHandle
from tests.emulator.sdk_helpers import sdk_client


def _token_connection_string(emulator: EmulatorHandle, queue: str, lifetime: int) -> str:
    host = f"localhost:{emulator.amqp_port}"
    resource = quote_plus(f"sb://{host}/{queue}")
    expiry = int(time.time()) + lifetime
    signature = quote_plus(sign(resource, expiry, DEFAULT_KEY))
    token = f"SharedAccessSignature sr={resource}&sig={signature}&se={expiry}&skn={DEFAULT_KEY_NAME}"
    return f"Endpoint=sb://{host};SharedAccessSignature={token};UseDevelopmentEmulator=true"


@pytest.mark.emulator_only
def test_a_sender_whose_token_expires_unrenewed_is_detached_and_cannot_send(emulator: EmulatorHandle) -> None:
    queue = emulator.create_queue()
    with (
        ServiceBusClient.from_connection_string(
            _token_connection_string(emulator, queue, lifetime=4), retry_total=0
        ) as client,
        client.get_queue_sender(queue) as sender,
    ):
        sender.send_messages(ServiceBusMessage("before"))
        time.sleep(5.5)  # the token has expired; the broker has detached the link
        with pytest.raises(ServiceBusError):
            sender.send_messages(ServiceBusMessage("after"))
    with sdk_client(emulator) as client, client.get_queue_receiver(queue, max_wait_time=2) as receiver:
        received = receiver.receive_messages(max_message_count=5, max_wait_time=2)
    assert [str(m) for m in received] == ["before"]


@pytest.mark.emulator_only
def test_a_client_with_a_renewable_key_keeps_its_links(emulator: EmulatorHandle) -> None:
    queue = emulator.create_queue()
    namespace = emulator.emulator.namespace
    with sdk_client(emulator, retry_total=0) as client, client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage("one"))
        # The broker checks again at every expiry; a token an hour long keeps the link through any check.
        for connection in list(emulator.emulator.amqp.connections):
            emulator.call(connection.enforce_token_expiry)
        sender.send_messages(ServiceBusMessage("two"))
    counts = emulator.call(lambda: namespace.counts(namespace.queues[queue.lower()]))
    assert isinstance(counts, dict) and counts["activeMessageCount"] == 2
