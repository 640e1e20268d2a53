"""Provisioning as an application service, independent of HTTP (publishing: :mod:`shared.publishing_service`).

The HTTP functions (``functions/provisioning_api.py``, ``functions/publishing_api.py``) convert requests to
:class:`~shared.api.ApiRequest`, call a method here and turn the :class:`~shared.api.ApiResponse` back.
Request bodies are pydantic models with camelCase JSON names; every validation problem is reported at once.

``PUT /endpoints/{endpoint}/subscriptions`` is declarative: the endpoint ends up subscribed to exactly the
listed events. The plan (topology library) creates what is missing, and the endpoint's subscriptions and
rules that no listed event needs any more are deleted. Repeating a PUT reports ``unchanged``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from azure.core.exceptions import AzureError, HttpResponseError
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from shared.api import (
    ApiError,
    ApiRequest,
    ApiResponse,
    ManagementRefused,
    Misconfigured,
    NotFound,
    QuotaExceeded,
    ValidationFailed,
    parse_body,
)
from shared.app_settings import AppSetting, read
from shared.contracts import ContractRegistry
from shared.endpoints import Endpoint, EndpointCatalog
from shared.management import ManagementClient, SettingsError
from shared.publishing_service import require_known
from shared.topology import (
    ApplyResult,
    DesiredState,
    EntityDefaults,
    Plan,
    PlanItem,
    Provisioner,
    ProvisioningError,
    QuotaExceededError,
    TopicRoutingMode,
    TopologyOptions,
    TopologyValidationError,
    UnmappedEventError,
    desired_state,
)
from shared.topology.errors import is_quota_refusal
from shared.topology.provisioner import rule_path, subscription_path

LOCK_DURATION = AppSetting(
    "BUSBAR_ENTITY_LOCK_DURATION_SECONDS",
    "Lock duration of the queues and subscriptions Busbar creates, in seconds (NServiceBus: 300).",
    default="300",
)
MAX_DELIVERY_COUNT = AppSetting(
    "BUSBAR_ENTITY_MAX_DELIVERY_COUNT",
    "MaxDeliveryCount of the queues and subscriptions Busbar creates (NServiceBus on the emulator: 10).",
    default="10",
)
MAX_SIZE_MB = AppSetting(
    "BUSBAR_ENTITY_MAX_SIZE_MB",
    "MaxSizeInMegabytes of the queues and topics Busbar creates (NServiceBus EntityMaximumSize 5 GB).",
    default="5120",
)

SETTINGS: tuple[AppSetting, ...] = (LOCK_DURATION, MAX_DELIVERY_COUNT, MAX_SIZE_MB)


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class EventSubscription(_Model):
    """One subscribed event with an explicit topic (and optionally a routing mode)."""

    type: str = Field(min_length=1)
    topic: str | None = Field(default=None, min_length=1)
    routing_mode: TopicRoutingMode | None = None


class SubscriptionsRequest(_Model):
    """Body of ``PUT /api/endpoints/{endpoint}/subscriptions``."""

    events: list[str | EventSubscription]
    dry_run: bool = False

    def entries(self) -> list[str | dict[str, Any]]:
        """The events in the topology library's request shape."""
        out: list[str | dict[str, Any]] = []
        for item in self.events:
            if isinstance(item, str):
                out.append(item)
            else:
                entry: dict[str, Any] = {"type": item.type}
                if item.topic is not None:
                    entry["topic"] = item.topic
                if item.routing_mode is not None:
                    entry["routingMode"] = str(item.routing_mode)
                out.append(entry)
        return out

    def event_types(self) -> list[str]:
        return [item if isinstance(item, str) else item.type for item in self.events]


def entity_defaults(env: Mapping[str, str]) -> EntityDefaults:
    """Entity properties from the ``BUSBAR_ENTITY_*`` settings; a malformed value is a settings error."""

    def number(setting: AppSetting, minimum: int) -> int:
        raw = read(setting, env) or setting.default or "0"
        try:
            value = int(raw)
        except ValueError:
            raise SettingsError(f"{setting.name} must be an integer, got {raw!r}") from None
        if value < minimum:
            raise SettingsError(f"{setting.name} must be at least {minimum}, got {value}")
        return value

    return EntityDefaults(
        lock_duration=timedelta(seconds=number(LOCK_DURATION, 5)),
        max_delivery_count=number(MAX_DELIVERY_COUNT, 1),
        max_size_in_megabytes=number(MAX_SIZE_MB, 1),
    )


def management_error(error: Exception) -> ApiError:
    """A management-plane failure as the API reports it: 409 when Service Bus refused for a quota (a
    race the pre-check could not see), else 502 with the ARM error. Both list what was rolled back."""
    if isinstance(error, ProvisioningError) and is_quota_refusal(error):
        return QuotaExceeded(
            f"Service Bus refused to {error.action} {error.path}: a per-topic quota is reached",
            [error.message],
            managementStatus=error.status,
            managementCode=error.code,
            done=error.done,
            rolledBack=error.rolled_back,
        )
    if isinstance(error, ProvisioningError):
        return ManagementRefused(
            f"the management plane refused to {error.action} {error.path or 'an entity'}",
            [error.message],
            managementStatus=error.status,
            managementCode=error.code,
            done=error.done,
            rolledBack=error.rolled_back,
        )
    if isinstance(error, HttpResponseError):
        code = getattr(getattr(error, "error", None), "code", None)
        return ManagementRefused(
            "the management plane refused the request",
            [str(getattr(getattr(error, "error", None), "message", None) or error.message)],
            managementStatus=error.status_code,
            managementCode=code,
        )
    return ManagementRefused(
        "the management plane could not be reached", [f"{type(error).__name__}: {error}"]
    )


class ProvisioningService:
    """Provision, describe and remove endpoint subscriptions (one namespace)."""

    def __init__(
        self,
        *,
        catalog: EndpointCatalog,
        contracts: ContractRegistry,
        options: TopologyOptions,
        management: ManagementClient,
        defaults: EntityDefaults,
        env: Mapping[str, str],
    ) -> None:
        self.catalog = catalog
        self.contracts = contracts
        self.options = options
        self.management = management
        self.provisioner = Provisioner(management, defaults)
        self.env = env

    # ------------------------------------------------------------------------------------------ helpers

    def _endpoint(self, request: ApiRequest) -> tuple[Endpoint, str]:
        name = request.route_params.get("endpoint", "")
        endpoint = self.catalog.get(name)
        if endpoint is None:
            raise NotFound(
                f"unknown endpoint {name!r}", [f"known endpoints: {', '.join(self.catalog.names())}"]
            )
        return endpoint, endpoint.queue(self.env)

    def _require_known(self, event_types: list[str]) -> None:
        require_known(self.contracts, event_types)

    def _desired(self, queue: str, entries: list[str | dict[str, Any]]) -> DesiredState:
        try:
            return desired_state(self.options, queue, entries)
        except TopologyValidationError as error:
            raise ValidationFailed("the subscriptions are invalid for this topology", error.errors) from None
        except UnmappedEventError as error:
            raise ValidationFailed("an event has no topic in this topology", [str(error)]) from None

    def _stale_items(self, queue: str, desired: DesiredState) -> list[PlanItem]:
        """Deletes of the endpoint's subscriptions and rules that ``desired`` no longer contains."""
        wanted = {(s.topic.lower(), s.name.lower()): s for s in desired.subscriptions}
        items: list[PlanItem] = []
        for existing in self.provisioner.describe(queue, self.options):
            spec = wanted.get((existing.topic.lower(), existing.name.lower()))
            if spec is None:
                path = subscription_path(existing.topic, existing.name)
                items.append(
                    PlanItem("delete", "subscription", path, {}, existing.topic, existing.name, existing.name)
                )
                continue
            keep = {r.name.lower() for r in spec.rules}
            for rule in existing.rules:
                if rule.name.lower() not in keep:
                    path = rule_path(existing.topic, existing.name, rule.name)
                    items.append(
                        PlanItem("delete", "rule", path, {}, existing.topic, existing.name, rule.name)
                    )
        return items

    # ------------------------------------------------------------------------------------------ endpoints

    def put_subscriptions(self, request: ApiRequest) -> ApiResponse:
        """Make the endpoint subscribe to exactly the requested events; 201 when something was created."""
        endpoint, queue = self._endpoint(request)
        body = parse_body(SubscriptionsRequest, request.body)
        self._require_known(body.event_types())
        desired = self._desired(queue, body.entries())
        try:
            plan = self.provisioner.plan(desired)
            plan = Plan(plan.items + tuple(self._stale_items(queue, desired)))
            result = ApplyResult() if body.dry_run else self.provisioner.apply(plan)
        except QuotaExceededError as error:
            raise QuotaExceeded("the plan would exceed a Service Bus quota", error.violations) from None
        except (ProvisioningError, AzureError) as error:
            raise management_error(error) from None
        changed = bool(result.created or result.deleted)
        outcome = "planned" if body.dry_run else ("changed" if changed else "unchanged")
        return ApiResponse(
            201 if result.created else 200,
            {
                "endpoint": endpoint.name,
                "queue": queue,
                "dryRun": body.dry_run,
                "outcome": outcome,
                "plan": plan.to_dict(),
                "result": result.to_dict(),
                "desired": desired.to_dict(),
            },
        )

    def get_subscriptions(self, request: ApiRequest) -> ApiResponse:
        """The endpoint's subscriptions as they exist in the namespace now."""
        endpoint, queue = self._endpoint(request)
        try:
            existing = self.provisioner.describe(queue, self.options)
        except (ProvisioningError, AzureError) as error:
            raise management_error(error) from None
        return ApiResponse(
            200,
            {
                "endpoint": endpoint.name,
                "queue": queue,
                "handles": endpoint.subscribed_events(),
                "subscriptions": [s.to_dict() for s in existing],
            },
        )

    def delete_subscription(self, request: ApiRequest) -> ApiResponse:
        """Unsubscribe the endpoint from one event (idempotent)."""
        endpoint, queue = self._endpoint(request)
        event_type = request.route_params.get("eventType", "")
        self._require_known([event_type])
        try:
            plan = self.provisioner.plan_unsubscribe(self.options, queue, event_type)
            result = self.provisioner.apply(plan)
        except TopologyValidationError as error:
            raise ValidationFailed("cannot unsubscribe in this topology", error.errors) from None
        except (ProvisioningError, AzureError) as error:
            raise management_error(error) from None
        return ApiResponse(
            200,
            {
                "endpoint": endpoint.name,
                "queue": queue,
                "eventType": event_type,
                "plan": plan.to_dict(),
                "result": result.to_dict(),
            },
        )

    def topology(self, request: ApiRequest) -> ApiResponse:
        """The effective options and the desired state of every hosted endpoint."""
        endpoints: dict[str, Any] = {}
        for endpoint in self.catalog:
            queue = endpoint.queue(self.env)
            try:
                desired: Any = desired_state(self.options, queue, endpoint.subscribed_events()).to_dict()
            except (TopologyValidationError, UnmappedEventError) as error:
                desired = {"errors": getattr(error, "errors", [str(error)])}
            endpoints[endpoint.name] = {
                "queue": queue,
                "events": endpoint.subscribed_events(),
                "desired": desired,
            }
        fallback = self.options.fallback_topic
        return ApiResponse(
            200,
            {
                "options": self.options.to_json_dict(),
                "hierarchyNamespace": self.options.hierarchy_namespace,
                "fallbackTopic": None
                if fallback is None
                else {"topicName": fallback.topic_name, "routingMode": fallback.routing_mode},
                "endpoints": endpoints,
                "contracts": self.contracts.names(),
            },
        )


def from_settings(
    env: Mapping[str, str], catalog: EndpointCatalog, contracts: ContractRegistry
) -> ProvisioningService:
    """The service for the current app settings (options are re-read: a bad value surfaces as an error)."""
    from shared import runtime

    try:
        options = runtime.topology_options(env)
    except TopologyValidationError as error:
        raise Misconfigured("the topology options app settings are invalid", error.errors) from None
    try:
        management = runtime.management_client(env)
        defaults = entity_defaults(env)
    except SettingsError as error:
        raise Misconfigured("the app settings are incomplete", [str(error)]) from None
    return ProvisioningService(
        catalog=catalog,
        contracts=contracts,
        options=options,
        management=management,
        defaults=defaults,
        env=env,
    )
