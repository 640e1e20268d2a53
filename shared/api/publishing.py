"""Publishing as an application service, independent of HTTP and of the management plane.

``POST /api/events/{eventType}`` needs the contracts, the topology options (where the event goes, how it is
stamped) and the Service Bus connection, nothing else: it must work in an app that has no management
settings (``BUSBAR_SUBSCRIPTION_ID``...), so it is not part of :mod:`shared.api.provisioning.service`.

An ``Idempotency-Key`` header (the HTTP convention for a POST a client may safely retry) makes the publish
idempotent: the event's ``MessageId`` is derived from the event type and the key
(:func:`~shared.topology.message_ids.idempotent_message_id`), so a client retrying after a timeout publishes
the same id and the topic's duplicate detection drops the copy inside its window
(``BUSBAR_DUPLICATE_DETECTION_WINDOW``). Without the header every publish is a new event.
"""

from __future__ import annotations

from typing import Any

from azure.core.exceptions import AzureError
from pydantic import ValidationError

from shared.api import (
    ApiRequest,
    ApiResponse,
    BrokerRefused,
    NotFound,
    ValidationFailed,
    pydantic_problems,
)
from shared.contracts import ContractError, ContractRegistry, ordering_key
from shared.handlers.dispatch import describe_validation_error
from shared.topology import (
    Publisher,
    TopologyOptions,
    UnmappedEventError,
    publish_route,
)
from shared.topology.message_ids import idempotency_key_problem, idempotent_message_id

IDEMPOTENCY_KEY = "Idempotency-Key"


def require_known(contracts: ContractRegistry, event_types: list[str]) -> None:
    """:class:`NotFound` naming every event type of ``event_types`` the registry does not know."""
    unknown = [t for t in dict.fromkeys(event_types) if t not in contracts]
    if unknown:
        raise NotFound(
            f"unknown event type(s): {', '.join(unknown)}",
            [f"{t} is not a known contract" for t in unknown] + [f"known: {', '.join(contracts.names())}"],
        )


class PublishingService:
    """Validate posted events against their contracts and publish them through the topology."""

    def __init__(self, *, contracts: ContractRegistry, options: TopologyOptions) -> None:
        self.contracts = contracts
        self.options = options

    def publish_event(self, request: ApiRequest, publish: Publisher) -> ApiResponse:
        """Validate the body against the event's contract and publish it through ``publish``; 202 with the
        ``messageId`` (the broker ``MessageId`` and ``NServiceBus.MessageId`` alike). A malformed or
        oversized ``Idempotency-Key`` is a 400 naming the problem, before the body is read."""
        event_type = request.route_params.get("eventType", "")
        key = request.headers.get(IDEMPOTENCY_KEY.lower())
        if key is not None:
            problem = idempotency_key_problem(key)
            if problem is not None:
                raise ValidationFailed(f"the {IDEMPOTENCY_KEY} header is invalid", [problem])
        require_known(self.contracts, [event_type])
        contract = self.contracts.resolve(event_type)
        if contract.is_abstract:
            raise ValidationFailed(
                f"{event_type} is an interface and cannot be published",
                [
                    "publish one of: "
                    + ", ".join(c.contract_name for c in self.contracts.implementers(event_type))
                ],
            )
        if not request.body.strip():
            raise ValidationFailed("the request body is empty; the event as a JSON object is required")
        try:
            event = contract.model_validate_json(request.body)
        except ValidationError as error:
            raise ValidationFailed(
                f"the body is not a valid {event_type}: {describe_validation_error(error)}",
                pydantic_problems(error),
            ) from None
        try:
            session_id = ordering_key(event)
        except ContractError as error:
            raise ValidationFailed(f"the body is not a valid {event_type}: {error}", [str(error)]) from None
        try:
            route = publish_route(self.options, contract)
        except UnmappedEventError as error:
            raise ValidationFailed("the event has no topic in this topology", [str(error)]) from None
        correlation_id = request.query.get("correlationId") or None
        # The contract name, not the route's spelling: the same event under one key is one id.
        message_ids = None if key is None else [idempotent_message_id(contract.contract_name, key)]
        try:
            result = publish.publish([event], correlation_id=correlation_id, message_ids=message_ids)
        except AzureError as error:
            raise BrokerRefused(
                "Service Bus refused the publish", [f"{type(error).__name__}: {error}"]
            ) from None
        sent = [{"eventType": m.event, "topic": m.topic, "messageId": m.message_id} for m in result.sent]
        dropped = [
            {"eventType": m.event, "topic": m.topic, "messageId": m.message_id} for m in result.dropped
        ]
        body: dict[str, Any] = {
            "eventType": event_type,
            # One id on the broker (MessageId: what duplicate detection keys on, what the console and the
            # dead-letter queues show) and in the NServiceBus.MessageId header (what handlers see).
            "messageId": (result.sent or result.dropped)[0].message_id,
            "idempotencyKey": key,
            "topic": route.topic,
            "routingMode": str(route.routing_mode),
            "sessionId": session_id,
            "sent": sent,
            "dropped": dropped,
        }
        if dropped:
            body["warning"] = (
                f"topic {route.topic} does not exist: the event was dropped "
                "(no endpoint subscribes to it yet)"
            )
        return ApiResponse(202, body)
