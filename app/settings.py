"""Every app setting the deployed app reads: the library's and the app's own, for the configuration
reference, ``local.settings.sample.json`` and the infrastructure checks."""

from __future__ import annotations

from app import probe, runtime, sample_endpoints
from shared import app_settings
from shared.app_settings import AppSetting


def all_settings() -> list[AppSetting]:
    """Every declared setting, by name (see :func:`shared.app_settings.all_settings`)."""
    return app_settings.all_settings(sample_endpoints.SETTINGS, runtime.SETTINGS, probe.SETTINGS)
