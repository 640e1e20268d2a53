"""Reading dead-letter queues for the console: by peek only, so looking never locks, moves or changes a
message (a peek is a ``$management`` read that takes no lock), with Busbar's own AMQP receiver
(:mod:`shared.amqp.receiver`), which reads every application property with its AMQP type (the console's
retry copies them).

Each entity's dead-letter queue is peeked in pages of :data:`PEEK_PAGE` from sequence number 0; entities
are read in parallel (opening a receiver takes a connection and a token, so a console over 20 entities
would otherwise wait 20 of them in a row).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from shared.envelope import as_text
from shared.ops.failures import Failure, endpoint_of, exception_of
from shared.redrive.entities import EntityPlan, EntityRef
from shared.redrive.received import from_received

if TYPE_CHECKING:
    from shared.amqp.connection import Namespace
    from shared.amqp.received import ReceivedMessage
    from shared.amqp.receiver import EntityReceiver

PEEK_PAGE = 250
PARALLEL = 32


def dead_letter_receiver(namespace: Namespace, source: EntityRef) -> EntityReceiver:
    """A receiver on ``source``'s dead-letter queue (the console only peeks with it)."""
    from shared.amqp.receiver import EntityReceiver  # proton loads its C library only when one is opened

    return EntityReceiver(namespace, f"{source.path}/$deadletterqueue")


def failure_of(plan: EntityPlan, message: ReceivedMessage) -> Failure:
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


def _peek_entity(namespace: Namespace, plan: EntityPlan, limit: int) -> list[Failure]:
    failures: list[Failure] = []
    with dead_letter_receiver(namespace, plan.source) as receiver:
        next_sequence = 0
        while len(failures) < limit:
            page = receiver.peek_messages(
                max_message_count=min(PEEK_PAGE, limit - len(failures)), sequence_number=next_sequence
            )
            if not page:
                break
            failures.extend(failure_of(plan, m) for m in page)
            next_sequence = max(m.sequence_number for m in page) + 1
    return failures


def peek_failures(
    namespace: Namespace, plans: Sequence[EntityPlan], limit_per_entity: int = 100_000
) -> tuple[list[Failure], dict[str, str]]:
    """Every dead-lettered message of ``plans`` (up to ``limit_per_entity`` each), and per entity path
    the error that kept it from being read (one unreadable entity does not hide the others)."""
    failures: list[Failure] = []
    errors: dict[str, str] = {}
    if not plans:
        return failures, errors
    with ThreadPoolExecutor(min(PARALLEL, len(plans))) as pool:
        futures = {
            plan.source.path: pool.submit(_peek_entity, namespace, plan, limit_per_entity) for plan in plans
        }
        for path, future in futures.items():
            try:
                failures.extend(future.result())
            except Exception as exc:
                errors[path] = f"{type(exc).__name__}: {exc}"
    return failures, errors


def peek_one(namespace: Namespace, source: EntityRef, sequence_number: int) -> ReceivedMessage | None:
    """The dead-lettered message with ``sequence_number`` in ``source``'s dead-letter queue, or None."""
    with dead_letter_receiver(namespace, source) as receiver:
        page = receiver.peek_messages(max_message_count=1, sequence_number=sequence_number)
    found = page[0] if page else None
    if found is not None and found.sequence_number == sequence_number:
        return found
    return None
