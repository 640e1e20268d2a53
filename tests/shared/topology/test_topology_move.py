"""Moving an endpoint to a new queue (``--move-from``, ``DesiredState.moved_from``): its subscriptions keep
their names and are redirected in place, one ``forwardTo`` update each (an ``update`` item in the plan), after
the new queues exist; nothing else of them changes, and nothing is created beside them. Without a declared
move a subscription forwarding elsewhere stays as it is (test_topology_provisioner.py)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from emulator.testing import EmulatorHandle
from shared.management import ManagementClient
from shared.topology import (
    FallbackTopicOptions,
    Provisioner,
    TopicRoutingMode,
    TopologyOptions,
    TopologyValidationError,
    desired_state,
)
from shared.topology.cli import run

UPDATED = "Tenant.CustomerUpdated"


def _options(ns: str, mapping: dict[str, str] | None = None) -> TopologyOptions:
    return TopologyOptions(
        hierarchy_namespace=ns,
        fallback_topic=FallbackTopicOptions(
            topic_name="fallback", routing_mode=TopicRoutingMode.CorrelationFilter
        ),
        queue_name_to_subscription_name_map=mapping or {},
    )


def test_a_declared_move_redirects_the_existing_subscription_in_place_after_creating_the_new_queues(
    management: ManagementClient, ns: str
) -> None:
    provisioner = Provisioner(management)
    options = _options(ns, {"loyalty-ordered": "loyalty"})
    provisioner.apply(provisioner.plan(desired_state(options, "loyalty", [UPDATED])))
    before = management.subscriptions.get(*management.scope, f"{ns}/fallback", "loyalty")
    rules_before = sorted(
        r.name for r in management.rules.list_by_subscriptions(*management.scope, f"{ns}/fallback", "loyalty")
    )

    desired = desired_state(options, "loyalty-ordered", [UPDATED], ordered=True, moved_from="loyalty")
    plan = provisioner.plan(desired)

    (update,) = plan.of("update")
    assert update.path == f"{ns}/fallback/Subscriptions/loyalty"
    assert update.details == {"forwardTo": {"existing": f"{ns}/loyalty", "desired": f"{ns}/loyalty-ordered"}}
    assert [i.path for i in plan.of("create")] == [f"{ns}/loyalty-ordered", f"{ns}/loyalty-ordered.held"]
    assert plan.of("would-update") == [] and plan.has_changes
    assert plan.summary()["update"] == 1

    result = provisioner.apply(plan)

    assert result.updated == [update.path]
    assert result.created == [f"{ns}/loyalty-ordered", f"{ns}/loyalty-ordered.held"]
    after = management.subscriptions.get(*management.scope, f"{ns}/fallback", "loyalty")
    assert after.forward_to == f"{ns}/loyalty-ordered"
    assert after.user_metadata == f"{ns}/loyalty-ordered"  # it named the old queue, as Busbar writes it
    assert after.created_at == before.created_at  # the same subscription, not a new one
    rules_after = management.rules.list_by_subscriptions(*management.scope, f"{ns}/fallback", "loyalty")
    assert sorted(r.name for r in rules_after) == rules_before
    subscriptions = management.subscriptions.list_by_topic(*management.scope, f"{ns}/fallback")
    assert [s.name for s in subscriptions] == ["loyalty"]
    again = provisioner.plan(desired)
    assert again.of("update") == [] and not again.has_changes


def test_without_a_declared_move_the_new_queue_is_not_given_the_old_queues_subscription(
    management: ManagementClient, ns: str
) -> None:
    provisioner = Provisioner(management)
    options = _options(ns, {"loyalty-ordered": "loyalty"})
    provisioner.apply(provisioner.plan(desired_state(options, "loyalty", [UPDATED])))

    plan = provisioner.plan(desired_state(options, "loyalty-ordered", [UPDATED], ordered=True))

    assert plan.of("update") == []
    (left,) = plan.of("would-update")
    assert left.path == f"{ns}/fallback/Subscriptions/loyalty"
    provisioner.apply(plan)
    sub = management.subscriptions.get(*management.scope, f"{ns}/fallback", "loyalty")
    assert sub.forward_to == f"{ns}/loyalty"


def test_a_move_whose_subscription_names_differ_is_refused_with_the_map_to_add(ns: str) -> None:
    with pytest.raises(TopologyValidationError) as raised:
        desired_state(_options(ns), "loyalty-ordered", [UPDATED], ordered=True, moved_from="loyalty")

    (error,) = raised.value.errors
    assert error.startswith(f"--move-from loyalty: {ns}/loyalty's subscriptions are named loyalty")
    assert '"QueueNameToSubscriptionNameMap": {"loyalty-ordered": "loyalty"}' in error


def test_a_move_to_the_same_queue_is_refused(ns: str) -> None:
    with pytest.raises(TopologyValidationError, match="move to a new queue"):
        desired_state(_options(ns), "loyalty", [UPDATED], ordered=True, moved_from="loyalty")


def _cli(emulator: EmulatorHandle, argv: list[str]) -> tuple[int, list[dict[str, Any]]]:
    env = {
        "BUSBAR_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000000",
        "BUSBAR_RESOURCE_GROUP": "busbar-tests",
        "BUSBAR_NAMESPACE": "sbemulatorns",
        "BUSBAR_MANAGEMENT_ENDPOINT": f"http://127.0.0.1:{emulator.management_port}",
        "BUSBAR_MANAGEMENT_TOKEN": emulator.emulator.management_token or "",
    }
    out = io.StringIO()
    code = run(argv, out, env)
    decoder, text, documents, position = json.JSONDecoder(), out.getvalue(), [], 0
    while position < len(text.rstrip()):
        document, position = decoder.raw_decode(text, position)
        documents.append(document)
        while position < len(text) and text[position].isspace():
            position += 1
    return code, documents


@pytest.fixture
def options_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Options with the fallback topic and the move's subscription-name map; the CLI runs in ``tmp_path``."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "topology.json"
    path.write_text(
        json.dumps(
            {
                "FallbackTopic": {"TopicName": "fallback", "RoutingMode": "CorrelationFilter"},
                "QueueNameToSubscriptionNameMap": {"loyalty-ordered": "loyalty"},
            }
        )
    )
    return str(path)


def test_a_move_that_leaves_a_subscription_forwarding_to_the_old_queue_exits_2_and_changes_nothing(
    emulator: EmulatorHandle, management: ManagementClient, ns: str, options_file: str
) -> None:
    on_topic = json.dumps({"type": "Shipping.OrderAccepted", "topic": "orders"})
    base = ["--options", options_file, "--hierarchy", ns]
    assert _cli(emulator, ["apply", *base, "--endpoint", "loyalty", "--events", UPDATED, on_topic])[0] == 0
    move = [*base, "--ordered", "--move-from", "loyalty", "--endpoint", "loyalty-ordered"]

    for command in ("plan", "apply"):
        code, (document,) = _cli(emulator, [command, *move, "--events", UPDATED])
        assert code == 2
        assert document["error"] == "incomplete-move"
        (error,) = document["errors"]
        assert error == (
            f"the move off {ns}/loyalty is incomplete: {ns}/orders/loyalty forwards to {ns}/loyalty, and the "
            "move does not take it: list its events too (or unsubscribe it first)"
        )
    subscription = management.subscriptions.get(*management.scope, f"{ns}/fallback", "loyalty")
    assert subscription.forward_to == f"{ns}/loyalty"
    queues = [q.name for q in management.queues.list_by_namespace(*management.scope)]
    assert f"{ns}/loyalty-ordered" not in queues
    code, _ = _cli(emulator, ["apply", *move, "--events", UPDATED, on_topic])
    assert code == 0
    for topic in ("fallback", "orders"):
        moved = management.subscriptions.get(*management.scope, f"{ns}/{topic}", "loyalty")
        assert moved.forward_to == f"{ns}/loyalty-ordered"


def test_a_move_that_would_redirect_a_rule_of_an_event_it_does_not_list_exits_2(
    emulator: EmulatorHandle, management: ManagementClient, ns: str, options_file: str
) -> None:
    created = "Tenant.CustomerCreated"
    base = ["--options", options_file, "--hierarchy", ns]
    assert _cli(emulator, ["apply", *base, "--endpoint", "loyalty", "--events", UPDATED, created])[0] == 0

    move = [*base, "--ordered", "--move-from", "loyalty", "--endpoint", "loyalty-ordered"]
    code, (document,) = _cli(emulator, ["apply", *move, "--events", UPDATED])

    assert code == 2
    (error,) = document["errors"]
    assert f"{ns}/fallback/loyalty/{created} would be redirected to {ns}/loyalty-ordered" in error
    subscription = management.subscriptions.get(*management.scope, f"{ns}/fallback", "loyalty")
    assert subscription.forward_to == f"{ns}/loyalty"
