"""Provisioning as an application service, independent of HTTP (publishing: :mod:`shared.api.publishing`).

The HTTP functions (``functions/provisioning_api.py``, ``functions/publishing_api.py``) convert requests to
:class:`~shared.api.ApiRequest`, call a method here and turn the :class:`~shared.api.ApiResponse` back.
Request bodies are pydantic models with camelCase JSON names; every validation problem is reported at once.

``PUT /endpoints/{endpoint}/subscriptions`` is declarative: the endpoint ends up subscribed to exactly the
listed events. A hosted endpoint that is ordered gets a session-enabled input queue and its hold queue
(:mod:`shared.topology.queues`); an existing queue whose ``RequiresSession`` differs is refused with 409
``QueueNeedsNewName`` naming it, and nothing is provisioned; so is a subscription of an ordered endpoint to a
contract without an ordering key (409 ``ContractWithoutOrderingKey``, see
:mod:`shared.topology.ordered_subscriptions`). The plan (topology library) creates what is
missing, and the endpoint's subscriptions and rules that no listed event needs any more are deleted.
Repeating a PUT reports ``unchanged``. A PUT that would leave the endpoint two paths for one event is
refused with 409 ``DuplicateDelivery`` (see
:mod:`shared.topology.single_delivery`); one that moves an event to another topic deletes the old path only
after the new one exists.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from azure.core.exceptions import AzureError, HttpResponseError

from shared.api import (
    ApiError,
    ApiRequest,
    ApiResponse,
    EndpointNotAllowed,
    ManagementRefused,
    ProvisioningBusy,
    QuotaExceeded,
    ValidationFailed,
    parse_body,
)
from shared.api.provisioning import admission
from shared.api.provisioning.handled import refuse_handled_deletes
from shared.api.provisioning.lock import (
    LockTimeout,
    ProvisioningLocks,
    endpoint_key,
    topic_key,
)
from shared.api.provisioning.requests import QueueSettings, SubscriptionsRequest
from shared.api.publishing import require_known
from shared.app_settings import AppSetting, read
from shared.contracts import ContractRegistry
from shared.handlers.endpoints import Endpoint, EndpointCatalog
from shared.management import ManagementClient, SettingsError
from shared.topology import (
    ApplyResult,
    DesiredState,
    EntityDefaults,
    HierarchyNamespace,
    Plan,
    PlanItem,
    Provisioner,
    ProvisioningError,
    QuotaExceededError,
    TopologyOptions,
    TopologyValidationError,
    UnmappedEventError,
    desired_state,
    parse_subscribed_events,
)
from shared.topology.content_filters import ContentFilter, require_valid_filters
from shared.topology.delivery_paths import DuplicateDeliveryError
from shared.topology.duplicate_detection import (
    DEFAULT_WINDOW,
    InvalidDuplicateDetectionWindow,
    duplicate_detection_window,
)
from shared.topology.errors import is_quota_refusal
from shared.topology.event_carriers import registry_enclosed_of
from shared.topology.handover import snapshot_seconds
from shared.topology.ordered_subscriptions import UnkeyedSubscriptionError, require_keyed
from shared.topology.plan import ExistingSubscription
from shared.topology.provisioner import rule_path, subscription_path
from shared.topology.queue_move import IncompleteMoveError, SecondSubscriptionError, check_complete_move
from shared.topology.single_delivery import PlanRefusedError, Subscriber, plan_delivery

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

HTTP_HINT = (
    "list the event on one topic only: a PUT replaces the endpoint's subscriptions, so an event listed "
    "only on its new topic is migrated there (the old path is removed once the new one exists)"
)


class DuplicateDelivery(ApiError):
    """The plan would give the endpoint a second path for an event (the details name both paths)."""

    status = 409
    code = "DuplicateDelivery"


class ContractWithoutOrderingKey(ApiError):
    """An ordered endpoint would subscribe to a contract without an ordering key: the broker would
    dead-letter each of its events (the details name the endpoint and the contract; nothing was
    provisioned)."""

    status = 409
    code = "ContractWithoutOrderingKey"


class IncompleteMove(ApiError):
    """A declared move (``moveFrom``) would leave a subscription forwarding to the old queue, or redirect a
    rule of an event the body does not list (the details name each; nothing was provisioned)."""

    status = 409
    code = "IncompleteMove"


class QueueNeedsNewName(ApiError):
    """An existing queue of the endpoint has an immutable property (``RequiresSession``) the endpoint
    cannot use: it needs a new queue (the details name the queue; nothing was provisioned)."""

    status = 409
    code = "QueueNeedsNewName"


RETRY_AFTER_SECONDS = 5
"""The retry hint of a request that waited too long for another one on the same endpoint or topic."""


def entity_defaults(env: Mapping[str, str]) -> EntityDefaults:
    """Entity properties from the ``BUSBAR_ENTITY_*`` settings and ``BUSBAR_DUPLICATE_DETECTION_WINDOW``;
    malformed values are one settings error naming each."""
    problems: list[str] = []

    def number(setting: AppSetting, minimum: int) -> int:
        raw = read(setting, env) or setting.default or "0"
        try:
            value = int(raw)
        except ValueError:
            problems.append(f"{setting.name} must be an integer, got {raw!r}")
            return minimum
        if value < minimum:
            problems.append(f"{setting.name} must be at least {minimum}, got {value}")
        return value

    try:
        window = duplicate_detection_window(env)
    except InvalidDuplicateDetectionWindow as error:
        problems.append(str(error))
        window = DEFAULT_WINDOW
    defaults = EntityDefaults(
        lock_duration=timedelta(seconds=number(LOCK_DURATION, 5)),
        max_delivery_count=number(MAX_DELIVERY_COUNT, 1),
        max_size_in_megabytes=number(MAX_SIZE_MB, 1),
        duplicate_detection_window=window,
    )
    if problems:
        raise SettingsError(*problems)
    return defaults


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


@dataclass(frozen=True, slots=True)
class EndpointTarget:
    """The endpoint a request is about: hosted by this app (``hosted``) or another subscriber on the
    namespace, whose input queue is named after it."""

    name: str
    queue: str
    hosted: Endpoint | None


class ProvisioningService:
    """Provision, describe and remove endpoint subscriptions (one namespace).

    Changes are serialised per endpoint and per topic they add to by ``locks`` (see
    :mod:`shared.api.provisioning.lock`); without ``locks`` (tests of the service alone) they are not."""

    def __init__(
        self,
        *,
        catalog: EndpointCatalog,
        contracts: ContractRegistry,
        options: TopologyOptions,
        management: ManagementClient,
        defaults: EntityDefaults,
        env: Mapping[str, str],
        locks: ProvisioningLocks | None = None,
    ) -> None:
        self.catalog = catalog
        self.contracts = contracts
        self.options = options
        self.management = management
        self.defaults = defaults
        self.provisioner = Provisioner(management, defaults)
        self.env = env
        self.locks = locks

    # ------------------------------------------------------------------------------------------ helpers

    def _endpoint(self, request: ApiRequest) -> EndpointTarget:
        name = request.route_params.get("endpoint", "")
        hosted = self.catalog.get(name)
        if hosted is not None:
            return EndpointTarget(name, hosted.queue(self.env), hosted)
        problems = admission.name_problems(name, self.options)
        if problems:
            raise ValidationFailed(f"{name!r} is not a valid endpoint name", problems)
        patterns = admission.allowed_patterns(self.env)
        if not admission.is_allowed(name, patterns):
            raise EndpointNotAllowed(
                f"endpoint {name!r} may not be provisioned by this app",
                [
                    f"{admission.PROVISIONABLE_ENDPOINTS.name} allows: {', '.join(patterns)}",
                    f"hosted endpoints: {', '.join(self.catalog.names())}",
                ],
            )
        return EndpointTarget(name, name, None)

    @contextlib.contextmanager
    def _serialised(self, keys: list[str]) -> Iterator[None]:
        if self.locks is None:
            yield
            return
        try:
            with self.locks.hold(keys):
                yield
        except LockTimeout as error:
            raise ProvisioningBusy(
                "another provisioning request is changing the same endpoint or topic; retry",
                [str(error)],
                retryAfterSeconds=RETRY_AFTER_SECONDS,
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
            ) from None

    def _provisioner_for(self, queue: QueueSettings | None) -> Provisioner:
        if queue is None:
            return self.provisioner
        d = self.defaults
        queue_defaults = replace(
            d,
            lock_duration=d.lock_duration
            if queue.lock_duration_seconds is None
            else timedelta(seconds=queue.lock_duration_seconds),
            max_delivery_count=queue.max_delivery_count or d.max_delivery_count,
            max_size_in_megabytes=queue.max_size_in_megabytes or d.max_size_in_megabytes,
        )
        return Provisioner(self.management, d, queue_defaults=queue_defaults)

    def _require_known(self, event_types: list[str]) -> None:
        require_known(self.contracts, event_types)

    @staticmethod
    def _with_handler_conditions(
        target: EndpointTarget, entries: list[str | dict[str, Any]]
    ) -> list[str | dict[str, Any]]:
        """``entries`` with a hosted endpoint's handler conditions (``where=``) on the events they filter: its
        handlers only ever see what the condition admits, so a ``PUT`` naming such an event subscribes under
        it; naming another filter for it is a 400 (the handlers would run on what they did not ask for)."""
        if target.hosted is None:
            return entries
        conditions = {s.event: s.filter for s in target.hosted.subscriptions() if s.filter is not None}
        out: list[str | dict[str, Any]] = []
        problems: list[str] = []
        for entry in entries:
            event = entry if isinstance(entry, str) else str(entry.get("type", ""))
            condition = conditions.get(event)
            if condition is None:
                out.append(entry)
                continue
            item: dict[str, Any] = {"type": entry} if isinstance(entry, str) else dict(entry)
            given = item.get("filter")
            if given is not None and not _same_filter(given, condition, event):
                problems.append(
                    f"{event}: endpoint {target.name}'s handlers subscribe where {condition.to_json()!r}; "
                    f"the filter {given!r} would give them events they do not handle (change the handlers' "
                    "condition instead)"
                )
            item["filter"] = condition.to_json()
            out.append(item)
        if problems:
            raise ValidationFailed("the subscriptions contradict the endpoint's handlers", problems)
        return out

    def _require_valid_filters(self, entries: list[str | dict[str, Any]]) -> None:
        """400 before any call when a filter does not parse or reads a property the contract does not
        promote (:mod:`shared.topology.content_filters`): such a rule would fail or silently match nothing."""
        try:
            require_valid_filters(parse_subscribed_events(entries), self.contracts)
        except TopologyValidationError as error:
            raise ValidationFailed("the subscriptions are invalid", error.errors) from None

    def _desired(
        self,
        queue: str,
        entries: list[str | dict[str, Any]],
        *,
        ordered: bool = False,
        moved_from: str | None = None,
    ) -> DesiredState:
        try:
            return desired_state(
                self.options,
                queue,
                entries,
                ordered=ordered,
                duplicate_detection_window=self.defaults.duplicate_detection_window,
                moved_from=moved_from,
            )
        except TopologyValidationError as error:
            raise ValidationFailed("the subscriptions are invalid for this topology", error.errors) from None
        except UnmappedEventError as error:
            raise ValidationFailed("an event has no topic in this topology", [str(error)]) from None

    def _require_keyed(self, endpoint: str, event_types: list[str]) -> None:
        """409 naming the ordered endpoint and each event it would receive without an ordering key."""
        try:
            require_keyed(endpoint, self.contracts, event_types)
        except UnkeyedSubscriptionError as error:
            raise ContractWithoutOrderingKey(
                f"ordered endpoint {endpoint} cannot subscribe to {', '.join(error.unkeyed)}: no key",
                error.errors,
            ) from None

    def _require_complete_move(self, plan: Plan, desired: DesiredState) -> None:
        """409 naming what a declared move (``moveFrom``) would leave behind on the old queue."""
        try:
            check_complete_move(plan, desired, lambda queue: self.provisioner.describe(queue, self.options))
        except IncompleteMoveError as error:
            raise IncompleteMove(
                "the move would leave part of what the old queue receives behind",
                error.errors,
                plan=plan.to_dict(),
            ) from None

    def _plan(
        self,
        provisioner: Provisioner,
        queue: str,
        entries: list[str | dict[str, Any]],
        desired: DesiredState,
        existing: list[ExistingSubscription],
    ) -> Plan:
        """The plan of a PUT (:func:`~shared.topology.single_delivery.plan_delivery`): creates, then the
        stale deletes, refused (409) when the endpoint would then receive an event through two paths or an
        existing queue needs a new one. A stale delete that removes an event's old path while the plan
        creates its new one waits for the creates (the PUT is the declared migration), and off the fallback
        topic for the router's snapshot interval too (see :mod:`shared.topology.handover`)."""
        try:
            return plan_delivery(
                provisioner,
                self.options,
                [Subscriber(queue, parse_subscribed_events(entries))],
                desired,
                enclosed_of=registry_enclosed_of(self.contracts),  # as the CLI: one answer
                existing=existing,
                deletes=self._stale_items(existing, desired),
                hint=HTTP_HINT,
                router_snapshot_seconds=snapshot_seconds(self.env),  # how long a handover lasts
            )
        except DuplicateDeliveryError as error:
            raise DuplicateDelivery(
                "the endpoint would receive an event twice",
                error.errors,
                duplicates=[d.to_dict() for d in error.duplicates],
            ) from None
        except SecondSubscriptionError as error:
            raise DuplicateDelivery("the endpoint would receive an event twice", error.errors) from None
        except PlanRefusedError as error:
            raise QueueNeedsNewName(
                "an existing queue of the endpoint cannot be used: it needs a new queue",
                error.errors,
                plan=error.plan.to_dict(),
            ) from None

    def _stale_items(self, found: list[ExistingSubscription], desired: DesiredState) -> list[PlanItem]:
        """Deletes of the endpoint's subscriptions and rules that ``desired`` no longer contains."""
        wanted = {(s.topic.lower(), s.name.lower()): s for s in desired.subscriptions}
        items: list[PlanItem] = []
        for existing in found:
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
                    # A condition dropped from a NotMultiplexed subscription: its rule goes only after
                    # $Default is 1=1 again (rewritten in place), or the subscription would take nothing
                    # in between. Other stale rules go first, as always (off the fallback topic, a late
                    # delete would be a handover).
                    late = spec.is_catch_all
                    items.append(
                        PlanItem(
                            "delete",
                            "rule",
                            path,
                            {},
                            existing.topic,
                            existing.name,
                            rule.name,
                            after_creates=late,
                        )
                    )
        return items

    # ------------------------------------------------------------------------------------------ endpoints

    def put_subscriptions(self, request: ApiRequest) -> ApiResponse:
        """Make the endpoint subscribe to exactly the requested events; 201 when something was created.

        Plan and apply run under the endpoint's lock (and, when the plan brings a topic near a quota, that
        topic's lock too), so concurrent requests for one endpoint apply one after the other, each planned
        against what the previous one left: the final state is exactly the last request's desired state.
        A hosted endpoint's list that leaves out an event its handlers need is refused (409
        ``SubscriptionHandled``, nothing changed), as a ``DELETE`` of it is."""
        target = self._endpoint(request)
        body = parse_body(SubscriptionsRequest, request.body)
        self._require_known(body.unmapped_event_types())
        entries = self._with_handler_conditions(target, body.entries())
        self._require_valid_filters(entries)
        queue = target.queue
        ordered = target.hosted is not None and target.hosted.ordered
        if ordered:
            self._require_keyed(target.name, body.event_types())
        desired = self._desired(queue, entries, ordered=ordered, moved_from=body.move_from)
        provisioner = self._provisioner_for(body.queue)
        endpoint_lock = [endpoint_key(HierarchyNamespace(self.options.hierarchy_namespace).apply(queue))]
        try:
            with contextlib.ExitStack() as held:
                if not body.dry_run:
                    held.enter_context(self._serialised(endpoint_lock))
                existing = self.provisioner.describe(queue, self.options)
                plan = self._plan(provisioner, queue, entries, desired, existing)
                if plan.near_quota and not body.dry_run:
                    # Two plans that each fit a nearly full topic may not fit together: take the topics'
                    # locks (after the endpoint's: never in a cycle) and plan again under them.
                    held.enter_context(self._serialised([topic_key(t) for t in plan.near_quota]))
                    plan = self._plan(provisioner, queue, entries, desired, existing)
                self._require_complete_move(plan, desired)
                # A handled event left out of the list would be deleted as stale: refused as its DELETE is.
                refuse_handled_deletes(
                    target.hosted,
                    queue,
                    self.options,
                    plan,
                    kept=body.event_types(),
                    unchanged="nothing was changed",
                )
                result = ApplyResult() if body.dry_run else provisioner.apply(plan)
        except QuotaExceededError as error:
            raise QuotaExceeded("the plan would exceed a Service Bus quota", error.violations) from None
        except (ProvisioningError, AzureError) as error:
            raise management_error(error) from None
        changed = bool(result.created or result.updated or result.deleted)
        outcome = "planned" if body.dry_run else ("changed" if changed else "unchanged")
        return ApiResponse(
            201 if result.created else 200,
            {
                "endpoint": target.name,
                "hosted": target.hosted is not None,
                "queue": queue,
                "ordered": ordered,
                "dryRun": body.dry_run,
                "outcome": outcome,
                "plan": plan.to_dict(),
                "result": result.to_dict(),
                "desired": desired.to_dict(),
            },
        )

    def get_subscriptions(self, request: ApiRequest) -> ApiResponse:
        """The endpoint's subscriptions as they exist in the namespace now."""
        target = self._endpoint(request)
        queue = target.queue
        try:
            existing = self.provisioner.describe(queue, self.options)
        except (ProvisioningError, AzureError) as error:
            raise management_error(error) from None
        return ApiResponse(
            200,
            {
                "endpoint": target.name,
                "hosted": target.hosted is not None,
                "queue": queue,
                "handles": None if target.hosted is None else target.hosted.subscribed_events(),
                "subscriptions": [s.to_dict() for s in existing],
            },
        )

    def delete_subscription(self, request: ApiRequest) -> ApiResponse:
        """Unsubscribe the endpoint from one event (idempotent), under the endpoint's lock.

        A hosted endpoint's subscriptions follow its handlers: a delete of one they need is refused with 409
        ``SubscriptionHandled`` naming them, before any call (:mod:`shared.api.provisioning.handled`).
        ``?topic=...`` (and optionally ``&routingMode=...``) names the event's topic, as the PUT's body
        can: then the event type need not be a contract the registry knows."""
        target = self._endpoint(request)
        queue = target.queue
        event_type = request.route_params.get("eventType", "")
        topic = request.query.get("topic") or None
        event: str | dict[str, str] = event_type
        if topic is None:
            self._require_known([event_type])
        else:
            event = {"type": event_type, "topic": topic}
            if request.query.get("routingMode"):
                event["routingMode"] = request.query["routingMode"]
        hierarchy = HierarchyNamespace(self.options.hierarchy_namespace)
        try:
            plan = self.provisioner.plan_unsubscribe(self.options, queue, event)
            refuse_handled_deletes(target.hosted, queue, self.options, plan)
            with self._serialised([endpoint_key(hierarchy.apply(queue))]):
                result = self.provisioner.apply(plan)
        except TopologyValidationError as error:
            raise ValidationFailed("cannot unsubscribe in this topology", error.errors) from None
        except (ProvisioningError, AzureError) as error:
            raise management_error(error) from None
        return ApiResponse(
            200,
            {
                "endpoint": target.name,
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
                desired: Any = desired_state(
                    self.options,
                    queue,
                    endpoint.subscriptions(),
                    ordered=endpoint.ordered,
                    duplicate_detection_window=self.defaults.duplicate_detection_window,
                ).to_dict()
            except (TopologyValidationError, UnmappedEventError) as error:
                desired = {"errors": getattr(error, "errors", [str(error)])}
            endpoints[endpoint.name] = {
                "queue": queue,
                "ordered": endpoint.ordered,
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


def _same_filter(given: object, condition: ContentFilter, event: str) -> bool:
    """Whether a request's filter is ``condition`` (a filter that does not parse is not)."""
    try:
        return ContentFilter.parse(given, event) == condition
    except TopologyValidationError:
        return False
