"""Conversions between Busbar's rule filters and ``azure-mgmt-servicebus`` models."""

from __future__ import annotations

from typing import Any, cast

from azure.mgmt.servicebus.models import CorrelationFilter, Rule, Ruleproperties, SqlFilter

from shared.topology.desired import RuleFilter, sql_filter


def correlation_properties(correlation_filter: Any) -> dict[str, Any]:
    """The application properties of an ARM ``CorrelationFilter``, with their JSON types.

    The SDK model types them as strings and turns a boolean true into ``"True"`` when read; its raw data
    keeps the JSON value, which is what the broker compares (a string ``"True"`` would not match
    NServiceBus's boolean stamps)."""
    raw = getattr(correlation_filter, "_data", {}).get("properties")
    return raw if isinstance(raw, dict) else dict(correlation_filter.properties or {})


def filter_of(rule: Any) -> RuleFilter:
    """The :class:`RuleFilter` of an ARM ``Rule`` (SQL ``1=1``/``1=0`` are the true/false filters)."""
    if rule.filter_type == "CorrelationFilter" and rule.correlation_filter is not None:
        cf = rule.correlation_filter
        props: list[tuple[str, bool | str | int | float]] = sorted(correlation_properties(cf).items())
        for key in (
            "correlation_id", "message_id", "to", "reply_to", "label", "session_id", "reply_to_session_id",
            "content_type",
        ):  # fmt: skip
            value = getattr(cf, key, None)
            if value:
                props.append((f"${key}", value))  # never equal to what Busbar wants: reported as a difference
        return RuleFilter("correlation", properties=tuple(props))
    return sql_filter(rule.sql_filter.sql_expression if rule.sql_filter is not None else None)


def arm_rule(spec: RuleFilter) -> Rule:
    if spec.kind == "correlation":
        # The SDK types correlation properties as strings, but sends what it is given: NServiceBus matches
        # boolean True, so the values must stay booleans on the wire.
        properties = cast(dict[str, str], dict(spec.properties))
        return Rule(
            properties=Ruleproperties(
                filter_type="CorrelationFilter", correlation_filter=CorrelationFilter(properties=properties)
            )
        )
    return Rule(
        properties=Ruleproperties(
            filter_type="SqlFilter", sql_filter=SqlFilter(sql_expression=spec.expression)
        )
    )
