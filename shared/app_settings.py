"""Every app setting Busbar reads, with its default and meaning: one declaration per setting.

Feature modules declare their settings as ``SETTINGS: tuple[AppSetting, ...]`` next to the code that reads
them and read values through :func:`read`; :func:`all_settings` gathers the library's, and the app adds
its own (``app.settings.all_settings``), for the configuration reference, ``local.settings.sample.json``
and the infrastructure checks (a test fails when the code reads a setting that is not declared, or a
declared one is missing from the Bicep template or the sample file).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AppSetting:
    """One app setting: its name, default (None: required or optional without default) and meaning."""

    name: str
    description: str
    default: str | None = None
    required: bool = False
    secret: bool = False  # holds a key or connection string: never set in Azure where an identity will do
    local_only: bool = False  # only meaningful against the emulator / devhost


def read(setting: AppSetting, env: Mapping[str, str] | None = None) -> str | None:
    """The value of ``setting`` from ``env`` (default: the process environment), else its default."""
    values = os.environ if env is None else env
    raw = values.get(setting.name)
    if raw is None or not raw.strip():
        return setting.default
    return raw.strip()


def read_seconds(
    setting: AppSetting, env: Mapping[str, str] | None = None, error: type[ValueError] = ValueError
) -> float:
    """``setting`` (see :func:`read`) as a non-negative number of seconds; a bad value raises ``error``
    naming the setting instead of falling back to a default silently."""
    raw = read(setting, env)
    try:
        value = float(raw if raw is not None else "")
    except ValueError:
        raise error(f"{setting.name} must be a number of seconds, got {raw!r}") from None
    if value < 0:
        raise error(f"{setting.name} must not be negative, got {raw!r}")
    return value


TRUE_TEXTS = ("true", "1")
FALSE_TEXTS = ("false", "0")
ACCEPTED_SWITCH_TEXTS = "true or false (or 1 or 0; any case)"
"""The values an on/off setting takes: as the Functions tooling reads a boolean app setting (``true`` in
any case, or ``1``: Azure Functions Core Tools, ``EnvironmentHelper.GetEnvironmentVariableAsBool``), with
their opposites."""


def read_switch(
    setting: AppSetting, env: Mapping[str, str] | None = None, error: type[ValueError] = ValueError
) -> bool:
    """``setting`` (see :func:`read`: surrounding blanks ignored, unset or blank is its default) as on or
    off: ``true``/``1`` or ``false``/``0``, in any case. Any other value raises ``error`` naming the setting,
    the value and the accepted values: a typo must neither switch a feature on nor off silently."""
    raw = read(setting, env)
    lowered = (raw or "").lower()
    if lowered in TRUE_TEXTS:
        return True
    if lowered in FALSE_TEXTS:
        return False
    raise error(f"{setting.name} must be {ACCEPTED_SWITCH_TEXTS}, got {raw!r}")


MANAGEMENT_SETTINGS: tuple[AppSetting, ...] = (
    AppSetting(
        "BUSBAR_SUBSCRIPTION_ID", "Azure subscription id of the Service Bus namespace.", required=True
    ),
    AppSetting("BUSBAR_RESOURCE_GROUP", "Resource group of the Service Bus namespace.", required=True),
    AppSetting(
        "BUSBAR_NAMESPACE", "Service Bus namespace name (without .servicebus.windows.net).", required=True
    ),
    AppSetting(
        "BUSBAR_MANAGEMENT_ENDPOINT",
        "Azure Resource Manager base URL used by the provisioning code.",
        default="https://management.azure.com",
    ),
    AppSetting(
        "BUSBAR_MANAGEMENT_TOKEN",
        "Development only: static bearer token for the emulator's ARM endpoint. Unset in Azure, where the "
        "managed identity (DefaultAzureCredential) is used.",
        secret=True,
        local_only=True,
    ),
)

CONNECTION_SETTINGS: tuple[AppSetting, ...] = (
    AppSetting(
        "ServiceBusConnection",
        "Local only: Service Bus connection string (the emulator's). In Azure use "
        "ServiceBusConnection__fullyQualifiedNamespace with the managed identity instead.",
        secret=True,
        local_only=True,
    ),
    AppSetting(
        "ServiceBusConnection__fullyQualifiedNamespace",
        "Fully qualified Service Bus namespace (<name>.servicebus.windows.net), used with the managed "
        "identity.",
    ),
)

# Library modules that declare a SETTINGS tuple; add a feature's module here when it gains settings. They
# import this module, hence the import by name. The app adds its own (app.settings.all_settings).
_SETTING_MODULES: tuple[str, ...] = (
    "shared.topology.options",
    "shared.topology.duplicate_detection",
    "shared.router.service",
    "shared.api.provisioning.service",
    "shared.api.provisioning.lock",
    "shared.api.provisioning.admission",
    "shared.redrive.settings",
    "shared.storage_tables",
    "shared.idempotency.records",
)


def all_settings(*extra: tuple[AppSetting, ...]) -> list[AppSetting]:
    """Every setting the library declares plus the ``extra`` groups (an app's own), by name; a name
    declared twice must be declared identically."""
    found: dict[str, AppSetting] = {}
    groups: list[tuple[AppSetting, ...]] = [CONNECTION_SETTINGS, MANAGEMENT_SETTINGS, *extra]
    for module_name in _SETTING_MODULES:
        groups.append(importlib.import_module(module_name).SETTINGS)
    for group in groups:
        for setting in group:
            known = found.get(setting.name)
            if known is not None and known != setting:
                raise ValueError(f"app setting {setting.name} is declared twice, differently")
            found[setting.name] = setting
    return sorted(found.values(), key=lambda s: s.name.lower())
