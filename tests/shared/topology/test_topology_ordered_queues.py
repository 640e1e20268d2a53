"""Ordered endpoints' queues against the emulator's ARM endpoint (azure-mgmt-servicebus): the input queue
requires sessions, the hold queue ``<queue>.held`` exists with its properties, the plan shows
``requiresSession``, and an existing queue whose immutable properties differ is refused with nothing
provisioned (RequiresSession cannot change on Azure: the emulator's ARM refuses it too, see
tests/emulator/test_arm_validation.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.mgmt.servicebus.models import SBQueue, SBQueueProperties

from shared.management import ManagementClient
from shared.topology import (
    DesiredState,
    EntityDefaults,
    Provisioner,
    TopologyOptions,
    TopologyValidationError,
    desired_state,
)
from shared.topology.duplicate_detection import DEFAULT_WINDOW
from shared.topology.errors import QueueNeedsRecreatingError
from shared.topology.names import held_queue
from shared.topology.queues import QueueSpec

UPDATED = "Tenant.CustomerUpdated"
DEFAULTS = EntityDefaults(lock_duration=timedelta(seconds=45), max_delivery_count=4)

pytestmark = pytest.mark.timeout(60)


def _options(ns: str) -> TopologyOptions:
    return TopologyOptions(hierarchy_namespace=ns)


def _queue_items(plan_dict: dict[str, object]) -> list[tuple[object, object, object]]:
    items = plan_dict["items"]
    assert isinstance(items, list)
    return [(i["action"], i["path"], i["details"]) for i in items if i["kind"] == "queue"]


DEDUP = {"requiresDuplicateDetection": True, "duplicateDetectionHistoryTimeWindow": "PT10M"}


def _create_queue(
    management: ManagementClient, name: str, *, requires_session: bool = False, dedup: bool = True
) -> None:
    properties = SBQueueProperties(requires_session=requires_session, requires_duplicate_detection=dedup)
    management.queues.create_or_update(*management.scope, name, SBQueue(properties=properties))


def test_held_queue_is_the_input_queue_name_with_held_appended() -> None:
    assert held_queue("crm") == "crm.held"
    assert held_queue("prod/crm") == "prod/crm.held"


def test_an_ordered_endpoint_wants_a_session_queue_and_a_prefixed_hold_queue(ns: str) -> None:
    desired = desired_state(_options(ns), "crm", [UPDATED], ordered=True)

    assert desired.queues == (f"{ns}/crm", f"{ns}/crm.held")
    assert desired.queue_spec(f"{ns}/crm") == QueueSpec(f"{ns}/crm", True, DEFAULT_WINDOW)
    assert desired.queue_spec(f"{ns}/crm.held") == QueueSpec(
        f"{ns}/crm.held", True, DEFAULT_WINDOW, held_for=f"{ns}/crm"
    )
    assert desired.to_dict()["queueProperties"] == {
        f"{ns}/crm": {
            "requiresSession": True,
            "requiresDuplicateDetection": True,
            "duplicateDetectionHistoryTimeWindow": "PT10M",
        },
        f"{ns}/crm.held": {
            "requiresSession": True,
            "requiresDuplicateDetection": True,
            "duplicateDetectionHistoryTimeWindow": "PT10M",
            "holdQueueOf": f"{ns}/crm",
        },
    }


def test_one_queue_wanted_ordered_and_unordered_in_one_plan_is_an_error(ns: str) -> None:
    options = _options(ns)
    with pytest.raises(TopologyValidationError) as raised:
        DesiredState.combine(
            [
                desired_state(options, "crm", [UPDATED], ordered=True),
                desired_state(options, "crm", ["Tenant.CustomerCreated"]),
            ]
        )
    assert f"queue {ns}/crm is wanted both with" in raised.value.errors[0]


def test_apply_creates_the_session_input_queue_and_the_hold_queue_with_its_properties(
    management: ManagementClient, ns: str
) -> None:
    provisioner = Provisioner(management, DEFAULTS)
    plan = provisioner.plan(desired_state(_options(ns), "crm", [UPDATED], ordered=True))

    assert _queue_items(plan.to_dict()) == [
        ("create", f"{ns}/crm", {"requiresSession": True, **DEDUP}),
        (
            "create",
            f"{ns}/crm.held",
            {
                "requiresSession": True,
                "requiresDuplicateDetection": True,
                "duplicateDetectionHistoryTimeWindow": "PT10M",
                "holdQueueOf": f"{ns}/crm",
            },
        ),
    ]
    provisioner.apply(plan)

    scope = management.scope
    queue = management.queues.get(*scope, f"{ns}/crm")
    hold = management.queues.get(*scope, f"{ns}/crm.held")
    assert (queue.requires_session, queue.requires_duplicate_detection) == (True, True)
    assert queue.duplicate_detection_history_time_window == DEFAULT_WINDOW
    assert (hold.requires_session, hold.requires_duplicate_detection) == (True, True)
    assert hold.duplicate_detection_history_time_window == DEFAULT_WINDOW
    assert hold.forward_to in (None, "")
    assert (hold.lock_duration, hold.max_delivery_count) == (queue.lock_duration, queue.max_delivery_count)
    assert (queue.lock_duration, queue.max_delivery_count) == (timedelta(seconds=45), 4)


def test_an_ordered_endpoint_planned_again_is_unchanged_and_still_shows_requires_session(
    management: ManagementClient, ns: str
) -> None:
    provisioner = Provisioner(management, DEFAULTS)
    desired = desired_state(_options(ns), "crm", [UPDATED], ordered=True)
    provisioner.apply(provisioner.plan(desired))

    again = provisioner.plan(desired)

    assert not again.has_changes and again.refusals == []
    assert [(a, p, d["requiresSession"]) for a, p, d in _queue_items(again.to_dict())] == [  # type: ignore[index]
        ("unchanged", f"{ns}/crm", True),
        ("unchanged", f"{ns}/crm.held", True),
    ]


def test_an_unordered_endpoint_gets_a_plain_queue_and_no_hold_queue(
    management: ManagementClient, ns: str
) -> None:
    provisioner = Provisioner(management, DEFAULTS)
    plan = provisioner.plan(desired_state(_options(ns), "crm", [UPDATED]))

    assert _queue_items(plan.to_dict()) == [("create", f"{ns}/crm", {"requiresSession": False, **DEDUP})]
    provisioner.apply(plan)
    queue = management.queues.get(*management.scope, f"{ns}/crm")
    assert (queue.requires_session, queue.requires_duplicate_detection) == (False, True)
    with pytest.raises(ResourceNotFoundError):
        management.queues.get(*management.scope, f"{ns}/crm.held")


def test_an_existing_queue_without_sessions_is_refused_for_an_ordered_endpoint_and_nothing_is_provisioned(
    management: ManagementClient, ns: str
) -> None:
    _create_queue(management, f"{ns}/crm")
    provisioner = Provisioner(management, DEFAULTS)

    plan = provisioner.plan(desired_state(_options(ns), "crm", [UPDATED], ordered=True))

    (refused,) = plan.of("refused")
    assert (refused.kind, refused.path) == ("queue", f"{ns}/crm")
    assert refused.details["requiresSession"] == {"existing": False, "desired": True}
    assert plan.refusals == [refused.details["reason"]]
    reason = plan.refusals[0]
    assert f"queue {ns}/crm (the endpoint's input queue) exists" in reason
    assert "RequiresSession is False, the endpoint needs True" in reason
    assert "needs a new queue" in reason and "docs/topology-guide.md" in reason
    assert plan.to_dict()["summary"]["refused"] == 1
    with pytest.raises(QueueNeedsRecreatingError) as raised:
        provisioner.apply(plan)
    assert raised.value.errors == plan.refusals
    scope = management.scope
    assert management.queues.get(*scope, f"{ns}/crm").requires_session is False
    with pytest.raises(ResourceNotFoundError):
        management.queues.get(*scope, f"{ns}/crm.held")
    with pytest.raises(ResourceNotFoundError):
        management.topics.get(*scope, f"{ns}/{UPDATED}")


def test_an_existing_session_queue_is_refused_for_an_unordered_endpoint(
    management: ManagementClient, ns: str
) -> None:
    _create_queue(management, f"{ns}/crm", requires_session=True)

    plan = Provisioner(management, DEFAULTS).plan(desired_state(_options(ns), "crm", [UPDATED]))

    (refused,) = plan.of("refused")
    assert refused.path == f"{ns}/crm"
    assert refused.details["requiresSession"] == {"existing": True, "desired": False}
    assert "RequiresSession is True, the endpoint needs False" in plan.refusals[0]


def test_an_existing_hold_queue_without_duplicate_detection_is_refused(
    management: ManagementClient, ns: str
) -> None:
    _create_queue(management, f"{ns}/crm.held", requires_session=True, dedup=False)

    plan = Provisioner(management, DEFAULTS).plan(desired_state(_options(ns), "crm", [UPDATED], ordered=True))

    (refused,) = plan.of("refused")
    assert refused.path == f"{ns}/crm.held"
    assert f"(the hold queue of {ns}/crm)" in plan.refusals[0]
    assert "RequiresDuplicateDetection is off, Busbar needs it on every endpoint queue" in plan.refusals[0]
    assert refused.details["requiresDuplicateDetection"] == {"existing": False, "desired": True}


def test_a_hold_queue_added_to_an_existing_ordered_queue_takes_its_lock_duration_and_max_delivery_count(
    management: ManagementClient, ns: str
) -> None:
    management.queues.create_or_update(
        *management.scope,
        f"{ns}/crm",
        SBQueue(
            properties=SBQueueProperties(
                requires_session=True,
                requires_duplicate_detection=True,
                lock_duration=timedelta(seconds=20),
                max_delivery_count=3,
            )
        ),
    )
    provisioner = Provisioner(management, DEFAULTS)  # 45 s and 4 for the queues it creates otherwise

    plan = provisioner.plan(desired_state(_options(ns), "crm", [UPDATED], ordered=True))
    provisioner.apply(plan)

    assert [(i.action, i.path) for i in plan.items if i.kind == "queue"] == [
        ("unchanged", f"{ns}/crm"),
        ("create", f"{ns}/crm.held"),
    ]
    hold = management.queues.get(*management.scope, f"{ns}/crm.held")
    assert (hold.lock_duration, hold.max_delivery_count) == (timedelta(seconds=20), 3)
