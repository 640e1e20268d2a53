"""Busbar's receiver over TLS, as in Azure: a connection string without ``UseDevelopmentEmulator`` opens
``amqps://`` with python-qpid-proton's default client SSL domain, which verifies the certificate against
OpenSSL's default trusted CAs and checks the peer name. proton documents both defaults
(``proton/_transport.py``, ``SSLDomain.set_trusted_ca_db``: "By default the list of trusted CA certificates
will be set to the system default"; ``set_peer_authentication``: "clients attempt to verify both the
certificate and peer name (PN_SSL_VERIFY_PEER_NAME)"), and ``proton/_reactor.py`` (``Container.connect``:
``connector.ssl_domain = ssl_domain or self.ssl.client``; ``Connector._connect``: ``peer_hostname =
self.ssl_sni or self.virtual_host or url.host``) checks the name the connection gives as ``virtual_host``,
the namespace's host. proton-c (apache/qpid-proton ``c/src/ssl/openssl.c``) is where the defaults are set:
``pni_init_ssl_domain`` gives a client domain ``PN_SSL_VERIFY_PEER_NAME`` and
``SSL_CTX_set_default_verify_paths`` (which reads ``SSL_CERT_FILE``), and ``verify_callback`` accepts the
peer only if its name matches a DNS subject alternative name or the common name.

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


def _azure_style_connection_string(handle: EmulatorHandle, host: str = "localhost") -> str:
    """The emulator's TLS port reached as ``host`` (by default the name its certificate carries), in a
    connection string as a namespace's looks in Azure: no ``UseDevelopmentEmulator``."""
    emulator = handle.emulator
    assert emulator.amqps_port is not None
    return (
        f"Endpoint=sb://{host}:{emulator.amqps_port}/;"
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
    assert namespace.url == f"amqps://localhost:{tls_emulator.emulator.amqps_port}"

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


def test_trusting_the_ca_a_host_the_certificate_does_not_name_is_refused_so_the_peer_name_is_checked(
    tls_emulator: EmulatorHandle,
) -> None:
    """Same server, same trusted CA, the same socket address: only the name differs. 127.0.0.1 is on the
    certificate as an IP address only, and proton's ``verify_callback`` matches the peer name against DNS
    names and the common name (``localhost``), never IP addresses, so the handshake is refused. (Azure's
    hosts are DNS names: ``<namespace>.servicebus.windows.net``.)"""
    queue = tls_emulator.create_queue()
    _send(tls_emulator, queue, "wrong-name-1")

    child = _run_receiver(
        _azure_style_connection_string(tls_emulator, host="127.0.0.1"), queue, _ca_file(tls_emulator)
    )

    assert child.returncode != 0
    assert child.stdout == ""
    assert "certificate verify failed" in child.stderr
    assert _sdk_peek(tls_emulator, queue) == ["wrong-name-1"]
