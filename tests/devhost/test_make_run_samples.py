"""The current SDK's samples run unedited against ``make run``: azure-servicebus 7.15.0's, which sign in with
``DefaultAzureCredential`` and name the namespace with ``SERVICEBUS_FULLY_QUALIFIED_NAMESPACE``, using one
``host:port`` for the admin client (HTTPS) and ``ServiceBusClient`` (AMQP over TLS). Each runs in a fresh
process whose environment holds only what make run's banner prints (docs/emulator.md) and the samples' own
entity-name variables.

``ServiceBusClient`` opens AMQP on port 5671 whatever port the namespace names, so this make run listens on
5671 (``AMQPS_PORT``): the default-ports lock keeps it from racing the guides' walkthroughs for it.
``proxy.py`` sends through the HTTP proxy it names (127.0.0.1:8899, user ``admin``); its test starts one
(``connect_proxy.ConnectProxy``) that tunnels to that port."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from azure.servicebus.management import ServiceBusAdministrationClient

from tests.devhost.connect_proxy import ConnectProxy, ProxyPortTaken
from tests.devhost.test_make_run import MakeRun
from tests.docs.guide_runner import default_ports_lock

# azure-servicebus 7.15.0's samples/{sync,async}_samples, byte-identical (see sdk_samples/README.md).
SAMPLES = Path(__file__).parent / "sdk_samples" / "v7_15_0"
BANNER_VARIABLES = (
    "SERVICEBUS_FULLY_QUALIFIED_NAMESPACE",
    "IDENTITY_ENDPOINT",
    "IDENTITY_HEADER",
    "PYTHONPATH",
)
AMQPS_PORT = 5671  # the SDK's AMQP client dials it whatever port the namespace names
# proxy.py's HTTP_PROXY, fixed in the sample: address, user and password.
PROXY_ADDRESS = ("127.0.0.1", 8899)
PROXY_CREDENTIALS = ("admin", "123456")


def run_sample(sample: str, environment: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, str(SAMPLES / sample)], env=environment, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"{sample}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@dataclass(frozen=True)
class SamplesNamespace:
    """A running ``make run AMQPS_PORT=5671`` and what a user exports from its banner."""

    run: MakeRun
    printed: dict[str, str]  # the banner's NAME=value lines (BANNER_VARIABLES)
    ca_file: str
    admin_connection_string: str

    def environment(self, **entity_names: str) -> dict[str, str]:
        """A sample's whole environment: PATH, the banner's variables, the CA file and entity names."""
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            **self.printed,
            "REQUESTS_CA_BUNDLE": self.ca_file,
            "SSL_CERT_FILE": self.ca_file,
            **entity_names,
        }

    def admin(self) -> ServiceBusAdministrationClient:
        return ServiceBusAdministrationClient.from_connection_string(
            self.admin_connection_string, connection_verify=self.ca_file
        )


@pytest.fixture(scope="module")
def samples_namespace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SamplesNamespace]:
    """One make run for this module's tests (under xdist, one per worker that runs any of them; the
    default-ports lock runs them one after the other)."""
    with default_ports_lock():
        run = MakeRun(tmp_path_factory.mktemp("samples") / "data", f"AMQPS_PORT={AMQPS_PORT}")
        try:
            run.reader.wait_ready(timeout=90)
            yield SamplesNamespace(
                run=run,
                printed={name: run.banner(name) for name in BANNER_VARIABLES},
                ca_file=run.banner("Emulator management CA file"),
                admin_connection_string=run.banner("Service Bus admin connection string"),
            )
            run.interrupt()
        finally:
            run.kill()


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.timeout(600)
def test_the_sdks_current_samples_run_unedited_with_a_managed_identity_against_make_run(
    samples_namespace: SamplesNamespace,
) -> None:
    printed = samples_namespace.printed
    assert printed["SERVICEBUS_FULLY_QUALIFIED_NAMESPACE"] == "localhost:5671"
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/msi/token", printed["IDENTITY_ENDPOINT"])

    queue, topic, subscription = (f"{kind}-{uuid.uuid4().hex[:8]}" for kind in ("q", "t", "s"))
    with samples_namespace.admin() as admin:
        admin.create_queue(queue)
        admin.create_topic(topic)
        admin.create_subscription(topic, subscription)
    environment = samples_namespace.environment(
        SERVICEBUS_QUEUE_NAME=queue, SERVICEBUS_TOPIC_NAME=topic, SERVICEBUS_SUBSCRIPTION_NAME=subscription
    )

    # The certifi the samples import is the stand-in: its bundle holds the emulator's CA.
    where = subprocess.run(
        [sys.executable, "-c", "import certifi; print(certifi.where())"],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(printed["PYTHONPATH"])
    assert Path(samples_namespace.ca_file).read_text().strip() in Path(where).read_text()

    for sample in ("mgmt_queue.py", "mgmt_topic.py", "mgmt_subscription.py", "mgmt_rule.py"):
        output = run_sample(f"sync_samples/{sample}", environment)
        assert re.search(r" is created\.$", output, re.MULTILINE), output
        assert re.search(r" is deleted\.$", output, re.MULTILINE), output
    output = run_sample("async_samples/mgmt_queue_async.py", environment)
    assert "is deleted." in output

    for sample in ("sync_samples/send_queue.py", "async_samples/send_queue_async.py"):
        output = run_sample(sample, environment)
        assert "failed" not in output, output
    received: list[str] = []
    for sample in ("sync_samples/receive_queue.py", "async_samples/receive_queue_async.py"):
        output = run_sample(sample, environment)
        messages = re.findall(r"^(?:Single Message|Message in list|Message inside a .*)$", output, re.M)
        assert messages, output  # each receives some of what the senders sent
        received += messages
    assert received[0] == "Single Message"  # FIFO: the first sample's first message

    # One namespace for the admin client and ServiceBusClient: subscriptions made over HTTPS, then
    # messages sent and received over AMQP, filtered by the rules it set.
    for sample in (
        "sync_samples/topic_subscription_with_rule_operations.py",
        "async_samples/topic_subscription_with_rule_operations_async.py",
    ):
        output = run_sample(sample, environment)
        counts = re.findall(r"^'(\d+)' Messages From Subscription: (\S+)$", output, re.MULTILINE)
        assert counts and any(int(count) > 0 for count, _ in counts), output


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.timeout(600)  # it may wait for the default-ports lock while the test above holds it
def test_the_proxy_sample_sends_through_an_authenticating_http_proxy_tunnel_to_make_run(
    samples_namespace: SamplesNamespace,
) -> None:
    queue = f"q-{uuid.uuid4().hex[:8]}"
    with samples_namespace.admin() as admin:
        admin.create_queue(queue)
    proxy = ConnectProxy(PROXY_ADDRESS, ("127.0.0.1", AMQPS_PORT), *PROXY_CREDENTIALS)
    try:
        proxy.start()
    except ProxyPortTaken as taken:
        pytest.fail(
            f"proxy.py sends through the HTTP proxy it names, 127.0.0.1:8899 (fixed in the sample), and "
            f"another process listens there; stop it and run this test again ({taken})"
        )
    try:
        environment = samples_namespace.environment(SERVICEBUS_QUEUE_NAME=queue)
        output = run_sample("sync_samples/proxy.py", environment)
    finally:
        proxy.close()
    assert "Send message is done." in output, output

    # The SDK went through the proxy, authenticated, to the namespace's WebSocket port (443), which the
    # proxy tunnelled to the emulator; the message is in the queue.
    assert proxy.requests, "proxy.py never reached the proxy"
    asked = {(r.method, r.target, r.authorized) for r in proxy.requests}
    assert asked == {("CONNECT", "localhost:443", True)}, proxy.requests
    with samples_namespace.admin() as admin:
        assert admin.get_queue_runtime_properties(queue).active_message_count == 1
