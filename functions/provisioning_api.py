"""HTTP provisioning (function-key auth): endpoints' subscriptions and the effective topology.

Routes (prefix ``/api``): ``PUT|GET endpoints/{endpoint}/subscriptions``,
``DELETE endpoints/{endpoint}/subscriptions/{eventType}``, ``GET topology``. The logic is
:class:`shared.api.provisioning.service.ProvisioningService`; this module only converts.
"""

from __future__ import annotations

from collections.abc import Callable

import azure.functions as func

from app.services import provisioning_service
from functions.convert import api_request, http_response
from shared.api import ApiRequest, ApiResponse, guarded
from shared.api.provisioning.service import ProvisioningService

bp = func.Blueprint()  # type: ignore[no-untyped-call]


def _serve(
    request: func.HttpRequest, call: Callable[[ProvisioningService, ApiRequest], ApiResponse]
) -> func.HttpResponse:
    converted = api_request(request)
    return http_response(guarded(lambda: call(provisioning_service(), converted)))


@bp.function_name("put_subscriptions")
@bp.route(route="endpoints/{endpoint}/subscriptions", methods=["PUT"], auth_level=func.AuthLevel.FUNCTION)
def put_subscriptions(req: func.HttpRequest) -> func.HttpResponse:
    """Subscribe an endpoint to exactly the listed events (plan + apply, or plan only with dryRun)."""
    return _serve(req, ProvisioningService.put_subscriptions)


@bp.function_name("get_subscriptions")
@bp.route(route="endpoints/{endpoint}/subscriptions", methods=["GET"], auth_level=func.AuthLevel.FUNCTION)
def get_subscriptions(req: func.HttpRequest) -> func.HttpResponse:
    """What the endpoint is subscribed to in the namespace now."""
    return _serve(req, ProvisioningService.get_subscriptions)


@bp.function_name("delete_subscription")
@bp.route(
    route="endpoints/{endpoint}/subscriptions/{eventType}",
    methods=["DELETE"],
    auth_level=func.AuthLevel.FUNCTION,
)
def delete_subscription(req: func.HttpRequest) -> func.HttpResponse:
    """Unsubscribe an endpoint from one event."""
    return _serve(req, ProvisioningService.delete_subscription)


@bp.function_name("get_topology")
@bp.route(route="topology", methods=["GET"], auth_level=func.AuthLevel.FUNCTION)
def get_topology(req: func.HttpRequest) -> func.HttpResponse:
    """The effective topology options and every endpoint's desired state."""
    return _serve(req, ProvisioningService.topology)
