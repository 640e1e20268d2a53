"""Where the deployment artefacts live, and their parsed contents (read once per test session)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from app.discovery import hosted_catalog
from app.settings import all_settings
from shared.app_settings import AppSetting
from tests.infra.bicep_tree import (
    AppSettingEntry,
    BicepResource,
    Tree,
    app_settings,
    read_templates,
    resources,
)

REPO = Path(__file__).resolve().parents[2]
INFRA = REPO / "infra"
SAMPLE_SETTINGS = REPO / "local.settings.sample.json"
DOCS = REPO / "docs"

# Settings the Functions host (not Busbar's code) reads; they need no AppSetting declaration.
AZURE_HOST_SETTINGS = frozenset(
    {
        "AzureWebJobsStorage__accountName",
        "AzureWebJobsStorage__tableServiceUri",
        "AzureWebJobsStorage__credential",
        "APPLICATIONINSIGHTS_CONNECTION_STRING",
        "APPLICATIONINSIGHTS_AUTHENTICATION_STRING",
        # Read by the Python worker (azure_functions_runtime): OpenTelemetry on in the worker.
        "PYTHON_ENABLE_OPENTELEMETRY",
    }
)
# Settings of the platform that app/telemetry.py reads to decide which OpenTelemetry exporter to install:
# OpenTelemetry's own environment variables (the SDK specification's, which the SDK and exporters read
# themselves too), the Application Insights connection string and App Service's site name. Their meaning and
# defaults are the platform's, so Busbar does not declare them; docs/configuration.md has a row for each.
TELEMETRY_PLATFORM_SETTINGS = frozenset(
    {
        "APPLICATIONINSIGHTS_CONNECTION_STRING",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_SDK_DISABLED",
        "OTEL_SERVICE_NAME",
        "WEBSITE_SITE_NAME",
    }
)
LOCAL_HOST_SETTINGS = frozenset(
    {"FUNCTIONS_WORKER_RUNTIME", "AzureWebJobsStorage", "AzureWebJobsFeatureFlags"}
)


@functools.cache
def templates() -> dict[str, Tree]:
    """Every Bicep file under infra/ by relative path, parsed by pycep."""
    return read_templates(INFRA)


@functools.cache
def bicep_resources() -> tuple[BicepResource, ...]:
    return tuple(resources(templates()))


@functools.cache
def bicep_app_settings() -> tuple[AppSettingEntry, ...]:
    return tuple(app_settings(templates()))


def declared_settings() -> dict[str, AppSetting]:
    """``app.settings.all_settings()`` by name (read at test time, so new features are covered)."""
    return {setting.name: setting for setting in all_settings()}


def endpoint_queue_settings() -> dict[str, AppSetting]:
    """The queue setting of every endpoint the app hosts by default (the sample's and any module under
    ``app/endpoints/``), by name: ``BUSBAR_<ENDPOINT>_QUEUE``, documented once as that pattern, needed in no
    settings file (the queue defaults to the endpoint's name), allowed in each."""
    return {endpoint.queue_setting.name: endpoint.queue_setting for endpoint in hosted_catalog({})}


def sample_values() -> dict[str, str]:
    """``Values`` of local.settings.sample.json."""
    values = json.loads(SAMPLE_SETTINGS.read_text(encoding="utf-8"))["Values"]
    assert isinstance(values, dict)
    return {str(k): str(v) for k, v in values.items()}
