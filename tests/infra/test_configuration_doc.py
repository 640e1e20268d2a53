"""docs/configuration.md documents every declared app setting with its default, and nothing stale."""

from __future__ import annotations

import re

from tests.infra.infra_paths import DOCS, TELEMETRY_PLATFORM_SETTINGS, declared_settings

ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|(.*)$", re.M)


def documented_rows() -> dict[str, str]:
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    rows: dict[str, str] = {}
    for name, rest in ROW.findall(text):
        assert name not in rows, f"{name} is documented twice"
        rows[name] = rest
    return rows


def cells(row_rest: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", row_rest)][:-1]


def test_every_declared_setting_has_a_row_with_its_default() -> None:
    rows = documented_rows()
    problems = []
    for name, setting in declared_settings().items():
        if name not in rows:
            problems.append(f"{name}: no row")
            continue
        default_cell = cells(rows[name])[0]
        if setting.default is not None:
            expected = f"`{setting.default}`"
        else:
            expected = "**required**" if setting.required else "(unset)"
        if default_cell != expected:
            problems.append(f"{name}: default cell {default_cell!r}, expected {expected!r}")
    assert problems == []


def test_local_only_settings_are_documented_as_not_set_in_azure() -> None:
    rows = documented_rows()
    for name, setting in declared_settings().items():
        if setting.local_only:
            assert cells(rows[name])[1] == "not set (local only)", name


def test_no_row_documents_a_busbar_setting_the_code_does_not_declare() -> None:
    stale = sorted(
        name
        for name in documented_rows()
        if (name.startswith(("BUSBAR_", "ServiceBusConnection", "AzureServiceBus__")))
        and name not in declared_settings()
    )
    assert stale == []


def test_every_platform_setting_the_telemetry_reads_has_a_row() -> None:
    assert sorted(TELEMETRY_PLATFORM_SETTINGS - set(documented_rows())) == []
