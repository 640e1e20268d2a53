"""Trigger and HTTP types -> Busbar's own types, and Busbar's API responses -> ``func.HttpResponse``.

The only place (with the function modules) that knows ``azure.functions``: ``shared/`` works on
:class:`~shared.messages.IncomingMessage` and :class:`~shared.api.ApiResponse`.
"""

from __future__ import annotations

import json

import azure.functions as func
from azure.servicebus import ServiceBusReceivedMessage

from functions.trigger_properties import typed_application_properties
from shared.api import ApiRequest, ApiResponse
from shared.envelope.sdk import readable_from_received
from shared.messages import IncomingMessage


def incoming_from_received(message: ServiceBusReceivedMessage) -> IncomingMessage:
    """An SDK-type binding's message as an :class:`IncomingMessage` (any body readable as bytes), every
    application property with the AMQP type it arrived with (:mod:`functions.trigger_properties`)."""
    typed = typed_application_properties(message)
    return readable_from_received(message, IncomingMessage, application_properties=typed)


def api_request(request: func.HttpRequest) -> ApiRequest:
    """An HTTP request as Busbar's :class:`ApiRequest` (body kept raw: the service validates it)."""
    return ApiRequest(
        method=request.method.upper(),
        route_params=dict(request.route_params),
        query=dict(request.params),
        body=request.get_body() or b"",
        headers={name.lower(): value for name, value in request.headers.items()},
    )


def http_response(response: ApiResponse) -> func.HttpResponse:
    """Busbar's :class:`ApiResponse` as a JSON ``func.HttpResponse``."""
    return func.HttpResponse(
        body=json.dumps(response.body, indent=2, default=str),
        status_code=response.status,
        headers=dict(response.headers),
        mimetype="application/json",
        charset="utf-8",
    )
