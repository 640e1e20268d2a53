"""The one edge between Busbar's rule model (:mod:`shared.topology.rule_filters`) and
``azure-mgmt-servicebus``: an ARM ``Rule`` read into a :class:`Rule`, a :class:`RuleFilter` written as an
ARM ``Rule``. The planner and the router both read rules here.

A rule is read from its JSON form (``Model.as_dict()``, the SDK's public "dict that can be turned into json"),
not from the typed attributes: the SDK types correlation properties as strings and, once the attribute is
read, keeps them as strings (a boolean true becomes ``"True"``), while the broker compares the JSON value,
and NServiceBus stamps are boolean ``true``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from azure.mgmt.servicebus.models import CorrelationFilter, Ruleproperties, SqlFilter
from azure.mgmt.servicebus.models import Rule as ArmRule

from shared.topology.rule_filters import Rule, RuleFilter


def filter_of(rule: ArmRule) -> RuleFilter:
    """The :class:`RuleFilter` of an ARM ``Rule`` (SQL ``1=1``/``1=0`` are the true/false filters; no
    filter at all is ``1=1``, what Azure applies)."""
    body: Mapping[str, Any] = rule.as_dict().get("properties") or {}
    correlation = body.get("correlationFilter")
    if body.get("filterType") == "CorrelationFilter" and correlation is not None:
        return RuleFilter.from_dict({**correlation, "filterType": "CorrelationFilter"})
    return RuleFilter.from_dict({"sqlExpression": (body.get("sqlFilter") or {}).get("sqlExpression")})


def rule_of(rule: ArmRule) -> Rule:
    """The :class:`Rule` (name and filter) of an ARM ``Rule``."""
    return Rule(str(rule.as_dict().get("name") or ""), filter_of(rule))


def arm_rule(spec: RuleFilter) -> ArmRule:
    """The ARM ``Rule`` that creates a rule of filter ``spec``."""
    if spec.kind == "correlation":
        # The SDK types correlation properties as strings, but sends what it is given: NServiceBus matches
        # boolean True, so the values must stay booleans on the wire.
        properties = cast(dict[str, str], dict(spec.properties))
        field = dict(spec.system).get
        correlation = CorrelationFilter(
            properties=properties,
            correlation_id=field("correlation_id"),
            message_id=field("message_id"),
            to=field("to"),
            reply_to=field("reply_to"),
            label=field("subject"),
            session_id=field("session_id"),
            reply_to_session_id=field("reply_to_session_id"),
            content_type=field("content_type"),
        )
        return ArmRule(
            properties=Ruleproperties(filter_type="CorrelationFilter", correlation_filter=correlation)
        )
    return ArmRule(
        properties=Ruleproperties(
            filter_type="SqlFilter", sql_filter=SqlFilter(sql_expression=spec.expression)
        )
    )
