"""The namespace's tier, Standard (the default) or Premium (``EmulatorOptions.sku`` / ``--sku Premium``), and
what it decides, over the wire with the SDKs: the SKU ARM and ``$namespaceinfo`` report, the largest
message a queue or topic takes, and whether ARM (azure-mgmt-servicebus) and the ATOM API
(ServiceBusAdministrationClient) accept ``MaxMessageSizeInKilobytes``. Azure's answers, with the evidence,
are in :mod:`emulator.tier`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.mgmt.servicebus.models import SBQueue, SBQueueProperties, SBTopic, SBTopicProperties
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import MessageSizeExceededError

from emulator.config import parse_config
from emulator.testing import EmulatorHandle, start_emulator
from emulator.tier import Sku
from tests.emulator.admin_fixtures import AdminEmulator, fresh, start_admin_emulator
from tests.emulator.arm_client import Arm, arm, receive_queue, refusal, unique
from tests.emulator.emulator_process import EmulatorProcesses

KIB = 1024


@pytest.fixture
def standard(emulator: EmulatorHandle) -> Iterator[Arm]:
    """ARM over the session's shared emulator, which is Standard (the default)."""
    client = arm(emulator.management_port, emulator.management_token)
    yield client
    client.close()


@pytest.fixture(scope="module")
def premium_emulator() -> Iterator[EmulatorHandle]:
    handle = start_emulator(sku=Sku.PREMIUM)
    yield handle
    handle.stop()


@pytest.fixture
def premium(premium_emulator: EmulatorHandle) -> Iterator[Arm]:
    client = arm(premium_emulator.management_port, premium_emulator.management_token)
    yield client
    client.close()


@pytest.fixture(scope="module")
def premium_admin() -> Iterator[AdminEmulator]:
    thread, handle = start_admin_emulator(sku=Sku.PREMIUM)
    yield handle
    thread.stop()


def queue_of(
    *, max_message_size_in_kilobytes: int | None = None, max_delivery_count: int | None = None
) -> SBQueue:
    properties = SBQueueProperties(
        max_message_size_in_kilobytes=max_message_size_in_kilobytes, max_delivery_count=max_delivery_count
    )
    return SBQueue(properties=properties)


def topic_of(*, max_message_size_in_kilobytes: int) -> SBTopic:
    return SBTopic(properties=SBTopicProperties(max_message_size_in_kilobytes=max_message_size_in_kilobytes))


def send_body(connection_string: str, queue: str, size: int, message_id: str) -> None:
    with (
        ServiceBusClient.from_connection_string(connection_string, retry_total=0) as client,
        client.get_queue_sender(queue) as sender,
    ):
        sender.send_messages(ServiceBusMessage(b"x" * size, message_id=message_id))


def received_ids(connection_string: str, queue: str) -> list[str | None]:
    return [m.message_id for m in receive_queue(connection_string, queue)]


# ------------------------------------------------------------------------------------- Standard, over ARM


def test_standard_namespace_reports_the_standard_sku(standard: Arm) -> None:
    sku = standard.namespaces.get(*standard.scope).sku

    assert sku is not None and (sku.name, sku.tier, sku.capacity) == ("Standard", "Standard", None)


def test_standard_namespace_refuses_max_message_size_on_queue_and_topic_puts_whatever_the_value(
    standard: Arm,
) -> None:
    """Azure: 400 MessagingGatewayBadRequest, SubCode=40000, for any value (even the 256 it reports)."""
    queue, small_queue, topic = unique("q"), unique("q"), unique("t")

    refusals = [
        refusal(
            lambda: standard.queues.create_or_update(
                *standard.scope, queue, queue_of(max_message_size_in_kilobytes=1024)
            )
        ),
        refusal(
            lambda: standard.queues.create_or_update(
                *standard.scope, small_queue, queue_of(max_message_size_in_kilobytes=256)
            )
        ),
        refusal(
            lambda: standard.topics.create_or_update(
                *standard.scope, topic, topic_of(max_message_size_in_kilobytes=1024)
            )
        ),
    ]

    for refused in refusals:
        assert refused.status_code == 400
        assert refused.error is not None and refused.error.code == "MessagingGatewayBadRequest"
        assert "SubCode=40000" in str(refused) and "Premium" in str(refused)
    with pytest.raises(ResourceNotFoundError):
        standard.queues.get(*standard.scope, queue)
    with pytest.raises(ResourceNotFoundError):
        standard.topics.get(*standard.scope, topic)


def test_standard_namespace_refuses_max_message_size_on_update_and_keeps_the_queue_as_it_was(
    standard: Arm,
) -> None:
    queue = unique("q")
    standard.queues.create_or_update(*standard.scope, queue, queue_of(max_delivery_count=3))

    refused = refusal(
        lambda: standard.queues.create_or_update(
            *standard.scope, queue, queue_of(max_delivery_count=5, max_message_size_in_kilobytes=512)
        )
    )

    assert refused.status_code == 400
    kept = standard.queues.get(*standard.scope, queue)
    assert (kept.max_delivery_count, kept.max_message_size_in_kilobytes) == (3, 256)


def test_standard_queue_reports_256_kb_and_refuses_a_bigger_message(
    standard: Arm, emulator: EmulatorHandle
) -> None:
    queue, topic = unique("q"), unique("t")
    created = standard.queues.create_or_update(*standard.scope, queue, SBQueue())
    created_topic = standard.topics.create_or_update(*standard.scope, topic, SBTopic())

    with pytest.raises(MessageSizeExceededError):
        send_body(emulator.connection_string, queue, 300 * KIB, "too-big")
    send_body(emulator.connection_string, queue, 250 * KIB, "fits")

    assert (created.max_message_size_in_kilobytes, created_topic.max_message_size_in_kilobytes) == (256, 256)
    assert received_ids(emulator.connection_string, queue) == ["fits"]


# -------------------------------------------------------------------------------------- Premium, over ARM


def test_premium_namespace_reports_the_premium_sku_with_one_messaging_unit(premium: Arm) -> None:
    sku = premium.namespaces.get(*premium.scope).sku

    assert sku is not None and (sku.name, sku.tier, sku.capacity) == ("Premium", "Premium", 1)


def test_premium_queue_and_topic_default_to_1024_kb_and_take_a_message_over_256_kb(
    premium: Arm, premium_emulator: EmulatorHandle
) -> None:
    queue, topic = unique("q"), unique("t")
    created = premium.queues.create_or_update(*premium.scope, queue, SBQueue())
    created_topic = premium.topics.create_or_update(*premium.scope, topic, SBTopic())

    send_body(premium_emulator.connection_string, queue, 1000 * KIB, "one-megabyte")
    with pytest.raises(MessageSizeExceededError):
        send_body(premium_emulator.connection_string, queue, 1100 * KIB, "too-big")

    assert (created.max_message_size_in_kilobytes, created_topic.max_message_size_in_kilobytes) == (
        1024,
        1024,
    )
    assert received_ids(premium_emulator.connection_string, queue) == ["one-megabyte"]


def test_premium_namespace_accepts_max_message_size_from_1024_to_102400_and_enforces_it(
    premium: Arm, premium_emulator: EmulatorHandle
) -> None:
    queue, topic = unique("q"), unique("t")
    created = premium.queues.create_or_update(
        *premium.scope, queue, queue_of(max_message_size_in_kilobytes=2048)
    )
    largest = premium.topics.create_or_update(
        *premium.scope, topic, topic_of(max_message_size_in_kilobytes=102400)
    )

    send_body(premium_emulator.connection_string, queue, 1536 * KIB, "one-and-a-half")

    assert (created.max_message_size_in_kilobytes, largest.max_message_size_in_kilobytes) == (2048, 102400)
    assert received_ids(premium_emulator.connection_string, queue) == ["one-and-a-half"]


def test_premium_namespace_refuses_max_message_size_outside_1024_to_102400(premium: Arm) -> None:
    queue, topic = unique("q"), unique("t")

    below = refusal(
        lambda: premium.queues.create_or_update(
            *premium.scope, queue, queue_of(max_message_size_in_kilobytes=256)
        )
    )
    above = refusal(
        lambda: premium.topics.create_or_update(
            *premium.scope, topic, topic_of(max_message_size_in_kilobytes=102401)
        )
    )

    assert below.status_code == 400 and "SubCode=40000" in str(below)
    assert "between 1024 and 102400" in str(below) and "'Premium' tier" in str(below)
    assert above.status_code == 400 and "between 1024 and 102400" in str(above)
    with pytest.raises(ResourceNotFoundError):
        premium.queues.get(*premium.scope, queue)


def test_premium_queue_shrunk_to_1024_kb_refuses_what_it_took_before(
    premium: Arm, premium_emulator: EmulatorHandle
) -> None:
    queue = unique("q")
    premium.queues.create_or_update(*premium.scope, queue, queue_of(max_message_size_in_kilobytes=2048))
    send_body(premium_emulator.connection_string, queue, 1536 * KIB, "before")

    shrunk = premium.queues.create_or_update(
        *premium.scope, queue, queue_of(max_message_size_in_kilobytes=1024)
    )
    with pytest.raises(MessageSizeExceededError):
        send_body(premium_emulator.connection_string, queue, 1536 * KIB, "after")

    assert shrunk.max_message_size_in_kilobytes == 1024
    assert received_ids(premium_emulator.connection_string, queue) == ["before"]


def test_premium_queue_sizes_survive_a_restart(tmp_path: Path) -> None:
    queues = {unique("q"): None, unique("q"): 2048}
    sizes: list[list[int | None]] = []
    for _run in range(2):
        handle = start_emulator(data_dir=tmp_path, sku=Sku.PREMIUM)
        try:
            client = arm(handle.management_port, handle.management_token)
            try:
                if not sizes:
                    for name, size in queues.items():
                        client.queues.create_or_update(
                            *client.scope, name, queue_of(max_message_size_in_kilobytes=size)
                        )
                sizes.append(
                    [client.queues.get(*client.scope, q).max_message_size_in_kilobytes for q in queues]
                )
            finally:
                client.close()
        finally:
            handle.stop()

    assert sizes == [[1024, 2048], [1024, 2048]]


# ------------------------------------------------------------------------- Premium, over the ATOM API


def test_premium_namespace_info_reports_premium_and_one_messaging_unit(premium_admin: AdminEmulator) -> None:
    with premium_admin.admin() as admin:
        info = admin.get_namespace_properties()

    assert (info.messaging_sku, info.messaging_units) == ("Premium", 1)


def test_premium_admin_client_sets_and_reads_max_message_size_and_a_description_round_trips(
    premium_admin: AdminEmulator,
) -> None:
    plain, sized, topic = fresh("q"), fresh("q"), fresh("t")
    with premium_admin.admin() as admin:
        default = admin.create_queue(plain)
        created = admin.create_queue(sized, max_message_size_in_kilobytes=2048)
        created_topic = admin.create_topic(topic, max_message_size_in_kilobytes=102400)
        description = admin.get_queue(sized)
        description.max_delivery_count = 4
        admin.update_queue(description)
        updated = admin.get_queue(sized)
        admin.update_queue(updated, max_message_size_in_kilobytes=4096)
        grown = admin.get_queue(sized)

    assert default.max_message_size_in_kilobytes == 1024
    assert (created.max_message_size_in_kilobytes, created_topic.max_message_size_in_kilobytes) == (
        2048,
        102400,
    )
    assert (updated.max_delivery_count, updated.max_message_size_in_kilobytes) == (4, 2048)
    assert grown.max_message_size_in_kilobytes == 4096
    # Sent alone: a batch is at most 1 MB on Premium too, whatever the entity's message size.
    send_body(premium_admin.connection_string, sized, 3000 * KIB, "3 MB")
    assert received_ids(premium_admin.connection_string, sized) == ["3 MB"]


def test_premium_admin_client_is_refused_a_max_message_size_below_1024(premium_admin: AdminEmulator) -> None:
    queue = fresh("q")
    with premium_admin.admin() as admin:
        with pytest.raises(HttpResponseError) as refused:
            admin.create_queue(queue, max_message_size_in_kilobytes=512)
        names = [q.name for q in admin.list_queues()]

    assert refused.value.status_code == 400 and "between 1024 and 102400" in str(refused.value)
    assert queue not in names


# ------------------------------------------------------------------------------------- Config.json


@pytest.mark.parametrize(("sku", "default"), [(Sku.STANDARD, 256), (Sku.PREMIUM, 1024)])
def test_config_queue_without_max_message_size_gets_its_tier_default_and_one_with_it_keeps_it(
    sku: Sku, default: int
) -> None:
    """Config.json may set any 1..102400 KB on either tier (a deliberate departure, for cheap size tests);
    left out, the queue gets what Azure gives one created without it."""
    queues = [
        {"Name": "plain", "Properties": {}},
        {"Name": "small", "Properties": {"MaxMessageSizeInKilobytes": 64}},
    ]
    document = {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": queues, "Topics": []}]}}
    config = parse_config(json.dumps(document))
    handle = start_emulator(config, sku=sku)
    try:
        client = arm(handle.management_port, handle.management_token)
        try:
            sizes = [
                client.queues.get(*client.scope, q).max_message_size_in_kilobytes for q in ("plain", "small")
            ]
        finally:
            client.close()
        with pytest.raises(MessageSizeExceededError):
            send_body(handle.connection_string, "small", 100 * KIB, "over-64")
    finally:
        handle.stop()

    assert sizes == [default, 64]


# ---------------------------------------------------------------------------------------- command line


@pytest.mark.subprocess
def test_cli_sku_option_runs_a_premium_namespace_and_prints_its_tier() -> None:
    with EmulatorProcesses() as processes:
        process = processes.start(in_memory=True, extra_args=["--management-token", "t", "--sku", "Premium"])
        assert process.management_port is not None
        client = arm(process.management_port, "t")
        try:
            sku = client.namespaces.get(*client.scope).sku
        finally:
            client.close()

    assert "Namespace tier: Premium" in process.stdout
    assert sku is not None and sku.name == "Premium"
