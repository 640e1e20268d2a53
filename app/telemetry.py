"""Installing the OpenTelemetry SDK at the edge, from the ecosystem's own settings.

* ``APPLICATIONINSIGHTS_CONNECTION_STRING`` set: Azure Monitor through ``azure-monitor-opentelemetry``'s
  ``configure_azure_monitor`` (what Microsoft documents for Python function apps, with ``"telemetryMode":
  "OpenTelemetry"`` in host.json: https://learn.microsoft.com/azure/azure-functions/opentelemetry-howto).
  An OTLP endpoint set as well gets the same spans and metrics (its exporters ride along).
* ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` /
  ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``) set: OTLP over HTTP/protobuf; the exporters read every other
  standard ``OTEL_EXPORTER_OTLP_*``, ``OTEL_BSP_*``, ``OTEL_METRIC_EXPORT_INTERVAL`` and
  ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` setting themselves.
* Neither (or ``OTEL_SDK_DISABLED=true``): nothing is installed. :mod:`shared.telemetry` then runs on the
  API's no-op tracer and meter, which cost next to nothing (bench/tracing_overhead.py measures it).

In Azure and under devhost the app settings are the worker's environment, so ``environment()`` holds them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

log = logging.getLogger(__name__)

CONNECTION_STRING = "APPLICATIONINSIGHTS_CONNECTION_STRING"
OTLP_ENDPOINTS = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
)
OTLP_PROTOCOLS = ("OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
HTTP_PROTOBUF = "http/protobuf"
DEFAULT_SERVICE_NAME = "busbar"


class Export(StrEnum):
    """Where telemetry goes (what :func:`export_of` decides from the settings)."""

    NONE = "none"
    OTLP = "otlp"
    AZURE_MONITOR = "azure-monitor"


class TelemetrySettingsError(ValueError):
    """The telemetry settings ask for something this app cannot do (the message says what and how)."""


def export_of(env: Mapping[str, str]) -> Export:
    """Which exporter the settings ask for; :class:`TelemetrySettingsError` for an OTLP protocol other than
    HTTP/protobuf (the one exporter the app ships: ``opentelemetry-exporter-otlp-proto-http``)."""
    # Not Busbar's on/off reader (shared.app_settings.read_switch): OTEL_SDK_DISABLED is the OpenTelemetry
    # SDK's own setting, which it reads as exactly this ("true" in any case; anything else, "1" too, is
    # false: opentelemetry-sdk TracerProvider/MeterProvider.__init__), and the app must agree with the SDK.
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return Export.NONE
    for name in OTLP_PROTOCOLS:
        protocol = env.get(name, "").strip()
        if protocol and protocol != HTTP_PROTOBUF:
            raise TelemetrySettingsError(
                f"{name}={protocol!r} is not supported: Busbar exports OTLP over {HTTP_PROTOBUF} "
                f"(set {name}={HTTP_PROTOBUF}, or remove it, and point the endpoint at the receiver's "
                "HTTP port, 4318 by default)"
            )
    if env.get(CONNECTION_STRING, "").strip():
        return Export.AZURE_MONITOR
    if any(env.get(name, "").strip() for name in OTLP_ENDPOINTS):
        return Export.OTLP
    return Export.NONE


_configured: Export | None = None


def configure_telemetry(env: Mapping[str, str]) -> Export:
    """Install the SDK's tracer and meter providers as the settings ask, once per process (the worker
    imports the app once; a second call returns the first decision). A refused setting is logged as an
    ERROR naming the fix and nothing is exported: telemetry never stops the app from handling messages."""
    global _configured
    if _configured is not None:
        return _configured
    try:
        export = export_of(env)
    except TelemetrySettingsError as error:
        log.error("telemetry is off: %s", error)
        export = Export.NONE
    if export is not Export.NONE and _sdk_installed():
        # The Python worker configured Azure Monitor itself (PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY:
        # azure_functions_runtime's initialize_azure_monitor, before the app is imported): a second SDK
        # would export everything twice. Busbar's spans and metrics go through the worker's.
        log.info("OpenTelemetry SDK already installed (by the Functions worker): using it")
        _configured = export
        return export
    if export is Export.AZURE_MONITOR:
        _azure_monitor(env)
    elif export is Export.OTLP:
        _otlp(env)
    _configured = export
    if export is not Export.NONE:
        log.info("OpenTelemetry traces and metrics export to %s", export)
    return export


def _sdk_installed() -> bool:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    return isinstance(trace.get_tracer_provider(), TracerProvider)


def _resource(env: Mapping[str, str]) -> Any:
    from opentelemetry.sdk.resources import Resource

    if env.get("OTEL_SERVICE_NAME"):
        return Resource.create()  # reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES itself
    # In Azure the site name names the app (the host's own OpenTelemetry uses it too).
    return Resource.create({"service.name": env.get("WEBSITE_SITE_NAME") or DEFAULT_SERVICE_NAME})


def _otlp_pipeline(env: Mapping[str, str]) -> tuple[list[Any], list[Any]]:
    """Span processors and metric readers exporting over OTLP/HTTP to the configured endpoints."""
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    processors: list[Any] = []
    readers: list[Any] = []
    if env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        processors.append(BatchSpanProcessor(OTLPSpanExporter()))
    if env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"):
        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
    return processors, readers


def _otlp(env: Mapping[str, str]) -> None:
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider

    resource = _resource(env)
    processors, readers = _otlp_pipeline(env)
    tracer_provider = TracerProvider(resource=resource)
    for processor in processors:
        tracer_provider.add_span_processor(processor)
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=readers))


def _azure_monitor(env: Mapping[str, str]) -> None:
    from azure.monitor.opentelemetry import configure_azure_monitor

    processors, readers = _otlp_pipeline(env) if any(env.get(n) for n in OTLP_ENDPOINTS) else ([], [])
    configure_azure_monitor(
        connection_string=env[CONNECTION_STRING].strip(),
        resource=_resource(env),
        span_processors=processors,
        metric_readers=readers,
    )
