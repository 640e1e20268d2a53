"""The current SDK's samples run unedited against ``make run``: azure-servicebus 7.15.0's, which sign in with
``DefaultAzureCredential`` and name the namespace with ``SERVICEBUS_FULLY_QUALIFIED_NAMESPACE``, using one
``host:port`` for the admin client (HTTPS) and ``ServiceBusClient`` (AMQP over TLS). Each runs in a fresh
process whose environment holds only what make run's banner prints (docs/emulator.md) and the samples' own
entity-name variables.

``ServiceBusClient`` opens AMQP on port 5671 whatever port the namespace names, so this make run listens on
5671 (``AMQPS_PORT``): the default-ports lock keeps it from racing the guides' walkthroughs for it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from azure.servicebus.management import ServiceBusAdministrationClient

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


def run_sample(sample: str, environment: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, str(SAMPLES / sample)], env=environment, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"{sample}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.timeout(600)
def test_the_sdks_current_samples_run_unedited_with_a_managed_identity_against_make_run(
    tmp_path: Path,
) -> None:
    with default_ports_lock():
        run = MakeRun(tmp_path / "data", "AMQPS_PORT=5671")
        try:
            run.reader.wait_ready(timeout=90)
            printed = {name: run.banner(name) for name in BANNER_VARIABLES}
            ca_file = run.banner("Emulator management CA file")
            assert printed["SERVICEBUS_FULLY_QUALIFIED_NAMESPACE"] == "localhost:5671"
            assert re.fullmatch(r"http://127\.0\.0\.1:\d+/msi/token", printed["IDENTITY_ENDPOINT"])

            queue, topic, subscription = (f"{kind}-{uuid.uuid4().hex[:8]}" for kind in ("q", "t", "s"))
            with ServiceBusAdministrationClient.from_connection_string(
                run.banner("Service Bus admin connection string"), connection_verify=ca_file
            ) as admin:
                admin.create_queue(queue)
                admin.create_topic(topic)
                admin.create_subscription(topic, subscription)
            environment = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                **printed,
                "REQUESTS_CA_BUNDLE": ca_file,
                "SSL_CERT_FILE": ca_file,
                "SERVICEBUS_QUEUE_NAME": queue,
                "SERVICEBUS_TOPIC_NAME": topic,
                "SERVICEBUS_SUBSCRIPTION_NAME": subscription,
            }

            # The certifi the samples import is the stand-in: its bundle holds the emulator's CA.
            where = subprocess.run(
                [sys.executable, "-c", "import certifi; print(certifi.where())"],
                env=environment,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            assert Path(where).is_relative_to(printed["PYTHONPATH"])
            assert Path(ca_file).read_text().strip() in Path(where).read_text()

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
                messages = re.findall(
                    r"^(?:Single Message|Message in list|Message inside a .*)$", output, re.M
                )
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
            run.interrupt()
        finally:
            run.kill()
