"""Every app setting the deployed app reads: the library's and the app's own, for the configuration
reference, ``local.settings.sample.json`` and the infrastructure checks; and the check of all of them at
once (:func:`require_valid_settings`)."""

from __future__ import annotations

from collections.abc import Mapping

from app import discovery, probe, provision_on_start, runtime
from shared import app_settings, settings_check
from shared.app_settings import AppSetting

CHECKS: tuple[settings_check.SettingsCheck, ...] = (
    runtime.require_connection,
    discovery.endpoint_module_names,
    provision_on_start.enabled,
    *settings_check.LIBRARY_CHECKS,
)


def all_settings() -> list[AppSetting]:
    """Every declared setting, by name (see :func:`shared.app_settings.all_settings`). The endpoints' queue
    settings are not among them: each hosted endpoint has one, named after it (``BUSBAR_<NAME>_QUEUE``,
    :attr:`shared.handlers.endpoints.Endpoint.queue_setting`, default the endpoint's name), documented once
    as that pattern and needed in no settings file."""
    return app_settings.all_settings(
        discovery.SETTINGS, runtime.SETTINGS, probe.SETTINGS, provision_on_start.SETTINGS
    )


def require_valid_settings(env: Mapping[str, str]) -> None:
    """Raise one :class:`shared.settings_check.InvalidAppSettings` naming every invalid setting in ``env``
    (see :mod:`shared.settings_check`)."""
    settings_check.require_valid_settings(env, CHECKS)
