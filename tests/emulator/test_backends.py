"""The backend fixture's own plumbing: the azure backend's settings, and the ARM translation of rules."""

from __future__ import annotations

import pytest

from emulator.broker.properties import CorrelationFilterConfig, RuleConfig
from tests.emulator.backends import (
    CONNECTION_STRING_VAR,
    NAMESPACE_VAR,
    RESOURCE_GROUP_VAR,
    SUBSCRIPTION_ID_VAR,
    AzureSettings,
    arm_rule,
    namespace_of,
)

CONNECTION = "Endpoint=sb://contoso-bus.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=k"


def test_azure_settings_name_every_missing_variable() -> None:
    with pytest.raises(LookupError, match=f"{SUBSCRIPTION_ID_VAR}, {RESOURCE_GROUP_VAR}"):
        AzureSettings.from_environ({CONNECTION_STRING_VAR: CONNECTION})


def test_azure_settings_take_the_namespace_from_the_connection_string_unless_given() -> None:
    environ = {CONNECTION_STRING_VAR: CONNECTION, SUBSCRIPTION_ID_VAR: "sub", RESOURCE_GROUP_VAR: "rg"}
    assert AzureSettings.from_environ(environ).namespace == "contoso-bus"
    assert AzureSettings.from_environ({**environ, NAMESPACE_VAR: "other"}).namespace == "other"
    assert namespace_of("SharedAccessKey=k;endpoint = sb://x.servicebus.windows.net") == "x"


def test_rules_translate_to_the_arm_models() -> None:
    sql = arm_rule(RuleConfig("big", "Sql", sql_expression="amount > 1", action_sql="SET big = TRUE"))
    assert (sql.filter_type, sql.sql_filter.sql_expression) == ("SqlFilter", "amount > 1")
    assert sql.action is not None and sql.action.sql_expression == "SET big = TRUE"
    correlation = CorrelationFilterConfig(subject="OrderAccepted", properties={"priority": 2})
    rule = arm_rule(RuleConfig("c", "Correlation", correlation=correlation))
    assert rule.filter_type == "CorrelationFilter" and rule.action is None
    # On the wire (what ARM receives) the user property keeps its type; the model's getter would say "2".
    wire = rule.as_dict()["properties"]["correlationFilter"]
    assert wire == {"label": "OrderAccepted", "properties": {"priority": 2}}
