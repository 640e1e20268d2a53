"""Every topic and endpoint queue Busbar creates requires duplicate detection over
``BUSBAR_DUPLICATE_DETECTION_WINDOW``, against the emulator's ARM endpoint (azure-mgmt-servicebus).

Azure's bounds for the window are 20 s to 7 days (``QueueProperties.DuplicateDetectionHistoryTimeWindow``
in the .NET SDK reference: "Max value is 7 days and minimum is 20 seconds"; learn.microsoft.com
"Duplicate detection": Standard and Premium support it, Basic does not). ``RequiresDuplicateDetection`` is
immutable on an existing queue or topic (the emulator's ARM refuses the change, as Azure does:
tests/emulator/test_arm_validation.py), so an entity created without it is refused by the plan, with the
``needs-new-queue`` mechanism of ``RequiresSession``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from azure.mgmt.servicebus.models import SBQueue, SBQueueProperties, SBTopic, SBTopicProperties

from shared.api.provisioning.service import entity_defaults
from shared.management import ManagementClient, SettingsError
from shared.settings_check import check_settings
from shared.topology import EntityDefaults, Provisioner, TopologyOptions, desired_state
from shared.topology.duplicate_detection import (
    DEFAULT_WINDOW,
    InvalidDuplicateDetectionWindow,
    parse_window,
)
from shared.topology.errors import QueueNeedsRecreatingError

EVENT = "Shipping.OrderAccepted"
SETTING = "BUSBAR_DUPLICATE_DETECTION_WINDOW"

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    ("text", "window"),
    [
        ("PT10M", timedelta(minutes=10)),
        ("PT20S", timedelta(seconds=20)),
        ("P7D", timedelta(days=7)),
        ("P1DT2H30M", timedelta(days=1, hours=2, minutes=30)),
        ("pt90s", timedelta(seconds=90)),
    ],
)
def test_a_window_is_an_iso_8601_duration_within_azures_bounds(text: str, window: timedelta) -> None:
    assert parse_window(text) == window


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("PT19S", "between PT20S and P7D"),
        ("P7DT1S", "between PT20S and P7D"),
        ("10 minutes", "ISO 8601 duration"),
        ("600", "ISO 8601 duration"),
        ("P1M", "ISO 8601 duration"),  # months have no fixed length
        ("PT", "ISO 8601 duration"),
        ("P1DT", "ISO 8601 duration"),
    ],
)
def test_a_bad_window_is_refused_naming_the_setting(text: str, problem: str) -> None:
    with pytest.raises(InvalidDuplicateDetectionWindow) as raised:
        parse_window(text)
    assert SETTING in str(raised.value) and problem in str(raised.value)
    assert repr(text) in str(raised.value)


def test_the_window_defaults_to_ten_minutes_and_a_bad_one_fails_the_start_up_check() -> None:
    assert entity_defaults({}).duplicate_detection_window == DEFAULT_WINDOW == timedelta(minutes=10)
    assert entity_defaults({SETTING: "PT45S"}).duplicate_detection_window == timedelta(seconds=45)
    with pytest.raises(SettingsError):
        entity_defaults({SETTING: "PT5S"})
    problems = check_settings({SETTING: "PT5S", "BUSBAR_ENTITY_MAX_DELIVERY_COUNT": "x"})
    assert any(SETTING in p and "between PT20S and P7D" in p for p in problems), problems
    assert any("BUSBAR_ENTITY_MAX_DELIVERY_COUNT" in p for p in problems), problems


def test_apply_creates_the_endpoint_queue_and_its_topics_with_duplicate_detection_over_the_window(
    management: ManagementClient, ns: str
) -> None:
    window = timedelta(seconds=45)
    options = TopologyOptions(hierarchy_namespace=ns)
    provisioner = Provisioner(management, EntityDefaults(duplicate_detection_window=window))
    plan = provisioner.plan(desired_state(options, "billing", [EVENT], duplicate_detection_window=window))

    wanted = {"requiresDuplicateDetection": True, "duplicateDetectionHistoryTimeWindow": "PT45S"}
    items = {(i.kind, i.path): i for i in plan.items}
    assert items[("queue", f"{ns}/billing")].details == {"requiresSession": False, **wanted}
    assert items[("topic", f"{ns}/{EVENT}")].details == wanted
    provisioner.apply(plan)

    queue = management.queues.get(*management.scope, f"{ns}/billing")
    topic = management.topics.get(*management.scope, f"{ns}/{EVENT}")
    for entity in (queue, topic):
        assert entity.requires_duplicate_detection is True
        assert entity.duplicate_detection_history_time_window == window
    again = provisioner.plan(desired_state(options, "billing", [EVENT], duplicate_detection_window=window))
    assert not again.has_changes and again.refusals == []


def test_an_existing_endpoint_queue_without_duplicate_detection_is_refused_and_nothing_is_provisioned(
    management: ManagementClient, ns: str
) -> None:
    queue = f"{ns}/billing"
    management.queues.create_or_update(*management.scope, queue, SBQueue(properties=SBQueueProperties()))
    provisioner = Provisioner(management)

    plan = provisioner.plan(desired_state(TopologyOptions(hierarchy_namespace=ns), "billing", [EVENT]))

    (refused,) = plan.of("refused")
    assert (refused.kind, refused.path) == ("queue", queue)
    assert refused.details["requiresDuplicateDetection"] == {"existing": False, "desired": True}
    assert "RequiresDuplicateDetection is off" in plan.refusals[0]
    assert "Duplicate detection on entities created without it" in plan.refusals[0]
    with pytest.raises(QueueNeedsRecreatingError):
        provisioner.apply(plan)
    topics = [t.name for t in management.topics.list_by_namespace(*management.scope)]
    assert f"{ns}/{EVENT}" not in topics


def test_an_existing_topic_without_duplicate_detection_is_refused_and_nothing_is_provisioned(
    management: ManagementClient, ns: str
) -> None:
    topic = f"{ns}/{EVENT}"
    management.topics.create_or_update(*management.scope, topic, SBTopic(properties=SBTopicProperties()))
    provisioner = Provisioner(management)

    plan = provisioner.plan(desired_state(TopologyOptions(hierarchy_namespace=ns), "billing", [EVENT]))

    (refused,) = plan.of("refused")
    assert (refused.kind, refused.path) == ("topic", topic)
    assert refused.details["requiresDuplicateDetection"] == {"existing": False, "desired": True}
    assert f"topic {topic} exists, but RequiresDuplicateDetection is off" in plan.refusals[0]
    with pytest.raises(QueueNeedsRecreatingError):
        provisioner.apply(plan)
    queues = [q.name for q in management.queues.list_by_namespace(*management.scope)]
    assert f"{ns}/billing" not in queues
