"""HTTP publishing (function-key auth): ``POST /api/events/{eventType}`` publishes one event, validated
against its contract, through the topology (routing, stamps)."""

from __future__ import annotations

import azure.functions as func

from app.services import publisher, publishing_service
from functions.convert import api_request, http_response
from shared.api import guarded
from shared.api.publishing import log_refused_publish
from shared.telemetry.operations import continuing
from shared.telemetry.propagation import context_from_headers

bp = func.Blueprint()  # type: ignore[no-untyped-call]


@bp.function_name("publish_event")
@bp.route(route="events/{eventType}", methods=["POST"], auth_level=func.AuthLevel.FUNCTION)
def publish_event(req: func.HttpRequest) -> func.HttpResponse:
    """Publish one event; 202 with where it went. A refusal is logged with its status and reason (the host's
    own line says only that the function ran)."""
    converted = api_request(req)
    # The caller's traceparent (if any) is the publish span's parent: the event joins the caller's trace.
    with continuing(context_from_headers(converted.headers)):
        response = guarded(lambda: publishing_service().publish_event(converted, publisher()))
    return http_response(log_refused_publish(converted, response))
