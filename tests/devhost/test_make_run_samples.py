"""The current SDK's samples run unedited against ``make run``: azure-servicebus 7.15.0's, which sign in with
``DefaultAzureCredential`` and name the namespace with ``SERVICEBUS_FULLY_QUALIFIED_NAMESPACE``, using one
``host:port`` for the admin client (HTTPS) and ``ServiceBusClient`` (AMQP over TLS). Each runs in a fresh
process whose environment holds only what make run's banner prints (docs/emulator.md) and the samples' own
entity-name variables.

``ServiceBusClient`` opens AMQP on port 5671 whatever port the namespace names, so this make run listens on
5671 (``AMQPS_PORT``): the default-ports lock keeps it from racing the guides' walkthroughs for it.
``proxy.py`` sends through the HTTP proxy it names (127.0.0.1:8899, user ``admin``); its test starts one
(``connect_proxy.ConnectProxy``) that tunnels to that port.

azure-servicebus 7.11.4's samples take one connection string for the admin client and ``ServiceBusClient``:
they run unedited with the admin connection string make run prints as ``SERVICEBUS_CONNECTION_STR``, its
``UseDevelopmentEmulator=true`` making ``ServiceBusClient`` speak plain AMQP to the HTTPS port, which takes
both (docs/emulator.md, "One connection string for both clients")."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
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


# azure-servicebus 7.11.4's samples taking SERVICEBUS_CONNECTION_STR, byte-identical (sdk_samples/README.md).
CONNECTION_STRING_SAMPLES = Path(__file__).parent / "sdk_samples" / "v7_11_4"
# 7.11.4's topic_subscription_with_rule_operations: its four subscriptions, how many of the nine messages it
# sends each matches (its own comments: all, Color = 'Red', Color = 'Blue', the one Red "important") and
# the (color, correlation id) each received message must print: the last one's correlation filter is
# ``correlation_id='important', label='Red'``, and the third's action sets Color to 'BlueProcessed'.
RULE_SAMPLE_MATCHES = {
    "sb-allmsgs-sub": (9, None),
    "sb-sqlfilteronly-sub": (3, {("Red", "None"), ("Red", "important"), ("Red", "notimportant")}),
    "sb-sqlfilteraction-sub": (
        3,
        {("BlueProcessed", "None"), ("BlueProcessed", "important"), ("BlueProcessed", "notimportant")},
    ),
    "sb-corrfiltersub": (1, {("Red", "important")}),
}
# The rest of 7.11.4's connection-string samples that end by themselves, sync and aio alike. Left out:
# receive_iterator_queue and failure_and_recovery (they iterate a receiver with no max_wait_time: they
# never end), auto_lock_renew (sleeps minutes on purpose, see docs/emulator.md), proxy (needs an HTTP proxy
# on 127.0.0.1:8899; 7.15.0's is run above), connection_to_custom_endpoint_address (its address is a
# placeholder to edit) and those that take a namespace name instead of a connection string.
CONNECTION_STRING_SAMPLE_NAMES = (
    "authenticate_client_connstr",
    "deadletter_messages_and_correct",
    "mgmt_queue",
    "mgmt_rule",
    "mgmt_subscription",
    "mgmt_topic",
    "receive_deadlettered_messages",
    "receive_deferred_message_queue",
    "receive_peek",
    "receive_queue",
    "receive_subscription",
    "schedule_messages_and_cancellation",
    "schedule_topic_messages_and_cancellation",
    "send_and_receive_amqp_annotated_message",
    "send_queue",
    "send_topic",
    "session_pool_receive",
    "session_send_receive",
)
SAMPLES_AT_ONCE = 4  # connection-string samples run side by side (each on entities of its own)


def run_sample(sample: str, environment: dict[str, str], samples: Path = SAMPLES) -> str:
    result = subprocess.run(
        [sys.executable, str(samples / sample)], env=environment, capture_output=True, text=True, timeout=120
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

    def connection_string_environment(self, **entity_names: str) -> dict[str, str]:
        """A 7.11.4 sample's whole environment: PATH, the admin connection string make run prints as
        ``SERVICEBUS_CONNECTION_STR`` (for the admin client and ServiceBusClient alike), the CA file and
        entity names. Nothing else: no certifi stand-in, since ServiceBusClient speaks plain AMQP."""
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "SERVICEBUS_CONNECTION_STR": self.admin_connection_string,
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
    # messages sent and received over AMQP, filtered by the rules it set. Sync and async side by side, each
    # on a topic of its own (the sample's subscription names are fixed).
    def run_on_a_topic_of_its_own(sample: str) -> str:
        rule_topic = f"t-{uuid.uuid4().hex[:8]}"
        with samples_namespace.admin() as admin:
            admin.create_topic(rule_topic)
        return run_sample(sample, {**environment, "SERVICEBUS_TOPIC_NAME": rule_topic})

    rule_samples = (
        "sync_samples/topic_subscription_with_rule_operations.py",
        "async_samples/topic_subscription_with_rule_operations_async.py",
    )
    with ThreadPoolExecutor(max_workers=len(rule_samples)) as pool:
        outputs = list(pool.map(run_on_a_topic_of_its_own, rule_samples))
    for output in outputs:
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


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.timeout(600)
def test_the_rule_sample_sends_and_receives_with_the_one_admin_connection_string_make_run_prints(
    samples_namespace: SamplesNamespace,
) -> None:
    # One string for both clients, as on Azure: HTTPS for the admin client, plain AMQP (the SDK's
    # UseDevelopmentEmulator) for ServiceBusClient, on the port the admin connection string names.
    assert "UseDevelopmentEmulator=true" in samples_namespace.admin_connection_string

    def run_on_a_topic_of_its_own(sample: str) -> tuple[str, str]:
        """The sample's topic and output (its subscriptions' names are fixed: one topic per run)."""
        topic = f"t-{uuid.uuid4().hex[:8]}"
        with samples_namespace.admin() as admin:
            admin.create_topic(topic)
        environment = samples_namespace.connection_string_environment(SERVICEBUS_TOPIC_NAME=topic)
        return topic, run_sample(sample, environment, CONNECTION_STRING_SAMPLES)

    samples = (
        "sync_samples/topic_subscription_with_rule_operations.py",
        "async_samples/topic_subscription_with_rule_operations_async.py",
    )
    with ThreadPoolExecutor(max_workers=len(samples)) as pool:  # each on its own topic: side by side
        runs = list(pool.map(run_on_a_topic_of_its_own, samples))
    for topic, output in runs:
        sections = re.findall(
            r"^Receiving Messages From Subscription: (\S+)$(.*?)^'(\d+)' Messages From Subscription: \1$",
            output,
            re.MULTILINE | re.DOTALL,
        )
        assert [name for name, _, _ in sections] == list(RULE_SAMPLE_MATCHES), output
        for name, lines, count in sections:
            matches, allowed = RULE_SAMPLE_MATCHES[name]
            # One receive_messages call each (up to 10, 5 s): it may take fewer than all that matched.
            assert 1 <= int(count) <= matches, output
            printed = re.findall(r"^Color Property = (\S+), Correlation ID = (\S+)$", lines, re.MULTILINE)
            assert len(printed) == int(count), output
            if allowed is not None:
                assert set(printed) <= allowed, f"{name}: {printed}"
        with samples_namespace.admin() as admin:
            assert [s.name for s in admin.list_subscriptions(topic)] == []  # the sample deleted its own


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.timeout(900)
def test_every_connection_string_sample_that_ends_runs_with_the_admin_connection_string(
    samples_namespace: SamplesNamespace,
) -> None:
    def run_with_fresh_entities(sample: str) -> str | None:
        """Runs ``sample`` on entities of its own; what went wrong, or None."""
        queue, topic, subscription, session_queue = (
            f"{kind}-{uuid.uuid4().hex[:8]}" for kind in ("q", "t", "s", "sq")
        )
        with samples_namespace.admin() as admin:
            admin.create_queue(queue)
            admin.create_topic(topic)
            admin.create_subscription(topic, subscription)
            admin.create_queue(session_queue, requires_session=True)
        environment = samples_namespace.connection_string_environment(
            SERVICEBUS_QUEUE_NAME=queue,
            SERVICEBUS_TOPIC_NAME=topic,
            SERVICEBUS_SUBSCRIPTION_NAME=subscription,
            SERVICEBUS_SESSION_QUEUE_NAME=session_queue,
            SERVICEBUS_SESSION_ID=f"session-{uuid.uuid4().hex[:8]}",
        )
        result = subprocess.run(
            [sys.executable, str(CONNECTION_STRING_SAMPLES / sample)],
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if result.returncode != 0:
            return f"{sample} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
        return None

    samples = [
        sample
        for name in CONNECTION_STRING_SAMPLE_NAMES
        for sample in (f"sync_samples/{name}.py", f"async_samples/{name}_async.py")
    ]
    # Several at once: most of a sample's time is its receivers' max_wait_time (5 s, idle), and each has
    # entities of its own (the ones it creates itself carry a uuid), so none sees another's messages.
    with ThreadPoolExecutor(max_workers=SAMPLES_AT_ONCE) as pool:
        failures = [failure for failure in pool.map(run_with_fresh_entities, samples) if failure]
    assert not failures, "\n\n".join(failures)
