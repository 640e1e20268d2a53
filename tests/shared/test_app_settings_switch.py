"""An on/off app setting (:func:`shared.app_settings.read_switch`): ``true``/``1`` and ``false``/``0`` in any
case, blanks around ignored, unset or blank its default; anything else an error naming the setting, the
value and the accepted values (a typo never switches a feature on or off silently)."""

from __future__ import annotations

import pytest

from shared.app_settings import AppSetting, read_switch
from shared.management import SettingsError

pytestmark = pytest.mark.timeout(10)

ON_BY_DEFAULT = AppSetting("BUSBAR_TEST_SWITCH_ON", "A switch, on unless set.", default="true")
OFF_BY_DEFAULT = AppSetting("BUSBAR_TEST_SWITCH_OFF", "A switch, off unless set.", default="false")


@pytest.mark.parametrize("raw", ["true", "TRUE", "True", " true ", "1", " 1\t"])
def test_true_or_1_in_any_case_is_on(raw: str) -> None:
    assert read_switch(OFF_BY_DEFAULT, {OFF_BY_DEFAULT.name: raw}) is True


@pytest.mark.parametrize("raw", ["false", "FALSE", "False", " false ", "0", "\t0 "])
def test_false_or_0_in_any_case_is_off(raw: str) -> None:
    assert read_switch(ON_BY_DEFAULT, {ON_BY_DEFAULT.name: raw}) is False


def test_an_unset_or_blank_switch_takes_its_default() -> None:
    assert read_switch(ON_BY_DEFAULT, {}) is True
    assert read_switch(ON_BY_DEFAULT, {ON_BY_DEFAULT.name: "  "}) is True
    assert read_switch(OFF_BY_DEFAULT, {}) is False
    assert read_switch(OFF_BY_DEFAULT, {OFF_BY_DEFAULT.name: ""}) is False


@pytest.mark.parametrize("raw", ["yes", "no", "on", "off", "ture", "2", "-1", "t", "enabled"])
def test_any_other_value_is_an_error_of_the_callers_type_naming_setting_value_and_accepted_values(
    raw: str,
) -> None:
    message = f"BUSBAR_TEST_SWITCH_OFF must be true or false (or 1 or 0; any case), got {raw!r}"
    with pytest.raises(ValueError) as raised:
        read_switch(OFF_BY_DEFAULT, {OFF_BY_DEFAULT.name: raw})
    assert str(raised.value) == message
    with pytest.raises(SettingsError) as as_settings_error:
        read_switch(OFF_BY_DEFAULT, {OFF_BY_DEFAULT.name: f" {raw} "}, SettingsError)
    assert as_settings_error.value.problems == [message]


def test_a_switch_without_a_default_must_be_set() -> None:
    required = AppSetting("BUSBAR_TEST_SWITCH_REQUIRED", "A switch without a default.")
    with pytest.raises(ValueError, match=r"BUSBAR_TEST_SWITCH_REQUIRED must be true or false .*got None"):
        read_switch(required, {})
