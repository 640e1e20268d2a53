"""Entity topology from the official Service Bus emulator's ``Config.json`` format.

The file looks like ``{"UserConfig": {"Namespaces": [{"Name": ..., "Queues": [...], "Topics": [...]}],
"Logging": {"Type": "Console"}}}``; see ``emulator/sample-config.json``.
Differences from the official emulator:

* ``//`` and ``/* */`` comments are tolerated anywhere outside JSON strings;
* keys are matched case-insensitively, but an unknown key is an error naming the allowed keys;
* values are checked against the CLOUD limits (:mod:`emulator.limits`), not the emulator's tighter quotas;
* a few extra entity properties are accepted (``MaxSizeInMegabytes``, ``Status``, ``AutoDeleteOnIdle`` ...);
* every problem in the file is reported at once, in a :class:`ConfigError`.

The file is read into the entity model of :mod:`emulator.broker.properties` and checked with
:mod:`emulator.validation`, the same checks the management APIs make.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace

from emulator import jsonc, limits
from emulator.broker.properties import (
    DEFAULT_NAMESPACE_NAME,
    FILTER_TYPES,
    CorrelationFilterConfig,
    EmulatorConfig,
    FilterType,
    FrozenProperties,
    NamespaceConfig,
    PropertyValue,
    QueueConfig,
    QueueProperties,
    RuleConfig,
    SubscriptionConfig,
    SubscriptionProperties,
    TopicConfig,
    TopicProperties,
)
from emulator.config_fields import FieldReader
from emulator.jsonc import JsonObject, describe, strip_json_comments, too_deep
from emulator.validation import (
    cross_entity_problems,
    rule_label,
    subscription_label,
    validate_entity_path,
    validate_namespace_name,
    validate_queue_properties,
    validate_rule,
    validate_subscription_name,
    validate_subscription_properties,
    validate_topic_properties,
)

__all__ = ["ConfigError", "load_config", "parse_config"]


class ConfigError(ValueError):
    """A configuration could not be used; ``problems`` lists every problem found, one message each."""

    problems: tuple[str, ...]
    source: str

    def __init__(self, problems: Sequence[str], source: str = "<config>") -> None:
        self.problems = tuple(problems)
        self.source = source
        count = len(self.problems)
        header = f"{source}: {count} configuration problem{'s' if count != 1 else ''}:"
        super().__init__("\n".join([header, *(f"  - {problem}" for problem in self.problems)]))


def _canonical_forward_targets(namespace: NamespaceConfig) -> NamespaceConfig:
    """Rewrite ForwardTo targets to the spelling the target entity was declared with."""
    declared = {q.name.lower(): q.name for q in namespace.queues}
    declared.update({t.name.lower(): t.name for t in namespace.topics})

    def fix(target: str | None) -> str | None:
        return None if target is None else declared.get(target.lower(), target)

    queues = tuple(
        replace(
            q,
            properties=replace(
                q.properties,
                forward_to=fix(q.properties.forward_to),
                forward_dead_lettered_messages_to=fix(q.properties.forward_dead_lettered_messages_to),
            ),
        )
        for q in namespace.queues
    )
    topics = tuple(
        replace(
            t,
            subscriptions=tuple(
                replace(
                    s,
                    properties=replace(
                        s.properties,
                        forward_to=fix(s.properties.forward_to),
                        forward_dead_lettered_messages_to=fix(s.properties.forward_dead_lettered_messages_to),
                    ),
                )
                for s in t.subscriptions
            ),
        )
        for t in namespace.topics
    )
    return replace(namespace, queues=queues, topics=topics)


# --------------------------------------------------------------------------------------------------
# Config.json reader
# --------------------------------------------------------------------------------------------------

_ROOT_KEYS = ("UserConfig", "$schema")
_USER_CONFIG_KEYS = ("Namespaces", "Logging")
_LOGGING_KEYS = ("Type",)
_NAMESPACE_KEYS = ("Name", "Queues", "Topics")
_QUEUE_KEYS = ("Name", "Properties")
_TOPIC_KEYS = ("Name", "Properties", "Subscriptions")
_SUBSCRIPTION_KEYS = ("Name", "Properties", "Rules")
_RULE_KEYS = ("Name", "Properties")
_RULE_PROPERTY_KEYS = ("FilterType", "CorrelationFilter", "SqlFilter", "Action")
_SQL_KEYS = ("SqlExpression",)
_CORRELATION_KEYS = (
    "ContentType",
    "CorrelationId",
    "Label",
    "MessageId",
    "ReplyTo",
    "ReplyToSessionId",
    "SessionId",
    "To",
    "Properties",
)
_CORRELATION_ALIASES = {"subject": "Label"}

_QUEUE_PROPERTY_KEYS = (
    "DeadLetteringOnMessageExpiration",
    "DefaultMessageTimeToLive",
    "DuplicateDetectionHistoryTimeWindow",
    "ForwardDeadLetteredMessagesTo",
    "ForwardTo",
    "LockDuration",
    "MaxDeliveryCount",
    "RequiresDuplicateDetection",
    "RequiresSession",
    "MaxSizeInMegabytes",
    "MaxMessageSizeInKilobytes",
    "Status",
    "AutoDeleteOnIdle",
    "EnableBatchedOperations",
    "UserMetadata",
)
_TOPIC_PROPERTY_KEYS = (
    "DefaultMessageTimeToLive",
    "DuplicateDetectionHistoryTimeWindow",
    "RequiresDuplicateDetection",
    "MaxSizeInMegabytes",
    "MaxMessageSizeInKilobytes",
    "Status",
    "AutoDeleteOnIdle",
    "EnableBatchedOperations",
    "SupportOrdering",
    "UserMetadata",
)
_SUBSCRIPTION_PROPERTY_KEYS = (
    "DeadLetteringOnMessageExpiration",
    "DefaultMessageTimeToLive",
    "LockDuration",
    "MaxDeliveryCount",
    "ForwardDeadLetteredMessagesTo",
    "ForwardTo",
    "RequiresSession",
    "DeadLetteringOnFilterEvaluationExceptions",
    "Status",
    "AutoDeleteOnIdle",
    "EnableBatchedOperations",
    "UserMetadata",
)

_LOGGING_TYPES = {
    "console": "Console",
    "file": "File",
    "file,console": "File,Console",
    "console,file": "Console,File",
}

_FILTER_TYPE_NAMES: dict[str, FilterType] = {
    "sql": "Sql",
    "sqlfilter": "Sql",
    "correlation": "Correlation",
    "correlationfilter": "Correlation",
    "true": "True",
    "truefilter": "True",
    "false": "False",
    "falsefilter": "False",
}


def _peek_name(value: object) -> str | None:
    """The ``Name`` of a JSON object before its keys are checked, so early problems can name the entity."""
    if isinstance(value, JsonObject):
        for key, item in value.pairs:
            if key.lower() == "name" and isinstance(item, str) and item:
                return item
    return None


def _peek_label(kind: str, index: int, value: object) -> str:
    name = _peek_name(value)
    return f"{kind} #{index}" if name is None else f"{kind} '{name}'"


class _Reader(FieldReader):
    """Walks the parsed JSON, builds the dataclasses and collects every problem on the way."""

    # -- document structure ------------------------------------------------------------------------

    def read(self, document: object) -> EmulatorConfig | None:
        root = self.fields("Config", document, _ROOT_KEYS, "the top level")
        if root is None:
            return None
        if "UserConfig" not in root:
            self.add("Config", "UserConfig is required at the top level")
            return None
        user_config = self.fields("UserConfig", root["UserConfig"], _USER_CONFIG_KEYS, "UserConfig")
        if user_config is None:
            return None
        logging_type = self.logging(user_config.get("Logging"))
        namespaces = user_config.get("Namespaces")
        if not isinstance(namespaces, list):
            shown = "missing" if namespaces is None else f"got {describe(namespaces)}"
            self.add("UserConfig", f"Namespaces must be an array with exactly one namespace ({shown})")
            return None
        if len(namespaces) != 1:
            self.add("UserConfig", f"Namespaces must contain exactly one namespace, got {len(namespaces)}")
            if not namespaces:
                return None
        namespace = self.namespace(namespaces[0])
        if namespace is None:
            return None
        return EmulatorConfig(namespace=namespace, logging_type=logging_type)

    def logging(self, value: object) -> str:
        if value is None:
            return "Console"
        fields = self.fields("UserConfig", value, _LOGGING_KEYS, "Logging")
        if fields is None:
            return "Console"
        kind = fields.get("Type")
        if kind is None:
            return "Console"
        if isinstance(kind, str):
            normalized = ",".join(part.strip() for part in kind.split(",")).lower()
            if normalized in _LOGGING_TYPES:
                return _LOGGING_TYPES[normalized]
        allowed = ", ".join(_LOGGING_TYPES.values())
        self.add("UserConfig", f"Logging.Type must be one of {allowed}, got {describe(kind)}")
        return "Console"

    def namespace(self, value: object) -> NamespaceConfig | None:
        fields = self.fields("Namespace #1", value, _NAMESPACE_KEYS)
        if fields is None:
            return None
        name = self.name("Namespace #1", fields)
        if name is None:
            name = DEFAULT_NAMESPACE_NAME
        else:
            self.problems.extend(validate_namespace_name(name))
        label = f"Namespace '{name}'"
        queues = [
            self.queue(index, item) for index, item in enumerate(self.array(label, fields, "Queues"), 1)
        ]
        topics = [
            self.topic(index, item) for index, item in enumerate(self.array(label, fields, "Topics"), 1)
        ]
        return NamespaceConfig(
            name=name,
            queues=tuple(queue for queue in queues if queue is not None),
            topics=tuple(topic for topic in topics if topic is not None),
        )

    def properties(
        self, label: str, fields: Mapping[str, object], allowed: Sequence[str]
    ) -> dict[str, object]:
        value = fields.get("Properties")
        if value is None:
            return {}
        return self.fields(label, value, allowed, "Properties") or {}

    def queue(self, index: int, value: object) -> QueueConfig | None:
        fields = self.fields(_peek_label("Queue", index, value), value, _QUEUE_KEYS)
        if fields is None:
            return None
        name = self.name(f"Queue #{index}", fields)
        if name is None:
            return None
        label = f"Queue '{name}'"
        p = self.properties(label, fields, _QUEUE_PROPERTY_KEYS)
        props = QueueProperties(
            lock_duration=self.finite_duration(
                label,
                p,
                "LockDuration",
                limits.LOCK_DURATION_DEFAULT,
                limits.LOCK_DURATION_MIN,
                limits.LOCK_DURATION_MAX,
            ),
            max_delivery_count=self.integer(label, p, "MaxDeliveryCount", limits.MAX_DELIVERY_COUNT_DEFAULT),
            default_message_time_to_live=self.duration(label, p, "DefaultMessageTimeToLive", None),
            dead_lettering_on_message_expiration=self.boolean(
                label, p, "DeadLetteringOnMessageExpiration", False
            ),
            requires_duplicate_detection=self.boolean(label, p, "RequiresDuplicateDetection", False),
            duplicate_detection_history_time_window=self.finite_duration(
                label,
                p,
                "DuplicateDetectionHistoryTimeWindow",
                limits.DUPLICATE_DETECTION_WINDOW_DEFAULT,
                limits.DUPLICATE_DETECTION_WINDOW_MIN,
                limits.DUPLICATE_DETECTION_WINDOW_MAX,
            ),
            requires_session=self.boolean(label, p, "RequiresSession", False),
            forward_to=self.text(label, p, "ForwardTo"),
            forward_dead_lettered_messages_to=self.text(label, p, "ForwardDeadLetteredMessagesTo"),
            max_size_in_megabytes=self.integer(
                label, p, "MaxSizeInMegabytes", limits.MAX_SIZE_IN_MEGABYTES_DEFAULT
            ),
            max_message_size_in_kilobytes=self.optional_integer(label, p, "MaxMessageSizeInKilobytes"),
            status=self.status(label, p),
            auto_delete_on_idle=self.duration(label, p, "AutoDeleteOnIdle", None),
            enable_batched_operations=self.boolean(label, p, "EnableBatchedOperations", True),
            user_metadata=self.text(label, p, "UserMetadata"),
        )
        queue = QueueConfig(name=name, properties=props)
        self.problems.extend(validate_entity_path("Queue", name))
        self.problems.extend(validate_queue_properties(name, props))
        return queue

    def topic(self, index: int, value: object) -> TopicConfig | None:
        fields = self.fields(_peek_label("Topic", index, value), value, _TOPIC_KEYS)
        if fields is None:
            return None
        name = self.name(f"Topic #{index}", fields)
        if name is None:
            return None
        label = f"Topic '{name}'"
        p = self.properties(label, fields, _TOPIC_PROPERTY_KEYS)
        props = TopicProperties(
            default_message_time_to_live=self.duration(label, p, "DefaultMessageTimeToLive", None),
            requires_duplicate_detection=self.boolean(label, p, "RequiresDuplicateDetection", False),
            duplicate_detection_history_time_window=self.finite_duration(
                label,
                p,
                "DuplicateDetectionHistoryTimeWindow",
                limits.DUPLICATE_DETECTION_WINDOW_DEFAULT,
                limits.DUPLICATE_DETECTION_WINDOW_MIN,
                limits.DUPLICATE_DETECTION_WINDOW_MAX,
            ),
            max_size_in_megabytes=self.integer(
                label, p, "MaxSizeInMegabytes", limits.MAX_SIZE_IN_MEGABYTES_DEFAULT
            ),
            max_message_size_in_kilobytes=self.optional_integer(label, p, "MaxMessageSizeInKilobytes"),
            status=self.status(label, p),
            auto_delete_on_idle=self.duration(label, p, "AutoDeleteOnIdle", None),
            enable_batched_operations=self.boolean(label, p, "EnableBatchedOperations", True),
            support_ordering=self.boolean(label, p, "SupportOrdering", True),
            user_metadata=self.text(label, p, "UserMetadata"),
        )
        self.problems.extend(validate_entity_path("Topic", name))
        self.problems.extend(validate_topic_properties(name, props))
        subscriptions = [
            self.subscription(name, index, item)
            for index, item in enumerate(self.array(label, fields, "Subscriptions"), 1)
        ]
        return TopicConfig(
            name=name,
            properties=props,
            subscriptions=tuple(sub for sub in subscriptions if sub is not None),
        )

    def subscription(self, topic: str, index: int, value: object) -> SubscriptionConfig | None:
        placeholder = f"Subscription #{index} of topic '{topic}'"
        peeked = _peek_name(value)
        early_label = placeholder if peeked is None else subscription_label(topic, peeked)
        fields = self.fields(early_label, value, _SUBSCRIPTION_KEYS)
        if fields is None:
            return None
        name = self.name(placeholder, fields)
        if name is None:
            return None
        label = subscription_label(topic, name)
        p = self.properties(label, fields, _SUBSCRIPTION_PROPERTY_KEYS)
        props = SubscriptionProperties(
            lock_duration=self.finite_duration(
                label,
                p,
                "LockDuration",
                limits.LOCK_DURATION_DEFAULT,
                limits.LOCK_DURATION_MIN,
                limits.LOCK_DURATION_MAX,
            ),
            max_delivery_count=self.integer(label, p, "MaxDeliveryCount", limits.MAX_DELIVERY_COUNT_DEFAULT),
            default_message_time_to_live=self.duration(label, p, "DefaultMessageTimeToLive", None),
            dead_lettering_on_message_expiration=self.boolean(
                label, p, "DeadLetteringOnMessageExpiration", False
            ),
            dead_lettering_on_filter_evaluation_exceptions=self.boolean(
                label, p, "DeadLetteringOnFilterEvaluationExceptions", True
            ),
            requires_session=self.boolean(label, p, "RequiresSession", False),
            forward_to=self.text(label, p, "ForwardTo"),
            forward_dead_lettered_messages_to=self.text(label, p, "ForwardDeadLetteredMessagesTo"),
            status=self.status(label, p),
            auto_delete_on_idle=self.duration(label, p, "AutoDeleteOnIdle", None),
            enable_batched_operations=self.boolean(label, p, "EnableBatchedOperations", True),
            user_metadata=self.text(label, p, "UserMetadata"),
        )
        self.problems.extend(validate_subscription_name(topic, name))
        self.problems.extend(validate_subscription_properties(topic, name, props))
        rules = [
            self.rule(topic, name, index, item)
            for index, item in enumerate(self.array(label, fields, "Rules"), 1)
        ]
        return SubscriptionConfig(
            name=name, properties=props, rules=tuple(rule for rule in rules if rule is not None)
        )

    def rule(self, topic: str, subscription: str, index: int, value: object) -> RuleConfig | None:
        placeholder = f"Rule #{index} of {subscription_label(topic, subscription)}"
        peeked = _peek_name(value)
        early_label = placeholder if peeked is None else rule_label(topic, subscription, peeked)
        fields = self.fields(early_label, value, _RULE_KEYS)
        if fields is None:
            return None
        name = self.name(placeholder, fields)
        if name is None:
            return None
        label = rule_label(topic, subscription, name)
        if fields.get("Properties") is None:
            self.add(label, "Properties with a FilterType is required")
            return None
        p = self.fields(label, fields["Properties"], _RULE_PROPERTY_KEYS, "Properties")
        if p is None:
            return None
        raw_type = p.get("FilterType")
        filter_type = _FILTER_TYPE_NAMES.get(raw_type.lower()) if isinstance(raw_type, str) else None
        if filter_type is None:
            shown = "missing" if raw_type is None else f"got {describe(raw_type)}"
            self.add(label, f"FilterType must be one of {', '.join(FILTER_TYPES)} ({shown})")
        sql_expression: str | None = None
        sql = p.get("SqlFilter")
        if sql is not None:
            sql_fields = self.fields(label, sql, _SQL_KEYS, "SqlFilter")
            if sql_fields is not None:
                value_ = sql_fields.get("SqlExpression")
                if value_ is not None and not isinstance(value_, str):
                    self.add(label, f"SqlFilter.SqlExpression must be a string, got {describe(value_)}")
                elif isinstance(value_, str):
                    sql_expression = value_
        correlation = self.correlation(label, p.get("CorrelationFilter"))
        action_sql = self.action(label, p.get("Action"))
        if filter_type is None:
            return None
        rule = RuleConfig(
            name=name,
            filter_type=filter_type,
            sql_expression=sql_expression,
            correlation=correlation,
            action_sql=action_sql,
        )
        self.problems.extend(validate_rule(topic, subscription, rule))
        return rule

    def action(self, label: str, value: object) -> str | None:
        if value is None or value == "":
            return None
        fields = self.fields(label, value, _SQL_KEYS, "Action")
        if fields is None:
            return None
        expression = fields.get("SqlExpression")
        if expression is None or expression == "":
            return None
        if not isinstance(expression, str):
            self.add(label, f"Action.SqlExpression must be a string, got {describe(expression)}")
            return None
        return expression

    def correlation(self, label: str, value: object) -> CorrelationFilterConfig | None:
        if value is None:
            return None
        fields = self.fields(label, value, _CORRELATION_KEYS, "CorrelationFilter", _CORRELATION_ALIASES)
        if fields is None:
            return None
        system: dict[str, str | None] = {}
        for key in _CORRELATION_KEYS[:-1]:  # all but "Properties"
            system[key] = self.text(label, fields, key, "CorrelationFilter.")
            if system[key] is None and fields.get(key) not in (None, ""):
                # Already reported; keep a stand-in so the filter doesn't also look empty.
                system[key] = describe(fields[key])
        properties: dict[str, PropertyValue] = {}
        raw_properties = fields.get("Properties")
        if raw_properties is not None:
            if not isinstance(raw_properties, JsonObject):
                self.add(
                    label, f"CorrelationFilter.Properties must be an object, got {describe(raw_properties)}"
                )
            else:
                for key, item in raw_properties.pairs:
                    if key in properties:
                        self.add(label, f"CorrelationFilter.Properties has '{key}' more than once")
                    elif isinstance(item, str | int | float | bool):
                        properties[key] = item
                    else:
                        self.add(
                            label,
                            f"CorrelationFilter.Properties['{key}'] must be a string, number or boolean, "
                            f"got {describe(item)}",
                        )
                        properties[key] = describe(item)  # stand-in; the config is refused anyway
        return CorrelationFilterConfig(
            correlation_id=system["CorrelationId"],
            message_id=system["MessageId"],
            to=system["To"],
            reply_to=system["ReplyTo"],
            subject=system["Label"],
            session_id=system["SessionId"],
            reply_to_session_id=system["ReplyToSessionId"],
            content_type=system["ContentType"],
            properties=FrozenProperties(properties),
        )


def parse_config(text: str, source: str = "<config>") -> EmulatorConfig:
    """Parse ``Config.json`` text; raise :class:`ConfigError` listing every problem found."""
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        stripped = strip_json_comments(text)
    except ValueError as exc:
        raise ConfigError([str(exc)], source) from None
    try:
        document = jsonc.loads(stripped)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            [f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"], source
        ) from None
    except RecursionError:
        raise ConfigError([too_deep(stripped)], source) from None
    reader = _Reader()
    try:
        config = reader.read(document)
    except RecursionError:  # a value nested hundreds deep where the reader describes it
        raise ConfigError([too_deep(stripped)], source) from None
    problems = reader.problems
    if config is not None:
        problems.extend(cross_entity_problems(config.namespace))
    if problems or config is None:
        raise ConfigError(problems or ["configuration is empty"], source)
    return replace(config, namespace=_canonical_forward_targets(config.namespace))


def load_config(path: str | os.PathLike[str]) -> EmulatorConfig:
    """Read and parse a ``Config.json`` file (UTF-8, optional BOM)."""
    source = os.fspath(path)
    try:
        with open(path, encoding="utf-8-sig") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"cannot read configuration file: {exc}"], source) from None
    return parse_config(text, source)
