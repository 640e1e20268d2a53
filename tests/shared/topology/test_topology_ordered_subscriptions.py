"""Which subscriptions an ordered endpoint may have: only to contracts every message of which carries an
ordering key (shared/topology/ordered_subscriptions.py). Everything else would be dead-lettered by the broker
on its way into the session-enabled queue, so it is refused naming the endpoint and the contract."""

from __future__ import annotations

import pytest

from shared.topology.ordered_subscriptions import UnkeyedSubscriptionError, require_keyed, why_unkeyed
from tests.shared.topology.loyalty_contracts import REGISTRY


@pytest.mark.parametrize(
    "event", ["Loyalty.PointsEarned", "Loyalty.IPointsEvent", "Loyalty.PointsExpired", "Loyalty.TierChanged"]
)
def test_a_keyed_contract_a_keyed_interface_and_an_interface_whose_implementers_are_all_keyed_pass(
    event: str,
) -> None:
    assert why_unkeyed(REGISTRY, event) is None


def test_a_concrete_contract_without_a_key_is_unkeyed() -> None:
    assert why_unkeyed(REGISTRY, "Loyalty.CampaignStarted") == "it declares no ordering key"


def test_an_interface_with_one_unkeyed_implementer_is_unkeyed_naming_that_implementer() -> None:
    reason = why_unkeyed(REGISTRY, "Loyalty.IAuditable")

    assert reason == "its implementer(s) Loyalty.CampaignStarted have no ordering key"


def test_an_interface_with_no_key_and_no_known_implementer_is_unkeyed() -> None:
    assert why_unkeyed(REGISTRY, "Loyalty.IOrphan") == (
        "it declares no ordering key and the app knows no implementer of it"
    )


def test_a_contract_the_registry_does_not_know_is_unkeyed() -> None:
    reason = why_unkeyed(REGISTRY, "Loyalty.Unknown")

    assert reason == "it is not a contract the app knows, so its ordering key is unknown"


def test_require_keyed_names_the_endpoint_and_every_unkeyed_contract_at_once() -> None:
    events = ["Loyalty.PointsEarned", "Loyalty.CampaignStarted", "Loyalty.IAuditable"]
    events.append("Loyalty.CampaignStarted")  # named twice, reported once

    with pytest.raises(UnkeyedSubscriptionError) as raised:
        require_keyed("loyalty", REGISTRY, events)

    assert raised.value.endpoint == "loyalty"
    assert raised.value.unkeyed == ["Loyalty.CampaignStarted", "Loyalty.IAuditable"]
    first, second = raised.value.errors
    assert first.startswith("endpoint loyalty is ordered, but it would subscribe to Loyalty.CampaignStarted")
    assert "dead-letters in the subscription every message forwarded there without a SessionId" in first
    assert "Nothing was provisioned." in first
    assert "Loyalty.IAuditable" in second and "Loyalty.CampaignStarted have no ordering key" in second


def test_require_keyed_accepts_keyed_events() -> None:
    keyed = ["Loyalty.PointsEarned", "Loyalty.IPointsEvent", "Loyalty.TierChanged"]

    require_keyed("loyalty", REGISTRY, keyed)  # raises nothing
