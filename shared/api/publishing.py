"""Publishing as an application service, independent of HTTP and of the management plane.

``POST /api/events/{eventType}`` needs the contracts, the topology options (where the event goes, how it is
stamped) and the Service Bus connection, nothing else: it must work in an app that has no management
settings (``BUSBAR_SUBSCRIPTION_ID``...), so it is not part of :mod:`shared.api.provisioning.service`.

An ``Idempotency-Key`` header (the HTTP convention for a POST a client may safely retry) makes the publish
idempotent: the event's ``MessageId`` is derived from the event type and the key
(:func:`~shared.topology.message_ids.idempotent_message_id`), so a client retrying after a timeout publishes
the same id and the topic's duplicate detection drops the copy inside its window
(``BUSBAR_DUPLICATE_DETECTION_WINDOW``). Without the header every publish is a new event.

One id names the published message everywhere: the broker ``MessageId`` (what the log, the console, the
probe, the dead-letter queues and duplicate detection show) *is* the ``NServiceBus.MessageId`` header (what
handlers read): :func:`~shared.topology.messages.build_message` sets both from one value. The 202 answers it
under both names, and every accepted publish is logged (INFO, this module's logger) with that id, the event
type, the topic, the session id (the ordering key) and the correlation id; every refused one (4xx/5xx) is
logged as a WARNING with the status and the reason (:func:`log_refused_publish`), because the Functions
host's own ``Executed ... (Succeeded ...)`` line speaks of the invocation, not of the HTTP status.

``?correlationId=`` sets the message's ``CorrelationId`` and ``NServiceBus.CorrelationId`` (default: its own
message id, a new conversation, as in NServiceBus); handlers' outgoing messages carry it on.

Refusals made before anything is sent: 415 for a non-JSON ``Content-Type`` (:mod:`shared.api.json_body`),
413 for a body larger than the topic's maximum message size (:mod:`shared.api.message_size`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from azure.core.exceptions import AzureError
from azure.servicebus.exceptions import MessageSizeExceededError
from pydantic import ValidationError

from shared.api import (
    ApiRequest,
    ApiResponse,
    BrokerRefused,
    NotFound,
    PayloadTooLarge,
    ValidationFailed,
    pydantic_problems,
)
from shared.api.json_body import require_json_content_type
from shared.contracts import ContractError, ContractRegistry, ordering_key
from shared.handlers.dispatch import describe_validation_error
from shared.topology import (
    Publisher,
    TopologyOptions,
    UnmappedEventError,
    publish_route,
)
from shared.topology.message_ids import idempotency_key_problem, idempotent_message_id
from shared.topology.messages import message_body

log = logging.getLogger(__name__)

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

    def __init__(
        self,
        *,
        contracts: ContractRegistry,
        options: TopologyOptions,
        max_message_bytes: Callable[[str], int | None] | None = None,
    ) -> None:
        """``max_message_bytes``: a topic's maximum message size in bytes, None when unknown
        (:class:`~shared.api.message_size.MessageSizeLimits`); without it only Service Bus checks sizes."""
        self.contracts = contracts
        self.options = options
        self.max_message_bytes = max_message_bytes

    def publish_event(self, request: ApiRequest, publish: Publisher) -> ApiResponse:
        """Validate the body against the event's contract and publish it through ``publish``; 202 with the
        ``messageId`` (the broker ``MessageId``) and ``nserviceBusMessageId`` (the header: always the same).
        A malformed or oversized ``Idempotency-Key`` is a 400 naming the problem, before the body is read; a
        non-JSON ``Content-Type`` a 415; a body larger than the topic takes a 413, before anything is sent."""
        event_type = request.route_params.get("eventType", "")
        key = request.headers.get(IDEMPOTENCY_KEY.lower())
        if key is not None:
            problem = idempotency_key_problem(key)
            if problem is not None:
                raise ValidationFailed(f"the {IDEMPOTENCY_KEY} header is invalid", [problem])
        require_known(self.contracts, [event_type])
        require_json_content_type(request.headers)
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
        self._require_fits(route.topic, len(message_body(event).encode()))
        correlation_id = request.query.get("correlationId") or None
        # The contract name, not the route's spelling: the same event under one key is one id.
        message_ids = None if key is None else [idempotent_message_id(contract.contract_name, key)]
        try:
            result = publish.publish([event], correlation_id=correlation_id, message_ids=message_ids)
        except MessageSizeExceededError as error:
            # The limit was not known beforehand (see shared.api.message_size), or the headers tipped a body
            # just under it over: Service Bus refused the message, so nothing was enqueued.
            raise PayloadTooLarge(
                f"the event is too large for topic {route.topic}: Service Bus refused it",
                [f"{type(error).__name__}: {error}"],
            ) from None
        except AzureError as error:
            raise BrokerRefused(
                "Service Bus refused the publish", [f"{type(error).__name__}: {error}"]
            ) from None
        sent = [{"eventType": m.event, "topic": m.topic, "messageId": m.message_id} for m in result.sent]
        dropped = [
            {"eventType": m.event, "topic": m.topic, "messageId": m.message_id} for m in result.dropped
        ]
        message_id = (result.sent or result.dropped)[0].message_id
        # No correlation id given: the message's own id (publish_headers), a new conversation.
        correlation = correlation_id or message_id
        body: dict[str, Any] = {
            "eventType": event_type,
            # One id on the broker (MessageId: what duplicate detection keys on, what the log, the console
            # and the dead-letter queues show) and in the NServiceBus.MessageId header (what handlers see).
            "messageId": message_id,
            "nserviceBusMessageId": message_id,
            "correlationId": correlation,
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
        log.info(
            "published %s: MessageId=%s (= NServiceBus.MessageId), topic %s, SessionId=%s, "
            "CorrelationId=%s%s",
            contract.contract_name,
            message_id,
            route.topic,
            session_id,
            correlation,
            " (dropped: the topic does not exist)" if dropped else "",
        )
        return ApiResponse(202, body)

    def _require_fits(self, topic: str, body_bytes: int) -> None:
        """:class:`PayloadTooLarge` naming the limit when a body of ``body_bytes`` can never fit a message
        of ``topic``; nothing when it may (the headers count too: Service Bus decides a close call)."""
        limit = None if self.max_message_bytes is None else self.max_message_bytes(topic)
        if limit is None or body_bytes <= limit:
            return
        raise PayloadTooLarge(
            f"the event's body is {body_bytes} bytes; topic {topic} takes messages of at most {limit} bytes "
            f"({limit // 1024} KB, headers included)",
            [
                f"Service Bus's maximum message size for topic {topic} is {limit // 1024} KB "
                "(Standard tier: 256 KB; Premium: the entity's MaxMessageSizeInKilobytes); nothing was sent"
            ],
            maxMessageSizeInBytes=limit,
        )


def log_refused_publish(request: ApiRequest, response: ApiResponse) -> ApiResponse:
    """Log ``response`` as a WARNING with its status and reason when it refuses the publish (4xx/5xx), and
    return it: the Functions host's ``Executed 'Functions.publish_event' (Succeeded, ...)`` says only that
    the function returned (azure-webjobs-sdk ``FunctionInstanceLogger``: ``Succeeded`` unless it threw),
    so without this line a refused publish leaves no trace of why."""
    if response.status < 400:
        return response
    error = response.body.get("error", {}) if isinstance(response.body, dict) else {}
    details = "; ".join(str(d) for d in error.get("details", []))
    log.warning(
        "publish of %s refused: %d %s: %s%s",
        request.route_params.get("eventType", "") or "(no event type)",
        response.status,
        error.get("code", ""),
        error.get("message", ""),
        f" ({details})" if details else "",
    )
    return response
