"""Re-drive app settings, the rate limiter and the CLI's exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared import app_settings
from shared.rate_limit import TokenBucket as RateLimiter
from shared.redrive import settings as redrive_settings
from shared.redrive.cli import main
from shared.redrive.settings import Limits, RedriveSettings, RedriveSettingsError


def test_defaults_bound_a_run_well_inside_the_function_timeout() -> None:
    found = RedriveSettings.from_env({})

    assert found.limits == Limits(
        max_redrives=3, max_messages=1000, time_budget_seconds=240.0, rate_per_second=100.0
    )
    assert found.entities == ()
    assert found.archive_url == ".data/archive"
    assert found.archive_storage_options == {}
    assert redrive_settings.SCHEDULE.default == "0 */5 * * * *"


def test_every_invalid_setting_is_reported_at_once() -> None:
    env = {
        "BUSBAR_REDRIVE_MAX_MESSAGES": "lots",
        "BUSBAR_REDRIVE_RATE_PER_SECOND": "0",
        "BUSBAR_REDRIVE_POLICY": '{"default": "explode"}',
        "BUSBAR_ARCHIVE_URL": "abfs://archive/dlq",
    }

    with pytest.raises(RedriveSettingsError) as raised:
        RedriveSettings.from_env(env)

    text = str(raised.value)
    assert "BUSBAR_REDRIVE_MAX_MESSAGES must be a number, got 'lots'" in text
    assert "BUSBAR_REDRIVE_RATE_PER_SECOND must be at least 0.1, got 0" in text
    assert "BUSBAR_REDRIVE_POLICY: default must be redrive | archive | leave, got 'explode'" in text
    assert "set BUSBAR_ARCHIVE_ACCOUNT_NAME (or, locally, BUSBAR_ARCHIVE_CONNECTION_STRING)" in text


def test_an_abfs_archive_uses_the_managed_identity_or_locally_a_connection_string() -> None:
    azure = RedriveSettings.from_env(
        {"BUSBAR_ARCHIVE_URL": "abfs://archive/dlq", "BUSBAR_ARCHIVE_ACCOUNT_NAME": "busbarstore"}
    )
    local = RedriveSettings.from_env(
        {
            "BUSBAR_ARCHIVE_URL": "abfs://archive/dlq",
            "BUSBAR_ARCHIVE_CONNECTION_STRING": "UseDevelopmentStorage=true",
        }
    )

    assert azure.archive_storage_options == {"account_name": "busbarstore", "anon": False}
    assert local.archive_storage_options == {"connection_string": "UseDevelopmentStorage=true"}


def test_entities_are_a_comma_separated_list() -> None:
    found = RedriveSettings.from_env({"BUSBAR_REDRIVE_ENTITIES": " orders , events/Subscriptions/* ,"})
    assert found.entities == ("orders", "events/Subscriptions/*")


def test_every_setting_is_declared_for_the_configuration_reference() -> None:
    names = {s.name for s in redrive_settings.SETTINGS}
    assert {"BUSBAR_REDRIVE_SCHEDULE", "BUSBAR_REDRIVE_POLICY", "BUSBAR_ARCHIVE_URL"} <= names
    connection = [s for s in redrive_settings.SETTINGS if s.name == "BUSBAR_ARCHIVE_CONNECTION_STRING"]
    assert connection[0].secret and connection[0].local_only
    assert all(isinstance(s, app_settings.AppSetting) for s in redrive_settings.SETTINGS)


def test_the_cli_exits_2_with_the_problem_when_settings_are_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # no local.settings.json here (the checkout's is a developer's)
    for name in ("BUSBAR_SUBSCRIPTION_ID", "BUSBAR_RESOURCE_GROUP", "BUSBAR_NAMESPACE"):
        monkeypatch.delenv(name, raising=False)

    assert main(["plan"]) == 2
    assert "missing app setting(s): BUSBAR_SUBSCRIPTION_ID, BUSBAR_RESOURCE_GROUP, BUSBAR_NAMESPACE" in (
        capsys.readouterr().err
    )


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_the_rate_limiter_allows_a_one_second_burst_then_spaces_messages_out() -> None:
    clock = FakeClock()
    limiter = RateLimiter(10, clock=clock, sleep=clock.sleep)

    limiter.acquire(10)
    limiter.acquire(5)
    limiter.acquire(5)

    assert clock.slept == pytest.approx([0.5, 0.5])
