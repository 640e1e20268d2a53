"""The Azure Resource Manager REST subset for Microsoft.ServiceBus: GET, PUT, DELETE and list of queues,
topics, subscriptions and rules, and GET of the namespace, under
``/subscriptions/{id}/resourceGroups/{group}/providers/Microsoft.ServiceBus/namespaces/{namespace}``.

Every handler runs on the emulator's event loop and calls the broker synchronously, so each request is
applied atomically: concurrent PUTs of the same entity serialize and the last one wins. Validation
happens before the broker is touched, so a refused request changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar
from urllib.parse import quote, unquote

from emulator.arm import models
from emulator.arm.auth import check_bearer
from emulator.arm.errors import ArmError, bad_request, entity_not_found, from_broker
from emulator.arm.http import Request, Response
from emulator.arm.metadata import Metadata
from emulator.arm.resources import PROVIDER, Resources
from emulator.broker.entities import QueueEntity, SubscriptionEntity, TopicEntity
from emulator.broker.errors import BrokerError
from emulator.broker.namespace import Namespace
from emulator.broker.properties import QueueProperties, RuleConfig, SubscriptionProperties
from emulator.broker.rules import compile_rule
from emulator.filters.sql import SqlSyntaxError
from emulator.tier import max_message_size_problem
from emulator.validation import (
    validate_entity_name,
    validate_entity_path,
    validate_queue_properties,
    validate_rule,
    validate_subscription_properties,
    validate_topic_properties,
)

DEFAULT_RESOURCE_GROUP = "emulator"
PAGE_SIZE = 100
MAX_TOP = 1000
_Item = TypeVar("_Item")
_API_VERSION_RE = re.compile(r"\d{4}-\d{2}-\d{2}(-preview)?", re.ASCII)


@dataclass(frozen=True, slots=True)
class ArmSettings:
    """Which requests the ARM endpoints accept. None accepts any subscription id / resource group."""

    token: str
    subscription_id: str | None = None
    resource_group: str | None = None
    location: str = "local"


@dataclass(frozen=True, slots=True)
class _Call:
    """A routed request: the resource id prefix as the client addressed it, and the names in the path."""

    request: Request
    subscription_id: str
    group: str | None
    # /subscriptions/{id}/resourceGroups/{group}/providers/Microsoft.ServiceBus/namespaces/{namespace}
    base: str = ""
    names: tuple[str, ...] = ()


def _join(problems: list[str]) -> str:
    return "; ".join(problems) + "."


class ArmApi:
    """Serves the ARM routes against one namespace."""

    def __init__(
        self,
        namespace: Namespace,
        settings: ArmSettings,
        metadata: Metadata,
        endpoint: Callable[[], str],
        check_jwt: Callable[[str], str | None] | None = None,
    ) -> None:
        self.namespace = namespace
        self.settings = settings
        self.check_jwt = check_jwt
        self.metadata = metadata
        self.resources = Resources(namespace, metadata, settings.location, endpoint)

    def handle(self, request: Request) -> Response:
        try:
            check_bearer(request.header("authorization"), self.settings.token, self.check_jwt)
            handler, call = self._route(request)
            self._check_api_version(request)
            return handler(call)
        except ArmError as exc:
            return Response.json(exc.status, exc.body(), exc.headers)
        except BrokerError as exc:
            error = from_broker(exc)
            return Response.json(error.status, error.body())

    # ------------------------------------------------------------------------------------------ routing

    def _route(self, request: Request) -> tuple[Callable[[_Call], Response], _Call]:
        segments = [unquote(s) for s in request.path.strip("/").split("/")]
        lowered = [s.lower() for s in segments]
        unknown = ArmError(
            404,
            "NotFound",
            f"The emulator does not serve '{request.path}'; it serves the namespace and its queues, "
            "topics, subscriptions and rules.",
        )
        if len(segments) < 2 or lowered[0] != "subscriptions":
            raise unknown
        subscription_id, rest, low = segments[1], segments[2:], lowered[2:]
        group: str | None = None
        if len(rest) >= 2 and low[0] == "resourcegroups":
            group, rest, low = rest[1], rest[2:], low[2:]
        if low[:3] != ["providers", PROVIDER.lower(), "namespaces"]:
            raise unknown
        rest, low = rest[3:], low[3:]
        self._check_scope(subscription_id, group)
        if not rest:
            listing = self._methods(request, {"GET": self._list_namespaces})
            return listing, _Call(request, subscription_id, group)
        if group is None:
            raise unknown
        self._check_namespace(rest[0], group)
        base = (
            f"/subscriptions/{subscription_id}/resourceGroups/{group}/providers/{PROVIDER}"
            f"/namespaces/{self.namespace.name}"
        )
        tail, tail_low = rest[1:], low[1:]  # after the namespace: keyword, name, keyword, name, ...
        names = tuple(tail[1::2])
        shape = tuple(tail_low[0::2]), len(tail) % 2 == 1  # (keywords, addresses a collection?)
        table: dict[tuple[tuple[str, ...], bool], dict[str, Callable[[_Call], Response]]] = {
            ((), False): {"GET": self._get_namespace},
            (("queues",), True): {"GET": self._list_queues},
            (("queues",), False): {
                "GET": self._get_queue,
                "PUT": self._put_queue,
                "DELETE": self._delete_queue,
            },
            (("topics",), True): {"GET": self._list_topics},
            (("topics",), False): {
                "GET": self._get_topic,
                "PUT": self._put_topic,
                "DELETE": self._delete_topic,
            },
            (("topics", "subscriptions"), True): {"GET": self._list_subscriptions},
            (("topics", "subscriptions"), False): {
                "GET": self._get_subscription,
                "PUT": self._put_subscription,
                "DELETE": self._delete_subscription,
            },
            (("topics", "subscriptions", "rules"), True): {"GET": self._list_rules},
            (("topics", "subscriptions", "rules"), False): {
                "GET": self._get_rule,
                "PUT": self._put_rule,
                "DELETE": self._delete_rule,
            },
        }
        methods = table.get(shape)
        if methods is None:
            raise unknown
        return self._methods(request, methods), _Call(request, subscription_id, group, base, names)

    @staticmethod
    def _methods(
        request: Request, methods: dict[str, Callable[[_Call], Response]]
    ) -> Callable[[_Call], Response]:
        handler = methods.get(request.method)
        if handler is None:
            allowed = ", ".join(methods)
            raise ArmError(
                405,
                "MethodNotAllowed",
                f"{request.method} is not supported on this resource by the emulator (allowed: {allowed}). "
                "The namespace itself comes from the emulator's configuration.",
                (("Allow", allowed),),
            )
        return handler

    def _check_api_version(self, request: Request) -> None:
        version = request.param("api-version")
        if version is None:
            raise ArmError(
                400,
                "MissingApiVersionParameter",
                "The api-version query parameter (?api-version=) is required for all requests.",
            )
        if not _API_VERSION_RE.fullmatch(version):
            raise ArmError(
                400,
                "InvalidApiVersionParameter",
                f"The api-version '{version}' is invalid. The supported versions look like '2026-01-01'.",
            )

    def _check_scope(self, subscription_id: str, group: str | None) -> None:
        wanted = self.settings.subscription_id
        if wanted is not None and subscription_id.lower() != wanted.lower():
            raise ArmError(
                404, "SubscriptionNotFound", f"The subscription '{subscription_id}' could not be found."
            )
        wanted_group = self.settings.resource_group
        if group is not None and wanted_group is not None and group.lower() != wanted_group.lower():
            raise ArmError(404, "ResourceGroupNotFound", f"Resource group '{group}' could not be found.")

    def _check_namespace(self, name: str, group: str) -> None:
        if name.lower() != self.namespace.name.lower():
            raise ArmError(
                404,
                "ResourceNotFound",
                f"The Resource '{PROVIDER}/namespaces/{name}' under resource group '{group}' was not found. "
                "For more details please go to https://aka.ms/ARMResourceNotFoundFix",
            )

    # ------------------------------------------------------------------------------------------ helpers

    def _queue(self, name: str) -> QueueEntity:
        entity = self.namespace.queues.get(name.lower())
        if entity is None:
            raise entity_not_found(self.namespace.name, "Queue", name)
        return entity

    def _topic(self, name: str) -> TopicEntity:
        topic = self.namespace.topics.get(name.lower())
        if topic is None:
            raise entity_not_found(self.namespace.name, "Topic", name)
        return topic

    def _subscription(self, topic: TopicEntity, name: str) -> SubscriptionEntity:
        subscription = topic.subscriptions.get(name.lower())
        if subscription is None:
            raise entity_not_found(self.namespace.name, "Topic", f"{topic.name}|{name}")
        return subscription

    def _page(
        self, call: _Call, items: Sequence[_Item], render: Callable[[_Item], dict[str, Any]]
    ) -> Response:
        """One page of a list; only the page's items are rendered (paging through N entities renders each
        once, not N/page-size times)."""
        request = call.request
        skip = _int_param(request, "$skip", 0, None)
        top = _int_param(request, "$top", 1, MAX_TOP)
        size = top or PAGE_SIZE
        skip = skip or 0
        document: dict[str, Any] = {"value": [render(item) for item in items[skip : skip + size]]}
        if skip + size < len(items):
            host = request.header("host") or "127.0.0.1"
            query = f"api-version={quote(request.param('api-version') or '')}&$skip={skip + size}"
            if top is not None:
                query += f"&$top={top}"
            document["nextLink"] = f"{request.scheme}://{host}{request.path}?{query}"
        return Response.json(200, document)

    def _check_forwarding(self, props: QueueProperties | SubscriptionProperties) -> None:
        for key, target in (
            ("forwardTo", props.forward_to),
            ("forwardDeadLetteredMessagesTo", props.forward_dead_lettered_messages_to),
        ):
            if target and self.namespace.send_target(target) is None:
                raise bad_request(
                    f"The auto forwarding destination entity does not exist: '{target}' ({key}). "
                    "The destination must exist before the source is created or updated.",
                    40400,
                )

    def _check_tier(self, max_message_size_in_kilobytes: int | None) -> None:
        """Standard refuses ``maxMessageSizeInKilobytes`` whatever its value; Premium takes 1024..102400
        (what Azure answers, with the evidence: emulator.tier)."""
        problem = max_message_size_problem(
            self.namespace.sku, self.namespace.name, max_message_size_in_kilobytes
        )
        if problem:
            raise bad_request(problem)

    @staticmethod
    def _immutable(kind: str, before: object, after: object, fields: tuple[str, ...]) -> None:
        labels = {
            "requires_session": "requiresSession",
            "requires_duplicate_detection": "requiresDuplicateDetection",
        }
        for field in fields:
            if getattr(before, field) != getattr(after, field):
                raise bad_request(
                    f"The value for the '{labels[field]}' property of an existing {kind} cannot be changed."
                )

    @staticmethod
    def _partitioning(kind: str, before: models.Extras, after: models.Extras) -> None:
        if before.enable_partitioning != after.enable_partitioning:
            raise bad_request(f"Partitioning cannot be changed for {kind}.")

    # ------------------------------------------------------------------------------------------ namespace

    def _get_namespace(self, call: _Call) -> Response:
        assert call.group is not None
        return Response.json(200, self.resources.namespace_json(call.subscription_id, call.group))

    def _list_namespaces(self, call: _Call) -> Response:
        group = call.group or self.settings.resource_group or DEFAULT_RESOURCE_GROUP
        return self._page(call, [group], lambda g: self.resources.namespace_json(call.subscription_id, g))

    # ------------------------------------------------------------------------------------------ queues

    def _get_queue(self, call: _Call) -> Response:
        return Response.json(200, self.resources.queue_json(call.base, self._queue(call.names[0])))

    def _list_queues(self, call: _Call) -> Response:
        queues = sorted(self.namespace.queues.values(), key=lambda q: q.name.lower())
        return self._page(call, queues, lambda q: self.resources.queue_json(call.base, q))

    def _put_queue(self, call: _Call) -> Response:
        (name,) = call.names
        problems = validate_entity_path("Queue", name)
        if problems:
            raise bad_request(_join(problems))
        props, extras = models.queue_from_arm(models.parse_document(call.request.body))
        self._check_tier(props.max_message_size_in_kilobytes)  # first: Azure's answer names the tier's range
        problems = validate_queue_properties(name, props)
        if problems:
            raise bad_request(_join(problems))
        existing = self.namespace.queues.get(name.lower())
        if existing is not None:
            self._immutable(
                "Queue", existing.props, props, ("requires_session", "requires_duplicate_detection")
            )
            self._partitioning("Queue", self.metadata.get(existing.name).extras, extras)
        self._check_forwarding(props)
        if existing is None:
            entity = self.namespace.create_queue(name, props, origin="arm")
        else:
            entity = self.namespace.update_queue(existing.name, props)
        self.metadata.record(entity.name, extras, created=existing is None)
        return Response.json(200, self.resources.queue_json(call.base, entity))

    def _delete_queue(self, call: _Call) -> Response:
        entity = self.namespace.queues.get(call.names[0].lower())
        if entity is None:
            return Response(204)
        self.namespace.delete_queue(entity.name)
        self.metadata.forget(entity.name)
        return Response(200)

    # ------------------------------------------------------------------------------------------ topics

    def _get_topic(self, call: _Call) -> Response:
        return Response.json(200, self.resources.topic_json(call.base, self._topic(call.names[0])))

    def _list_topics(self, call: _Call) -> Response:
        topics = sorted(self.namespace.topics.values(), key=lambda t: t.name.lower())
        return self._page(call, topics, lambda t: self.resources.topic_json(call.base, t))

    def _put_topic(self, call: _Call) -> Response:
        (name,) = call.names
        problems = validate_entity_path("Topic", name)
        if problems:
            raise bad_request(_join(problems))
        props, extras = models.topic_from_arm(models.parse_document(call.request.body))
        self._check_tier(props.max_message_size_in_kilobytes)  # first: Azure's answer names the tier's range
        problems = validate_topic_properties(name, props)
        if problems:
            raise bad_request(_join(problems))
        existing = self.namespace.topics.get(name.lower())
        if existing is not None:
            self._immutable("Topic", existing.props, props, ("requires_duplicate_detection",))
            self._partitioning("Topic", self.metadata.get(existing.name).extras, extras)
            topic = self.namespace.update_topic(existing.name, props)
        else:
            topic = self.namespace.create_topic(name, props, origin="arm")
        self.metadata.record(topic.name, extras, created=existing is None)
        return Response.json(200, self.resources.topic_json(call.base, topic))

    def _delete_topic(self, call: _Call) -> Response:
        topic = self.namespace.topics.get(call.names[0].lower())
        if topic is None:
            return Response(204)
        self.namespace.delete_topic(topic.name)
        self.metadata.forget(topic.name, with_children=True)
        return Response(200)

    # ------------------------------------------------------------------------------------------ subscriptions

    def _get_subscription(self, call: _Call) -> Response:
        topic_name, name = call.names
        subscription = self._subscription(self._topic(topic_name), name)
        return Response.json(200, self.resources.subscription_json(call.base, subscription))

    def _list_subscriptions(self, call: _Call) -> Response:
        topic = self._topic(call.names[0])
        subscriptions = sorted(topic.subscriptions.values(), key=lambda s: s.subscription_name.lower())
        return self._page(call, subscriptions, lambda s: self.resources.subscription_json(call.base, s))

    def _put_subscription(self, call: _Call) -> Response:
        topic_name, name = call.names
        topic = self._topic(topic_name)
        problems = validate_entity_name("Subscription", name)
        if problems:
            raise bad_request(_join(problems))
        props = models.subscription_from_arm(models.parse_document(call.request.body))
        problems = validate_subscription_properties(topic.name, name, props)
        if problems:
            raise bad_request(_join(problems))
        existing = topic.subscriptions.get(name.lower())
        if existing is not None:
            self._immutable("Subscription", existing.props, props, ("requires_session",))
        self._check_forwarding(props)
        if existing is None:
            subscription = self.namespace.create_subscription(topic.name, name, props, None, origin="arm")
        else:
            subscription = self.namespace.update_subscription(topic.name, existing.subscription_name, props)
        self.metadata.record(subscription.path, models.Extras(), created=existing is None)
        return Response.json(200, self.resources.subscription_json(call.base, subscription))

    def _delete_subscription(self, call: _Call) -> Response:
        topic_name, name = call.names
        topic = self._topic(topic_name)
        subscription = topic.subscriptions.get(name.lower())
        if subscription is None:
            return Response(204)
        self.namespace.delete_subscription(topic.name, subscription.subscription_name)
        self.metadata.forget(subscription.path)
        return Response(200)

    # ------------------------------------------------------------------------------------------ rules

    def _get_rule(self, call: _Call) -> Response:
        topic_name, subscription_name, name = call.names
        subscription = self._subscription(self._topic(topic_name), subscription_name)
        rule = subscription.rules.get(name.lower())
        if rule is None:
            raise entity_not_found(
                self.namespace.name,
                "Topic",
                f"{subscription.topic.name}|{subscription.subscription_name}|{name}",
            )
        return Response.json(200, self.resources.rule_json(call.base, subscription, rule.config))

    def _list_rules(self, call: _Call) -> Response:
        topic_name, subscription_name = call.names
        subscription = self._subscription(self._topic(topic_name), subscription_name)
        rules = sorted((r.config for r in subscription.rules.values()), key=lambda r: r.name.lower())
        return self._page(call, rules, lambda r: self.resources.rule_json(call.base, subscription, r))

    def _put_rule(self, call: _Call) -> Response:
        topic_name, subscription_name, name = call.names
        topic = self._topic(topic_name)
        subscription = self._subscription(topic, subscription_name)
        problems = validate_entity_name("Rule", name)
        if problems:
            raise bad_request(_join(problems))
        existing = subscription.rules.get(name.lower())
        document = models.parse_document(call.request.body)
        config = models.rule_from_arm(existing.name if existing else name, document)
        problems = validate_rule(topic.name, subscription.subscription_name, config)
        if problems:
            raise bad_request(_join(problems))
        _compile(config)
        try:
            rule = self.namespace.put_rule(topic.name, subscription.subscription_name, config)
        except SqlSyntaxError as exc:
            raise bad_request(
                f"The SQL expression of rule '{config.name}' is invalid: {_where(exc)}."
            ) from None
        return Response.json(200, self.resources.rule_json(call.base, subscription, rule.config))

    def _delete_rule(self, call: _Call) -> Response:
        topic_name, subscription_name, name = call.names
        subscription = self._subscription(self._topic(topic_name), subscription_name)
        rule = subscription.rules.get(name.lower())
        if rule is None:
            return Response(204)
        self.namespace.delete_rule(subscription.topic.name, subscription.subscription_name, rule.name)
        return Response(200)


def _compile(config: RuleConfig) -> None:
    """Compile the filter and the action separately, to say which one does not parse, and where."""
    try:
        compile_rule(replace(config, action_sql=None))
    except SqlSyntaxError as exc:
        raise bad_request(
            f"The SQL filter expression {config.sql_expression!r} of rule '{config.name}' is invalid: "
            f"{_where(exc)}."
        ) from None
    if config.action_sql:
        try:
            compile_rule(RuleConfig(name=config.name, filter_type="True", action_sql=config.action_sql))
        except SqlSyntaxError as exc:
            raise bad_request(
                f"The SQL action expression {config.action_sql!r} of rule '{config.name}' is invalid: "
                f"{_where(exc)}."
            ) from None


def _where(exc: SqlSyntaxError) -> str:
    text = str(exc)
    return text if "position" in text else f"{text} at position {exc.position}"


def _int_param(request: Request, name: str, low: int, high: int | None) -> int | None:
    text = request.param(name)
    if text is None:
        return None
    if not text.strip().isdigit() or int(text) < low or (high is not None and int(text) > high):
        allowed = f"{low}..{high}" if high is not None else f"at least {low}"
        raise ArmError(
            400, "InvalidQueryParameterValue", f"The value '{text}' of '{name}' is invalid ({allowed})."
        )
    return int(text)
