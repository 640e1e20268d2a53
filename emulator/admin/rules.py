"""Rule descriptions of the ATOM management API <-> the broker's :class:`RuleConfig`.

A filter is ``<Filter i:type="SqlFilter|TrueFilter|FalseFilter|CorrelationFilter">`` and an action
``<Action i:type="SqlRuleAction|EmptyRuleAction">``; correlation user properties travel as
``KeyValueOfstringanyType`` pairs whose ``Value`` carries an ``xsi:type`` (``d6p1:int``, ``d6p1:string``,
``d6p1:dateTime``, ``d6p1:duration``, ...), which decides the property's type, as on Azure. SQL filter and
action ``<Parameters>`` (values of ``@name`` placeholders) are the same pairs; they are stored, reported
back with their types and bound when the broker compiles the rule.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from xml.sax.saxutils import escape

from emulator.admin import atom
from emulator.admin.descriptions import InvalidDescription
from emulator.arm.models import COMPATIBILITY_LEVEL, CORRELATION_FIELDS
from emulator.broker.properties import CorrelationFilterConfig, FrozenProperties, PropertyValue, RuleConfig
from emulator.durations import format_duration, parse_duration

_XSD_TYPES: dict[type, str] = {bool: "boolean", int: "int", float: "double", str: "string"}
_CORRELATION_XML = {key.lower(): field for key, field in CORRELATION_FIELDS}
_CORRELATION_XML["label"] = "subject"


def _child(parent: ET.Element, name: str) -> ET.Element | None:
    return next((c for c in parent if atom.local(c.tag).lower() == name.lower()), None)


def _text(parent: ET.Element, name: str) -> str | None:
    child = _child(parent, name)
    if child is None or child.text is None:
        return None
    return child.text


def _value(element: ET.Element, key: str) -> PropertyValue:
    kind = (atom.xsi_type(element) or "string").lower()
    text = element.text or ""
    try:
        if kind in ("int", "long", "short", "byte", "unsignedint", "unsignedshort", "unsignedbyte"):
            return int(text)
        if kind in ("double", "float", "decimal"):
            return float(text)
        if kind == "boolean":
            if text.strip().lower() not in ("true", "false"):
                raise ValueError(text)
            return text.strip().lower() == "true"
        if kind == "datetime":
            return datetime.fromisoformat(text.strip())
        if kind == "duration":
            duration = parse_duration(text.strip())
            if duration is None:  # TimeSpan.MaxValue: a limit, not a value a message can carry
                raise ValueError(text)
            return duration
    except ValueError:
        raise InvalidDescription(f"the value {text!r} of '{key}' is not a valid {kind}.") from None
    if kind != "string":
        raise InvalidDescription(
            f"'{key}' has type '{kind}'; the supported types are string, int, long, double, boolean, "
            "dateTime and duration."
        )
    return text


def _pairs(parent: ET.Element | None, where: str) -> dict[str, PropertyValue]:
    out: dict[str, PropertyValue] = {}
    if parent is None:
        return out
    for pair in parent:
        key = _text(pair, "Key")
        value = _child(pair, "Value")
        if key is None or value is None:
            raise InvalidDescription(f"every entry of <{where}> needs a <Key> and a <Value>.")
        out[key] = _value(value, key)
    return out


def _parameters(element: ET.Element) -> FrozenProperties:
    return FrozenProperties(_pairs(_child(element, "Parameters"), "Parameters"))


def rule_from_xml(name: str, description: ET.Element) -> RuleConfig:
    """The rule a ``RuleDescription`` asks for (no filter: the true filter, as Azure defaults it)."""
    action = RuleConfig(name=name, filter_type="True")
    element = _child(description, "Action")
    if element is not None and (atom.xsi_type(element) or "").lower() == "sqlruleaction":
        action_sql = _text(element, "SqlExpression") or None
        action = replace(action, action_sql=action_sql, action_parameters=_parameters(element))
    filter_ = _child(description, "Filter")
    kind = "truefilter" if filter_ is None else (atom.xsi_type(filter_) or "").lower()
    if filter_ is None or kind == "truefilter":
        return action
    if kind == "falsefilter":
        return replace(action, filter_type="False")
    if kind == "sqlfilter":
        expression = _text(filter_, "SqlExpression")
        if expression is None:
            raise InvalidDescription("a SqlFilter needs a <SqlExpression>.")
        return replace(
            action, filter_type="Sql", sql_expression=expression, sql_parameters=_parameters(filter_)
        )
    if kind == "correlationfilter":
        system: dict[str, str | None] = {field: None for field in _CORRELATION_XML.values()}
        for child in filter_:
            field = _CORRELATION_XML.get(atom.local(child.tag).lower())
            if field is not None:
                system[field] = child.text
        properties = _pairs(_child(filter_, "Properties"), "Properties")
        correlation = CorrelationFilterConfig(**system, properties=FrozenProperties(properties))
        return replace(action, filter_type="Correlation", correlation=correlation)
    raise InvalidDescription(
        f"the filter type {atom.xsi_type(filter_)!r} is not supported "
        "(SqlFilter, TrueFilter, FalseFilter, CorrelationFilter)."
    )


# ------------------------------------------------------------------------------------------ rendering


def _typed_text(value: PropertyValue) -> tuple[str, str]:
    """The ``xsi:type`` and text of a value, as the SDK's ``serialize_value_type`` writes them."""
    if isinstance(value, datetime):
        return "dateTime", value.isoformat()
    if isinstance(value, timedelta):
        return "duration", format_duration(value)
    kind = _XSD_TYPES[type(value)]
    if isinstance(value, int) and kind == "int" and not -(2**31) <= value < 2**31:
        kind = "long"
    return kind, atom.text_of(value)


def _properties_xml(properties: Mapping[str, PropertyValue]) -> str:
    parts = []
    for key, value in properties.items():
        kind, text = _typed_text(value)
        parts.append(
            "<KeyValueOfstringanyType>"
            f"{atom.elements([('Key', key)])}"
            f'<Value i:type="d6p1:{kind}" xmlns:d6p1="{atom.XSD_NS}">{escape(text)}</Value>'
            "</KeyValueOfstringanyType>"
        )
    return "".join(parts)


def _sql_inner(expression: str, parameters: Mapping[str, PropertyValue]) -> str:
    inner = atom.elements([("SqlExpression", expression), ("CompatibilityLevel", COMPATIBILITY_LEVEL)])
    if parameters:
        inner += f"<Parameters>{_properties_xml(parameters)}</Parameters>"
    return inner


def _sql(kind: str, expression: str, parameters: Mapping[str, PropertyValue] | None = None) -> str:
    return f'<Filter i:type="{kind}">{_sql_inner(expression, parameters or {})}</Filter>'


def rule_xml(rule: RuleConfig, created_at: datetime) -> str:
    if rule.filter_type == "True":
        filter_ = _sql("TrueFilter", "1=1")
    elif rule.filter_type == "False":
        filter_ = _sql("FalseFilter", "1=0")
    elif rule.filter_type == "Sql":
        filter_ = _sql("SqlFilter", rule.sql_expression or "", rule.sql_parameters)
    else:
        correlation = rule.correlation or CorrelationFilterConfig()
        values = [
            (key[0].upper() + key[1:], getattr(correlation, field)) for key, field in CORRELATION_FIELDS
        ]
        inner = atom.elements(values) + f"<Properties>{_properties_xml(correlation.properties)}</Properties>"
        filter_ = f'<Filter i:type="CorrelationFilter">{inner}</Filter>'
    if rule.action_sql:
        inner = _sql_inner(rule.action_sql, rule.action_parameters)
        action = f'<Action i:type="SqlRuleAction">{inner}</Action>'
    else:
        action = '<Action i:type="EmptyRuleAction"/>'
    tail = atom.elements([("CreatedAt", atom.timestamp(created_at)), ("Name", rule.name)])
    return atom.description("RuleDescription", filter_ + action + tail)
