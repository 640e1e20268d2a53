"""Contracts of the ordered-subscription tests: keyed and unkeyed events and interfaces (the sample app's
contracts are all keyed). ``--contracts tests.shared.topology.loyalty_contracts:REGISTRY`` loads
``REGISTRY``."""

from __future__ import annotations

from shared.contracts import ContractRegistry, Event


class IPointsEvent(Event, contract="Loyalty.IPointsEvent", abstract=True, ordering_key="member_id"):
    """A keyed interface: every implementer inherits its key."""

    member_id: str


class PointsEarned(IPointsEvent, contract="Loyalty.PointsEarned"):
    points: int = 0


class IAuditable(Event, contract="Loyalty.IAuditable", abstract=True):
    """An interface without a key, one implementer keyed (through IPointsEvent), one not."""


class PointsExpired(IPointsEvent, IAuditable, contract="Loyalty.PointsExpired"):
    points: int = 0


class CampaignStarted(IAuditable, contract="Loyalty.CampaignStarted"):
    """No key: a campaign is not one member's history."""

    campaign: str = ""


class IKeyedAuditable(Event, contract="Loyalty.IKeyedAuditable", abstract=True):
    """An interface without a key whose only implementer declares one."""


class TierChanged(IKeyedAuditable, contract="Loyalty.TierChanged", ordering_key="member_id"):
    member_id: str


class IOrphan(Event, contract="Loyalty.IOrphan", abstract=True):
    """An interface without a key and without an implementer the registry knows."""


REGISTRY = ContractRegistry(PointsEarned, PointsExpired, CampaignStarted, TierChanged, IOrphan)
