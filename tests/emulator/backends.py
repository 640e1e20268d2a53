"""Where the SDK-level emulator tests create their entities: the ``backend`` fixture's three kinds.

The tests observe behaviour only through ``azure-servicebus``, so they are a contract any Service Bus
namespace must meet; the backend decides who creates the entities and which namespace they talk to:

``in-process`` (default)
    the session's shared emulator, entities created through its own API (fast).
``arm``
    the same emulator, entities created with ``azure-mgmt-servicebus`` over its ARM API, as Busbar's
    provisioning creates them in production.
``azure``
    a real namespace, entities created over Azure Resource Manager and deleted after each test. Settings
    (the test is skipped, saying which are missing, when one is unset):

    - ``BUSBAR_AZURE_SERVICEBUS_CONNECTION_STRING``: a namespace-level SAS connection string (Manage);
    - ``BUSBAR_AZURE_SUBSCRIPTION_ID``, ``BUSBAR_AZURE_RESOURCE_GROUP``: where the namespace lives;
    - ``BUSBAR_AZURE_SERVICEBUS_NAMESPACE`` (optional): its name, else the connection string's host's
      first label. ARM calls authenticate with ``azure.identity.DefaultAzureCredential``.

Select with ``pytest tests/emulator --backend=arm`` or ``pytest tests/emulator --backend=azure -m azure``;
tests marked ``emulator_only`` read broker internals and are skipped for ``azure``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from azure.core.credentials import TokenCredential
from azure.mgmt.servicebus import ServiceBusManagementClient
from azure.mgmt.servicebus.models import (
    Action,
    CorrelationFilter,
    Rule,
    Ruleproperties,
    SBQueue,
    SBSubscription,
    SBTopic,
    SqlFilter,
)

from emulator.broker.properties import RuleConfig
from emulator.testing import EmulatorHandle
from shared.management import PlainHttpOperations, StaticTokenCredential

IN_PROCESS, ARM, AZURE = "in-process", "arm", "azure"
BACKENDS = (IN_PROCESS, ARM, AZURE)
DEFAULT_RULE = "$Default"

# The emulator's ARM API answers for any subscription and resource group.
EMULATOR_SUBSCRIPTION_ID = "00000000-0000-0000-0000-000000000000"
EMULATOR_RESOURCE_GROUP = "busbar-tests"

CONNECTION_STRING_VAR = "BUSBAR_AZURE_SERVICEBUS_CONNECTION_STRING"
SUBSCRIPTION_ID_VAR = "BUSBAR_AZURE_SUBSCRIPTION_ID"
RESOURCE_GROUP_VAR = "BUSBAR_AZURE_RESOURCE_GROUP"
NAMESPACE_VAR = "BUSBAR_AZURE_SERVICEBUS_NAMESPACE"


class Backend(Protocol):
    """What an SDK-level test needs: a data-plane connection string and entity creation.

    ``properties`` are the fields of the emulator's QueueProperties / TopicProperties /
    SubscriptionProperties (the vocabulary every backend translates from); ``rules`` replace the default
    rule. Each ``create_*`` returns the entity's name (a fresh one when ``name`` is None)."""

    @property
    def connection_string(self) -> str: ...

    def create_queue(self, name: str | None = None, **properties: Any) -> str: ...

    def create_topic(self, name: str | None = None, **properties: Any) -> str: ...

    def create_subscription(
        self, topic: str, name: str, rules: Sequence[RuleConfig] | None = None, **properties: Any
    ) -> str: ...


def fresh_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class InProcessBackend:
    """Entities created through the emulator's own API (today's way, and the fastest)."""

    name = IN_PROCESS

    def __init__(self, emulator: EmulatorHandle) -> None:
        self._emulator = emulator

    @property
    def connection_string(self) -> str:
        return self._emulator.connection_string

    def create_queue(self, name: str | None = None, **properties: Any) -> str:
        return self._emulator.create_queue(name, **properties)

    def create_topic(self, name: str | None = None, **properties: Any) -> str:
        return self._emulator.create_topic(name, **properties)

    def create_subscription(
        self, topic: str, name: str, rules: Sequence[RuleConfig] | None = None, **properties: Any
    ) -> str:
        return self._emulator.create_subscription(topic, name, rules, **properties)


# ------------------------------------------------------------------------------------------ over ARM


def _arm_value(value: object) -> object:
    # Enums (EntityStatus) go as their ARM spelling; timedeltas the SDK serialises as ISO 8601 itself.
    return value.value if isinstance(value, Enum) else value


def _arm_fields(properties: Mapping[str, Any]) -> dict[str, Any]:
    """Emulator property fields as the SDK models' (same snake_case names); None means "not set"."""
    return {key: _arm_value(value) for key, value in properties.items() if value is not None}


def arm_rule(rule: RuleConfig) -> Rule:
    """The ARM model of an emulator rule definition."""
    action = Action(sql_expression=rule.action_sql) if rule.action_sql else None
    if rule.filter_type == "Correlation":
        c = rule.correlation
        assert c is not None
        # Typed dict[str, str] in the SDK model, as Azure's ARM API documents them; the SDK passes other JSON
        # types through, and the emulator (like Service Bus's own filters) compares them typed. Any: the
        # model's annotation is narrower than what it accepts and sends.
        user_properties: Any = dict(c.properties) or None
        correlation = CorrelationFilter(
            correlation_id=c.correlation_id,
            message_id=c.message_id,
            to=c.to,
            reply_to=c.reply_to,
            label=c.subject,
            session_id=c.session_id,
            reply_to_session_id=c.reply_to_session_id,
            content_type=c.content_type,
            properties=user_properties,
        )
        return Rule(
            properties=Ruleproperties(
                filter_type="CorrelationFilter", correlation_filter=correlation, action=action
            )
        )
    sql = SqlFilter(sql_expression=rule.sql_expression or "1=1")
    return Rule(properties=Ruleproperties(filter_type="SqlFilter", sql_filter=sql, action=action))


class ArmBackend:
    """Entities created with ``azure-mgmt-servicebus``: against the emulator's ARM API or Azure's."""

    def __init__(
        self,
        name: str,
        client: ServiceBusManagementClient,
        connection_string: str,
        resource_group: str,
        namespace: str,
        *,
        plain_http: bool,
    ) -> None:
        self.name = name
        self._client = client
        self._connection_string = connection_string
        self._scope = (resource_group, namespace)
        wrap: Callable[[object], Any] = PlainHttpOperations if plain_http else (lambda ops: ops)
        self._queues = wrap(client.queues)
        self._topics = wrap(client.topics)
        self._subscriptions = wrap(client.subscriptions)
        self._rules = wrap(client.rules)
        self.created_queues: list[str] = []
        self.created_topics: list[str] = []

    @property
    def connection_string(self) -> str:
        return self._connection_string

    def create_queue(self, name: str | None = None, **properties: Any) -> str:
        queue = name or fresh_name("q")
        self._queues.create_or_update(*self._scope, queue, SBQueue(**_arm_fields(properties)))
        self.created_queues.append(queue)
        return queue

    def create_topic(self, name: str | None = None, **properties: Any) -> str:
        topic = name or fresh_name("t")
        self._topics.create_or_update(*self._scope, topic, SBTopic(**_arm_fields(properties)))
        self.created_topics.append(topic)
        return topic

    def create_subscription(
        self, topic: str, name: str, rules: Sequence[RuleConfig] | None = None, **properties: Any
    ) -> str:
        """Create the subscription (ARM gives it the default true rule), then put ``rules`` in that rule's
        place: a rule named like it replaces it, otherwise it is deleted after the others exist."""
        model = SBSubscription(**_arm_fields(properties))
        self._subscriptions.create_or_update(*self._scope, topic, name, model)
        if rules:
            for rule in rules:
                self._rules.create_or_update(*self._scope, topic, name, rule.name, arm_rule(rule))
            if all(rule.name.lower() != DEFAULT_RULE.lower() for rule in rules):
                self._rules.delete(*self._scope, topic, name, DEFAULT_RULE)
        return name

    def delete_created(self) -> None:
        """Delete what this backend created (a real namespace is not thrown away after the run)."""
        for topic in self.created_topics:
            self._topics.delete(*self._scope, topic)
        for queue in self.created_queues:
            self._queues.delete(*self._scope, queue)
        self.created_topics.clear()
        self.created_queues.clear()

    def close(self) -> None:
        self._client.close()


def emulator_arm_backend(emulator: EmulatorHandle) -> ArmBackend:
    """An ARM backend over the emulator's plain-HTTP ARM API, with its static bearer token."""
    client = ServiceBusManagementClient(
        credential=StaticTokenCredential(emulator.management_token),
        subscription_id=EMULATOR_SUBSCRIPTION_ID,
        base_url=emulator.management_url,
        retry_total=0,
    )
    return ArmBackend(
        ARM,
        client,
        emulator.connection_string,
        EMULATOR_RESOURCE_GROUP,
        emulator.namespace_name,
        plain_http=True,
    )


# ---------------------------------------------------------------------------------------------- Azure


@dataclass(frozen=True)
class AzureSettings:
    """The real namespace the ``azure`` backend uses (see the module docstring)."""

    connection_string: str
    subscription_id: str
    resource_group: str
    namespace: str

    @staticmethod
    def missing(environ: Mapping[str, str] = os.environ) -> list[str]:
        """The required settings that are unset or empty."""
        required = (CONNECTION_STRING_VAR, SUBSCRIPTION_ID_VAR, RESOURCE_GROUP_VAR)
        return [var for var in required if not environ.get(var)]

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] = os.environ) -> AzureSettings:
        """Read the settings; raise LookupError naming the missing ones."""
        missing = cls.missing(environ)
        if missing:
            needs = ", ".join(missing)
            raise LookupError(f"the azure backend needs {needs} (see tests/emulator/backends.py)")
        connection_string = environ[CONNECTION_STRING_VAR]
        return cls(
            connection_string=connection_string,
            subscription_id=environ[SUBSCRIPTION_ID_VAR],
            resource_group=environ[RESOURCE_GROUP_VAR],
            namespace=environ.get(NAMESPACE_VAR) or namespace_of(connection_string),
        )


def namespace_of(connection_string: str) -> str:
    """``Endpoint=sb://<namespace>.servicebus.windows.net/;...`` -> ``<namespace>``."""
    for part in connection_string.split(";"):
        key, _, value = part.partition("=")
        if key.strip().lower() == "endpoint":
            host = value.strip().removeprefix("sb://").split("/", 1)[0]
            return host.split(".", 1)[0]
    raise ValueError("the connection string has no Endpoint")


def azure_arm_backend(settings: AzureSettings, credential: TokenCredential | None = None) -> ArmBackend:
    """An ARM backend over Azure Resource Manager for the namespace in ``settings``."""
    if credential is None:
        from azure.identity import DefaultAzureCredential  # only this backend needs azure-identity

        credential = DefaultAzureCredential()
    client = ServiceBusManagementClient(credential=credential, subscription_id=settings.subscription_id)
    return ArmBackend(
        AZURE,
        client,
        settings.connection_string,
        settings.resource_group,
        settings.namespace,
        plain_http=False,
    )
