"""Which deletes a hosted endpoint's handlers need (:mod:`shared.api.provisioning.handled`), decided on the
plan's paths in each topology, without a namespace: the HTTP behaviour is
``tests/functions/test_handled_subscriptions.py``."""

from __future__ import annotations

import pytest

from app.endpoints.sample import sample_catalog
from shared.api.provisioning.handled import SubscriptionHandled, handled_deletes, refuse_handled_deletes
from shared.handlers import Endpoint
from shared.topology import load_topology_options
from shared.topology.plan import Plan, PlanItem, rule_path, subscription_path

TOPIC_PER_EVENT: dict[str, str] = {}
FALLBACK = {"BUSBAR_FALLBACK_TOPIC": "bundle", "BUSBAR_FALLBACK_ROUTING_MODE": "CorrelationFilter"}


def endpoint(name: str) -> Endpoint:
    found = sample_catalog().get(name)
    assert found is not None
    return found


def delete_subscription(topic: str, name: str) -> Plan:
    return Plan((PlanItem("delete", "subscription", subscription_path(topic, name), {}, topic, name, name),))


def delete_rule(topic: str, subscription: str, rule: str) -> Plan:
    path = rule_path(topic, subscription, rule)
    return Plan((PlanItem("delete", "rule", path, {}, topic, subscription, rule),))


def test_in_topic_per_event_deleting_a_handled_events_subscription_names_the_event_and_its_handler() -> None:
    options = load_topology_options(TOPIC_PER_EVENT)
    plan = delete_subscription("Billing.InvoiceIssued", "shipping")

    assert handled_deletes(endpoint("shipping"), "shipping", options, plan) == {
        "Billing.InvoiceIssued": ["app.endpoints.sample.endpoints.ship_invoiced_order"]
    }


def test_an_interface_handler_needs_the_interfaces_subscription_not_an_implementers() -> None:
    options = load_topology_options(TOPIC_PER_EVENT)
    crm = endpoint("crm")

    interface = handled_deletes(
        crm, "crm", options, delete_subscription("Tenant.ICustomerLifecycleEvent", "crm")
    )
    implementer = handled_deletes(crm, "crm", options, delete_subscription("Tenant.CustomerCreated", "crm"))

    assert interface == {"Tenant.ICustomerLifecycleEvent": ["app.endpoints.sample.endpoints.track_customer"]}
    assert implementer == {}


def test_on_a_filtered_topic_only_the_handled_events_rule_is_needed_case_insensitively() -> None:
    options = load_topology_options(FALLBACK)
    shipping = endpoint("shipping")

    handled = handled_deletes(
        shipping, "shipping", options, delete_rule("BUNDLE", "Shipping", "billing.invoiceissued")
    )
    other = handled_deletes(
        shipping, "shipping", options, delete_rule("bundle", "shipping", "Tenant.CustomerDeleted")
    )

    assert list(handled) == ["Billing.InvoiceIssued"]
    assert other == {}


def test_a_refusal_is_a_409_listing_each_handled_event_and_an_unhosted_endpoint_is_never_refused() -> None:
    options = load_topology_options(TOPIC_PER_EVENT)
    plan = delete_subscription("Shipping.OrderAccepted", "billing")

    with pytest.raises(SubscriptionHandled) as refused:
        refuse_handled_deletes(endpoint("billing"), "billing", options, plan)
    refuse_handled_deletes(None, "billing", options, plan)

    assert refused.value.status == 409
    assert "Shipping.OrderAccepted is handled by app.endpoints.sample.endpoints.invoice_accepted_order" in (
        refused.value.details
    )
