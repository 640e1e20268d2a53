"""The app settings a Busbar command line runs with: the local app's, found the way ``func`` finds them.

The Functions host (Core Tools' ``func start``, and devhost) gives an app the ``Values`` of
``local.settings.json`` in its directory as environment variables, except where the environment already
sets one: the environment wins, as app settings do in Azure. Busbar's command lines (``shared.redrive``,
``shared.topology``, ``spark.replay``) read their settings the same way, so from the checkout they describe
and reach the app ``make run`` serves:

1. the endpoints the running app recorded (``<data dir>/devhost/endpoints.json``, written by
   ``python -m devhost --data-dir`` -- ``make run`` passes ``$(DATA_DIR)/devhost`` -- while it runs): the
   emulator's connection string, management endpoint and token, on the ports it actually listens on;
2. ``local.settings.json`` (``--settings`` names another), over the record -- except values meant for a
   local emulator (a connection string with ``UseDevelopmentEmulator=true``, a management endpoint on
   127.0.0.1/localhost), which the record's replace, as devhost replaces them for the app itself;
3. the environment, over both.

A default file that does not exist means no file values (as with ``func``); a file named with
``--settings`` must exist.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

DEFAULT_SETTINGS = Path("local.settings.json")
DEFAULT_DATA_DIR = Path(".data")
# Under the data dir; devhost.endpoints_record writes it (make run: --data-dir $(DATA_DIR)/devhost).
ENDPOINTS_RECORD = Path("devhost") / "endpoints.json"


class LocalSettingsError(ValueError):
    """local.settings.json or the endpoints record cannot be read."""


def _json_object(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise LocalSettingsError(f"{path}: cannot be read ({exc})") from exc
    except json.JSONDecodeError as exc:
        raise LocalSettingsError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(document, dict):
        raise LocalSettingsError(f"{path}: the top level must be a JSON object")
    return document


def _strings(raw: Any, where: str) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise LocalSettingsError(f"{where} must be an object")
    values = {}
    for name, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise LocalSettingsError(f"{where}.{name} must be a string")
        values[str(name)] = str(value)
    return values


def read_settings_file(path: Path) -> dict[str, str]:
    """The ``Values`` of a local.settings.json file, checked as the host checks them."""
    document = _json_object(path)
    if document.get("IsEncrypted"):
        raise LocalSettingsError(f"{path}: encrypted settings are not supported (IsEncrypted)")
    return _strings(document.get("Values") or {}, f"{path}: Values")


def read_endpoints_record(path: Path) -> dict[str, str]:
    """The app settings a running devhost recorded as pointing at what it listens on (empty: no record)."""
    if not path.exists():
        return {}
    return _strings(_json_object(path).get("settings") or {}, f"{path}: settings")


def points_at_local_emulator(value: str) -> bool:
    """Whether a setting's value is meant for an emulator on this machine (devhost's own rule)."""
    text = value.replace(" ", "").lower()
    return "usedevelopmentemulator=true" in text or text.startswith(("http://127.0.0.1", "http://localhost"))


def merge_settings(
    file_values: Mapping[str, str], recorded: Mapping[str, str], environment: Mapping[str, str]
) -> dict[str, str]:
    """The settings in force: recorded endpoints, then file values (except those meant for a local
    emulator where the record has the actual one), then the environment over both."""
    merged = dict(recorded)
    for name, value in file_values.items():
        if name in recorded and points_at_local_emulator(value):
            continue
        merged[name] = value
    merged.update(environment)
    return merged


def local_app_settings(
    settings: Path | None = None, data_dir: Path | None = None, environment: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The settings a command line runs with (see the module docstring). ``settings``: the file named on
    the command line (must exist), None for ``local.settings.json`` if present; ``environment``: default
    the process's."""
    path = settings if settings is not None else DEFAULT_SETTINGS
    if settings is not None and not path.is_file():
        raise LocalSettingsError(
            f"{path}: no such settings file (`make run` creates it from local.settings.sample.json)"
        )
    file_values = read_settings_file(path) if path.is_file() else {}
    recorded = read_endpoints_record((data_dir or DEFAULT_DATA_DIR) / ENDPOINTS_RECORD)
    return merge_settings(file_values, recorded, os.environ if environment is None else environment)


def add_settings_arguments(parser: argparse.ArgumentParser, *, underscore: bool = False) -> None:
    """``--settings`` and ``--data-dir`` (also ``--data_dir`` with ``underscore``, for job parameters)."""
    parser.add_argument(
        "--settings",
        type=Path,
        default=None,
        help="local.settings.json to read (default: ./local.settings.json if it exists); environment "
        "variables win over its Values",
    )
    flags = ["--data-dir", "--data_dir"] if underscore else ["--data-dir"]
    parser.add_argument(
        *flags,
        dest="data_dir",
        type=Path,
        default=None,
        help=f"the local app's data directory, where a running `make run` records its endpoints "
        f"(default: {DEFAULT_DATA_DIR}, as make run's DATA_DIR)",
    )
