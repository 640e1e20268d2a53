"""The chaos run's accounting (bench/chaos_accounting.py): every accepted event per endpoint that owes it
something is handled, parked (dead-lettered or archived) or lost, an event nobody subscribes to is archived
by the fallback router or lost, and a handler that completed without recording shows up as a loss."""

from __future__ import annotations

from pathlib import Path

from bench.chaos_accounting import Handled, Parked, account, endpoint_of, recovery_by_kind, recovery_times
from bench.chaos_drain import archived
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
    assert report["duplicates"]["events_handled_more_than_once"] == 3
    assert report["duplicates"]["most_handlings_of_one_event"] == 2


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
