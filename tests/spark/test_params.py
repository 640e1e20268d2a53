"""Job parameters: the Databricks underscore spelling and the CLI's hyphens, validation, connections."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from spark.params import Connection, ParameterError, parse_params, resolve_connection

PATHS = ["--archive_path", "/a", "--ledger_path", "/l", "--report_path", "/r"]


def test_databricks_named_parameters_and_cli_flags_parse_to_the_same_params() -> None:
    databricks = parse_params(
        [
            "--archive_path=/a",
            "--ledger_path=/l",
            "--report_path=/r",
            "--replay_run_id=run-1",
            "--from_time=2026-03-01T00:00:00Z",
            "--to_time=2026-03-02",
            "--source_entities=orders, sales/Subscriptions/billing",
            "--reasons=MaxDeliveryCountExceeded",
            "--target_overrides=orders=orders-v2",
            "--set_properties=x-fixed=INC-42",
            "--remove_properties=secret",
            "--dry_run=true",
            "--rate_limit=250",
        ],
        env={},
    )
    cli = parse_params(
        [
            *[
                "--archive-path",
                "/a",
                "--ledger-path",
                "/l",
                "--report-path",
                "/r",
                "--replay-run-id",
                "run-1",
            ],
            *["--from-time", "2026-03-01T00:00:00+00:00", "--to-time", "2026-03-02T00:00:00"],
            *[
                "--source-entities",
                "orders,sales/Subscriptions/billing",
                "--reasons",
                "MaxDeliveryCountExceeded",
            ],
            *["--target-overrides", "orders=orders-v2", "--set-properties", "x-fixed=INC-42"],
            *["--remove-properties", "secret", "--dry-run", "--rate-limit", "250"],
        ],
        env={},
    )
    assert databricks == cli
    assert cli.selection.from_time == datetime(2026, 3, 1, tzinfo=UTC)
    assert cli.selection.source_entities == ("orders", "sales/Subscriptions/billing")
    assert cli.target_overrides == (("orders", "orders-v2"),)
    assert cli.dry_run and not cli.force


def test_empty_databricks_parameters_mean_not_set() -> None:
    params = parse_params(
        [*PATHS, "--partitions=", "--reasons=", "--from_time=", "--target_overrides=", "--replay_run_id="],
        env={},
    )
    assert params == parse_params([*PATHS, "--replay_run_id", params.replay_run_id], env={})
    assert params.partitions is None and params.selection.reasons == () and params.selection.from_time is None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--from_time", "yesterday"], "not an ISO-8601 timestamp"),
        (["--from_time", "2026-03-02", "--to_time", "2026-03-01"], "is not before"),
        (["--target_overrides", "orders"], "is not key=value"),
        (["--batch_size", "0"], "must be positive"),
        (["--rate_limit", "-1"], "must be >= 0"),
        (["--dry_run", "maybe"], "is not true/false"),
        (["--secret_scope", "kv"], "go together"),
    ],
)
def test_bad_parameters_are_refused_with_the_reason(extra: list[str], message: str) -> None:
    with pytest.raises(ParameterError, match=message):
        parse_params([*PATHS, *extra], env={})


def test_missing_required_parameters_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ParameterError):
        parse_params(["--archive_path", "/a"], env={})
    assert "--ledger_path" in capsys.readouterr().err


def test_connection_comes_from_the_flag_then_the_secret_then_the_namespace_then_app_settings() -> None:
    class Secrets:
        def get(self, scope: str, key: str) -> str:
            return f"Endpoint=sb://{scope}/{key}"

    env = {"ServiceBusConnection": "from-env", "ServiceBusConnection__fullyQualifiedNamespace": "ns.env"}
    flag = parse_params([*PATHS, "--connection_string", "from-flag"], env={})
    secret = parse_params([*PATHS, "--secret_scope", "kv", "--secret_key", "sb"], env={})
    namespace = parse_params([*PATHS, "--fully_qualified_namespace", "ns.servicebus.windows.net"], env={})
    plain = parse_params(PATHS, env={})
    assert resolve_connection(flag, Secrets(), env) == Connection(connection_string="from-flag")
    assert resolve_connection(secret, Secrets(), env) == Connection(connection_string="Endpoint=sb://kv/sb")
    assert resolve_connection(namespace, None, env) == Connection(
        fully_qualified_namespace="ns.servicebus.windows.net"
    )
    assert resolve_connection(plain, None, env) == Connection(connection_string="from-env")
    assert resolve_connection(
        plain, None, {"ServiceBusConnection__fullyQualifiedNamespace": "ns.env"}
    ) == Connection(fully_qualified_namespace="ns.env")
    with pytest.raises(ParameterError, match="no Databricks secrets"):
        resolve_connection(secret, None, env)
    with pytest.raises(ParameterError, match="no Service Bus connection"):
        resolve_connection(plain, None, {})


def test_the_databricks_job_passes_only_parameters_the_job_accepts() -> None:
    """infra/databricks/databricks.yml and spark/params.py name the same parameters (no YAML parser here:
    the bundle's two lists are simple enough to read line by line)."""
    text = (Path(__file__).resolve().parents[2] / "infra" / "databricks" / "databricks.yml").read_text()
    defaults = {
        name: value.strip('"')
        for name, value in re.findall(r"- \{ name: (\w+), default: (\"[^\"]*\"|\S+) \}", text)
    }
    block = text.split("named_parameters:", 1)[1]
    named = dict(re.findall(r"^ {14}(\w+): (.+)$", block, flags=re.MULTILINE))
    assert {"archive_path", "ledger_path", "report_path", "dry_run", "rate_limit"} <= set(named)
    assert set(defaults) <= set(named), "every job parameter reaches the wheel task"
    argv = []
    for name, value in named.items():
        if reference := re.fullmatch(r"\"\{\{job\.parameters\.(\w+)\}\}\"", value):
            value = defaults[reference.group(1)].replace("{{job.run_id}}", "42")
        elif value.startswith("${var."):
            value = f"/placeholder/{name}" if name.endswith("_path") else "x"
        argv.append(f"--{name}={value}")
    params = parse_params(argv, env={})
    assert params.dry_run is True  # a run from the UI plans unless told otherwise
    assert params.replay_run_id == "replay-42"


def test_the_databricks_runtime_runs_the_spark_the_tests_run() -> None:
    """The bundle's Databricks Runtime carries the Spark pinned for the tests (DBR 17.x: Spark 4.0)."""
    root = Path(__file__).resolve().parents[2]
    bundle = (root / "infra" / "databricks" / "databricks.yml").read_text()
    runtime = re.search(r"spark_version: (\d+)\.(\d+)\.x-scala(\S+)", bundle)
    assert runtime is not None
    spark_of_runtime = {("17", "3"): "4.0", ("16", "4"): "3.5", ("15", "4"): "3.5"}
    pinned = re.search(
        r"^pyspark==(\d+\.\d+)\.\d+$", (root / "requirements-dev.txt").read_text(), re.MULTILINE
    )
    assert pinned is not None
    assert spark_of_runtime[(runtime.group(1), runtime.group(2))] == pinned.group(1)
    assert runtime.group(3) == "2.13"  # Spark 4 is built for Scala 2.13 only


def test_the_databricks_job_exposes_the_message_id_policy_and_the_duplicate_detection_check() -> None:
    bundle = (Path(__file__).resolve().parents[2] / "infra" / "databricks" / "databricks.yml").read_text()
    assert "- { name: message_id_policy, default: preserve }" in bundle
    assert '- { name: duplicate_detection_check, default: "true" }' in bundle
    for name in ("subscription_id", "resource_group", "namespace"):
        assert f"{name}: ${{var.{name}}}" in bundle
