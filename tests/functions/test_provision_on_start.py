"""The deployed app provisions its endpoints when it starts (issue 37, item 4): ``BUSBAR_PROVISION_ON_START``.

Against the emulator's management plane (ARM), as the Function App does in Azure: several app instances
starting at once (separate processes, each with its own clients, as scaled-out instances are) all succeed,
and the namespace ends with one topology (one subscription per endpoint and topic, each rule once); a
later start finds everything in place. Off, nothing is provisioned. The switch takes true/false/1/0 in any
case; any other value stops the start naming it (with every other invalid setting), provisioning nothing.
"""

from __future__ import annotations

import multiprocessing
import uuid
from collections import Counter
from concurrent.futures import ProcessPoolExecutor

import pytest

from app.bootstrap import provision_on_start
from app.provision_on_start import PROVISION_ON_START, enabled
from app.settings import require_valid_settings
from emulator.server import EmulatorThread
from shared.management import SettingsError
from shared.settings_check import InvalidAppSettings
from tests.functions.busbar_app import app_settings, management_for

INSTANCES = 4


def start_instance(settings: dict[str, str]) -> tuple[int, int]:
    """One app instance's start: what it created and found (an error fails the test with its message)."""
    result = provision_on_start(settings)
    assert result is not None
    return len(result.created), len(result.unchanged)


def forwarding(settings: dict[str, str]) -> dict[tuple[str, str], list[str]]:
    """Per (topic, forwardTo queue): the subscriptions forwarding there, with their rules."""
    found: dict[tuple[str, str], list[str]] = {}
    with management_for(settings) as management:
        scope = management.scope
        for topic in management.topics.list_by_namespace(*scope):
            for sub in management.subscriptions.list_by_topic(*scope, topic.name):
                rules = sorted(
                    r.name.lower()
                    for r in management.rules.list_by_subscriptions(*scope, topic.name, sub.name)
                )
                found.setdefault((topic.name, (sub.forward_to or "").lower()), []).append(
                    f"{sub.name}:{','.join(rules)}"
                )
    return found


@pytest.mark.timeout(600)
def test_instances_starting_at_once_all_succeed_and_leave_one_topology_and_a_later_start_creates_nothing(
    private_emulator: EmulatorThread,
) -> None:
    settings = app_settings(
        private_emulator,
        BUSBAR_PROVISION_ON_START="true",
        BUSBAR_PROVISIONING_LOCK_QUEUE=f"locks-{uuid.uuid4().hex[:8]}",
    )

    # Separate processes: each instance has its own management and Service Bus clients and lock sessions.
    with ProcessPoolExecutor(INSTANCES, mp_context=multiprocessing.get_context("spawn")) as pool:
        starts = list(pool.map(start_instance, [settings] * INSTANCES))
    later = start_instance(settings)
    paths = forwarding(settings)

    created = [c for c, _ in starts]
    assert sum(1 for c in created if c > 0) >= 1, starts
    assert later[0] == 0, later  # "0 created": everything was in place
    billing, crm, shipping, sales = (
        settings[f"BUSBAR_{n}_QUEUE"].lower() for n in ("BILLING", "CRM", "SHIPPING", "SALES")
    )
    fallback = settings["BUSBAR_FALLBACK_TOPIC"]
    # One subscription per endpoint on the fallback topic, each with its rules once.
    assert paths[(fallback, billing)] == [
        f"{settings['BUSBAR_BILLING_QUEUE']}:$default,shipping.orderaccepted,shipping.orderacceptedv2"
    ]
    assert paths[(fallback, crm)] == [
        f"{settings['BUSBAR_CRM_QUEUE']}:$default,shipping.iorderstatuschanged,tenant.icustomerlifecycleevent"
    ]
    assert paths[(fallback, shipping)] == [
        f"{settings['BUSBAR_SHIPPING_QUEUE']}:$default,billing.invoiceissued"
    ]
    assert paths[(fallback, sales)] == [f"{settings['BUSBAR_SALES_QUEUE']}:$default,shipping.orderaccepted"]
    assert paths[(fallback, "")] == ["busbar-router:$default"]
    # No topic has two subscriptions forwarding to one queue.
    assert [key for key, subs in paths.items() if len(subs) > 1] == []
    with management_for(settings) as management:
        queues = Counter(q.name.lower() for q in management.queues.list_by_namespace(*management.scope))
    assert all(queues[q] == 1 for q in (billing, crm, shipping, sales)), queues


def test_off_the_start_provisions_nothing(private_emulator: EmulatorThread) -> None:
    settings = app_settings(private_emulator, BUSBAR_PROVISION_ON_START="false")

    result = provision_on_start(settings)

    with management_for(settings) as management:
        queues = {q.name.lower() for q in management.queues.list_by_namespace(*management.scope)}
    assert result is None
    assert settings["BUSBAR_BILLING_QUEUE"].lower() not in queues


@pytest.mark.timeout(30)
def test_the_switch_is_on_for_true_or_1_off_for_false_0_or_unset_in_any_case() -> None:
    for on in ("true", "TRUE", " True ", "1"):
        assert enabled({PROVISION_ON_START.name: on}) is True
    for off in ("false", "FALSE", " False ", "0", "", " "):
        assert enabled({PROVISION_ON_START.name: off}) is False
    assert enabled({}) is False


@pytest.mark.timeout(30)
@pytest.mark.parametrize("value", ["yes", "on", "ture", "enabled"])
def test_a_switch_that_is_neither_true_nor_false_is_a_settings_error_naming_it(value: str) -> None:
    problem = f"BUSBAR_PROVISION_ON_START must be true or false (or 1 or 0; any case), got {value!r}"

    with pytest.raises(SettingsError) as read:
        enabled({PROVISION_ON_START.name: value})
    assert read.value.problems == [problem]
    with pytest.raises(InvalidAppSettings) as checked:
        require_valid_settings({PROVISION_ON_START.name: value})
    assert problem in checked.value.problems


@pytest.mark.timeout(120)
def test_a_mistyped_switch_stops_the_start_naming_it_and_every_other_bad_setting_provisioning_nothing(
    private_emulator: EmulatorThread,
) -> None:
    settings = app_settings(
        private_emulator, BUSBAR_PROVISION_ON_START="ture", BUSBAR_ENTITY_LOCK_DURATION_SECONDS="soon"
    )

    with pytest.raises(InvalidAppSettings) as raised:
        provision_on_start(settings)

    problems = raised.value.problems
    assert "BUSBAR_PROVISION_ON_START must be true or false (or 1 or 0; any case), got 'ture'" in problems
    assert any(p.startswith("BUSBAR_ENTITY_LOCK_DURATION_SECONDS") for p in problems), problems
    with management_for(settings) as management:
        queues = {q.name.lower() for q in management.queues.list_by_namespace(*management.scope)}
    assert settings["BUSBAR_BILLING_QUEUE"].lower() not in queues
