"""Errors of the topology library."""

from __future__ import annotations


class TopologyValidationError(ValueError):
    """Options, or a subscription request, break NServiceBus's rules. ``errors`` lists every violation;
    the message joins them with ``; `` as NServiceBus's ``ValidationException`` does."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = list(errors)
        super().__init__("; ".join(self.errors))


class IncompatibleRoutingModesError(TopologyValidationError):
    """Events subscribed on one topic by one subscription mix SqlLikeFilter with the catch-all modes."""


class QueueNeedsRecreatingError(TopologyValidationError):
    """A plan found an existing queue whose immutable properties (``RequiresSession``, a hold queue's
    duplicate detection) differ from the desired ones: the endpoint needs a new queue. ``errors`` holds
    one reason per queue, naming it; nothing was provisioned."""


class UnmappedEventError(LookupError):
    """An event has no topic: ``ThrowIfUnmappedEventTypes`` is set, or the migration topology does not
    know it. The message is NServiceBus's."""


class QuotaExceededError(ValueError):
    """A plan would exceed a per-topic quota; raised before any management call that changes anything.
    ``violations`` holds one line per topic and quota, with the numbers."""

    def __init__(self, violations: list[str]) -> None:
        self.violations = list(violations)
        super().__init__("; ".join(self.violations))


class ProvisioningError(RuntimeError):
    """The management plane refused a call. Carries the refused action and entity path and the ARM
    ``status``/``code``/``message``; ``__cause__`` is the SDK's ``HttpResponseError``; ``done`` holds
    the paths changed before the refusal and still in place (a re-run continues idempotently);
    ``rolled_back`` the subscriptions this run created and deleted again because one of their rules
    was refused (a subscription is never left half-provisioned)."""

    def __init__(
        self, action: str, path: str, status: int | None, code: str | None, message: str, done: list[str]
    ) -> None:
        self.action = action
        self.path = path
        self.status = status
        self.code = code
        self.message = message
        self.done = list(done)
        self.rolled_back: list[str] = []
        super().__init__(f"{action} {path} failed ({status} {code}): {message}")


QUOTA_SUBCODE = "SubCode=40300"
"""How Service Bus marks a quota refusal in an ARM error message (``MessagingGatewayBadRequest``)."""


def is_quota_refusal(error: ProvisioningError) -> bool:
    """True when the management plane refused because a quota (subscriptions, filters) is reached."""
    return QUOTA_SUBCODE in (error.message or "")
