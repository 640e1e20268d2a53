"""The namespace's own management API, as ``azure.servicebus.management.ServiceBusAdministrationClient``
speaks it: ATOM entries over HTTPS, authenticated with a SAS token in ``Authorization``, or with a
Microsoft Entra ID token (``Bearer <JWT>`` for ``https://servicebus.azure.net``) from the emulator's
managed-identity endpoint, as ``DefaultAzureCredential`` gets one in an App Service / Functions app.

Routes (entity names are URL-encoded single segments, so a queue called ``a/b`` arrives as ``a%2Fb``)::

    GET                 /$namespaceinfo
    GET                 /$Resources/{queues|topics}?$skip=&$top=
    GET | PUT | DELETE  /{queue or topic}
    GET                 /{topic}/subscriptions?$skip=&$top=
    GET | PUT | DELETE  /{topic}/subscriptions/{subscription}
    GET                 /{topic}/subscriptions/{subscription}/rules?$skip=&$top=
    GET | PUT | DELETE  /{topic}/subscriptions/{subscription}/rules/{rule}

Azure's conventions, which the SDK relies on: GET of a queue or topic that does not exist answers 200 with
an empty feed (the SDK turns a feed without content into ``ResourceNotFoundError``); a PUT without
``If-Match`` creates (409 if the entity exists, 201 on success) and a PUT with ``If-Match: *`` updates (404
if it does not exist, 200 on success); errors are ``<Error><Code/><Detail/></Error>``.

Every handler runs on the emulator's event loop against the same namespace, validators and metadata as
ARM, so an entity created here is the entity ARM and AMQP see, persisted the same way.
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar
from urllib.parse import unquote

from emulator.admin import atom
from emulator.admin.descriptions import (
    InvalidDescription,
    Runtime,
    api_version_problems,
    entity_path,
    queue_from_xml,
    queue_xml,
    subscription_from_xml,
    subscription_xml,
    topic_from_xml,
    topic_xml,
)
from emulator.admin.errors import AdminError, already_exists, bad_request, not_found
from emulator.admin.rules import rule_from_xml, rule_xml
from emulator.arm.errors import ArmError
from emulator.arm.http import Request, Response
from emulator.arm.metadata import EntityMeta, Metadata
from emulator.arm.models import Extras
from emulator.auth import SasAuthority, TokenRejected
from emulator.broker.entities import MessageEntity, QueueEntity, SubscriptionEntity, TopicEntity
from emulator.broker.errors import BrokerError
from emulator.broker.namespace import Namespace
from emulator.broker.properties import QueueProperties, RuleConfig, SubscriptionProperties
from emulator.broker.rules import compile_rule
from emulator.filters.sql import SqlSyntaxError
from emulator.identity import MANAGEMENT_RESOURCE, SERVICE_BUS_RESOURCE, IdentityAuthority, unverified_claims
from emulator.tier import PREMIUM_MESSAGING_UNITS, Sku, max_message_size_problem
from emulator.validation import (
    validate_entity_name,
    validate_entity_path,
    validate_queue_properties,
    validate_rule,
    validate_subscription_properties,
    validate_topic_properties,
)

PAGE_SIZE = 100
SUPPLEMENTARY = "servicebussupplementaryauthorization"
DEAD_LETTER_SUPPLEMENTARY = "servicebusdlqsupplementaryauthorization"
_ZERO_COUNTS = {"activeMessageCount": 0}


_Entity = TypeVar("_Entity", QueueEntity, TopicEntity)


@dataclass(frozen=True, slots=True)
class _Call:
    request: Request
    names: tuple[str, ...]
    host: str  # host[:port] the client addressed, for ids and forward-to addresses


Handler = Callable[[_Call], Response]


class AdminApi:
    """Serves the ATOM management routes against one namespace."""

    def __init__(
        self,
        namespace: Namespace,
        metadata: Metadata,
        authority: SasAuthority,
        identity: IdentityAuthority | None = None,
    ) -> None:
        self.namespace = namespace
        self.metadata = metadata
        self.authority = authority
        self.identity = identity

    @staticmethod
    def accepts(request: Request) -> bool:
        """Whether a request on the management port is for this API: SAS-authenticated, or carrying a
        JWT not meant for ARM (its signature is checked later, so a forged one is refused here, with 401)."""
        header = request.header("authorization")
        if _sas_token(header) is not None:
            return True
        claims = _bearer_claims(header)
        return claims is not None and claims.get("aud") != MANAGEMENT_RESOURCE

    def handle(self, request: Request) -> Response:
        try:
            segments = tuple(unquote(s) for s in request.path.strip("/").split("/"))
            host = request.header("host") or "localhost"
            self._authorize(request, host, segments)
            handler, names = self._route(request, segments)
            return handler(_Call(request, names, host))
        except AdminError as exc:
            return _error(exc.status, exc.detail)
        except (InvalidDescription, atom.MalformedEntry) as exc:
            return _error(400, f"The request body is invalid: {exc}")
        except ArmError as exc:  # the shared ARM converters and validators speak ARM errors
            return _error(exc.status, exc.message)
        except BrokerError as exc:
            return _error(_status(exc), exc.description)

    # ------------------------------------------------------------------------------------------ auth

    def _authorize(self, request: Request, host: str, segments: tuple[str, ...]) -> None:
        path = "/".join(s for s in segments if not s.startswith("$"))
        try:
            authorization = request.header("authorization")
            if _sas_token(authorization) is None and _bearer_claims(authorization) is not None:
                self._check_jwt(authorization or "")
            else:
                self.authority.check(_sas_token(authorization) or "", f"https://{host}/{path}")
            for header, target in (
                (SUPPLEMENTARY, "forwardto"),
                (DEAD_LETTER_SUPPLEMENTARY, "forwarddeadletteredmessagesto"),
            ):
                token = request.header(header)
                if token and token.startswith("SharedAccessSignature "):
                    self.authority.check(token, f"sb://{host}/{_target_in(request.body, target)}")
                elif token and _bearer_claims(token) is not None:
                    self._check_jwt(token)  # the SDK sends "Bearer <JWT>" for a token credential
        except TokenRejected as exc:
            raise AdminError(401, f"{exc}") from None

    def _check_jwt(self, authorization: str) -> None:
        if self.identity is None:
            raise TokenRejected("InvalidToken: this namespace accepts only SharedAccessSignature tokens.")
        token = authorization.strip().removeprefix("Bearer ").strip()
        self.identity.check(token, SERVICE_BUS_RESOURCE, time.time())

    # ------------------------------------------------------------------------------------------ routing

    def _route(self, request: Request, segments: tuple[str, ...]) -> tuple[Handler, tuple[str, ...]]:
        low = tuple(s.lower() for s in segments)
        table: dict[str, Handler]
        names: tuple[str, ...]
        if low == ("$namespaceinfo",):
            table, names = {"GET": self._namespace_info}, ()
        elif len(low) == 2 and low[0] == "$resources" and low[1] in ("queues", "topics"):
            table, names = {"GET": self._list_queues if low[1] == "queues" else self._list_topics}, ()
        elif len(segments) == 1 and segments[0]:
            table = {"GET": self._get_entity, "PUT": self._put_entity, "DELETE": self._delete_entity}
            names = segments
        elif len(low) == 2 and low[1] == "subscriptions":
            table, names = {"GET": self._list_subscriptions}, segments[:1]
        elif len(low) == 3 and low[1] == "subscriptions":
            table = {"GET": self._get_subscription, "PUT": self._put_subscription, "DELETE": self._delete_sub}
            names = (segments[0], segments[2])
        elif len(low) == 4 and low[1] == "subscriptions" and low[3] == "rules":
            table, names = {"GET": self._list_rules}, (segments[0], segments[2])
        elif len(low) == 5 and low[1] == "subscriptions" and low[3] == "rules":
            table = {"GET": self._get_rule, "PUT": self._put_rule, "DELETE": self._delete_rule}
            names = (segments[0], segments[2], segments[4])
        else:
            raise AdminError(404, f"The emulator does not serve '{request.path}'.")
        handler = table.get(request.method)
        if handler is None:
            raise AdminError(405, f"{request.method} is not supported on '{request.path}'.")
        return handler, names

    # ------------------------------------------------------------------------------------------ helpers

    def _runtime(self, entity: MessageEntity | TopicEntity, meta: EntityMeta) -> Runtime:
        counts = self.namespace.counts(entity) if not isinstance(entity, TopicEntity) else dict(_ZERO_COUNTS)
        return Runtime(entity.size_bytes, counts, meta.created_at, meta.updated_at, meta.updated_at)

    def _queue_entry(self, call: _Call, queue: QueueEntity) -> str:
        meta = self.metadata.get(queue.name)
        runtime = self._runtime(queue, meta)
        authorization = meta.extras.authorization_rules
        body = queue_xml(queue.props, meta.extras, runtime, call.host, authorization, self.namespace.sku)
        return self._entry(call, queue.name, queue.name, meta, body)

    def _topic_entry(self, call: _Call, topic: TopicEntity) -> str:
        meta = self.metadata.get(topic.name)
        filters = {
            "subscriptions": len(topic.subscriptions),
            "sql": topic.sql_rules,
            "correlation": topic.correlation_rules,
        }
        runtime = self._runtime(topic, meta)
        authorization = meta.extras.authorization_rules
        body = topic_xml(topic.props, meta.extras, runtime, filters, authorization, self.namespace.sku)
        return self._entry(call, topic.name, topic.name, meta, body)

    def _subscription_entry(self, call: _Call, subscription: SubscriptionEntity) -> str:
        meta = self.metadata.get(subscription.path)
        body = subscription_xml(subscription.props, self._runtime(subscription, meta), call.host)
        path = f"{subscription.topic.name}/subscriptions/{subscription.subscription_name}"
        return self._entry(call, path, subscription.subscription_name, meta, body)

    def _rule_entry(self, call: _Call, subscription: SubscriptionEntity, rule: RuleConfig) -> str:
        meta = self.metadata.get(subscription.path)
        path = f"{subscription.topic.name}/subscriptions/{subscription.subscription_name}/rules/{rule.name}"
        return self._entry(call, path, rule.name, meta, rule_xml(rule, meta.created_at))

    def _entry(self, call: _Call, path: str, title: str, meta: EntityMeta, body: str) -> str:
        return atom.entry(
            base_url=f"https://{call.host}",
            path=path,
            title=title,
            published=meta.created_at,
            updated=meta.updated_at,
            author=self.namespace.name,
            body=body,
        )

    def _feed(self, call: _Call, title: str, entries: list[str]) -> Response:
        request = call.request
        skip = _int_param(request, "$skip", 0)
        top = _int_param(request, "$top", PAGE_SIZE) or PAGE_SIZE
        page = entries[skip : skip + top]
        base = f"https://{call.host}{request.path}"
        version = request.param("api-version") or "2021-05"
        next_url = None
        if skip + top < len(entries):
            next_url = f"{base}?$skip={skip + top}&$top={top}&api-version={version}"
        document = atom.feed(
            self_url=f"{base}?api-version={version}",
            title=title,
            updated=self.metadata.started_at,
            entries=page,
            next_url=next_url,
        )
        return _xml(200, document, atom.FEED_CONTENT_TYPE)

    def _empty_feed(self, call: _Call) -> Response:
        document = atom.feed(
            self_url=f"https://{call.host}{call.request.path}",
            title="Publicly Listed Services",
            updated=self.metadata.started_at,
            entries=[],
            next_url=None,
        )
        return _xml(200, document, atom.FEED_CONTENT_TYPE)

    def _topic(self, name: str) -> TopicEntity:
        topic = self.namespace.topics.get(name.lower())
        if topic is None:
            raise not_found(self.namespace.name, "Topic", name)
        return topic

    def _subscription(self, topic_name: str, name: str) -> SubscriptionEntity:
        topic = self._topic(topic_name)
        subscription = topic.subscriptions.get(name.lower())
        if subscription is None:
            raise not_found(self.namespace.name, "Topic", f"{topic.name}|{name}")
        return subscription

    def _check_forwarding(self, props: QueueProperties | SubscriptionProperties) -> None:
        for target in (props.forward_to, props.forward_dead_lettered_messages_to):
            if target and self.namespace.send_target(target) is None:
                raise bad_request(
                    f"The auto forwarding destination entity does not exist: '{target}'. "
                    "The destination must exist before the source is created or updated.",
                    40400,
                )

    def _check_tier(self, max_message_size_in_kilobytes: int | None) -> None:
        """Standard refuses ``MaxMessageSizeInKilobytes`` whatever its value; Premium takes 1024..102400, as
        ARM (emulator.tier)."""
        problem = max_message_size_problem(
            self.namespace.sku, self.namespace.name, max_message_size_in_kilobytes
        )
        if problem:
            raise bad_request(problem)

    @staticmethod
    def _mode(request: Request) -> str:
        """``create`` without ``If-Match``, ``update`` with ``If-Match: *`` (what the SDK sends)."""
        return "update" if request.header("if-match") is not None else "create"

    # ------------------------------------------------------------------------------------------ namespace

    def _namespace_info(self, call: _Call) -> Response:
        started = atom.timestamp(self.metadata.started_at)
        inner = atom.elements(
            [
                ("CreatedTime", started),
                ("MessagingSKU", self.namespace.sku.value),
                ("MessagingUnits", PREMIUM_MESSAGING_UNITS if self.namespace.sku is Sku.PREMIUM else None),
                ("ModifiedTime", started),
                ("Name", self.namespace.name),
                ("NamespaceType", "Messaging"),
            ]
        )
        body = atom.description("NamespaceInfo", inner)
        meta = EntityMeta(self.metadata.started_at, self.metadata.started_at, Extras())
        return _xml(200, self._entry(call, "$namespaceinfo", self.namespace.name, meta, body))

    # ------------------------------------------------------------------------------------------ queues

    def _list_queues(self, call: _Call) -> Response:
        queues = sorted(self.namespace.queues.values(), key=lambda q: q.name.lower())
        return self._feed(call, "Queues", [self._queue_entry(call, q) for q in queues])

    def _list_topics(self, call: _Call) -> Response:
        topics = sorted(self.namespace.topics.values(), key=lambda t: t.name.lower())
        return self._feed(call, "Topics", [self._topic_entry(call, t) for t in topics])

    def _get_entity(self, call: _Call) -> Response:
        key = call.names[0].lower()
        queue = self.namespace.queues.get(key)
        if queue is not None:
            return _xml(200, self._queue_entry(call, queue))
        topic = self.namespace.topics.get(key)
        if topic is not None:
            return _xml(200, self._topic_entry(call, topic))
        return self._empty_feed(call)

    def _put_entity(self, call: _Call) -> Response:
        """A queue or a topic: the description in the body says which (the URL is the same)."""
        description = atom.parse_description(call.request.body, "QueueDescription", "TopicDescription")
        if atom.local(description.tag) == "TopicDescription":
            return self._put_topic(call, description)
        return self._put_queue(call, description)

    def _put_queue(self, call: _Call, description: ET.Element) -> Response:
        (name,) = call.names
        _check_path("Queue", name)
        _check_api_version(call.request, description)
        props, extras = queue_from_xml(description)
        self._check_tier(props.max_message_size_in_kilobytes)
        return self._put_top_level(
            call,
            "Queue",
            replace(extras, authorization_rules=_authorization_rules(description)),
            validate_queue_properties(name, props),
            create=lambda: self.namespace.create_queue(name, props, origin="arm"),
            update=lambda existing: self.namespace.update_queue(existing, props),
            entry=lambda queue: self._queue_entry(call, queue),
            forwards=props,
        )

    def _put_topic(self, call: _Call, description: ET.Element) -> Response:
        (name,) = call.names
        _check_path("Topic", name)
        _check_api_version(call.request, description)
        props, extras = topic_from_xml(description)
        self._check_tier(props.max_message_size_in_kilobytes)
        return self._put_top_level(
            call,
            "Topic",
            replace(extras, authorization_rules=_authorization_rules(description)),
            validate_topic_properties(name, props),
            create=lambda: self.namespace.create_topic(name, props, origin="arm"),
            update=lambda existing: self.namespace.update_topic(existing, props),
            entry=lambda topic: self._topic_entry(call, topic),
            forwards=None,
        )

    def _put_top_level(
        self,
        call: _Call,
        kind: str,
        extras: Extras,
        problems: list[str],
        *,
        create: Callable[[], _Entity],
        update: Callable[[str], _Entity],
        entry: Callable[[_Entity], str],
        forwards: QueueProperties | None,
    ) -> Response:
        """A queue's or a topic's PUT once its description is read: create without ``If-Match`` (409 if a
        queue or a topic has the name), update with it (404 if absent). Answers the entity's entry."""
        (name,) = call.names
        if problems:
            raise bad_request(_join(problems))
        own, other = (
            (self.namespace.queues, self.namespace.topics)
            if kind == "Queue"
            else (self.namespace.topics, self.namespace.queues)
        )
        existing = own.get(name.lower())
        if self._mode(call.request) == "create":
            if existing is not None or name.lower() in other:
                raise already_exists(self.namespace.name, kind, name)
            if forwards is not None:
                self._check_forwarding(forwards)
            created = create()
            self.metadata.record(created.name, extras, created=True)
            return _xml(201, entry(created))
        if existing is None:
            raise not_found(self.namespace.name, kind, name)
        _partitioning(kind, self.metadata.get(existing.name).extras, extras)
        if forwards is not None:
            self._check_forwarding(forwards)
        updated = update(existing.name)
        self.metadata.record(updated.name, extras, created=False)
        return _xml(200, entry(updated))

    def _delete_entity(self, call: _Call) -> Response:
        key = call.names[0].lower()
        queue = self.namespace.queues.get(key)
        if queue is not None:
            self.namespace.delete_queue(queue.name)
            self.metadata.forget(queue.name)
            return Response(200)
        topic = self.namespace.topics.get(key)
        if topic is not None:
            self.namespace.delete_topic(topic.name)
            self.metadata.forget(topic.name, with_children=True)
            return Response(200)
        raise not_found(self.namespace.name, "Queue", call.names[0])

    # ------------------------------------------------------------------------------------------ subscriptions

    def _list_subscriptions(self, call: _Call) -> Response:
        topic = self._topic(call.names[0])
        subscriptions = sorted(topic.subscriptions.values(), key=lambda s: s.subscription_name.lower())
        return self._feed(call, "Subscriptions", [self._subscription_entry(call, s) for s in subscriptions])

    def _get_subscription(self, call: _Call) -> Response:
        return _xml(200, self._subscription_entry(call, self._subscription(*call.names)))

    def _put_subscription(self, call: _Call) -> Response:
        topic_name, name = call.names
        topic = self._topic(topic_name)
        problems = validate_entity_name("Subscription", name)
        if problems:
            raise bad_request(_join(problems))
        description = atom.parse_description(call.request.body, "SubscriptionDescription")
        props = subscription_from_xml(description)
        problems = validate_subscription_properties(topic.name, name, props)
        if problems:
            raise bad_request(_join(problems))
        existing = topic.subscriptions.get(name.lower())
        self._check_forwarding(props)
        if self._mode(call.request) == "create":
            if existing is not None:
                raise already_exists(self.namespace.name, "Topic", f"{topic.name}|{name}")
            rules = _default_rule(description)
            for rule in rules or []:
                _check_rule(topic.name, name, rule)
            subscription = self.namespace.create_subscription(topic.name, name, props, rules, origin="arm")
            self.metadata.record(subscription.path, Extras(), created=True)
            return _xml(201, self._subscription_entry(call, subscription))
        if existing is None:
            raise not_found(self.namespace.name, "Topic", f"{topic.name}|{name}")
        subscription = self.namespace.update_subscription(topic.name, existing.subscription_name, props)
        self.metadata.record(subscription.path, Extras(), created=False)
        return _xml(200, self._subscription_entry(call, subscription))

    def _delete_sub(self, call: _Call) -> Response:
        subscription = self._subscription(*call.names)
        self.namespace.delete_subscription(subscription.topic.name, subscription.subscription_name)
        self.metadata.forget(subscription.path)
        return Response(200)

    # ------------------------------------------------------------------------------------------ rules

    def _list_rules(self, call: _Call) -> Response:
        subscription = self._subscription(*call.names)
        rules = sorted((r.config for r in subscription.rules.values()), key=lambda r: r.name.lower())
        return self._feed(call, "Rules", [self._rule_entry(call, subscription, r) for r in rules])

    def _get_rule(self, call: _Call) -> Response:
        topic_name, subscription_name, name = call.names
        subscription = self._subscription(topic_name, subscription_name)
        rule = subscription.rules.get(name.lower())
        if rule is None:
            path = f"{subscription.topic.name}|{subscription.subscription_name}|{name}"
            raise not_found(self.namespace.name, "Topic", path)
        return _xml(200, self._rule_entry(call, subscription, rule.config))

    def _put_rule(self, call: _Call) -> Response:
        topic_name, subscription_name, name = call.names
        subscription = self._subscription(topic_name, subscription_name)
        topic = subscription.topic
        problems = validate_entity_name("Rule", name)
        if problems:
            raise bad_request(_join(problems))
        existing = subscription.rules.get(name.lower())
        mode = self._mode(call.request)
        path = f"{topic.name}|{subscription.subscription_name}|{name}"
        if mode == "create" and existing is not None:
            raise already_exists(self.namespace.name, "Topic", path)
        if mode == "update" and existing is None:
            raise not_found(self.namespace.name, "Topic", path)
        description = atom.parse_description(call.request.body, "RuleDescription")
        config = rule_from_xml(existing.name if existing else name, description)
        _check_rule(topic.name, subscription.subscription_name, config)
        try:
            rule = self.namespace.put_rule(topic.name, subscription.subscription_name, config)
        except SqlSyntaxError as exc:
            raise bad_request(f"The SQL expression of rule '{config.name}' is invalid: {exc}.") from None
        return _xml(201 if existing is None else 200, self._rule_entry(call, subscription, rule.config))

    def _delete_rule(self, call: _Call) -> Response:
        topic_name, subscription_name, name = call.names
        subscription = self._subscription(topic_name, subscription_name)
        rule = subscription.rules.get(name.lower())
        if rule is None:
            path = f"{subscription.topic.name}|{subscription.subscription_name}|{name}"
            raise not_found(self.namespace.name, "Topic", path)
        self.namespace.delete_rule(subscription.topic.name, subscription.subscription_name, rule.name)
        return Response(200)


# ------------------------------------------------------------------------------------------ module helpers


def _sas_token(header: str | None) -> str | None:
    """The SAS token of an ``Authorization`` header: the SDK sends ``SharedAccessSignature ...`` for a
    key credential and ``Bearer SharedAccessSignature ...`` for a SAS-token connection string."""
    if header is None:
        return None
    token = header.removeprefix("Bearer ").strip()
    return token if token.startswith("SharedAccessSignature ") else None


def _bearer_claims(header: str | None) -> dict[str, Any] | None:
    """The (unverified) claims of a ``Bearer <JWT>`` header, None for anything else."""
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return unverified_claims(token.strip())


def _xml(status: int, document: str, content_type: str = atom.CONTENT_TYPE) -> Response:
    return Response(status, document.encode("utf-8"), [("Content-Type", content_type)])


def _error(status: int, detail: str) -> Response:
    return _xml(status, atom.error(status, detail), atom.ERROR_CONTENT_TYPE)


def _status(exc: BrokerError) -> int:
    if exc.status_code in (400, 401, 403, 404, 409):
        return 400 if exc.status_code == 403 else exc.status_code
    return 400


def _check_path(kind: str, name: str) -> None:
    problems = validate_entity_path(kind, name)
    if problems:
        raise bad_request(_join(problems))


def _check_api_version(request: Request, description: ET.Element) -> None:
    problems = api_version_problems(description, request.param("api-version"))
    if problems:
        raise bad_request(_join(problems))


def _join(problems: list[str]) -> str:
    return "; ".join(problems) + "."


def _int_param(request: Request, name: str, default: int) -> int:
    text = request.param(name)
    if text is None:
        return default
    if not text.strip().isdigit():
        raise bad_request(f"The value '{text}' of '{name}' must be a non-negative integer.")
    return int(text)


def _partitioning(kind: str, before: Extras, after: Extras) -> None:
    if before.enable_partitioning != after.enable_partitioning:
        raise bad_request(f"Partitioning cannot be changed for {kind}.")


def _authorization_rules(description: ET.Element) -> str:
    """The entity's ``AuthorizationRules`` children as sent, to report back (they grant nothing here)."""
    rules = next((c for c in description if atom.local(c.tag) == "AuthorizationRules"), None)
    if rules is None:
        return ""
    ET.register_namespace("", atom.SB_NS)
    return "".join(ET.tostring(rule, encoding="unicode") for rule in rules)


def _default_rule(description: ET.Element) -> list[RuleConfig] | None:
    """The subscription's ``DefaultRuleDescription``, if it has one (else the broker's ``$Default``)."""
    default = next((c for c in description if atom.local(c.tag) == "DefaultRuleDescription"), None)
    if default is None:
        return None
    name_element = next((c for c in default if atom.local(c.tag) == "Name"), None)
    name = (name_element.text if name_element is not None else None) or "$Default"
    return [rule_from_xml(name, default)]


def _check_rule(topic: str, subscription: str, config: RuleConfig) -> None:
    problems = validate_rule(topic, subscription, config)
    if problems:
        raise bad_request(_join(problems))
    try:
        compile_rule(config)
    except SqlSyntaxError as exc:
        raise bad_request(f"The SQL expression of rule '{config.name}' is invalid: {exc}.") from None


def _target_in(body: bytes, element: str) -> str:
    """The entity path a description's ForwardTo / ForwardDeadLetteredMessagesTo names ('' if none)."""
    try:
        root = ET.fromstring(body) if body.strip() and b"<!DOCTYPE" not in body.upper() else None
    except ET.ParseError:
        return ""
    if root is None:
        return ""
    for node in root.iter():
        if atom.local(node.tag).lower() == element and node.text:
            return entity_path(node.text.strip())
    return ""


__all__: list[Any] = ["AdminApi"]
