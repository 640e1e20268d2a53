"""The operations console: the page at ``GET /api/ops`` and its JSON API under ``/api/ops/`` (admin auth:
only the master key opens it in Azure; under devhost the master key it prints). The logic is
:class:`shared.ops.service.OpsService`; this module only converts.

The page itself is static and holds no data (everything it shows comes from the admin-level API, called
with the key the page was opened with), so the host lets it through (anonymous) and the function answers a
request that carries no key at all with 401 and a page saying how to open the console: the host's own 401
for an admin-level function has an empty body, which tells a browser user nothing.

Routes (prefix ``/api``): ``GET ops`` (the page), ``GET ops/entities``, ``GET ops/failures``,
``GET ops/failures/{entity}/{sequenceNumber}`` (a queue; a subscription's path URL-encoded as one
segment also matches here in Azure, whose routing keeps ``%2F`` encoded),
``GET ops/failures/{topic}/Subscriptions/{subscription}/{sequenceNumber}`` (a subscription by its path),
``POST ops/failures/retry``, ``POST ops/failures/archive``, ``GET ops/archive``, ``GET ops/held`` (the held
keys of ordered endpoints), ``GET ops/monitoring?minutes=15`` (each endpoint's throughput, retries, dead
letters, processing and critical time and queue length over recent minutes).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import azure.functions as func

from app import runtime
from app.monitoring import monitoring_table
from functions.convert import api_request, http_response
from shared.api import ApiRequest, ApiResponse, guarded
from shared.ops.held_keys_view import held_keys_view
from shared.ops.service import OpsService

PAGE = Path(__file__).with_name("console") / "index.html"
NEEDS_KEY_PAGE = Path(__file__).with_name("console") / "needs_key.html"
PAGE_HEADERS = {"Cache-Control": "no-store", "Content-Security-Policy": "default-src 'self' 'unsafe-inline'"}

bp = func.Blueprint()  # type: ignore[no-untyped-call]


def ops_service() -> OpsService:
    return OpsService(runtime.environment(), runtime.management_client, runtime.wire_namespace)


def _serve(
    request: func.HttpRequest, call: Callable[[OpsService, ApiRequest], ApiResponse]
) -> func.HttpResponse:
    converted = api_request(request)
    return http_response(guarded(lambda: call(ops_service(), converted)))


def carries_key(req: func.HttpRequest) -> bool:
    """Whether the request names a key, as the host reads one: ``?code=`` or ``x-functions-key``. Whether
    it is the master key only the host knows: the page's API calls find out (a refused key asks again)."""
    return bool(req.params.get("code") or req.headers.get("x-functions-key"))


@bp.function_name("ops_console")
@bp.route(route="ops", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
def ops_console(req: func.HttpRequest) -> func.HttpResponse:
    """The console page: one self-contained HTML file (no CDN; works offline). Without a key: 401 and a
    page naming the key it needs and how to get it."""
    if not carries_key(req):
        return func.HttpResponse(
            body=NEEDS_KEY_PAGE.read_bytes(),
            status_code=401,
            mimetype="text/html",
            charset="utf-8",
            headers=dict(PAGE_HEADERS),
        )
    return func.HttpResponse(
        body=PAGE.read_bytes(),
        status_code=200,
        mimetype="text/html",
        charset="utf-8",
        headers=dict(PAGE_HEADERS),
    )


@bp.function_name("ops_entities")
@bp.route(route="ops/entities", methods=["GET"], auth_level=func.AuthLevel.ADMIN)
def ops_entities(req: func.HttpRequest) -> func.HttpResponse:
    """Every queue, topic and subscription with active, dead-letter, scheduled and transfer counts: the
    app's endpoints first, Busbar's infrastructure and foreign entities apart."""
    from app.services import app_entities  # the catalog imports the app's handlers: only when asked

    return _serve(req, lambda ops, request: ops.entities(request, app_entities(runtime.environment())))


@bp.function_name("ops_failures")
@bp.route(route="ops/failures", methods=["GET"], auth_level=func.AuthLevel.ADMIN)
def ops_failures(req: func.HttpRequest) -> func.HttpResponse:
    """Dead-lettered messages grouped by endpoint, reason and exception (read by peek)."""
    return _serve(req, OpsService.failures)


@bp.function_name("ops_failure")
@bp.route(route="ops/failures/{entity}/{sequenceNumber}", methods=["GET"], auth_level=func.AuthLevel.ADMIN)
def ops_failure(req: func.HttpRequest) -> func.HttpResponse:
    """One dead-lettered message: body, properties, NServiceBus headers, re-drive history."""
    return _serve(req, OpsService.failure)


@bp.function_name("ops_subscription_failure")
@bp.route(
    route="ops/failures/{topic}/subscriptions/{subscription}/{sequenceNumber}",
    methods=["GET"],
    auth_level=func.AuthLevel.ADMIN,
)
def ops_subscription_failure(req: func.HttpRequest) -> func.HttpResponse:
    """One dead-lettered message of a subscription, addressed by its path (``topic/Subscriptions/sub``)."""
    return _serve(req, OpsService.failure)


@bp.function_name("ops_retry")
@bp.route(route="ops/failures/retry", methods=["POST"], auth_level=func.AuthLevel.ADMIN)
def ops_retry(req: func.HttpRequest) -> func.HttpResponse:
    """Re-drive a failure group or selected messages, through the timer re-drive's code."""
    return _serve(req, OpsService.retry)


@bp.function_name("ops_archive_messages")
@bp.route(route="ops/failures/archive", methods=["POST"], auth_level=func.AuthLevel.ADMIN)
def ops_archive_messages(req: func.HttpRequest) -> func.HttpResponse:
    """Archive a failure group or selected messages to the Parquet archive."""
    return _serve(req, OpsService.archive_messages)


@bp.function_name("ops_archive")
@bp.route(route="ops/archive", methods=["GET"], auth_level=func.AuthLevel.ADMIN)
def ops_archive(req: func.HttpRequest) -> func.HttpResponse:
    """What the archive holds and the replay command lines."""
    return _serve(req, OpsService.archive)


@bp.function_name("ops_held_keys")
@bp.route(route="ops/held", methods=["GET"], auth_level=func.AuthLevel.ADMIN)
def ops_held_keys(req: func.HttpRequest) -> func.HttpResponse:
    """Every ordered endpoint's held keys: the blocker, how many are parked, since when."""
    from app.services import CATALOG  # the catalog imports the app's handlers: only when asked

    env = runtime.environment()
    return http_response(
        guarded(lambda: ApiResponse(200, held_keys_view(CATALOG, env, lambda: runtime.held_keys(env))))
    )


@bp.function_name("ops_monitoring")
@bp.route(route="ops/monitoring", methods=["GET"], auth_level=func.AuthLevel.ADMIN)
def ops_monitoring(req: func.HttpRequest) -> func.HttpResponse:
    """Per endpoint over the last ``minutes`` minutes (default 15): handled per minute, retries, dead
    letters, processing and critical time (median, p95), and queue length now and per minute."""
    from app.services import app_entities  # the catalog imports the app's handlers: only when asked

    env = runtime.environment()
    return _serve(req, lambda ops, request: ops.monitoring(request, app_entities(env), monitoring_table))
