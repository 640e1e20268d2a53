"""An endpoint handles a message id once, against Azurite's table service (a real Table Storage endpoint).

The handlers write a row and publish an event; ``dispatch`` stands in for sending (it records what it was
given, or fails when told to), so these tests see exactly what would go out and when.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from azure.core.exceptions import ServiceRequestError
from azure.data.tables import TableServiceClient

from shared.contracts import ContractRegistry, Event
from shared.handlers import Endpoint, HandlerContext, HandlerRegistry
from shared.handlers.context import OutgoingPublish
from shared.handlers.dispatch import Complete, Retry
from shared.idempotency.once import handle_once
from shared.idempotency.records import HandledRecord, HandledRecords, partition_of
from shared.messages import IncomingMessage
from tests.azurite import table_connection_string

pytestmark = pytest.mark.timeout(60)


class Ordered(Event, contract="Tests.Ordered", ordering_key="order_id"):
    order_id: str
    amount: float


class Invoiced(Event, contract="Tests.Invoiced", ordering_key="order_id"):
    order_id: str
    amount: float


@dataclass
class Calls:
    handled: list[str] = field(default_factory=list)
    gate: threading.Barrier | None = None


CALLS = Calls()
HANDLERS = HandlerRegistry()


@HANDLERS.handles(Ordered)
def invoice(event: Ordered, context: HandlerContext) -> None:
    if CALLS.gate is not None:
        CALLS.gate.wait(10)  # both copies are inside their handlers before either commits
    CALLS.handled.append(event.order_id)
    context.store.put("invoice", {"amount": event.amount, "copy": uuid.uuid4().hex})
    context.publish(Invoiced(order_id=event.order_id, amount=event.amount))


ENDPOINT = Endpoint("billing", ContractRegistry(Ordered), HANDLERS)


@dataclass
class Dispatched:
    outcomes: list[Complete] = field(default_factory=list)
    fail: bool = False

    def __call__(self, outcome: Complete) -> None:
        if self.fail:
            raise ConnectionError("the broker is gone")
        self.outcomes.append(outcome)


@pytest.fixture
def records() -> Iterator[HandledRecords]:
    CALLS.handled.clear()
    CALLS.gate = None
    service = TableServiceClient.from_connection_string(table_connection_string())
    store = HandledRecords(service.get_table_client(f"t{uuid.uuid4().hex}"))
    yield store
    store.close()


def message(order: str, message_id: str | None = None) -> IncomingMessage:
    return IncomingMessage(
        body=Ordered(order_id=order, amount=5).model_dump_json().encode(),
        message_id=message_id or uuid.uuid4().hex,
        session_id=order,
        content_type="application/json",
        application_properties={"NServiceBus.EnclosedMessageTypes": "Tests.Ordered"},
    )


def invoices(outcomes: list[Complete]) -> list[Event]:
    return [item.event for o in outcomes for item in o.outgoing if isinstance(item, OutgoingPublish)]


def test_a_message_id_is_handled_once_and_its_rows_commit_with_its_record(records: HandledRecords) -> None:
    copy = message("o-1")
    dispatch = Dispatched()
    first, ran_first = handle_once(ENDPOINT, copy, records, dispatch)
    second, ran_second = handle_once(ENDPOINT, copy, records, dispatch)
    assert (ran_first, ran_second) == (True, False)
    assert isinstance(first, Complete) and isinstance(second, Complete)
    assert CALLS.handled == ["o-1"]
    assert invoices(dispatch.outcomes) == [Invoiced(order_id="o-1", amount=5)]
    partition = partition_of("billing", copy)
    row = records.read_row(partition, "invoice")
    assert row is not None and row["amount"] == 5
    record = records.get(partition, str(copy.message_id))
    assert record is not None and record.dispatched


def test_a_crash_between_commit_and_dispatch_re_dispatches_the_same_messages_without_the_handlers(
    records: HandledRecords,
) -> None:
    copy = message("o-2")
    broken = Dispatched(fail=True)
    with pytest.raises(ConnectionError):
        handle_once(ENDPOINT, copy, records, broken)  # committed, not dispatched: the message is retried
    record = records.get(partition_of("billing", copy), str(copy.message_id))
    assert record is not None and not record.dispatched

    dispatch = Dispatched()
    outcome, ran = handle_once(ENDPOINT, copy, records, dispatch)
    assert isinstance(outcome, Complete) and not ran
    assert CALLS.handled == ["o-2"]  # the handlers ran once
    assert invoices(dispatch.outcomes) == [Invoiced(order_id="o-2", amount=5)]
    [sent] = dispatch.outcomes
    assert sent.correlation_id == copy.message_id  # the correlation carried over, as the first time


def test_two_copies_of_one_message_id_handled_at_once_commit_one_effect(records: HandledRecords) -> None:
    copy = message("o-3")
    CALLS.gate = threading.Barrier(2)
    results: list[tuple[object, bool]] = []

    def run() -> None:
        results.append(handle_once(ENDPOINT, copy, records, Dispatched()))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert CALLS.handled == ["o-3", "o-3"]  # both ran their handlers...
    assert sorted(ran for _, ran in results) == [False, True]  # ...one committed, the other was discarded
    assert all(isinstance(outcome, Complete) for outcome, _ in results)
    rows = list(records.rows())
    assert len(rows) == 1  # one invoice row: the winner's


def test_a_failed_handler_commits_nothing_and_the_retry_runs_it_again(records: HandledRecords) -> None:
    copy = message("o-4")
    failing = HandlerRegistry()

    @failing.handles(Ordered)
    def flaky(event: Ordered, context: HandlerContext) -> None:
        context.store.put("invoice", {"amount": 1})
        raise TimeoutError("the database timed out")

    endpoint = Endpoint("billing", ContractRegistry(Ordered), failing)
    outcome, _ = handle_once(endpoint, copy, records, Dispatched())
    assert isinstance(outcome, Retry)
    assert records.get(partition_of("billing", copy), str(copy.message_id)) is None
    assert list(records.rows()) == []
    _, ran = handle_once(ENDPOINT, copy, records, Dispatched())
    assert ran and CALLS.handled == ["o-4"]


class UnmarkableRecords(HandledRecords):
    """Records whose storage becomes unreachable right after the commit (marking fails once)."""

    failures = 1

    def mark_dispatched(self, record: HandledRecord) -> None:
        if self.failures:
            self.failures -= 1
            raise ServiceRequestError("the storage account cannot be reached")
        super().mark_dispatched(record)


def test_storage_unreachable_after_the_dispatch_retries_the_message_which_dispatches_the_same_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    CALLS.handled.clear()
    CALLS.gate = None
    copy = message("o-6")
    service = TableServiceClient.from_connection_string(table_connection_string())
    flaky = UnmarkableRecords(service.get_table_client(f"t{uuid.uuid4().hex}"))
    dispatch = Dispatched()

    outcome, ran = handle_once(ENDPOINT, copy, flaky, dispatch)
    assert isinstance(outcome, Retry) and ran  # the handlers ran; the message is abandoned, not completed
    assert f"storage unreachable for message {copy.message_id}" in caplog.text
    retried, ran_again = handle_once(ENDPOINT, copy, flaky, dispatch)

    assert isinstance(retried, Complete) and not ran_again
    assert CALLS.handled == ["o-6"]
    first, second = dispatch.outcomes  # dispatched again from the record: the same messages
    assert invoices([first]) == invoices([second]) == [Invoiced(order_id="o-6", amount=5)]
    record = flaky.get(partition_of("billing", copy), str(copy.message_id))
    assert record is not None and record.dispatched
    flaky.close()


def test_storage_unreachable_retries_the_message_and_never_completes_it_unhandled() -> None:
    CALLS.handled.clear()
    CALLS.gate = None
    nowhere = (
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;"
        "TableEndpoint=http://127.0.0.1:9/devstoreaccount1;"
    )
    service = TableServiceClient.from_connection_string(nowhere, retry_total=0)
    store = HandledRecords(service.get_table_client("unreachable"))
    outcome, ran = handle_once(ENDPOINT, message("o-5"), store, Dispatched())
    assert isinstance(outcome, Retry) and not ran
    assert "busbar.handled-records" in outcome.description
    assert CALLS.handled == []


def test_a_records_table_deleted_under_a_running_endpoint_is_created_again_and_messages_are_handled() -> None:
    """The table gone (deleted; locally, Azurite's data lost): the endpoint does not fail every message
    until it restarts (each would be dead-lettered after MaxDeliveryCount), it creates the table again."""
    CALLS.handled.clear()
    CALLS.gate = None
    service = TableServiceClient.from_connection_string(table_connection_string())
    name = f"t{uuid.uuid4().hex}"
    store = HandledRecords(service.get_table_client(name))
    handle_once(ENDPOINT, message("o-7"), store, Dispatched())  # the table is created, and known to be
    service.delete_table(name)

    copy = message("o-8")
    outcome, ran = handle_once(ENDPOINT, copy, store, Dispatched())

    assert isinstance(outcome, Complete) and ran
    assert CALLS.handled == ["o-7", "o-8"]
    record = store.get(partition_of("billing", copy), str(copy.message_id))
    assert record is not None and record.dispatched
    store.close()


def test_two_messages_of_one_partition_acting_on_the_same_row_at_once_commit_one_and_retry_the_other(
    records: HandledRecords,
) -> None:
    once = HandlerRegistry()
    gate = threading.Barrier(2)

    @once.handles(Ordered)
    def invoice_once(event: Ordered, context: HandlerContext) -> None:
        if context.store.get("invoice") is not None:
            return  # invoiced already: nothing to do
        gate.wait(10)  # both messages read "no invoice yet" before either commits
        context.store.put("invoice", {"amount": event.amount})
        context.publish(Invoiced(order_id=event.order_id, amount=event.amount))

    endpoint = Endpoint("billing", ContractRegistry(Ordered), once)
    first, second = message("o-6"), message("o-6")  # two events of one order: two message ids
    dispatched = Dispatched()
    results: list[object] = []

    def run(copy: IncomingMessage) -> None:
        results.append(handle_once(endpoint, copy, records, dispatched)[0])

    threads = [threading.Thread(target=run, args=(m,)) for m in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    retried = [r for r in results if isinstance(r, Retry)]
    assert len(retried) == 1 and "changed by another message" in retried[0].description
    assert invoices(dispatched.outcomes) == [Invoiced(order_id="o-6", amount=5)]
    # The retried message runs again and finds the order invoiced: no second invoice goes out.
    loser = first if records.get(partition_of("billing", first), str(first.message_id)) is None else second
    gate.reset()
    outcome, ran = handle_once(endpoint, loser, records, dispatched)
    assert isinstance(outcome, Complete) and ran and outcome.outgoing == ()
    assert invoices(dispatched.outcomes) == [Invoiced(order_id="o-6", amount=5)]
