"""Every invalid app setting is reported at once, each with its problem, before ``make run`` provisions."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from app.bootstrap import provision
from app.settings import CHECKS, require_valid_settings
from shared.management import SettingsError
from shared.redrive.settings import RedriveSettingsError
from shared.settings_check import InvalidAppSettings, check_settings

REPO = Path(__file__).resolve().parents[2]


def sample_settings(**changes: str) -> dict[str, str]:
    values: dict[str, str] = json.loads((REPO / "local.settings.sample.json").read_text())["Values"]
    return {**values, **changes}


def test_the_sample_settings_are_valid() -> None:
    assert check_settings(sample_settings(), CHECKS) == []
    require_valid_settings(sample_settings())  # nothing raised


def test_every_invalid_app_setting_is_reported_at_once_each_on_its_own_line() -> None:
    bad = sample_settings(
        ServiceBusConnection="",
        BUSBAR_MANAGEMENT_ENDPOINT="management.local",
        BUSBAR_ENTITY_MAX_DELIVERY_COUNT="ten",
        BUSBAR_ENTITY_MAX_SIZE_MB="0",
        BUSBAR_ROUTER_SNAPSHOT_SECONDS="soon",
        BUSBAR_PROVISIONING_LOCK_WAIT_SECONDS="-1",
        BUSBAR_REDRIVE_MAX_MESSAGES="lots",
        BUSBAR_REDRIVE_RATE_PER_SECOND="0",
        BUSBAR_FALLBACK_ROUTING_MODE="Sideways",
    )
    bad.pop("ServiceBusConnection__fullyQualifiedNamespace", None)

    with pytest.raises(InvalidAppSettings) as raised:
        require_valid_settings(bad)

    problems = raised.value.problems
    expected = [
        "missing app setting: ServiceBusConnection (connection string) or "
        "ServiceBusConnection__fullyQualifiedNamespace",
        "BUSBAR_MANAGEMENT_ENDPOINT must be an http(s) URL, got 'management.local'",
        "BUSBAR_ENTITY_MAX_DELIVERY_COUNT must be an integer, got 'ten'",
        "BUSBAR_ENTITY_MAX_SIZE_MB must be at least 1, got 0",
        "BUSBAR_PROVISIONING_LOCK_WAIT_SECONDS must not be negative, got '-1'",
        "BUSBAR_ROUTER_SNAPSHOT_SECONDS must be a number of seconds, got 'soon'",
        "BUSBAR_REDRIVE_MAX_MESSAGES must be a number, got 'lots'",
        "BUSBAR_REDRIVE_RATE_PER_SECOND must be at least 0.1, got 0",
    ]
    for problem in expected:
        assert problem in problems
    routing = [p for p in problems if "Sideways" in p]
    assert len(routing) == 1 and "BUSBAR_FALLBACK_ROUTING_MODE" in routing[0]
    assert len(problems) == len(expected) + 1
    message = str(raised.value)
    assert message.splitlines()[0] == f"{len(problems)} invalid app setting(s):"
    assert message.splitlines()[1:] == [f"  - {p}" for p in problems]
    assert isinstance(raised.value, SettingsError)  # what the app's callers already handle


def test_make_runs_provisioning_refuses_every_invalid_setting_before_touching_the_namespace() -> None:
    # The management endpoint is nowhere: provisioning would fail on the first call, after the checks.
    bad = sample_settings(
        BUSBAR_MANAGEMENT_ENDPOINT="http://127.0.0.1:9",
        BUSBAR_ENTITY_LOCK_DURATION_SECONDS="1",
        BUSBAR_REDRIVE_POLICY='{"default": "explode"}',
    )
    with pytest.raises(InvalidAppSettings) as raised:
        provision(bad)
    assert raised.value.problems == [
        "BUSBAR_ENTITY_LOCK_DURATION_SECONDS must be at least 5, got 1",
        "BUSBAR_REDRIVE_POLICY: default must be redrive | archive | leave, got 'explode'",
    ]


def test_the_feature_errors_keep_their_problems_apart_and_their_message_whole() -> None:
    error = RedriveSettingsError(["A must be a number, got 'x'", "B must be at least 1, got 0"])
    assert str(error) == "invalid re-drive settings: A must be a number, got 'x'; B must be at least 1, got 0"
    assert pickle.loads(pickle.dumps(error)).problems == error.problems
    assert str(SettingsError("one", "two")) == "one; two" and SettingsError("one").problems == ["one"]
