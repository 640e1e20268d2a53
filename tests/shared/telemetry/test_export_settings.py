"""Which exporter the app settings ask for (app.telemetry.export_of): the ecosystem's own settings."""

from __future__ import annotations

import pytest

from app.telemetry import Export, TelemetrySettingsError, export_of

CONNECTION = "InstrumentationKey=00000000-0000-0000-0000-000000000000;IngestionEndpoint=https://x/"


def test_nothing_configured_exports_nothing() -> None:
    assert export_of({}) is Export.NONE
    assert export_of({"OTEL_SERVICE_NAME": "busbar", "OTEL_EXPORTER_OTLP_ENDPOINT": " "}) is Export.NONE


@pytest.mark.parametrize(
    "name",
    [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    ],
)
def test_an_otlp_endpoint_exports_over_otlp(name: str) -> None:
    assert export_of({name: "http://127.0.0.1:4318"}) is Export.OTLP


def test_an_application_insights_connection_string_exports_to_azure_monitor_even_beside_otlp() -> None:
    assert export_of({"APPLICATIONINSIGHTS_CONNECTION_STRING": CONNECTION}) is Export.AZURE_MONITOR
    both = {"APPLICATIONINSIGHTS_CONNECTION_STRING": CONNECTION, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h"}
    assert export_of(both) is Export.AZURE_MONITOR


def test_the_sdk_disabled_setting_wins() -> None:
    assert export_of({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h"}) is Export.NONE


def test_an_otlp_protocol_the_app_cannot_speak_is_refused_naming_the_fix() -> None:
    with pytest.raises(TelemetrySettingsError, match=r"OTEL_EXPORTER_OTLP_PROTOCOL='grpc'.*http/protobuf"):
        export_of({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    explicit = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
    assert export_of(explicit) is Export.OTLP
