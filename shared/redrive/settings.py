"""The re-drive's app settings, read into :class:`RedriveSettings` with every problem reported at once."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.app_settings import AppSetting, read
from shared.redrive.policy import Policy, PolicyError, parse_policy

SCHEDULE = AppSetting(
    "BUSBAR_REDRIVE_SCHEDULE",
    "NCronTab (6-field) schedule of the dead-letter re-drive timer function.",
    default="0 */5 * * * *",
)
MAX_REDRIVES = AppSetting(
    "BUSBAR_REDRIVE_MAX_REDRIVES",
    "Loop protection: a message re-driven this many times is archived instead of re-driven again.",
    default="3",
)
MAX_MESSAGES = AppSetting(
    "BUSBAR_REDRIVE_MAX_MESSAGES", "Most dead-lettered messages one re-drive run handles.", default="1000"
)
TIME_BUDGET = AppSetting(
    "BUSBAR_REDRIVE_TIME_BUDGET_SECONDS",
    "Seconds after which a re-drive run stops taking new messages (keep well inside functionTimeout).",
    default="240",
)
RATE = AppSetting(
    "BUSBAR_REDRIVE_RATE_PER_SECOND",
    "Most dead-lettered messages handled per second (Standard tier: 1,000 credits/s per namespace).",
    default="100",
)
ENTITIES = AppSetting(
    "BUSBAR_REDRIVE_ENTITIES",
    "Comma-separated entities whose dead-letter queues are re-driven: queue names and "
    "'<topic>/Subscriptions/<subscription>' paths, shell-style wildcards allowed. Empty: every queue and "
    "subscription the management plane lists.",
)
POLICY = AppSetting(
    "BUSBAR_REDRIVE_POLICY",
    "JSON re-drive policy per dead-letter reason (see shared/redrive/policy.py); merged over the defaults.",
)
ARCHIVE_URL = AppSetting(
    "BUSBAR_ARCHIVE_URL",
    "Where archived dead-lettered messages are written as Parquet: a local directory or "
    "abfs://<container>/<path>.",
    default=".data/archive",
)
ARCHIVE_ACCOUNT_NAME = AppSetting(
    "BUSBAR_ARCHIVE_ACCOUNT_NAME",
    "Storage account of an abfs:// archive, reached with the managed identity (DefaultAzureCredential).",
)
ARCHIVE_CONNECTION_STRING = AppSetting(
    "BUSBAR_ARCHIVE_CONNECTION_STRING",
    "Local only: storage connection string of an abfs:// archive (Azurite). In Azure use "
    "BUSBAR_ARCHIVE_ACCOUNT_NAME with the managed identity.",
    secret=True,
    local_only=True,
)

SETTINGS: tuple[AppSetting, ...] = (
    SCHEDULE,
    MAX_REDRIVES,
    MAX_MESSAGES,
    TIME_BUDGET,
    RATE,
    ENTITIES,
    POLICY,
    ARCHIVE_URL,
    ARCHIVE_ACCOUNT_NAME,
    ARCHIVE_CONNECTION_STRING,
)


class RedriveSettingsError(ValueError):
    """One or more re-drive settings are invalid; ``problems`` lists every one, and so does the message."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("invalid re-drive settings: " + "; ".join(problems))

    def __reduce__(self) -> tuple[type[RedriveSettingsError], tuple[list[str]]]:
        return type(self), (self.problems,)  # pickled (a Spark task's error) with its problems, not its text


@dataclass(frozen=True, slots=True)
class Limits:
    """How much one run may do."""

    max_redrives: int = 3
    max_messages: int = 1000
    time_budget_seconds: float = 240.0
    rate_per_second: float = 100.0


@dataclass(frozen=True, slots=True)
class RedriveSettings:
    """Everything a re-drive run needs from app settings (connections are read elsewhere)."""

    limits: Limits
    policy: Policy
    entities: tuple[str, ...]
    archive_url: str
    archive_storage_options: Mapping[str, Any]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RedriveSettings:
        """Read and validate the settings from ``env`` (default: the process environment)."""
        values = os.environ if env is None else env
        problems: list[str] = []

        def number(setting: AppSetting, kind: type[int] | type[float], minimum: float) -> Any:
            text = read(setting, values) or ""
            try:
                value = kind(text)
            except ValueError:
                problems.append(f"{setting.name} must be a number, got {text!r}")
                return kind(setting.default or 0)
            if value < minimum:
                problems.append(f"{setting.name} must be at least {minimum}, got {text}")
            return value

        limits = Limits(
            max_redrives=number(MAX_REDRIVES, int, 0),
            max_messages=number(MAX_MESSAGES, int, 1),
            time_budget_seconds=number(TIME_BUDGET, float, 1),
            rate_per_second=number(RATE, float, 0.1),
        )
        policy = Policy()
        try:
            policy = parse_policy(read(POLICY, values))
        except PolicyError as exc:
            problems.append(f"{POLICY.name}: {exc}")
        entities = tuple(e.strip() for e in (read(ENTITIES, values) or "").split(",") if e.strip())
        archive_url = read(ARCHIVE_URL, values) or ".data/archive"
        options: dict[str, Any] = {}
        if archive_url.startswith(("abfs://", "az://", "abfss://")):
            connection_string = read(ARCHIVE_CONNECTION_STRING, values)
            account_name = read(ARCHIVE_ACCOUNT_NAME, values)
            if connection_string:
                options["connection_string"] = connection_string
            elif account_name:
                # No key: adlfs authenticates with DefaultAzureCredential (the managed identity).
                options.update(account_name=account_name, anon=False)
            else:
                problems.append(
                    f"{ARCHIVE_URL.name} is {archive_url!r}: set {ARCHIVE_ACCOUNT_NAME.name} "
                    f"(or, locally, {ARCHIVE_CONNECTION_STRING.name})"
                )
        if problems:
            raise RedriveSettingsError(problems)
        return cls(limits, policy, entities, archive_url, options)
