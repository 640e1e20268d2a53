"""A setting that is a number of seconds: its default when unset, and a precise error for a bad value
(never a silent fallback), raised as the caller's error type."""

from __future__ import annotations

import pytest

from shared.app_settings import AppSetting, read_seconds
from shared.management import SettingsError

WAIT = AppSetting("BUSBAR_TEST_WAIT_SECONDS", "A wait, in seconds.", default="30")


def test_an_unset_or_blank_setting_takes_its_default_and_a_set_one_its_value() -> None:
    assert read_seconds(WAIT, {}) == 30.0
    assert read_seconds(WAIT, {WAIT.name: "  "}) == 30.0
    assert read_seconds(WAIT, {WAIT.name: "0.5"}) == 0.5


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("soon", "BUSBAR_TEST_WAIT_SECONDS must be a number of seconds, got 'soon'"),
        ("-1", "BUSBAR_TEST_WAIT_SECONDS must not be negative, got '-1'"),
    ],
)
def test_a_bad_value_is_an_error_of_the_callers_type_naming_the_setting(raw: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        read_seconds(WAIT, {WAIT.name: raw})
    with pytest.raises(SettingsError, match=f"^{message}$"):
        read_seconds(WAIT, {WAIT.name: raw}, SettingsError)


def test_a_setting_without_a_default_must_be_set() -> None:
    required = AppSetting("BUSBAR_TEST_REQUIRED_SECONDS", "A wait, in seconds.")
    with pytest.raises(ValueError, match="must be a number of seconds, got None"):
        read_seconds(required, {})
