"""ARM JSON <-> the broker's property dataclasses, for queues, topics, subscriptions and rules.

Requests carry ``{"properties": {...}}`` with camelCase keys (matched case-insensitively, as ARM's
deserializer does), ISO-8601 durations and ``status`` as an EntityStatus name. A PUT replaces the whole
definition: a property left out takes its default. Read-only properties (counts, timestamps) in a request
are ignored, as are properties the emulator has no use for.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from emulator import limits
from emulator.arm.errors import ArmError, bad_request, invalid_content
from emulator.broker.properties import (
    CorrelationFilterConfig,
    EntityStatus,
    FrozenProperties,
    PropertyValue,
    QueueProperties,
    RuleConfig,
    SubscriptionProperties,
    TopicProperties,
)
from emulator.durations import format_duration, parse_duration

COMPATIBILITY_LEVEL = 20
_FOREVER = timedelta.max  # stands for TimeSpan.MaxValue where a finite duration is required

# (ARM property name, CorrelationFilterConfig field)
CORRELATION_FIELDS: tuple[tuple[str, str], ...] = (
    ("correlationId", "correlation_id"),
    ("messageId", "message_id"),
    ("to", "to"),
    ("replyTo", "reply_to"),
    ("label", "subject"),
    ("sessionId", "session_id"),
    ("replyToSessionId", "reply_to_session_id"),
    ("contentType", "content_type"),
)


@dataclass(frozen=True, slots=True)
class Extras:
    """Properties the management planes know that the broker's dataclasses do not hold."""

    enable_partitioning: bool = False
    enable_express: bool = False
    # The entity's AuthorizationRules as the ATOM API received them (XML), reported back unchanged.
    authorization_rules: str = ""


def parse_document(body: bytes) -> dict[str, Any]:
    """The request's JSON object (an empty body is an empty object)."""
    if not body.strip():
        return {}
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise invalid_content(f"the body is not valid JSON ({exc}).") from None
    except RecursionError:  # arrays or objects nested thousands deep: a bad request, not a server error
        raise invalid_content(
            "the body is not valid JSON (arrays or objects are nested too deeply)."
        ) from None
    if not isinstance(document, dict):
        raise invalid_content("the body must be a JSON object.")
    return document


class _Reader:
    """Typed, case-insensitive access to one JSON object (``where`` names it in error messages)."""

    def __init__(self, value: object, where: str) -> None:
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise invalid_content(f"'{where}' must be an object, got {json.dumps(value)}.")
        self.where = where
        self.values = {str(k).lower(): v for k, v in value.items() if v is not None}

    def get(self, key: str) -> Any:
        return self.values.get(key.lower())

    def _wrong(self, key: str, expected: str) -> ArmError:
        return invalid_content(
            f"'{self.where}.{key}' must be {expected}, got {json.dumps(self.get(key))[:100]}."
        )

    def boolean(self, key: str, default: bool) -> bool:
        value = self.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._wrong(key, "a boolean")
        return value

    def integer(self, key: str, default: int) -> int:
        value = self.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._wrong(key, "an integer")
        return value

    def optional_integer(self, key: str) -> int | None:
        """An integer property; absent or null means unset (the caller decides what that means)."""
        return None if self.get(key) is None else self.integer(key, 0)

    def text(self, key: str) -> str | None:
        value = self.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self._wrong(key, "a string")
        return value

    def duration(self, key: str, default: timedelta | None) -> timedelta | None:
        """A duration; None is infinite (``TimeSpan.MaxValue``)."""
        text = self.text(key)
        if text is None:
            return default
        try:
            return parse_duration(text)
        except ValueError as exc:
            raise invalid_content(f"'{self.where}.{key}': {exc}.") from None

    def finite(self, key: str, default: timedelta) -> timedelta:
        value = self.duration(key, default)
        return _FOREVER if value is None else value

    def status(self, allowed: tuple[EntityStatus, ...]) -> EntityStatus:
        text = self.text("status")
        if text is None:
            return EntityStatus.ACTIVE
        for status in allowed:
            if status.value.lower() == text.lower():
                return status
        names = ", ".join(s.value for s in allowed)
        raise bad_request(f"The value '{text}' of property 'status' is not supported (allowed: {names}).")

    def reader(self, key: str) -> _Reader | None:
        value = self.get(key)
        return None if value is None else _Reader(value, f"{self.where}.{key}")


_QUEUE_STATUSES = (
    EntityStatus.ACTIVE,
    EntityStatus.DISABLED,
    EntityStatus.SEND_DISABLED,
    EntityStatus.RECEIVE_DISABLED,
)
_TOPIC_STATUSES = (EntityStatus.ACTIVE, EntityStatus.DISABLED, EntityStatus.SEND_DISABLED)
_SUBSCRIPTION_STATUSES = (EntityStatus.ACTIVE, EntityStatus.DISABLED, EntityStatus.RECEIVE_DISABLED)


def _properties(document: Mapping[str, Any]) -> _Reader:
    for key, value in document.items():
        if key.lower() == "properties":
            return _Reader(value, "properties")
    return _Reader({}, "properties")


def _extras(p: _Reader) -> Extras:
    return Extras(p.boolean("enablePartitioning", False), p.boolean("enableExpress", False))


def queue_from_arm(document: Mapping[str, Any]) -> tuple[QueueProperties, Extras]:
    p = _properties(document)
    props = QueueProperties(
        lock_duration=p.finite("lockDuration", limits.LOCK_DURATION_DEFAULT),
        max_delivery_count=p.integer("maxDeliveryCount", limits.MAX_DELIVERY_COUNT_DEFAULT),
        default_message_time_to_live=p.duration("defaultMessageTimeToLive", None),
        dead_lettering_on_message_expiration=p.boolean("deadLetteringOnMessageExpiration", False),
        requires_duplicate_detection=p.boolean("requiresDuplicateDetection", False),
        duplicate_detection_history_time_window=p.finite(
            "duplicateDetectionHistoryTimeWindow", limits.DUPLICATE_DETECTION_WINDOW_DEFAULT
        ),
        requires_session=p.boolean("requiresSession", False),
        forward_to=p.text("forwardTo") or None,
        forward_dead_lettered_messages_to=p.text("forwardDeadLetteredMessagesTo") or None,
        max_size_in_megabytes=p.integer("maxSizeInMegabytes", limits.MAX_SIZE_IN_MEGABYTES_DEFAULT),
        max_message_size_in_kilobytes=p.optional_integer("maxMessageSizeInKilobytes"),
        status=p.status(_QUEUE_STATUSES),
        auto_delete_on_idle=p.duration("autoDeleteOnIdle", None),
        enable_batched_operations=p.boolean("enableBatchedOperations", True),
        user_metadata=p.text("userMetadata"),
    )
    return props, _extras(p)


def topic_from_arm(document: Mapping[str, Any]) -> tuple[TopicProperties, Extras]:
    p = _properties(document)
    props = TopicProperties(
        default_message_time_to_live=p.duration("defaultMessageTimeToLive", None),
        requires_duplicate_detection=p.boolean("requiresDuplicateDetection", False),
        duplicate_detection_history_time_window=p.finite(
            "duplicateDetectionHistoryTimeWindow", limits.DUPLICATE_DETECTION_WINDOW_DEFAULT
        ),
        max_size_in_megabytes=p.integer("maxSizeInMegabytes", limits.MAX_SIZE_IN_MEGABYTES_DEFAULT),
        max_message_size_in_kilobytes=p.optional_integer("maxMessageSizeInKilobytes"),
        status=p.status(_TOPIC_STATUSES),
        auto_delete_on_idle=p.duration("autoDeleteOnIdle", None),
        enable_batched_operations=p.boolean("enableBatchedOperations", True),
        support_ordering=p.boolean("supportOrdering", True),
        user_metadata=p.text("userMetadata"),
    )
    return props, _extras(p)


def subscription_from_arm(document: Mapping[str, Any]) -> SubscriptionProperties:
    p = _properties(document)
    return SubscriptionProperties(
        lock_duration=p.finite("lockDuration", limits.LOCK_DURATION_DEFAULT),
        max_delivery_count=p.integer("maxDeliveryCount", limits.MAX_DELIVERY_COUNT_DEFAULT),
        default_message_time_to_live=p.duration("defaultMessageTimeToLive", None),
        dead_lettering_on_message_expiration=p.boolean("deadLetteringOnMessageExpiration", False),
        dead_lettering_on_filter_evaluation_exceptions=p.boolean(
            "deadLetteringOnFilterEvaluationExceptions", True
        ),
        requires_session=p.boolean("requiresSession", False),
        forward_to=p.text("forwardTo") or None,
        forward_dead_lettered_messages_to=p.text("forwardDeadLetteredMessagesTo") or None,
        status=p.status(_SUBSCRIPTION_STATUSES),
        auto_delete_on_idle=p.duration("autoDeleteOnIdle", None),
        enable_batched_operations=p.boolean("enableBatchedOperations", True),
        user_metadata=p.text("userMetadata"),
    )


def rule_from_arm(name: str, document: Mapping[str, Any]) -> RuleConfig:
    """A rule. Without a filter type the filter object present decides; a SQL filter without an
    expression is the true filter (what the SDKs create by default)."""
    p = _properties(document)
    sql = p.reader("sqlFilter")
    correlation = p.reader("correlationFilter")
    raw_type = p.text("filterType")
    if raw_type is None:
        kind = "correlationfilter" if correlation is not None and sql is None else "sqlfilter"
    elif raw_type.lower() in ("sqlfilter", "correlationfilter"):
        kind = raw_type.lower()
    else:
        raise bad_request(
            f"The value '{raw_type}' of property 'filterType' is not supported "
            "(allowed: SqlFilter, CorrelationFilter)."
        )
    action = p.reader("action")
    action_sql = action.text("sqlExpression") if action is not None else None
    if kind == "correlationfilter":
        return RuleConfig(
            name=name,
            filter_type="Correlation",
            correlation=_correlation(correlation or _Reader({}, "properties.correlationFilter")),
            action_sql=action_sql or None,
        )
    expression = sql.text("sqlExpression") if sql is not None else None
    if expression is None:
        return RuleConfig(name=name, filter_type="True", action_sql=action_sql or None)
    return RuleConfig(name=name, filter_type="Sql", sql_expression=expression, action_sql=action_sql or None)


def _correlation(c: _Reader) -> CorrelationFilterConfig:
    system = {field: c.text(key) for key, field in CORRELATION_FIELDS}
    properties: dict[str, str | int | float | bool] = {}
    user = c.reader("properties")
    if user is not None:
        for key, value in c.get("properties").items():
            if value is None:
                continue
            if not isinstance(value, str | int | float | bool) or (
                isinstance(value, float) and not math.isfinite(value)
            ):
                raise invalid_content(
                    f"'{user.where}.{key}' must be a string, number or boolean, got {json.dumps(value)}."
                )
            properties[str(key)] = value
    return CorrelationFilterConfig(**system, properties=FrozenProperties(properties))


# ------------------------------------------------------------------------------------------ rendering


def timestamp(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def duration(value: timedelta | None) -> str:
    return format_duration(value)


def _optional(properties: dict[str, Any], key: str, value: object) -> None:
    if value is not None:
        properties[key] = value


def queue_properties(props: QueueProperties, extras: Extras) -> dict[str, Any]:
    out: dict[str, Any] = {
        "lockDuration": duration(props.lock_duration),
        "maxSizeInMegabytes": props.max_size_in_megabytes,
        "maxMessageSizeInKilobytes": props.max_message_size_in_kilobytes,
        "requiresDuplicateDetection": props.requires_duplicate_detection,
        "requiresSession": props.requires_session,
        "defaultMessageTimeToLive": duration(props.default_message_time_to_live),
        "deadLetteringOnMessageExpiration": props.dead_lettering_on_message_expiration,
        "duplicateDetectionHistoryTimeWindow": duration(props.duplicate_detection_history_time_window),
        "maxDeliveryCount": props.max_delivery_count,
        "status": props.status.value,
        "enableBatchedOperations": props.enable_batched_operations,
        "autoDeleteOnIdle": duration(props.auto_delete_on_idle),
        "enablePartitioning": extras.enable_partitioning,
        "enableExpress": extras.enable_express,
    }
    _optional(out, "forwardTo", props.forward_to)
    _optional(out, "forwardDeadLetteredMessagesTo", props.forward_dead_lettered_messages_to)
    _optional(out, "userMetadata", props.user_metadata)
    return out


def topic_properties(props: TopicProperties, extras: Extras) -> dict[str, Any]:
    out: dict[str, Any] = {
        "defaultMessageTimeToLive": duration(props.default_message_time_to_live),
        "maxSizeInMegabytes": props.max_size_in_megabytes,
        "maxMessageSizeInKilobytes": props.max_message_size_in_kilobytes,
        "requiresDuplicateDetection": props.requires_duplicate_detection,
        "duplicateDetectionHistoryTimeWindow": duration(props.duplicate_detection_history_time_window),
        "enableBatchedOperations": props.enable_batched_operations,
        "status": props.status.value,
        "supportOrdering": props.support_ordering,
        "autoDeleteOnIdle": duration(props.auto_delete_on_idle),
        "enablePartitioning": extras.enable_partitioning,
        "enableExpress": extras.enable_express,
    }
    _optional(out, "userMetadata", props.user_metadata)
    return out


def subscription_properties(props: SubscriptionProperties) -> dict[str, Any]:
    out: dict[str, Any] = {
        "lockDuration": duration(props.lock_duration),
        "requiresSession": props.requires_session,
        "defaultMessageTimeToLive": duration(props.default_message_time_to_live),
        "deadLetteringOnFilterEvaluationExceptions": props.dead_lettering_on_filter_evaluation_exceptions,
        "deadLetteringOnMessageExpiration": props.dead_lettering_on_message_expiration,
        "duplicateDetectionHistoryTimeWindow": duration(limits.DUPLICATE_DETECTION_WINDOW_DEFAULT),
        "maxDeliveryCount": props.max_delivery_count,
        "status": props.status.value,
        "enableBatchedOperations": props.enable_batched_operations,
        "autoDeleteOnIdle": duration(props.auto_delete_on_idle),
        "isClientAffine": False,
    }
    _optional(out, "forwardTo", props.forward_to)
    _optional(out, "forwardDeadLetteredMessagesTo", props.forward_dead_lettered_messages_to)
    _optional(out, "userMetadata", props.user_metadata)
    return out


def _arm_text(value: PropertyValue) -> str | int | float | bool:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return format_duration(value)
    return value


def rule_properties(rule: RuleConfig) -> dict[str, Any]:
    out: dict[str, Any]
    if rule.filter_type == "Correlation":
        correlation = rule.correlation or CorrelationFilterConfig()
        filter_: dict[str, Any] = {}
        for key, field in CORRELATION_FIELDS:
            _optional(filter_, key, getattr(correlation, field))
        # ARM's correlation properties are strings: a dateTime or duration set over the ATOM API is shown
        # in its ISO 8601 form.
        filter_["properties"] = {key: _arm_text(value) for key, value in correlation.properties.items()}
        out = {"filterType": "CorrelationFilter", "correlationFilter": filter_}
    else:
        expression = {"True": "1=1", "False": "1=0"}.get(rule.filter_type, rule.sql_expression or "")
        out = {
            "filterType": "SqlFilter",
            "sqlFilter": {"sqlExpression": expression, "compatibilityLevel": COMPATIBILITY_LEVEL},
        }
    if rule.action_sql:
        out["action"] = {"sqlExpression": rule.action_sql, "compatibilityLevel": COMPATIBILITY_LEVEL}
    return out
