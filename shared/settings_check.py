"""Every app setting checked at once: one error naming each bad setting and its problem.

Each feature reads its own settings when it first needs them (a re-drive run, a publish, the router), so a
bad value would surface one at a time, on the path that happens to read it first: a bad integer found at one
start, a bad number of seconds at the next. :func:`check_settings` runs every reader over the settings up
front and collects what each one refuses; :func:`require_valid_settings` raises one
:class:`InvalidAppSettings` listing them all (``make run``'s start-up hook calls it before provisioning).

A check is a reader of settings (``env -> anything``) that raises a :class:`ValueError` for a bad value;
when the error carries its problems one per setting (``problems`` on :class:`shared.management.SettingsError`
and :class:`shared.redrive.settings.RedriveSettingsError`, ``errors`` on the topology library's
``TopologyValidationError``), each is reported on its own line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from shared.api.provisioning.lock import lock_wait_seconds
from shared.api.provisioning.service import entity_defaults
from shared.management import ManagementSettings, SettingsError
from shared.redrive.settings import RedriveSettings
from shared.topology.handover import snapshot_seconds
from shared.topology.options import load_topology_options

SettingsCheck = Callable[[Mapping[str, str]], object]
"""Reads settings; raises :class:`ValueError` for a bad one."""

LIBRARY_CHECKS: tuple[SettingsCheck, ...] = (
    ManagementSettings.from_env,
    load_topology_options,
    entity_defaults,
    lock_wait_seconds,
    snapshot_seconds,
    RedriveSettings.from_env,
)
"""The readers of every setting the library declares a rule for (the others take any text)."""


class InvalidAppSettings(SettingsError):
    """Some app settings are invalid; ``problems`` names each with its problem, and the message lists them
    one a line."""

    def __init__(self, *problems: str) -> None:
        super().__init__(*problems)
        lines = [f"{len(self.problems)} invalid app setting(s):", *(f"  - {p}" for p in self.problems)]
        self.args = ("\n".join(lines),)


def _problems_of(error: ValueError) -> list[str]:
    for attribute in ("problems", "errors"):
        found = getattr(error, attribute, None)
        if isinstance(found, list) and found and all(isinstance(p, str) for p in found):
            return found
    return [str(error)]


def check_settings(env: Mapping[str, str], checks: Sequence[SettingsCheck] = LIBRARY_CHECKS) -> list[str]:
    """What every check refuses in ``env``, in check order, each problem once."""
    found: list[str] = []
    for check in checks:
        try:
            check(env)
        except ValueError as error:
            found.extend(p for p in _problems_of(error) if p not in found)
    return found


def require_valid_settings(env: Mapping[str, str], checks: Sequence[SettingsCheck] = LIBRARY_CHECKS) -> None:
    """Raise one :class:`InvalidAppSettings` naming every bad setting in ``env``; nothing when all are
    valid."""
    problems = check_settings(env, checks)
    if problems:
        raise InvalidAppSettings(*problems)
