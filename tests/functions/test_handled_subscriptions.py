"""A hosted endpoint's subscriptions follow its handlers (issue 37, item 5), over HTTP under devhost.

A ``DELETE`` of a subscription the endpoint's handlers need is refused with 409 naming the handlers and the
event, and deletes nothing (the start-up provisioning would re-create it: the call would be silently
undone). What the code does not handle, a hosted endpoint's event added by a ``PUT`` or another subscriber's
subscription, is still deleted.
"""

from __future__ import annotations

import uuid

import httpx


def _rule_names(listed: httpx.Response) -> set[str]:
    [subscription] = listed.json()["subscriptions"]
    return {r["name"].lower() for r in subscription["rules"]}  # rule names are case-insensitive


def test_deleting_a_subscription_the_endpoints_handlers_need_is_409_naming_them_and_deletes_nothing(
    http: httpx.Client, settings: dict[str, str]
) -> None:
    # shipping's code handles Billing.InvoiceIssued (ship_invoiced_order); its subscriptions are the
    # sample's, on the fallback topic (CorrelationFilter): one rule per event.
    put = http.put("/api/endpoints/shipping/subscriptions", json={"events": ["Billing.InvoiceIssued"]})

    refused = http.delete("/api/endpoints/shipping/subscriptions/Billing.InvoiceIssued")
    listed = http.get("/api/endpoints/shipping/subscriptions")

    assert put.status_code == 201, put.text
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "SubscriptionHandled"
    assert "endpoint shipping handles Billing.InvoiceIssued" in error["message"]
    assert error["handledBy"] == {
        "Billing.InvoiceIssued": ["app.endpoints.sample.endpoints.ship_invoiced_order"]
    }
    assert (
        "Billing.InvoiceIssued is handled by app.endpoints.sample.endpoints.ship_invoiced_order"
        in error["details"]
    )
    assert "billing.invoiceissued" in _rule_names(listed)


def test_an_event_a_put_added_that_no_handler_of_the_endpoint_takes_is_still_deleted(
    http: httpx.Client, settings: dict[str, str]
) -> None:
    # billing's code handles the accepted orders, not Tenant.CustomerDeleted: that one is the PUT's.
    put = http.put(
        "/api/endpoints/billing/subscriptions",
        json={"events": ["Shipping.OrderAccepted", "Tenant.CustomerDeleted"]},
    )

    deleted = http.delete("/api/endpoints/billing/subscriptions/Tenant.CustomerDeleted")
    listed = http.get("/api/endpoints/billing/subscriptions")

    assert put.status_code == 201, put.text
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["result"]["deleted"] == [
        f"{settings['BUSBAR_FALLBACK_TOPIC']}/Subscriptions/{settings['BUSBAR_BILLING_QUEUE']}/Rules/"
        "Tenant.CustomerDeleted"
    ]
    assert _rule_names(listed) == {"$default", "shipping.orderaccepted"}


def test_another_subscribers_subscription_to_an_event_a_hosted_endpoint_handles_is_still_deleted(
    http: httpx.Client, settings: dict[str, str]
) -> None:
    # The event is shipping's code's, but this subscription forwards to a queue the app does not host.
    endpoint = f"warehouse-{uuid.uuid4().hex[:8]}"
    put = http.put(f"/api/endpoints/{endpoint}/subscriptions", json={"events": ["Billing.InvoiceIssued"]})

    deleted = http.delete(f"/api/endpoints/{endpoint}/subscriptions/Billing.InvoiceIssued")
    listed = http.get(f"/api/endpoints/{endpoint}/subscriptions")

    assert put.status_code == 201, put.text
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["result"]["deleted"] == [
        f"{settings['BUSBAR_FALLBACK_TOPIC']}/Subscriptions/{endpoint}/Rules/Billing.InvoiceIssued"
    ]
    assert _rule_names(listed) == {"$default"}


def test_a_put_leaving_out_an_event_the_endpoints_handlers_need_is_409_naming_them_and_changes_nothing(
    http: httpx.Client, settings: dict[str, str]
) -> None:
    # A PUT declares the endpoint's whole list: leaving out shipping's handled Billing.InvoiceIssued would
    # delete its rule as stale (and the start-up would re-create it), so the PUT is refused like the DELETE,
    # its creates included.
    first = http.put("/api/endpoints/shipping/subscriptions", json={"events": ["Billing.InvoiceIssued"]})

    refused = http.put("/api/endpoints/shipping/subscriptions", json={"events": ["Tenant.CustomerDeleted"]})
    listed = http.get("/api/endpoints/shipping/subscriptions")

    assert first.status_code in (200, 201), first.text
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "SubscriptionHandled"
    assert "endpoint shipping handles Billing.InvoiceIssued" in error["message"]
    assert "nothing was changed" in error["message"]
    assert error["handledBy"] == {
        "Billing.InvoiceIssued": ["app.endpoints.sample.endpoints.ship_invoiced_order"]
    }
    assert _rule_names(listed) == {"$default", "billing.invoiceissued"}
