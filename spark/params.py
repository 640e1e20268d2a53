"""Job parameters of the replay, parsed from keyword arguments.

The same names serve ``python -m spark.replay --archive_path … --dry_run`` locally and the Databricks wheel
task, whose ``named_parameters`` arrive as ``--name=value``. Every option also accepts the hyphenated
spelling (``--dry-run``), so the command line reads naturally either way.
"""

from __future__ import annotations

import argparse
import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from shared.app_settings import CONNECTION_SETTINGS, AppSetting, read
from shared.local_settings import LocalSettingsError, add_settings_arguments, local_app_settings

if TYPE_CHECKING:  # azure-mgmt-servicebus is needed on the driver only, when the check runs
    from shared.management import ManagementSettings

CRASH_AFTER_BATCHES = AppSetting(
    "BUSBAR_REPLAY_TEST_CRASH_AFTER_BATCHES",
    "Tests only: a replay task SIGKILLs its own job after sending this many batches, before recording the "
    "last one in the ledger (simulates a crash in the at-most-one-batch window).",
    local_only=True,
)

SETTINGS: tuple[AppSetting, ...] = (*CONNECTION_SETTINGS, CRASH_AFTER_BATCHES)
"""App settings (environment variables) the replay job reads."""

_CONNECTION_STRING, _FULLY_QUALIFIED_NAMESPACE = CONNECTION_SETTINGS


class ParameterError(ValueError):
    """A job parameter is missing, malformed or contradicts another one."""


@dataclass(frozen=True, slots=True)
class Selection:
    """Which archived rows to replay; every criterion that is set must hold (empty tuples select all)."""

    from_time: datetime | None = None
    to_time: datetime | None = None  # exclusive
    time_column: str = "archived_at"  # archived_at | enqueued_time
    source_entities: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()  # dead_letter_reason, exact
    contract_types: tuple[str, ...] = ()
    message_ids: tuple[str, ...] = ()
    run_ids: tuple[str, ...] = ()  # the re-drive runs that archived the rows


@dataclass(frozen=True, slots=True)
class PropertyTransform:
    """Edits applied to every replayed message's application properties (declared in the job parameters)."""

    set_properties: tuple[tuple[str, str], ...] = ()
    remove_properties: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Connection:
    """How executors reach Service Bus: a connection string, or a namespace + DefaultAzureCredential."""

    connection_string: str | None = None
    fully_qualified_namespace: str | None = None


@dataclass(frozen=True, slots=True)
class ReplayParams:
    """Everything one replay run needs."""

    archive_path: str
    ledger_path: str
    report_path: str
    replay_run_id: str
    selection: Selection = field(default_factory=Selection)
    target_overrides: tuple[tuple[str, str], ...] = ()  # source entity -> target entity
    transform: PropertyTransform = field(default_factory=PropertyTransform)
    dry_run: bool = False
    force: bool = False  # resend rows the ledger says were sent
    message_id_policy: str = "preserve"  # preserve | derive (see spark.sender.build_message)
    # Where to read the targets' duplicate detection (ARM); None with the check on refuses to start.
    management: ManagementSettings | None = None
    duplicate_detection_check: bool = True  # hold rows a target would silently drop (see spark.targets)
    partitions: int | None = None  # default: the cluster's default parallelism
    batch_size: int = 500  # most messages per ServiceBusMessageBatch (the size limit may cut sooner)
    rate_limit: float = 0.0  # namespace-wide messages per second, split across tasks; 0: unlimited
    max_attempts: int = 6  # per batch, on throttling and transient errors
    backoff_seconds: float = 0.5  # first retry delay; doubles per attempt
    progress_interval: float = 5.0
    secret_scope: str | None = None
    secret_key: str | None = None
    connection_string: str | None = None
    fully_qualified_namespace: str | None = None
    spark_master: str | None = None  # local runs only (Databricks provides the session)
    crash_after_batches: int | None = None  # test hook, see CRASH_AFTER_BATCHES


def new_replay_run_id(now: datetime | None = None) -> str:
    """A fresh, sortable replay run id: ``replay-20260101T120000-1a2b3c``."""
    moment = now or datetime.now(UTC)
    return f"replay-{moment:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"


def _option(parser: argparse.ArgumentParser, name: str, **kwargs: object) -> None:
    """``--name`` plus its hyphenated alias ``--na-me`` (Databricks passes the underscore spelling)."""
    flags = [f"--{name}"]
    if "_" in name:
        flags.append(f"--{name.replace('_', '-')}")
    parser.add_argument(*flags, dest=name, **kwargs)  # type: ignore[arg-type]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m spark.replay`` (and of the Databricks wheel entry point)."""
    parser = argparse.ArgumentParser(
        prog="python -m spark.replay",
        description="Replay archived Service Bus failures selectively, in session order, exactly once.",
    )
    _option(parser, "archive_path", required=True, help="root of the Hive-partitioned archive")
    _option(parser, "ledger_path", required=True, help="root of the replay ledger (Parquet)")
    _option(parser, "report_path", required=True, help="root for plans, per-message reports and summaries")
    _option(parser, "replay_run_id", help="id of this run (default: generated)")
    _option(parser, "from_time", help="ISO-8601 start of the time range (inclusive; UTC if naive)")
    _option(parser, "to_time", help="ISO-8601 end of the time range (exclusive)")
    _option(parser, "time_column", default="archived_at", choices=("archived_at", "enqueued_time"))
    _option(parser, "source_entities", help="comma-separated source entities")
    _option(parser, "reasons", help="comma-separated dead-letter reasons")
    _option(parser, "contract_types", help="comma-separated contract types")
    _option(parser, "message_ids", help="comma-separated message ids")
    _option(parser, "run_ids", help="comma-separated archive (re-drive) run ids")
    _option(parser, "target_overrides", help="comma-separated source=target pairs")
    _option(parser, "set_properties", help="comma-separated key=value application properties to set")
    _option(parser, "remove_properties", help="comma-separated application properties to remove")
    _option(parser, "dry_run", default="false", nargs="?", const="true", help="write the plan, send nothing")
    _option(parser, "force", default="false", nargs="?", const="true", help="ignore the ledger's sent rows")
    _option(
        parser,
        "message_id_policy",
        default="preserve",
        choices=("preserve", "derive"),
        help="derive: send under a new stable MessageId (original in x-original-message-id), for targets "
        "whose duplicate detection window still holds the original",
    )
    _option(
        parser,
        "duplicate_detection_check",
        default="true",
        nargs="?",
        const="true",
        help="hold rows a target with duplicate detection would silently drop (needs the management "
        "settings below); false accepts that risk",
    )
    _option(
        parser, "subscription_id", help="Azure subscription of the namespace (default BUSBAR_SUBSCRIPTION_ID)"
    )
    _option(parser, "resource_group", help="resource group of the namespace (default BUSBAR_RESOURCE_GROUP)")
    _option(parser, "namespace", help="Service Bus namespace name (default BUSBAR_NAMESPACE)")
    _option(
        parser, "management_endpoint", help="ARM endpoint (default BUSBAR_MANAGEMENT_ENDPOINT, else Azure)"
    )
    _option(parser, "management_token", help="local emulator only: its ARM token (BUSBAR_MANAGEMENT_TOKEN)")
    _option(parser, "partitions", type=int, help="send tasks (default: default parallelism)")
    _option(parser, "batch_size", type=int, default=500)
    _option(parser, "rate_limit", type=float, default=0.0, help="namespace-wide msgs/s; 0 = unlimited")
    _option(parser, "max_attempts", type=int, default=6)
    _option(parser, "backoff_seconds", type=float, default=0.5)
    _option(parser, "progress_interval", type=float, default=5.0)
    _option(parser, "secret_scope", help="Databricks secret scope holding the connection string")
    _option(parser, "secret_key", help="key of the connection string in --secret_scope")
    _option(parser, "connection_string", help="Service Bus connection string (local)")
    _option(parser, "fully_qualified_namespace", help="<ns>.servicebus.windows.net (managed identity)")
    _option(parser, "spark_master", help="local runs: Spark master (default local[*])")
    # Read by main() before the other parameters (local_app_env); declared here for --help and validation.
    add_settings_arguments(parser, underscore=True)
    return parser


def _csv(value: str | None) -> tuple[str, ...]:
    if value is None:
        return ()
    return tuple(item.strip() for item in value.split(",") if item.strip())


def _pairs(value: str | None, option: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    for item in _csv(value):
        key, sep, val = item.partition("=")
        if not sep or not key.strip() or not val.strip():
            raise ParameterError(f"--{option}: {item!r} is not key=value")
        pairs.append((key.strip(), val.strip()))
    return tuple(pairs)


def _flag(value: str, option: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no", ""):
        return False
    raise ParameterError(f"--{option}: {value!r} is not true/false")


def _time(value: str | None, option: str) -> datetime | None:
    if value is None or not value.strip():
        return None
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError as error:
        raise ParameterError(f"--{option}: {value!r} is not an ISO-8601 timestamp") from error
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _positive(value: float | int, option: str) -> None:
    if value <= 0:
        raise ParameterError(f"--{option}: must be positive, got {value}")


def _given(argv: Sequence[str]) -> list[str]:
    """A Databricks job parameter left empty arrives as ``--name=``: treat it as not given."""
    return [arg for arg in argv if not (arg.startswith("--") and arg.endswith("=") and arg.count("=") == 1)]


def parse_params(argv: Sequence[str], env: Mapping[str, str] | None = None) -> ReplayParams:
    """Parse keyword arguments (``--name value`` / ``--name=value``) into :class:`ReplayParams`.

    Raises :class:`ParameterError` for values argparse accepts but the job cannot use."""
    parser = build_parser()
    try:
        args = parser.parse_args(_given(argv))
    except SystemExit as error:  # argparse already printed the usage and the problem
        if error.code == 0:  # --help
            raise
        raise ParameterError(f"invalid arguments: {' '.join(argv)}") from error
    from_time, to_time = _time(args.from_time, "from_time"), _time(args.to_time, "to_time")
    if from_time and to_time and from_time >= to_time:
        raise ParameterError(
            f"--from_time {from_time.isoformat()} is not before --to_time {to_time.isoformat()}"
        )
    for name in ("batch_size", "max_attempts", "progress_interval"):
        _positive(getattr(args, name), name)
    if args.partitions is not None:
        _positive(args.partitions, "partitions")
    if args.rate_limit < 0:
        raise ParameterError(f"--rate_limit: must be >= 0, got {args.rate_limit}")
    if bool(args.secret_scope) != bool(args.secret_key):
        raise ParameterError("--secret_scope and --secret_key go together")
    crash = read(CRASH_AFTER_BATCHES, env)
    check = _flag(args.duplicate_detection_check, "duplicate_detection_check")
    return ReplayParams(
        archive_path=args.archive_path,
        ledger_path=args.ledger_path,
        report_path=args.report_path,
        replay_run_id=args.replay_run_id or new_replay_run_id(),
        selection=Selection(
            from_time=from_time,
            to_time=to_time,
            time_column=args.time_column,
            source_entities=_csv(args.source_entities),
            reasons=_csv(args.reasons),
            contract_types=_csv(args.contract_types),
            message_ids=_csv(args.message_ids),
            run_ids=_csv(args.run_ids),
        ),
        target_overrides=_pairs(args.target_overrides, "target_overrides"),
        transform=PropertyTransform(
            set_properties=_pairs(args.set_properties, "set_properties"),
            remove_properties=_csv(args.remove_properties),
        ),
        dry_run=_flag(args.dry_run, "dry_run"),
        force=_flag(args.force, "force"),
        message_id_policy=args.message_id_policy,
        management=_management(args, env),
        duplicate_detection_check=check,
        partitions=args.partitions,
        batch_size=args.batch_size,
        rate_limit=args.rate_limit,
        max_attempts=args.max_attempts,
        backoff_seconds=args.backoff_seconds,
        progress_interval=args.progress_interval,
        secret_scope=args.secret_scope,
        secret_key=args.secret_key,
        connection_string=args.connection_string,
        fully_qualified_namespace=args.fully_qualified_namespace,
        spark_master=args.spark_master,
        crash_after_batches=int(crash) if crash else None,
    )


def _management(args: argparse.Namespace, env: Mapping[str, str] | None) -> ManagementSettings | None:
    """The namespace's management settings from the parameters, each falling back to its ``BUSBAR_*``
    app setting; None when the namespace is not named at all."""
    values = dict(os.environ if env is None else env)
    for option, setting in (
        ("subscription_id", "BUSBAR_SUBSCRIPTION_ID"),
        ("resource_group", "BUSBAR_RESOURCE_GROUP"),
        ("namespace", "BUSBAR_NAMESPACE"),
        ("management_endpoint", "BUSBAR_MANAGEMENT_ENDPOINT"),
        ("management_token", "BUSBAR_MANAGEMENT_TOKEN"),
    ):
        value = getattr(args, option)
        if value:
            values[setting] = value
    if not any(values.get(name, "").strip() for name in ("BUSBAR_SUBSCRIPTION_ID", "BUSBAR_NAMESPACE")):
        return None
    from shared.management import ManagementSettings, SettingsError

    try:
        return ManagementSettings.from_env(values)
    except SettingsError as error:
        raise ParameterError(f"the management settings are incomplete: {error}") from None


def local_app_env(argv: Sequence[str], environment: Mapping[str, str] | None = None) -> dict[str, str]:
    """The app settings a local run reads: the ``--settings`` file (default ./local.settings.json when it
    exists), the endpoints a running ``make run`` recorded under ``--data_dir`` and the environment over both
    (see :mod:`shared.local_settings`). On Databricks neither file exists: the environment alone."""
    parser = argparse.ArgumentParser(add_help=False)
    add_settings_arguments(parser, underscore=True)
    known, _ = parser.parse_known_args(_given(argv))
    try:
        return local_app_settings(known.settings, known.data_dir, environment)
    except LocalSettingsError as error:
        raise ParameterError(str(error)) from None


def resolve_connection(
    params: ReplayParams, secret_reader: object | None = None, env: Mapping[str, str] | None = None
) -> Connection:
    """The connection the executors use, in this order: ``--connection_string``; the Databricks secret
    (``secret_reader.get(scope, key)``, i.e. ``dbutils.secrets``); ``--fully_qualified_namespace``; the app
    settings ``ServiceBusConnection`` then ``ServiceBusConnection__fullyQualifiedNamespace``."""
    if params.connection_string:
        return Connection(connection_string=params.connection_string)
    if params.secret_scope and params.secret_key:
        if secret_reader is None:
            raise ParameterError("--secret_scope given but no Databricks secrets (dbutils) are available")
        value = secret_reader.get(params.secret_scope, params.secret_key)  # type: ignore[attr-defined]
        return Connection(connection_string=str(value))
    if params.fully_qualified_namespace:
        return Connection(fully_qualified_namespace=params.fully_qualified_namespace)
    if value := read(_CONNECTION_STRING, env):
        return Connection(connection_string=value)
    if value := read(_FULLY_QUALIFIED_NAMESPACE, env):
        return Connection(fully_qualified_namespace=value)
    raise ParameterError(
        "no Service Bus connection: pass --connection_string, --secret_scope/--secret_key or "
        "--fully_qualified_namespace, or set ServiceBusConnection"
    )
