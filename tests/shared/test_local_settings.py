"""Busbar's command lines read the local app's settings as ``func`` gives them to the app: local.settings.json
Values (``--settings`` names another), the endpoints a running ``make run`` recorded, the environment over
both (shared.local_settings)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from shared.local_settings import (
    ENDPOINTS_RECORD,
    LocalSettingsError,
    local_app_settings,
    merge_settings,
)
from shared.topology.cli import run as topology

SAMPLE_CONNECTION = (
    "Endpoint=sb://localhost:5672;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true;"
)
RECORDED_CONNECTION = (
    "Endpoint=sb://127.0.0.1:40123;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true;"
)


def write_settings(path: Path, values: dict[str, str], **extra: object) -> Path:
    path.write_text(json.dumps({"IsEncrypted": False, "Values": values, **extra}), encoding="utf-8")
    return path


def write_record(data_dir: Path, settings: dict[str, str]) -> None:
    path = data_dir / ENDPOINTS_RECORD
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"pid": 1, "http": "http://127.0.0.1:40999", "settings": settings}))


@pytest.fixture(autouse=True)
def _in_the_app_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def test_the_values_of_local_settings_json_in_the_app_directory_are_the_settings(tmp_path: Path) -> None:
    write_settings(tmp_path / "local.settings.json", {"BUSBAR_NAMESPACE": "from-file", "N": 7})  # type: ignore[dict-item]

    settings = local_app_settings(environment={})

    assert settings == {"BUSBAR_NAMESPACE": "from-file", "N": "7"}


def test_environment_variables_win_over_the_file_as_app_settings_do_in_azure(tmp_path: Path) -> None:
    write_settings(tmp_path / "local.settings.json", {"BUSBAR_NAMESPACE": "from-file", "KEPT": "file"})

    settings = local_app_settings(environment={"BUSBAR_NAMESPACE": "from-env", "OTHER": "x"})

    assert settings == {"BUSBAR_NAMESPACE": "from-env", "KEPT": "file", "OTHER": "x"}


def test_settings_names_another_file_which_must_exist(tmp_path: Path) -> None:
    write_settings(tmp_path / "local.settings.json", {"WHICH": "default"})
    other = write_settings(tmp_path / "team.settings.json", {"WHICH": "other"})

    assert local_app_settings(other, environment={}) == {"WHICH": "other"}
    with pytest.raises(LocalSettingsError, match=r"missing\.json: no such settings file"):
        local_app_settings(tmp_path / "missing.json", environment={})


def test_without_a_settings_file_only_the_environment_counts() -> None:
    assert local_app_settings(environment={"A": "1"}) == {"A": "1"}


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ('{"IsEncrypted": true, "Values": {}}', "encrypted settings are not supported"),
        ('{"Values": ', "not valid JSON"),
        ('{"Values": {"A": {"nested": 1}}}', "Values.A must be a string"),
        ("[]", "top level must be a JSON object"),
    ],
)
def test_a_settings_file_the_host_would_refuse_is_refused_precisely(
    tmp_path: Path, document: str, problem: str
) -> None:
    (tmp_path / "local.settings.json").write_text(document)

    with pytest.raises(LocalSettingsError, match=problem):
        local_app_settings(environment={})


def test_the_running_apps_recorded_endpoints_replace_the_files_local_emulator_values(tmp_path: Path) -> None:
    write_settings(
        tmp_path / "local.settings.json",
        {
            "ServiceBusConnection": SAMPLE_CONNECTION,
            "BUSBAR_MANAGEMENT_ENDPOINT": "http://127.0.0.1:5300",
            "BUSBAR_NAMESPACE": "sbemulatorns",
        },
    )
    write_record(
        tmp_path / ".data",
        {
            "ServiceBusConnection": RECORDED_CONNECTION,
            "BUSBAR_MANAGEMENT_ENDPOINT": "http://127.0.0.1:40124",
            "BUSBAR_MANAGEMENT_TOKEN": "recorded-token",
        },
    )

    settings = local_app_settings(environment={})

    assert settings == {
        "ServiceBusConnection": RECORDED_CONNECTION,
        "BUSBAR_MANAGEMENT_ENDPOINT": "http://127.0.0.1:40124",
        "BUSBAR_MANAGEMENT_TOKEN": "recorded-token",
        "BUSBAR_NAMESPACE": "sbemulatorns",
    }


def test_the_record_is_read_from_the_data_dir_named_and_never_replaces_a_real_namespace(
    tmp_path: Path,
) -> None:
    real = "Endpoint=sb://busbar.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=v"
    write_settings(tmp_path / "local.settings.json", {"ServiceBusConnection": real})
    write_record(
        tmp_path / "elsewhere", {"ServiceBusConnection": RECORDED_CONNECTION, "BUSBAR_NAMESPACE": "x"}
    )

    assert local_app_settings(environment={}) == {"ServiceBusConnection": real}  # no record under ./.data
    assert local_app_settings(data_dir=tmp_path / "elsewhere", environment={}) == {
        "ServiceBusConnection": real,
        "BUSBAR_NAMESPACE": "x",
    }


def test_the_environment_wins_over_the_record_too() -> None:
    merged = merge_settings(
        {"ServiceBusConnection": SAMPLE_CONNECTION},
        {"ServiceBusConnection": RECORDED_CONNECTION},
        {"ServiceBusConnection": "from-env"},
    )
    assert merged == {"ServiceBusConnection": "from-env"}


def _topology(argv: list[str], environment: dict[str, str]) -> tuple[int, dict[str, object]]:
    out = io.StringIO()
    code = topology(argv, out, environment)
    return code, json.loads(out.getvalue())


def test_the_topology_clis_default_options_are_the_apps_own_from_its_settings(tmp_path: Path) -> None:
    def options(topic: str) -> str:
        return json.dumps({"PublishedEventToTopicsMap": {"Shipping.OrderAccepted": topic}})

    write_settings(
        tmp_path / "local.settings.json", {"AzureServiceBus__TopologyOptions": options("from-file")}
    )

    code, document = _topology(["validate"], {})
    assert code == 0, document
    assert document["options"]["PublishedEventToTopicsMap"] == {"Shipping.OrderAccepted": "from-file"}  # type: ignore[index]

    code, document = _topology(["validate"], {"AzureServiceBus__TopologyOptions": options("from-env")})
    assert code == 0, document
    assert document["options"]["PublishedEventToTopicsMap"] == {"Shipping.OrderAccepted": "from-env"}  # type: ignore[index]


def test_a_cli_names_a_bad_settings_file_and_exits_2(tmp_path: Path) -> None:
    code, document = _topology(["validate", "--settings", str(tmp_path / "nope.json")], {})
    assert code == 2
    assert "nope.json: no such settings file" in str(document["errors"])
