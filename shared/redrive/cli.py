"""``python -m shared.redrive run|plan``: one re-drive run (or a dry run) from app settings.

Settings are the local app's, found as ``func`` finds them (:mod:`shared.local_settings`):
``local.settings.json`` (``--settings`` names another), the endpoints a running ``make run`` recorded
under ``--data-dir``, and environment variables over both -- see :mod:`shared.redrive.settings`,
``ServiceBusConnection`` and the ``BUSBAR_*`` management settings. The summary is printed as JSON. Exit
status: 0 all handled, 1 some messages or entities failed (they stay in their dead-letter queue), 2 invalid
settings.

The log (stderr) has the run's own lines; the clients' INFO logging -- every HTTP request and response of
the management client, every AMQP connection of the receivers (python-qpid-proton) and of the senders'
connections, sessions and links (azure-servicebus) -- only with ``--verbose``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Mapping, Sequence

from shared.local_settings import LocalSettingsError, add_settings_arguments, local_app_settings
from shared.management import SettingsError
from shared.redrive.job import run_redrive
from shared.redrive.runner import RunHooks
from shared.redrive.settings import RedriveSettingsError

# The Azure SDK's loggers all sit under "azure": at INFO, azure-core's HttpLoggingPolicy
# (azure.core.pipeline.policies.http_logging_policy) writes a dozen lines per management call (URL,
# headers) and azure-servicebus's AMQP stack one per connection, session and link state change: about 80
# lines before a small run's summary. python-qpid-proton (Busbar's own receivers, shared.amqp) logs each
# connection's open and close under "proton". Useful when a call misbehaves; noise otherwise. Warnings stay.
SDK_LOGGER = "azure"
AMQP_LOGGER = "proton"


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser."""
    parser = argparse.ArgumentParser(prog="python -m shared.redrive", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=("run", "plan"), help="run: re-drive and archive; plan: dry run")
    parser.add_argument(
        "--run-id", help="run id (default: time-based); re-using one keeps archive files idempotent"
    )
    parser.add_argument(
        "--receive-wait", type=float, default=1.0, help="seconds a receive waits on an empty DLQ"
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="also log the clients' INFO lines (every HTTP request and response, AMQP connections and links)",
    )
    add_settings_arguments(parser)
    return parser


def configure_logging(verbose: bool) -> None:
    """INFO for the run's own lines; the clients' (Azure SDK, proton) from WARNING unless ``verbose``."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for name in (SDK_LOGGER, AMQP_LOGGER):
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.WARNING)


def main(
    argv: Sequence[str] | None = None,
    hooks: RunHooks | None = None,
    environment: Mapping[str, str] | None = None,
) -> int:
    """Run the command; returns the exit status. ``environment``: default the process's."""
    args = build_parser().parse_args(argv)
    configure_logging(args.verbose)
    try:
        env = local_app_settings(args.settings, args.data_dir, environment)
        summary = run_redrive(
            run_id=args.run_id,
            dry_run=args.command == "plan",
            hooks=hooks,
            receive_wait=args.receive_wait,
            env=env,
        )
    except (SettingsError, RedriveSettingsError, LocalSettingsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result = summary.to_dict()
    result["summary_path"] = summary.summary_path
    print(json.dumps(result, indent=2, sort_keys=True))
    return 1 if summary.errors or summary.totals()["failed"] else 0
