"""What Azure accepts and refuses through ``ServiceBusAdministrationClient`` (sync and ``aio``), pinned where
the SDK's own live tests (``tests/mgmt_tests`` of the azure-servicebus source distribution) found the
emulator answering differently; each checked on the data plane where the property has an effect there."""

from __future__ import annotations

import asyncio

from azure.servicebus import ServiceBusMessage, ServiceBusSubQueue

from tests.emulator.admin_fixtures import AdminEmulator, admin_emulator, fresh
from tests.emulator.arm_client import receive_queue, receive_subscription, send

__all__ = ["admin_emulator"]  # fixture used by name below


# ------------------------------------------------------------------------- forwarding to the queue itself


def test_a_queue_may_forward_and_forward_its_dead_letters_to_itself(admin_emulator: AdminEmulator) -> None:
    """Azure accepts the update (test_mgmt_queue_update_success) and reports the queue's own address; a
    message then goes round until the hop limit dead-letters it, and stays in the dead-letter queue."""
    queue = fresh("q")
    with admin_emulator.admin() as admin:
        description = admin.create_queue(queue)
        address = f"sb://{admin.fully_qualified_namespace}/{queue}"
        description.forward_to = address
        description.forward_dead_lettered_messages_to = address
        admin.update_queue(description)
        updated = admin.get_queue(queue)

    assert updated.forward_to is not None and updated.forward_to.startswith("sb://")
    assert updated.forward_to.endswith(f"/{queue}")
    assert updated.forward_dead_lettered_messages_to == updated.forward_to
    send(admin_emulator.connection_string, queue, ServiceBusMessage("round and round", message_id="m"))
    dead = receive_queue(admin_emulator.connection_string, queue, 1, sub_queue=ServiceBusSubQueue.DEAD_LETTER)
    assert [(m.message_id, m.dead_letter_reason) for m in dead] == [("m", "MaxTransferHopCountExceeded")]
    with admin_emulator.admin() as admin:
        runtime = admin.get_queue_runtime_properties(queue)
    assert (runtime.active_message_count, runtime.dead_letter_message_count) == (0, 0)


def test_a_queue_may_forward_to_itself_by_name_async(admin_emulator: AdminEmulator) -> None:
    queue = fresh("q")

    async def update() -> tuple[str | None, str | None]:
        async with admin_emulator.async_admin() as admin:
            description = await admin.create_queue(queue)
            await admin.update_queue(description, forward_to=queue, forward_dead_lettered_messages_to=queue)
            updated = await admin.get_queue(queue)
            return updated.forward_to, updated.forward_dead_lettered_messages_to

    forward_to, forward_dead_letters_to = asyncio.run(update())

    assert forward_to is not None and forward_to.endswith(f"/{queue}")
    assert forward_dead_letters_to == forward_to


# ------------------------------------------------------------------ sessions together with forwarding


def test_a_session_queue_may_forward_to_a_topic_and_its_messages_arrive_there(
    admin_emulator: AdminEmulator,
) -> None:
    """Azure accepts ``requires_session=True`` with ``forward_to`` (test_mgmt_queue_create_with_queue_
    description); the messages are forwarded with their session id."""
    queue, topic = fresh("q"), fresh("t")
    with admin_emulator.admin() as admin:
        admin.create_topic(topic)
        admin.create_subscription(topic, "all")
        admin.create_queue(
            queue, requires_session=True, forward_to=topic, forward_dead_lettered_messages_to=topic
        )
        created = admin.get_queue(queue)

    assert created.requires_session is True
    assert created.forward_to is not None and created.forward_to.endswith(f"/{topic}")
    send(admin_emulator.connection_string, queue, ServiceBusMessage("hello", session_id="s1"))
    received = receive_subscription(admin_emulator.connection_string, topic, "all", 1)
    assert [(str(m), m.session_id) for m in received] == [("hello", "s1")]


def test_a_session_queue_may_forward_to_a_topic_async(admin_emulator: AdminEmulator) -> None:
    queue, topic = fresh("q"), fresh("t")

    async def create() -> tuple[bool | None, str | None]:
        async with admin_emulator.async_admin() as admin:
            await admin.create_topic(topic)
            await admin.create_queue(queue, requires_session=True, forward_to=topic)
            created = await admin.get_queue(queue)
            return created.requires_session, created.forward_to

    requires_session, forward_to = asyncio.run(create())

    assert requires_session is True
    assert forward_to is not None and forward_to.endswith(f"/{topic}")
