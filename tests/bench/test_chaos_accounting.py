"""The chaos run's accounting (bench/chaos_accounting.py): every accepted event per endpoint that owes it
something is handled, parked (dead-lettered or archived) or lost, an event nobody subscribes to is archived
by the fallback router or lost, and a handler that completed without recording shows up as a loss; the
side effects the endpoints committed to their table (bench/chaos_effects.py) are counted per order, so a
second invoice, shipment or committed CRM handling is a duplicate side effect and none is a missing one,
while handler invocations that ran more than once are reported apart."""

from __future__ import annotations

import json
from pathlib import Path

from bench.chaos_accounting import Handled, Parked, account, endpoint_of, recovery_by_kind, recovery_times
from bench.chaos_drain import archived
from bench.chaos_effects import Commit, EffectRow, commit_of, effect_row, partition_endpoint, side_effects
from bench.chaos_faults import Fault
from bench.chaos_load import (
    HANDLED,
    POISON,
    ROUTER,
    UNROUTED,
    AcceptedEvent,
    EventFactory,
    PlannedEvent,
    expected_outcomes,
)
from shared.archive.writer import ArchiveWriter
from shared.messages import IncomingMessage
from shared.router.decision import RouterDecision
from shared.router.service import ArchivingRecorder
from shared.table_keys import table_key

UNROUTED_ARCHIVED = Parked(ROUTER, "u", "archive", "NoMatchingSubscription (NoMatchingSubscription)")


def _accepted(key: str, contract: str = "Shipping.OrderAccepted", poison: bool = False, at: float = 100.0):
    return AcceptedEvent(PlannedEvent(contract, key, "{}", expected_outcomes(contract, poison)), at)


def _handled_everywhere(item: AcceptedEvent, at: float = 101.0) -> list[Handled]:
    return [Handled(e, item.event.key, at) for e, owed in item.event.expected.items() if owed == HANDLED]


def test_an_order_is_owed_by_billing_crm_and_shipping_and_a_poison_one_is_owed_a_dead_letter_by_billing() -> (
    None
):
    assert expected_outcomes("Shipping.OrderAccepted", poison=False) == {
        "billing": HANDLED,
        "crm": HANDLED,
        "shipping": HANDLED,
    }
    assert expected_outcomes("Shipping.OrderAcceptedV2", poison=True) == {"billing": POISON, "crm": HANDLED}
    assert expected_outcomes("Tenant.CustomerDeleted", poison=False) == {"crm": HANDLED}
    assert expected_outcomes("Billing.InvoiceIssued", poison=False) == {"shipping": HANDLED}


def test_a_high_value_order_is_owed_by_sales_too_and_only_an_order_accepted_of_1000_or_more() -> None:
    assert expected_outcomes("Shipping.OrderAccepted", poison=False, amount=1000.0) == {
        "billing": HANDLED,
        "crm": HANDLED,
        "shipping": HANDLED,
        "sales": HANDLED,
    }
    assert "sales" not in expected_outcomes("Shipping.OrderAccepted", poison=False, amount=999.99)
    assert "sales" not in expected_outcomes("Shipping.OrderAcceptedV2", poison=False, amount=5000.0)
    assert "sales" not in expected_outcomes("Shipping.OrderAccepted", poison=True, amount=5000.0)


def test_an_event_nobody_subscribes_to_is_owed_an_archive_entry_by_the_fallback_router() -> None:
    assert expected_outcomes("Billing.PaymentReceived", poison=False) == {ROUTER: UNROUTED}


def test_every_sample_contract_is_published_with_a_unique_key_and_some_orders_are_poison() -> None:
    factory = EventFactory(seed=3, prefix="t")
    events = [factory.next() for _ in range(2000)]
    assert len({e.key for e in events}) == len(events)
    assert {e.contract for e in events} == {
        "Shipping.OrderAccepted",
        "Shipping.OrderAcceptedV2",
        "Shipping.OrderDeclined",
        "Tenant.CustomerCreated",
        "Tenant.CustomerUpdated",
        "Tenant.CustomerDeleted",
        "Billing.InvoiceIssued",
        "Billing.PaymentReceived",
    }
    assert any(e.poison for e in events) and not all(e.poison for e in events)
    # The same seed gives the same events.
    again = EventFactory(seed=3, prefix="t")
    assert [again.next() for _ in range(2000)] == events


def test_a_run_where_everything_was_handled_or_parked_as_owed_loses_nothing() -> None:
    good, poison = _accepted("k1"), _accepted("k2", poison=True)
    handled = [*_handled_everywhere(good), *_handled_everywhere(good), *_handled_everywhere(poison)]
    parked = [Parked("billing", "k2", "archive", "archive (PermanentHandlerError)")]

    report = account([good, poison], handled, parked)

    assert report["lost"] == 0
    assert report["outcomes"] == {"handled": 4, "poison dead-lettered or archived": 1}
    assert report["repeated_invocations"]["events_invoked_more_than_once"] == 3
    assert report["repeated_invocations"]["extra_invocations_by_endpoint"] == {
        "billing": 1,
        "crm": 1,
        "shipping": 1,
    }
    assert report["repeated_invocations"]["most_invocations_for_one_event"] == 2


def test_a_handler_that_completed_without_recording_is_a_loss_named_by_key_and_endpoint() -> None:
    item = _accepted("k1")
    handled = [h for h in _handled_everywhere(item) if h.endpoint != "shipping"]

    report = account([item], handled, [])

    assert report["lost"] == 1
    assert report["lost_examples"] == [
        {"key": "k1", "contract": "Shipping.OrderAccepted", "endpoint": "shipping", "owed": HANDLED}
    ]


def test_a_poison_event_found_nowhere_is_lost_and_a_good_one_only_dead_lettered_was_parked() -> None:
    poison, good = _accepted("p", poison=True), _accepted("g")
    handled = [Handled("crm", "p", 1.0), Handled("crm", "g", 1.0), Handled("shipping", "g", 1.0)]
    parked = [Parked("billing", "g", "dead-letter", "MaxDeliveryCountExceeded")]

    report = account([poison, good], handled, parked)

    assert report["lost"] == 1 and report["lost_examples"][0]["endpoint"] == "billing"
    assert report["outcomes"]["parked instead of handled"] == 1
    assert report["parked_instead_of_handled_reasons"] == {"dead-letter: MaxDeliveryCountExceeded": 1}


def test_an_unsubscribed_event_archived_by_the_router_as_no_matching_subscription_is_accounted() -> None:
    report = account([_accepted("u", "Billing.PaymentReceived")], [], [UNROUTED_ARCHIVED])

    assert report["lost"] == 0
    assert report["outcomes"] == {"unrouted archived by the router": 1}


def test_an_unsubscribed_event_neither_archived_nor_handled_is_lost() -> None:
    payment = _accepted("u", "Billing.PaymentReceived")
    at_billing = Parked("billing", "u", "archive", "archive (PermanentHandlerError)")

    report = account([payment], [], [at_billing])

    assert report["lost"] == 1
    assert report["lost_examples"] == [
        {"key": "u", "contract": "Billing.PaymentReceived", "endpoint": ROUTER, "owed": UNROUTED}
    ]
    # Dead-lettered on the router's own subscription (its archive failed too often): parked, not lost.
    at_router = Parked(ROUTER, "u", "dead-letter", "MaxDeliveryCountExceeded")
    report = account([payment], [], [at_router])
    assert report["lost"] == 0 and report["outcomes"] == {"parked instead of handled": 1}


def test_an_unsubscribed_event_that_an_endpoint_handled_is_a_bug_even_when_archived() -> None:
    report = account(
        [_accepted("u", "Billing.PaymentReceived")], [Handled("crm", "u", 1.0)], [UNROUTED_ARCHIVED]
    )
    assert report["outcomes"] == {"unrouted handled (a bug)": 1}


def test_the_router_s_archive_entries_are_read_as_the_router_s_and_by_the_event_s_key(tmp_path: Path) -> None:
    message = IncomingMessage(body=b'{"order_id": "u", "amount": 3.0}', message_id="m")
    decision = RouterDecision(contract="Billing.PaymentReceived", unrouted=True)
    ArchivingRecorder(ArchiveWriter(str(tmp_path))).record(message, decision, "busbar-fallback", ROUTER)

    assert archived(str(tmp_path)) == [UNROUTED_ARCHIVED]


def test_handlings_of_events_never_accepted_are_counted_apart() -> None:
    report = account([], [Handled("crm", "never-answered", 1.0)], [])
    assert report["lost"] == 0 and report["handled_without_acceptance"] == 1


def test_recovery_is_the_time_until_the_first_event_accepted_after_the_fault_is_handled() -> None:
    before, after, later = _accepted("a", at=10.0), _accepted("b", at=21.0), _accepted("c", at=22.0)
    handled = [Handled("crm", "a", 11.0), Handled("crm", "c", 30.0), Handled("crm", "b", 35.0)]
    faults = [Fault("kill-host", 20.0, ""), Fault("garbage", 40.0, "")]

    times = recovery_times(faults, [before, after, later], handled)

    assert times == [10.0, None]
    summary = recovery_by_kind(faults, times)
    assert summary["kill-host"]["max_s"] == 10.0
    assert summary["garbage"] == {"count": 0, "not_observed": 1, "p50_s": None, "max_s": None}


def test_an_entity_path_names_its_endpoint() -> None:
    assert endpoint_of("billing") == "billing"
    assert endpoint_of("busbar-fallback/Subscriptions/crm") == "crm"


def _row(endpoint: str, name: str, order: str, message_id: str = "m") -> dict[str, object]:
    """A handler's row entity as shared.idempotency.records writes it."""
    return {
        "PartitionKey": table_key(f"{endpoint}|{message_id}"),
        "RowKey": "d|x",
        "Kind": "row",
        "Name": name,
        "Data": json.dumps({"order_id": order, "invoice_id": f"INV-{order}"}),
    }


def _committed_everywhere(item: AcceptedEvent) -> tuple[list[EffectRow], list[Commit], list[Handled]]:
    """An order invoiced, shipped and followed by CRM once each, as the table and the probe show it."""
    key = item.event.key
    rows = [effect_row(_row("billing", "invoice", key)), effect_row(_row("shipping", "shipment", key))]
    handled = [Handled(e, key, 1.0, f"{e}-{key}") for e in ("billing", "crm", "shipping")]
    commits = [commit_of({"Endpoint": h.endpoint, "MessageId": h.message_id}) for h in handled]
    return rows, commits, handled


def test_a_stored_row_is_read_as_the_endpoint_of_its_partition_and_the_order_its_data_names() -> None:
    assert effect_row(_row("shipping", "shipment", "o-1", "some|id")) == EffectRow(
        "shipping", "shipment", "o-1"
    )
    assert commit_of({"Endpoint": "crm", "MessageId": "m-1"}) == Commit("crm", "m-1")
    assert partition_endpoint("not base64 at all!") == "?"


def test_an_order_invoiced_shipped_and_followed_once_has_no_duplicate_or_missing_side_effect() -> None:
    item = _accepted("k1")
    rows, commits, handled = _committed_everywhere(item)

    report = side_effects([item], rows, commits, handled)

    assert report["duplicate_side_effects"] == 0 and report["effects_missing"] == 0
    assert report["effects_counted"]["orders_with_rows"] == {"billing": 1, "shipping": 1}
    assert report["effects_counted"]["records_by_endpoint"] == {"billing": 1, "crm": 1, "shipping": 1}


def test_a_second_invoice_row_for_an_order_is_a_duplicate_side_effect_whatever_its_message_id() -> None:
    item = _accepted("k1")
    rows, commits, handled = _committed_everywhere(item)
    rows.append(effect_row(_row("billing", "invoice", "k1", "another-message-id")))

    report = side_effects([item], rows, commits, handled)

    assert report["duplicate_side_effects"] == 1
    assert report["duplicate_side_effect_examples"] == [{"endpoint": "billing", "key": "k1", "effects": 2}]


def test_two_shipments_of_an_order_never_accepted_are_still_a_duplicate_side_effect() -> None:
    rows = [effect_row(_row("shipping", "shipment", "unanswered", m)) for m in ("m1", "m2")]

    report = side_effects([], rows, [], [])

    assert report["duplicate_side_effects_by_endpoint"] == {"shipping": 1}


def test_crm_committing_one_event_under_two_message_ids_is_a_duplicate_side_effect() -> None:
    item = _accepted("c1", "Tenant.CustomerCreated")
    handled = [Handled("crm", "c1", 1.0, "first"), Handled("crm", "c1", 2.0, "second")]
    commits = [Commit("crm", "first"), Commit("crm", "second")]

    report = side_effects([item], [], commits, handled)

    assert report["duplicate_side_effects_by_endpoint"] == {"crm": 1}
    assert report["events_committed_more_than_once"] == 1


def test_an_invocation_that_ran_twice_but_committed_once_is_no_duplicate_side_effect() -> None:
    item = _accepted("k1")
    rows, commits, handled = _committed_everywhere(item)
    # The worker was killed after billing's handler ran and before its commit: a second probe line, same id.
    handled.append(Handled("billing", "k1", 2.0, "billing-k1"))

    effects = side_effects([item], rows, commits, handled)
    invocations = account([item], handled, [])["repeated_invocations"]

    assert effects["duplicate_side_effects"] == 0
    assert invocations["extra_invocations_by_endpoint"] == {"billing": 1}


def test_an_event_handled_per_the_probe_without_a_committed_effect_is_a_missing_side_effect() -> None:
    item = _accepted("k1")
    rows, commits, handled = _committed_everywhere(item)
    rows = [r for r in rows if r.name != "shipment"]  # shipping ran its handler; its shipment is not there
    commits = [c for c in commits if c.endpoint != "crm"]

    report = side_effects([item], rows, commits, handled)

    assert report["effects_missing"] == 2
    assert {m["endpoint"] for m in report["effects_missing_examples"]} == {"crm", "shipping"}
    assert report["duplicate_side_effects"] == 0


def test_a_poison_order_owes_no_invoice_and_billing_s_records_without_a_probe_line_are_counted_apart() -> (
    None
):
    poison = _accepted("p", poison=True)
    handled = [Handled("crm", "p", 1.0, "crm-p")]
    commits = [Commit("crm", "crm-p"), Commit("billing", "found-the-order-invoiced")]

    report = side_effects([poison], [], commits, handled)

    assert report["effects_missing"] == 0 and report["duplicate_side_effects"] == 0
    assert report["effects_counted"]["records_without_probe_line"] == {"billing": 1}
