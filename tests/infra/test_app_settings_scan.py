"""The source scan finds every way the code reads an app setting (so the infra checks see them all)."""

from __future__ import annotations

from pathlib import Path

from tests.infra.app_settings_scan import looks_like_setting, scan_app, scan_source
from tests.infra.infra_paths import REPO


def names(source: str) -> set[tuple[str, str]]:
    return {(read.name, read.kind) for read in scan_source(source)}


def test_os_environ_reads_are_found_by_subscript_get_and_getenv() -> None:
    source = (
        "import os\n"
        "a = os.environ['BUSBAR_A']\n"
        "b = os.environ.get('BUSBAR_B', 'x')\n"
        "c = os.getenv('lowercase_is_still_a_setting_here')\n"
    )
    assert names(source) == {
        ("BUSBAR_A", "environ"),
        ("BUSBAR_B", "environ"),
        ("lowercase_is_still_a_setting_here", "environ"),
    }


def test_module_constants_used_as_setting_names_are_resolved() -> None:
    source = "import os\nSETTING = 'BUSBAR_FALLBACK_TOPIC'\nvalue = os.environ.get(SETTING)\n"
    assert names(source) == {("BUSBAR_FALLBACK_TOPIC", "environ")}


def test_settings_mappings_count_only_for_setting_shaped_names() -> None:
    source = (
        "def f(env, values, payload):\n"
        "    env.get('BUSBAR_X')\n"
        "    values['ServiceBusConnection__fullyQualifiedNamespace']\n"
        "    values.get('Topic')\n"
        "    payload.get('BUSBAR_NOT_A_SETTINGS_MAPPING')\n"
    )
    assert names(source) == {
        ("BUSBAR_X", "mapping"),
        ("ServiceBusConnection__fullyQualifiedNamespace", "mapping"),
    }


def test_declarations_binding_expressions_and_connections_are_found() -> None:
    source = (
        "SETTINGS = (AppSetting('BUSBAR_DECLARED', 'meaning'),\n"
        "            app_settings.AppSetting(name='BUSBAR_KW', description=''))\n"
        "@bp.schedule(schedule='%BUSBAR_REDRIVE_SCHEDULE%', arg_name='timer')\n"
        "@bp.service_bus_topic_trigger(arg_name='m', topic_name='%BUSBAR_TOPIC%', subscription_name='s',\n"
        "                              connection='ServiceBusConnection')\n"
        "def handler(m): ...\n"
    )
    assert names(source) == {
        ("BUSBAR_DECLARED", "declaration"),
        ("BUSBAR_KW", "declaration"),
        ("BUSBAR_REDRIVE_SCHEDULE", "binding"),
        ("BUSBAR_TOPIC", "binding"),
        ("ServiceBusConnection", "connection"),
    }


def test_constants_of_imported_app_modules_are_resolved(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "runtime.py").write_text('CONNECTION = "ServiceBusConnection"\n', encoding="utf-8")
    source = (
        "from pkg import runtime\n"
        "@bp.service_bus_queue_trigger(arg_name='m', queue_name='q', connection=runtime.CONNECTION)\n"
        "def handler(m): ...\n"
    )
    found = {(read.name, read.kind) for read in scan_source(source, root=tmp_path)}
    assert found == {("ServiceBusConnection", "connection")}


def test_setting_shaped_names_exclude_ordinary_keys() -> None:
    assert looks_like_setting("BUSBAR_FALLBACK_TOPIC")
    assert looks_like_setting("AzureServiceBus__TopologyOptions")
    assert looks_like_setting("ServiceBusConnection")
    assert not looks_like_setting("Topic")
    assert not looks_like_setting("RoutingMode")
    assert not looks_like_setting("NAME")


def test_the_repository_scan_sees_the_declared_management_settings() -> None:
    found = {read.name for read in scan_app(REPO)}
    # shared/app_settings.py declares these and shared/management.py reads them.
    assert {"BUSBAR_SUBSCRIPTION_ID", "BUSBAR_NAMESPACE", "ServiceBusConnection"} <= found
    connections = {read.name for read in scan_app(REPO) if read.kind == "connection"}
    if any("connection=" in p.read_text(encoding="utf-8") for p in (REPO / "functions").glob("*.py")):
        assert connections, "the triggers' connection arguments were not resolved"
