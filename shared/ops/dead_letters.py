"""Reading dead-letter queues for the console: by peek only, so looking never locks, moves or changes a
message (the SDK's ``peek_messages`` is a ``$management`` read that takes no lock).

Each entity's dead-letter queue is peeked in pages of :data:`PEEK_PAGE` from sequence number 0; entities
are read in parallel (opening an SDK receiver costs most of a second, so a console over 20 entities would
otherwise wait 20 of them in a row).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusReceivedMessage, ServiceBusSubQueue

from shared.envelope import as_text
from shared.envelope.sdk_property_types import typed_receiver
from shared.ops.failures import Failure, endpoint_of, exception_of
from shared.redrive.entities import EntityPlan, EntityRef
from shared.redrive.received import from_received

PEEK_PAGE = 250
PARALLEL = 32


def dead_letter_receiver(client: ServiceBusClient, source: EntityRef) -> Any:
    """A receiver on ``source``'s dead-letter queue that prefetches nothing (it only peeks), reading every
    application property with its AMQP type (the console's retry copies them)."""
    if source.kind == "queue":
        return typed_receiver(
            client.get_queue_receiver(source.name, sub_queue=ServiceBusSubQueue.DEAD_LETTER, prefetch_count=0)
        )
    assert source.topic is not None
    return typed_receiver(
        client.get_subscription_receiver(
            source.topic, source.name, sub_queue=ServiceBusSubQueue.DEAD_LETTER, prefetch_count=0
        )
    )


def failure_of(plan: EntityPlan, message: ServiceBusReceivedMessage) -> Failure:
    """The console's view of one peeked dead-lettered message."""
    dead_letter = from_received(message, plan.source)
    return Failure(
        entity=plan.source.path,
        endpoint=endpoint_of(plan),
        sequence_number=dead_letter.sequence_number,
        reason=dead_letter.dead_letter_reason,
        exception=exception_of(dead_letter.dead_letter_description, dead_letter.application_properties),
        enqueued_at=dead_letter.enqueued_time,
        message_id=dead_letter.message_id,
        contract=as_text(dead_letter.application_properties.get("NServiceBus.EnclosedMessageTypes")),
    )


# The SDK's receiver close waits for its keep-alive thread and idle listen cycles (up to about a second);
# a peek-only receiver has nothing to settle, so it is closed off the request's path.
_CLOSER = ThreadPoolExecutor(max_workers=4, thread_name_prefix="ops-receiver-close")


def _peek_entity(client: ServiceBusClient, plan: EntityPlan, limit: int) -> list[Failure]:
    failures: list[Failure] = []
    receiver = dead_letter_receiver(client, plan.source)
    try:
        next_sequence = 0
        while len(failures) < limit:
            page = receiver.peek_messages(
                max_message_count=min(PEEK_PAGE, limit - len(failures)), sequence_number=next_sequence
            )
            if not page:
                break
            failures.extend(failure_of(plan, m) for m in page)
            next_sequence = max(m.sequence_number for m in page) + 1
    finally:
        _CLOSER.submit(receiver.close)
    return failures


def peek_failures(
    client: ServiceBusClient, plans: Sequence[EntityPlan], limit_per_entity: int = 100_000
) -> tuple[list[Failure], dict[str, str]]:
    """Every dead-lettered message of ``plans`` (up to ``limit_per_entity`` each), and per entity path
    the error that kept it from being read (one unreadable entity does not hide the others)."""
    failures: list[Failure] = []
    errors: dict[str, str] = {}
    if not plans:
        return failures, errors
    with ThreadPoolExecutor(min(PARALLEL, len(plans))) as pool:
        futures = {
            plan.source.path: pool.submit(_peek_entity, client, plan, limit_per_entity) for plan in plans
        }
        for path, future in futures.items():
            try:
                failures.extend(future.result())
            except Exception as exc:
                errors[path] = f"{type(exc).__name__}: {exc}"
    return failures, errors


def peek_one(
    client: ServiceBusClient, source: EntityRef, sequence_number: int
) -> ServiceBusReceivedMessage | None:
    """The dead-lettered message with ``sequence_number`` in ``source``'s dead-letter queue, or None."""
    with dead_letter_receiver(client, source) as receiver:
        page = receiver.peek_messages(max_message_count=1, sequence_number=sequence_number)
    found: ServiceBusReceivedMessage | None = page[0] if page else None
    if found is not None and found.sequence_number == sequence_number:
        return found
    return None
