"""Busbar's receiver over TLS, as in Azure: a connection string without ``UseDevelopmentEmulator`` opens
``amqps://`` with python-qpid-proton's default client SSL domain, which verifies the certificate against
OpenSSL's default trusted CAs and checks the peer name. proton documents both defaults
(``proton/_transport.py``, ``SSLDomain.set_trusted_ca_db``: "By default the list of trusted CA certificates
will be set to the system default"; ``set_peer_authentication``: "clients attempt to verify both the
certificate and peer name (PN_SSL_VERIFY_PEER_NAME)"), and ``proton/_reactor.py`` (``Container.connect``:
``connector.ssl_domain = ssl_domain or self.ssl.client``; ``Connector._connect``: ``peer_hostname =
self.ssl_sni or self.virtual_host or url.host``) checks the name the connection gives as ``virtual_host``,
the namespace's host.

The emulator's TLS port (``amqps_port``: AMQP over TLS beside HTTPS) presents a certificate its own CA
signs, naming ``localhost`` (emulator/arm/tls.py). The only knob used to trust it is OpenSSL's
``SSL_CERT_FILE``, in a child process (tests/shared/amqp/tls_client.py), so what runs is the production
path unchanged. Without it the handshake fails verification and nothing is received or settled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from emulator.testing import EmulatorHandle, start_emulator
from shared.amqp.connection import Namespace

pytestmark = pytest.mark.timeout(90)

REPOSITORY = Path(__file__).resolve().parents[3]
CHILD_TIMEOUT = 60


@pytest.fixture(scope="module")
def tls_emulator() -> Iterator[EmulatorHandle]:
    handle = start_emulator(management_tls=True, management_tls_port=0, amqps_port=0)
    yield handle
    handle.stop()


def _ca_file(handle: EmulatorHandle) -> str:
    assert handle.emulator.management_ca_file is not None
    return str(handle.emulator.management_ca_file)


def _azure_style_connection_string(handle: EmulatorHandle) -> str:
    """The emulator's TLS port under the name its certificate carries, as a namespace's connection string
    looks in Azure: no ``UseDevelopmentEmulator``. ``localhost``, not ``127.0.0.1``: the certificate also
    carries 127.0.0.1 as an IP address, but proton's peer-name check (tried here) fails on it as on any name
    the certificate does not give as a DNS name; Azure's hosts are always DNS names."""
    emulator = handle.emulator
    assert emulator.fully_qualified_namespace is not None
    return (
        f"Endpoint=sb://{emulator.fully_qualified_namespace}/;"
        f"SharedAccessKeyName={emulator.options.key_name};SharedAccessKey={emulator.options.key}"
    )


def _run_receiver(
    connection_string: str, queue: str, ca_file: str | None
) -> subprocess.CompletedProcess[str]:
    """tests/shared/amqp/tls_client.py in a child whose only trusted CA source is ``ca_file`` (none: OpenSSL's
    built-in default paths, which do not hold the emulator's CA)."""
    env = {name: value for name, value in os.environ.items() if name not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
    if ca_file is not None:
        env["SSL_CERT_FILE"] = ca_file
    return subprocess.run(
        [sys.executable, "-m", "tests.shared.amqp.tls_client", connection_string, queue],
        cwd=REPOSITORY,
        env=env,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
        check=False,
    )


def _send(handle: EmulatorHandle, queue: str, *message_ids: str) -> None:
    with (
        ServiceBusClient.from_connection_string(handle.connection_string) as client,
        client.get_queue_sender(queue) as sender,
    ):
        sender.send_messages([ServiceBusMessage(f"body of {id_}", message_id=id_) for id_ in message_ids])


def _sdk_peek(handle: EmulatorHandle, queue: str) -> list[str]:
    with (
        ServiceBusClient.from_connection_string(handle.connection_string) as client,
        client.get_queue_receiver(queue) as receiver,
    ):
        return [str(message.message_id) for message in receiver.peek_messages(max_message_count=10)]


def test_an_azure_connection_string_opens_amqps_and_receives_peeks_and_settles_trusting_the_ca(
    tls_emulator: EmulatorHandle,
) -> None:
    queue = tls_emulator.create_queue()
    _send(tls_emulator, queue, "tls-1", "tls-2")
    connection_string = _azure_style_connection_string(tls_emulator)
    namespace = Namespace.from_connection_string(connection_string)
    assert namespace.secure
    assert namespace.url == f"amqps://{tls_emulator.emulator.fully_qualified_namespace}"

    child = _run_receiver(connection_string, queue, _ca_file(tls_emulator))

    assert child.returncode == 0, child.stderr
    assert json.loads(child.stdout) == {
        "url": namespace.url,
        "secure": True,
        "peeked_before": ["tls-1", "tls-2"],
        "received": ["tls-1", "body of tls-1"],
        "peeked_after": ["tls-2"],
    }
    assert _sdk_peek(tls_emulator, queue) == ["tls-2"]


def test_without_the_ca_trusted_the_connection_fails_verification_and_nothing_is_received(
    tls_emulator: EmulatorHandle,
) -> None:
    queue = tls_emulator.create_queue()
    _send(tls_emulator, queue, "untrusted-1")

    child = _run_receiver(_azure_style_connection_string(tls_emulator), queue, None)

    assert child.returncode != 0
    assert child.stdout == ""
    assert "certificate verify failed" in child.stderr
    assert _sdk_peek(tls_emulator, queue) == ["untrusted-1"]
