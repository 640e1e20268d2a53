"""host.json, local.settings.json, binding expressions, connections and route templates (pure)."""

from __future__ import annotations

import json
import logging
import os
from datetime import timedelta
from pathlib import Path

import pytest

from devhost.__main__ import effective_settings
from devhost.bindings import BindingError, resolve_connection, resolve_expression
from devhost.host import apply_log_levels
from devhost.host_config import HostConfigError, load_host_config, parse_timespan
from devhost.http.keys import ADMIN, ANONYMOUS, FUNCTION, HostKeys
from devhost.http.routes import RouteError, compile_route
from devhost.local_settings import ConfiguredKeys, LocalSettingsError, load_local_settings


def test_service_bus_defaults_are_the_hosts() -> None:
    options = load_host_config({"version": "2.0"}).service_bus
    assert options.max_concurrent_calls == 16 * (os.cpu_count() or 1)
    assert options.prefetch_count == 0
    assert options.max_auto_lock_renewal_duration == timedelta(minutes=5)
    assert options.auto_complete_messages is True
    assert options.max_concurrent_sessions == 8
    assert options.max_message_batch_size == 1000
    assert options.session_idle_timeout is None


def test_repository_host_json_is_read() -> None:
    config = load_host_config(Path(__file__).parents[2] / "host.json")
    assert config.route_prefix == "api"
    assert config.function_timeout == timedelta(minutes=10)
    assert config.service_bus.max_concurrent_calls == 16
    assert config.service_bus.max_auto_lock_renewal_duration == timedelta(minutes=10)
    assert config.service_bus.max_concurrent_sessions == 16
    assert config.service_bus.session_idle_timeout == timedelta(seconds=2)
    assert config.default_log_level == "Information"


def test_the_repository_host_json_asks_the_host_for_opentelemetry_and_devhost_reads_it() -> None:
    # "telemetryMode": "OpenTelemetry" (host.json root) makes the Azure Functions host emit OpenTelemetry
    # instead of Application Insights SDK telemetry (learn.microsoft.com/azure/azure-functions/
    # opentelemetry-howto); devhost has no telemetry of its own and reads the rest of the file as before.
    path = Path(__file__).parents[2] / "host.json"
    assert json.loads(path.read_text())["telemetryMode"] == "OpenTelemetry"
    assert load_host_config(path).route_prefix == "api"


def test_opentelemetry_settings_in_local_settings_reach_the_worker_unchanged() -> None:
    # The worker's environment is the app settings (devhost.channel.process_worker), as in Azure: the OTLP
    # exporter reads OTEL_EXPORTER_OTLP_* from it.
    values = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SERVICE_NAME": "busbar"}
    assert effective_settings(values, {}, {}).items() >= values.items()


def test_session_options_are_read_with_the_extensions_names_and_timespan_format() -> None:
    # ServiceBusOptions (extension 5.x): MaxConcurrentSessions (int), SessionIdleTimeout (TimeSpan?),
    # bound from host.json's camelCase keys; an unset SessionIdleTimeout falls back to the try timeout.
    options = load_host_config(
        {
            "version": "2.0",
            "extensions": {"serviceBus": {"maxConcurrentSessions": 3, "sessionIdleTimeout": "00:01:30.5"}},
        }
    ).service_bus
    assert options.max_concurrent_sessions == 3
    assert options.session_idle_timeout == timedelta(minutes=1, seconds=30.5)
    renewal_off = {"version": "2.0", "extensions": {"serviceBus": {"maxAutoLockRenewalDuration": "00:00:00"}}}
    assert load_host_config(renewal_off).service_bus.max_auto_lock_renewal_duration == timedelta(0)


def test_infinite_timespan_means_no_limit() -> None:
    config = load_host_config(
        {"version": "2.0", "extensions": {"serviceBus": {"maxAutoLockRenewalDuration": "-00:00:00.0010000"}}}
    )
    assert config.service_bus.max_auto_lock_renewal_duration is None
    assert parse_timespan("1.02:03:04.5", setting="x") == timedelta(days=1, hours=2, minutes=3, seconds=4.5)


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        ({"version": "1.0"}, "version must be"),
        ({"version": "2.0", "functionTimeout": "ten minutes"}, "functionTimeout"),
        ({"version": "2.0", "extensions": {"serviceBus": {"maxConcurrentCalls": 0}}}, "maxConcurrentCalls"),
        ({"version": "2.0", "extensions": {"serviceBus": {"autoCompleteMessages": "yes"}}}, "autoComplete"),
        # ServiceBusSessionProcessorOptions: MaxConcurrentSessions >= 1, SessionIdleTimeout positive.
        (
            {"version": "2.0", "extensions": {"serviceBus": {"maxConcurrentSessions": 0}}},
            "maxConcurrentSessions",
        ),
        ({"version": "2.0", "extensions": {"serviceBus": {"sessionIdleTimeout": "00:00:00"}}}, "positive"),
        (
            {"version": "2.0", "extensions": {"serviceBus": {"sessionIdleTimeout": "-00:00:00.0010000"}}},
            "positive",
        ),
        # Only Timeout.InfiniteTimeSpan may be negative (ServiceBusOptions.MaxAutoLockRenewalDuration).
        (
            {"version": "2.0", "extensions": {"serviceBus": {"maxAutoLockRenewalDuration": "-00:05:00"}}},
            "negative",
        ),
        (
            {"version": "2.0", "extensions": {"serviceBus": {"maxConcurrentCallsPerSession": 2}}},
            "maxConcurrentCallsPerSession",
        ),
    ],
)
def test_bad_host_json_is_refused_precisely(document: dict[str, object], fragment: str) -> None:
    with pytest.raises(HostConfigError, match=fragment):
        load_host_config(document)


def test_local_settings_values_port_and_keys_are_read(tmp_path: Path) -> None:
    path = tmp_path / "local.settings.json"
    path.write_text(
        json.dumps(
            {
                "IsEncrypted": False,
                "Values": {"A": "1", "B": 2},
                "Host": {"LocalHttpPort": 7072},
                "Keys": {"master": "m", "functions": {"f": "k"}},
            }
        )
    )
    settings = load_local_settings(path)
    assert settings.values == {"A": "1", "B": "2"}
    assert settings.http_port == 7072
    assert settings.keys.master == "m" and settings.keys.functions == {"f": "k"}
    assert load_local_settings(tmp_path / "missing.json").values == {}


def test_malformed_local_settings_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "local.settings.json"
    path.write_text("{not json")
    with pytest.raises(LocalSettingsError, match="not valid JSON"):
        load_local_settings(path)


def test_binding_expressions_resolve_from_settings_and_unknown_names_fail() -> None:
    assert resolve_expression("%Topic%-%Env%", {"Topic": "orders", "Env": "dev"}, where="f") == "orders-dev"
    with pytest.raises(BindingError, match=r"'%Missing%' does not resolve to a value\."):
        resolve_expression("%Missing%", {}, where="function 'f'")


def test_connection_is_a_connection_string_or_a_fully_qualified_namespace() -> None:
    assert (
        resolve_connection("Sb", {"Sb": "Endpoint=sb://x/;"}, where="f").connection_string
        == "Endpoint=sb://x/;"
    )
    identity = resolve_connection(
        "Sb", {"Sb__fullyQualifiedNamespace": "ns.servicebus.windows.net"}, where="f"
    )
    assert identity.fully_qualified_namespace == "ns.servicebus.windows.net"
    with pytest.raises(BindingError, match="AzureWebJobsServiceBus"):
        resolve_connection(None, {}, where="f")


def test_environment_wins_over_the_file_and_the_embedded_emulator_replaces_local_emulator_strings() -> None:
    emulator = {"ServiceBusConnection": "Endpoint=sb://localhost:6000;UseDevelopmentEmulator=true;", "X": "e"}
    file_values = {
        "ServiceBusConnection": "Endpoint=sb://localhost:5672;UseDevelopmentEmulator=true;",
        "X": "f",
    }
    settings = effective_settings(file_values, {"X": "env"}, emulator)
    assert settings["ServiceBusConnection"].startswith("Endpoint=sb://localhost:6000")
    assert settings["X"] == "env"


def test_keys_grant_access_by_auth_level() -> None:
    keys = HostKeys(ConfiguredKeys(master="master", host="host", functions={"f": "fkey"}), ["f", "g"])
    assert keys.authorizes(ANONYMOUS, "f", None)
    assert keys.authorizes(FUNCTION, "f", "fkey") and keys.authorizes(FUNCTION, "f", "host")
    assert keys.authorizes(FUNCTION, "f", "master")
    assert not keys.authorizes(FUNCTION, "g", "fkey")  # another function's key
    assert not keys.authorizes(FUNCTION, "f", None)
    assert keys.authorizes(ADMIN, "f", "master") and not keys.authorizes(ADMIN, "f", "host")
    assert keys.function_key("g") not in ("master", "host", "fkey")


def test_route_templates_match_parameters_constraints_and_catch_all() -> None:
    route = compile_route("endpoints/{endpoint}/subscriptions/{eventType}")
    assert route.match("Endpoints/billing/subscriptions/Shop.OrderPlaced") == {
        "endpoint": "billing",
        "eventType": "Shop.OrderPlaced",
    }
    assert route.match("endpoints/billing") is None
    assert compile_route("items/{id:int}").match("items/abc") is None
    assert compile_route("files/{*path}").match("files/a/b/c") == {"path": "a/b/c"}
    assert compile_route("things/{name?}").match("things") == {}
    with pytest.raises(RouteError, match="unsupported constraint"):
        compile_route("x/{id:regex}")


def test_host_json_log_levels_set_the_invocation_and_host_loggers() -> None:
    function_logger = logging.getLogger("devhost.Function")
    before = function_logger.level
    try:
        apply_log_levels({"Function": "Warning", "Unknown.Category": "Trace"})
        assert function_logger.level == logging.WARNING
        apply_log_levels({"Function.work": "None"})
        assert not function_logger.isEnabledFor(logging.CRITICAL)
    finally:
        function_logger.setLevel(before)
