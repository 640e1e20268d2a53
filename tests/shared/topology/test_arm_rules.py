"""The one edge between Busbar's rule model and ``azure-mgmt-servicebus``: a rule read from ARM keeps the JSON
types of its correlation properties (an NServiceBus stamp is boolean ``true``, and a string ``"True"`` would
never match it), through public API only; a rule written and read back is the same rule.

Evidence: azure-mgmt-servicebus 10's models are typespec "hybrid" models (``_utils/model_base.py``): the
constructor takes the raw JSON (``mapping: raw JSON to initialize the model``), the typed attribute
``CorrelationFilter.properties`` is ``dict[str, str]`` and, once read, stores its values converted to strings
(``_MyMutableMapping.__getitem__``), while ``as_dict()`` ("a dict that can be turned into json") gives the
JSON values as long as nobody read the attribute first: so the edge reads ``as_dict()`` only.
"""

from __future__ import annotations

from typing import Any

from azure.mgmt.servicebus.models import Rule as ArmRule

from shared.contracts import ENCLOSED_MESSAGE_TYPES
from shared.topology.arm import arm_rule, filter_of, rule_of
from shared.topology.rule_filters import (
    FALSE_FILTER,
    TRUE_FILTER,
    Known,
    Match,
    Rule,
    correlation,
    evaluate,
    sql_filter,
    sql_like_filter,
)

OA = "Shipping.OrderAccepted"


def as_listed(name: str, properties: dict[str, Any]) -> ArmRule:
    """A rule as ``rules.list_by_subscriptions`` gives it: the model built from the service's JSON."""
    return ArmRule({"name": name, "properties": properties})


def test_correlation_properties_keep_their_json_types_as_read_from_arm() -> None:
    listed = as_listed(
        OA,
        {
            "filterType": "CorrelationFilter",
            "correlationFilter": {"properties": {OA: True, "tier": 3, "region": "emea"}, "label": "orders"},
        },
    )

    rule = rule_of(listed)

    assert rule == Rule(OA, correlation({OA: True, "tier": 3, "region": "emea"}, {"subject": "orders"}))
    stamped = Known({OA: True, "tier": 3, "region": "emea"}, {"subject": "orders"})
    assert evaluate(rule.filter, stamped) is Match.YES
    as_text = Known({OA: "True", "tier": 3, "region": "emea"}, {"subject": "orders"})
    assert evaluate(rule.filter, as_text) is Match.NO


def test_sql_rules_read_as_azure_stores_them_and_no_filter_is_the_catch_all() -> None:
    like = f"[{ENCLOSED_MESSAGE_TYPES}] LIKE '%{OA}%'"

    assert filter_of(as_listed("r", {"filterType": "SqlFilter", "sqlFilter": {"sqlExpression": like}})) == (
        sql_like_filter(OA)
    )
    assert filter_of(as_listed("t", {"filterType": "SqlFilter", "sqlFilter": {"sqlExpression": "1=1"}})) == (
        TRUE_FILTER
    )
    assert filter_of(as_listed("f", {"sqlFilter": {"sqlExpression": " 1 = 0 "}})) == FALSE_FILTER
    assert filter_of(as_listed("none", {})) == TRUE_FILTER


def test_a_rule_written_for_arm_reads_back_as_the_same_rule() -> None:
    written = [
        correlation({OA: True}),
        correlation({OA: True, "region": "emea"}, {"subject": "orders", "correlation_id": "c-1"}),
        sql_like_filter(OA),
        sql_filter("amount >= 1000"),
        TRUE_FILTER,
        FALSE_FILTER,
    ]

    # The body a create_or_update sends, as the service echoes it back.
    read = [filter_of(ArmRule(arm_rule(f).as_dict())) for f in written]

    assert read == written
    assert arm_rule(written[1]).as_dict()["properties"]["correlationFilter"] == {
        "properties": {OA: True, "region": "emea"},
        "correlationId": "c-1",
        "label": "orders",
    }
