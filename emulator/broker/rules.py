"""Subscription rules and topic routing.

A rule is a filter (SQL, correlation, true, false) plus an optional SQL action. Publishing evaluates
every subscription's rules: matching rules without an action are OR-ed into one copy, and each matching
rule with an action yields its own copy with the action applied (as Azure does).

Correlation filters are indexed: each is registered under one of its equality conditions, so a publish
looks up only the rules that can possibly match its properties, and its cost follows the matches rather
than the number of subscriptions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from emulator.broker.properties import CorrelationFilterConfig, RuleConfig
from emulator.encoding.property_map import splice_application_properties
from shared.amqp.encoding.sections import (
    PROPERTIES,
    ParsedMessage,
    PropertiesField,
    section,
)
from shared.amqp.encoding.types import Symbol, Timestamp

if TYPE_CHECKING:
    from emulator.filters.sql import CompiledAction, CompiledFilter, MessageProperties

DEFAULT_RULE_NAME = "$Default"

# Correlation filter system fields → (properties section index, name as SQL filters know it).
CORRELATION_SYSTEM_FIELDS: tuple[tuple[str, int, str], ...] = (
    ("correlation_id", PropertiesField.CORRELATION_ID, "CorrelationId"),
    ("message_id", PropertiesField.MESSAGE_ID, "MessageId"),
    ("to", PropertiesField.TO, "To"),
    ("reply_to", PropertiesField.REPLY_TO, "ReplyTo"),
    ("subject", PropertiesField.SUBJECT, "Label"),
    ("session_id", PropertiesField.GROUP_ID, "SessionId"),
    ("reply_to_session_id", PropertiesField.REPLY_TO_GROUP_ID, "ReplyToSessionId"),
    ("content_type", PropertiesField.CONTENT_TYPE, "ContentType"),
)
_SETTABLE_SYSTEM = {name: index for _, index, name in CORRELATION_SYSTEM_FIELDS}


def _typed_key(value: Any) -> tuple[str, Any]:
    # Python's True == 1 would merge bool and int keys; correlation equality is typed.
    return (type(value).__name__ if isinstance(value, bool) else "v", value)


@dataclass(slots=True, eq=False)
class Rule:
    """One subscription rule, compiled."""

    config: RuleConfig
    sql: CompiledFilter | None = None
    action: CompiledAction | None = None
    constant: bool | None = None  # True / False filters need no evaluation
    conditions: tuple[tuple[str, str, tuple[str, Any]], ...] = ()  # (scope, name, typed value)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def is_correlation(self) -> bool:
        return self.config.filter_type == "Correlation"

    def matches(self, facts: MessageFacts) -> bool:
        """Evaluate this rule's filter alone (the index does it faster for a whole topic)."""
        if self.is_correlation:
            keys = set(facts.condition_keys())
            return all(condition in keys for condition in self.conditions)
        if self.sql is None:
            return bool(self.constant)
        return bool(self.sql.matches(facts.sql_view()))

    @property
    def is_sql(self) -> bool:
        return self.sql is not None


def compile_rule(config: RuleConfig) -> Rule:
    """Compile a rule's filter and action (raises SqlSyntaxError for a bad expression)."""
    rule = Rule(config)
    if config.filter_type == "Sql":
        from emulator.filters.sql import compile_filter

        rule.sql = compile_filter(config.sql_expression or "", config.sql_parameters)
    elif config.filter_type == "True":
        rule.constant = True
    elif config.filter_type == "False":
        rule.constant = False
    else:
        rule.conditions = correlation_conditions(config.correlation or CorrelationFilterConfig())
    if config.action_sql:
        from emulator.filters.sql import compile_action

        rule.action = compile_action(config.action_sql, config.action_parameters)
    return rule


def default_rule() -> Rule:
    return compile_rule(RuleConfig(name=DEFAULT_RULE_NAME, filter_type="True"))


def correlation_conditions(
    correlation: CorrelationFilterConfig,
) -> tuple[tuple[str, str, tuple[str, Any]], ...]:
    conditions: list[tuple[str, str, tuple[str, Any]]] = []
    for attr, _index, name in CORRELATION_SYSTEM_FIELDS:
        value = getattr(correlation, attr)
        if value is not None:
            conditions.append(("sys", name, _typed_key(str(value))))
    for key, value in correlation.properties.items():
        if isinstance(value, datetime) and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)  # message date/times arrive as UTC instants
        conditions.append(("user", key, _typed_key(value)))
    return tuple(conditions)


@dataclass(slots=True)
class MessageFacts:
    """The routable view of one message: system fields and application properties."""

    parsed: ParsedMessage
    system: dict[str, Any] = field(default_factory=dict)
    user: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, parsed: ParsedMessage, size: int) -> MessageFacts:
        system: dict[str, Any] = {}
        for _attr, index, name in CORRELATION_SYSTEM_FIELDS:
            value = parsed.prop(index)
            if value is not None:
                system[name] = value if isinstance(value, str) else str(value)
        ttl = parsed.header_field(2)
        if ttl:
            system["TimeToLive"] = timedelta(milliseconds=int(ttl))
        system["Size"] = size
        system["DeliveryCount"] = 0
        system["EnqueuedTimeUtc"] = datetime.now(UTC)
        user = {str(k): _sql_value(v) for k, v in (parsed.application_properties or {}).items()}
        return cls(parsed, system, user)

    def condition_keys(self) -> Iterable[tuple[str, str, tuple[str, Any]]]:
        for name, value in self.system.items():
            if isinstance(value, str):
                yield ("sys", name, _typed_key(value))
        for name, value in self.user.items():
            try:
                hash(value)
            except TypeError:
                continue
            yield ("user", name, _typed_key(value))

    def sql_view(self) -> MessageProperties:
        from emulator.filters.sql import MessageProperties

        return MessageProperties(system=dict(self.system), user=dict(self.user))


def _sql_value(value: Any) -> Any:
    # AMQP timestamps decode as an int subclass; filters compare them as date/times.
    if isinstance(value, Timestamp):
        return datetime.fromtimestamp(int(value) / 1000, UTC)
    return value


def apply_action(facts: MessageFacts, rule: Rule) -> ParsedMessage:
    """A copy of the message with ``rule``'s action applied and the rule name stamped on it."""
    assert rule.action is not None
    changed = rule.action.apply(facts.sql_view())
    user = dict(changed.user)
    user["RuleName"] = rule.name
    return rewrite(facts.parsed, changed.system, user, facts.user)


def rewrite(
    parsed: ParsedMessage, system: dict[str, Any], user: dict[str, Any], seen: dict[str, Any]
) -> ParsedMessage:
    """Re-encode the properties section from edited values, and splice the application properties that
    changed from ``seen`` (the values the action saw) into their section: a property the action left
    alone keeps its AMQP encoding, as on Azure."""
    original = list(parsed.properties or [])
    props = original + [None] * (13 - len(original))
    for name, index in _SETTABLE_SYSTEM.items():
        value = system.get(name)
        if value is None and name == "Label":
            value = system.get("Subject")
        before = props[index]
        if value is None:
            props[index] = None
        elif before is None or str(before) != str(value):
            # Changed by the action: content-type is a symbol on the wire, the others strings.
            props[index] = Symbol.as_sent(str(value)) if index == PropertiesField.CONTENT_TYPE else value
    # Identity, not equality: an untouched value is the very object the action was given. A property the
    # action REMOVEd or SET to NULL goes; one that was null and left alone stays.
    changed = {k: v for k, v in user.items() if k not in seen or v is not seen[k]}
    updates = {k: v for k, v in changed.items() if v is not None}
    clean_user = {k: v for k, v in user.items() if k not in changed or v is not None}
    removals = {k for k in (parsed.application_properties or {}) if str(k) not in clean_user}
    return ParsedMessage(
        header=parsed.header,
        delivery_annotations=dict(parsed.delivery_annotations),
        message_annotations=dict(parsed.message_annotations),
        properties=props,
        properties_raw=section(PROPERTIES, props),
        application_properties=clean_user,
        application_properties_raw=splice_application_properties(
            parsed.application_properties_raw, updates, removals
        ),
        body_raw=parsed.body_raw,
        footer_raw=parsed.footer_raw,
    )


class RuleIndex:
    """All rules of one topic, indexed for routing."""

    def __init__(self) -> None:
        # condition key → [(subscription key, rule)] for correlation rules, keyed by their first condition.
        self._correlation: dict[tuple[str, str, tuple[str, Any]], list[tuple[str, Rule]]] = defaultdict(list)
        self._evaluated: list[tuple[str, Rule]] = []  # SQL, true and false rules

    def add(self, subscription: str, rule: Rule) -> None:
        if rule.is_correlation and rule.conditions:
            self._correlation[rule.conditions[0]].append((subscription, rule))
        else:
            self._evaluated.append((subscription, rule))

    def remove(self, subscription: str, rule: Rule) -> None:
        if rule.is_correlation and rule.conditions:
            bucket = self._correlation.get(rule.conditions[0], [])
            bucket[:] = [(s, r) for s, r in bucket if r is not rule]
        else:
            self._evaluated = [(s, r) for s, r in self._evaluated if r is not rule]

    def remove_subscription(self, subscription: str) -> None:
        for bucket in self._correlation.values():
            bucket[:] = [(s, r) for s, r in bucket if s != subscription]
        self._evaluated = [(s, r) for s, r in self._evaluated if s != subscription]

    def matches(self, facts: MessageFacts) -> dict[str, list[Rule]]:
        """Matching rules per subscription key.

        Raises FilterEvaluationError (with the subscription key in ``.subscription``) when a SQL filter
        cannot be evaluated for this message."""
        found: dict[str, list[Rule]] = defaultdict(list)
        if self._correlation:
            keys = set(facts.condition_keys())
            for key in keys:
                for subscription, rule in self._correlation.get(key, ()):
                    if all(condition in keys for condition in rule.conditions):
                        found[subscription].append(rule)
        if self._evaluated:
            view = facts.sql_view() if any(r.is_sql for _, r in self._evaluated) else None
            for subscription, rule in self._evaluated:
                sql = rule.sql
                if sql is None:
                    if rule.constant:
                        found[subscription].append(rule)
                    continue
                assert view is not None
                try:
                    if sql.matches(view):
                        found[subscription].append(rule)
                except Exception as exc:
                    exc.subscription = subscription  # type: ignore[attr-defined]
                    raise
        return found


def copies_for(facts: MessageFacts, rules: list[Rule]) -> list[ParsedMessage]:
    """The copies one subscription receives for its matching rules."""
    copies: list[ParsedMessage] = []
    if any(rule.action is None for rule in rules):
        copies.append(facts.parsed)
    for rule in rules:
        if rule.action is not None:
            copies.append(apply_action(facts, rule))
    return copies
