"""``python -m shared.topology``: validate, plan and apply, with errors as JSON and exit codes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from emulator.testing import EmulatorHandle
from shared.management import ManagementClient
from shared.topology.cli import run


@pytest.fixture(autouse=True)
def _outside_the_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI reads ./local.settings.json (and ./.data): the checkout's are a developer's, not the test's."""
    monkeypatch.chdir(tmp_path)


def _env(emulator: EmulatorHandle) -> dict[str, str]:
    return {
        "BUSBAR_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000000",
        "BUSBAR_RESOURCE_GROUP": "busbar-tests",
        "BUSBAR_NAMESPACE": "sbemulatorns",
        "BUSBAR_MANAGEMENT_ENDPOINT": f"http://127.0.0.1:{emulator.management_port}",
        "BUSBAR_MANAGEMENT_TOKEN": emulator.emulator.management_token or "",
    }


def _run(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, list[dict[str, object]]]:
    out = io.StringIO()
    code = run(argv, out, env)
    decoder, text, documents, position = json.JSONDecoder(), out.getvalue(), [], 0
    while position < len(text.rstrip()):
        document, position = decoder.raw_decode(text, position)
        documents.append(document)
        while position < len(text) and text[position].isspace():
            position += 1
    return code, documents


def test_validate_reports_every_violation_and_exits_2(tmp_path: Path) -> None:
    options = tmp_path / "options.json"
    options.write_text(json.dumps({"FallbackTopic": {"TopicName": "bad?", "RoutingMode": "NotMultiplexed"}}))
    code, (document,) = _run(["validate", "--options", str(options)])
    assert code == 2
    assert document == {
        "error": "invalid",
        "errors": [
            "FallbackTopic.TopicName: The following topic name(s) do not comply with the Azure Service Bus "
            "topic "
            "limits: bad?",
            "FallbackTopic.RoutingMode: 'RoutingMode' must be either 'CorrelationFilter' or 'SqlLikeFilter'.",
        ],
    }


def test_plan_then_apply_then_plan_again(
    tmp_path: Path, emulator: EmulatorHandle, management: ManagementClient, ns: str
) -> None:
    options = tmp_path / "options.json"
    options.write_text(json.dumps({"FallbackTopic": {"TopicName": "Shared", "RoutingMode": "SqlLikeFilter"}}))
    args = [
        "--options",
        str(options),
        "--hierarchy",
        ns,
        "--endpoint",
        "billing",
        "--events",
        "Shipping.OrderAccepted",
    ]
    code, (planned,) = _run(["plan", *args], _env(emulator))
    assert code == 0 and planned["plan"]["summary"]["create"] == 5  # type: ignore[index]
    code, (shown, applied) = _run(["apply", *args], _env(emulator))
    assert code == 0 and shown == planned
    assert f"{ns}/Shared/Subscriptions/billing/Rules/Shipping.OrderAccepted" in applied["applied"]["created"]  # type: ignore[index]
    code, (again,) = _run(["plan", *args], _env(emulator))
    assert again["plan"]["summary"] == {"create": 0, "unchanged": 5, "delete": 0, "would-update": 0}  # type: ignore[index]
    rule = management.rules.get(*management.scope, f"{ns}/Shared", "billing", "Shipping.OrderAccepted")
    assert (
        rule.sql_filter.sql_expression == "[NServiceBus.EnclosedMessageTypes] LIKE '%Shipping.OrderAccepted%'"
    )


def test_object_events_and_missing_management_settings(tmp_path: Path, ns: str) -> None:
    event = json.dumps({"type": "Ev.A", "topic": "T", "routingMode": "CorrelationFilter"})
    code, (document,) = _run(["validate", "--hierarchy", ns, "--endpoint", "billing", "--events", event], {})
    assert code == 0
    assert document["desired"]["subscriptions"][0]["rules"][1]["properties"] == {"Ev.A": True}  # type: ignore[index]
    code, (refused,) = _run(["plan", "--endpoint", "billing", "--events", "Ev.A"], {})
    assert code == 2 and "missing app setting(s)" in refused["errors"][0]  # type: ignore[index]


def test_validate_without_the_false_default_rule_shows_only_the_event_rules(tmp_path: Path) -> None:
    options = tmp_path / "options.json"
    bundle = {
        "$type": "migration-topology-options",
        "TopicToPublishTo": "bundle-1",
        "TopicToSubscribeOn": "bundle-1",
        "EventsToMigrateMap": ["Ev.A"],
    }
    options.write_text(json.dumps(bundle))
    argv = ["validate", "--options", str(options), "--endpoint", "billing", "--events", "Ev.A"]
    _, (nservicebus,) = _run(argv)
    _, (lean,) = _run([*argv, "--no-false-default-rule"])

    def rule_names(document: dict[str, object]) -> list[str]:
        desired = document["desired"]
        assert isinstance(desired, dict)
        return [rule["name"] for rule in desired["subscriptions"][0]["rules"]]

    assert rule_names(nservicebus) == ["$default", "Ev.A"]
    assert rule_names(lean) == ["Ev.A"]


def test_ordered_plan_shows_the_session_queue_and_the_hold_queue_and_apply_creates_them(
    emulator: EmulatorHandle, management: ManagementClient, ns: str
) -> None:
    args = ["--hierarchy", ns, "--endpoint", "crm", "--events", "Tenant.CustomerUpdated", "--ordered"]

    code, (planned,) = _run(["plan", *args], _env(emulator))

    assert code == 0
    queues = [
        (i["action"], i["path"], i["details"]["requiresSession"])
        for i in planned["plan"]["items"]  # type: ignore[index]
        if i["kind"] == "queue"
    ]
    assert queues == [("create", f"{ns}/crm", True), ("create", f"{ns}/crm.held", True)]
    code, _ = _run(["apply", *args], _env(emulator))
    assert code == 0
    assert management.queues.get(*management.scope, f"{ns}/crm").requires_session is True
    assert management.queues.get(*management.scope, f"{ns}/crm.held").requires_duplicate_detection is True


def test_ordered_apply_on_an_existing_queue_without_sessions_exits_2_naming_it_and_creates_nothing(
    emulator: EmulatorHandle, management: ManagementClient, ns: str
) -> None:
    args = ["--hierarchy", ns, "--endpoint", "crm", "--events", "Tenant.CustomerUpdated"]
    assert _run(["apply", *args], _env(emulator))[0] == 0  # unordered first: a plain queue

    for command in ("plan", "apply"):
        code, (document,) = _run([command, *args, "--ordered"], _env(emulator))
        assert code == 2
        assert document["error"] == "needs-new-queue"
        errors = document["errors"]
        assert isinstance(errors, list) and len(errors) == 1
        reason = str(errors[0])
        assert f"queue {ns}/crm (the endpoint's input queue) exists" in reason
        assert "needs a new queue" in reason
        refused = [i for i in document["plan"]["items"] if i["action"] == "refused"]  # type: ignore[index]
        assert [i["path"] for i in refused] == [f"{ns}/crm"]
    names = [q.name for q in management.queues.list_by_namespace(*management.scope)]
    assert f"{ns}/crm.held" not in names
    assert management.queues.get(*management.scope, f"{ns}/crm").requires_session is False


LOYALTY_CONTRACTS = "tests.shared.topology.loyalty_contracts:REGISTRY"


@pytest.mark.parametrize("command", ["plan", "apply"])
def test_ordered_subscription_to_a_contract_without_an_ordering_key_exits_2_naming_it_and_creates_nothing(
    emulator: EmulatorHandle, management: ManagementClient, ns: str, command: str
) -> None:
    events = ["Loyalty.PointsEarned", "Loyalty.IAuditable"]  # an interface with an unkeyed implementer
    args = ["--hierarchy", ns, "--endpoint", "loyalty", "--ordered", "--contracts", LOYALTY_CONTRACTS]

    code, (document,) = _run([command, *args, "--events", *events], _env(emulator))

    assert code == 2
    assert document["error"] == "unkeyed-contract"
    assert document["contracts"] == ["Loyalty.IAuditable"]
    errors = document["errors"]
    assert isinstance(errors, list) and len(errors) == 1
    error = str(errors[0])
    assert "endpoint loyalty is ordered, but it would subscribe to Loyalty.IAuditable" in error
    assert "Loyalty.CampaignStarted have no ordering key" in error
    assert [q.name for q in management.queues.list_by_namespace(*management.scope) if ns in q.name] == []
    assert [t.name for t in management.topics.list_by_namespace(*management.scope) if ns in t.name] == []


def test_ordered_apply_of_keyed_contracts_from_the_named_registry_creates_the_session_queue(
    emulator: EmulatorHandle, management: ManagementClient, ns: str
) -> None:
    args = ["--hierarchy", ns, "--endpoint", "loyalty", "--ordered", "--contracts", LOYALTY_CONTRACTS]

    code, _ = _run(["apply", *args, "--events", "Loyalty.IPointsEvent"], _env(emulator))

    assert code == 0
    assert management.queues.get(*management.scope, f"{ns}/loyalty").requires_session is True


def test_ordered_plan_of_an_event_the_default_registry_does_not_know_exits_2(
    emulator: EmulatorHandle, ns: str
) -> None:
    # The default registry is the app's, whatever endpoint modules it has: no contract is named like this.
    unknown = f"Nowhere.Unknown{ns.replace('-', '')}"
    args = ["--hierarchy", ns, "--endpoint", "loyalty", "--ordered", "--events", unknown]

    code, (document,) = _run(["plan", *args], _env(emulator))

    assert code == 2
    assert document["contracts"] == [unknown]
    assert "is not a contract the app knows" in str(document["errors"])


def test_contracts_that_cannot_be_loaded_exit_2_naming_the_argument(
    emulator: EmulatorHandle, ns: str
) -> None:
    args = ["--hierarchy", ns, "--endpoint", "loyalty", "--ordered", "--events", "Tenant.CustomerUpdated"]

    code, (document,) = _run(["plan", *args, "--contracts", "tests.nowhere:REGISTRY"], _env(emulator))

    assert code == 2
    assert document["error"] == "invalid"
    assert "--contracts tests.nowhere:REGISTRY: cannot load it" in str(document["errors"])
