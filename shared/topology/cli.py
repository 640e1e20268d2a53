"""``python -m shared.topology plan|apply|validate|unsubscribe``: provisioning from the command line.

``--options FILE`` is NServiceBus TopologyOptions JSON (default: the app's own, from the
``AzureServiceBus__TopologyOptions`` app setting and its overrides); events are contract names or JSON
objects ``{"type": ..., "topic": ..., "routingMode": ..., "filter": ...}`` (a filter: SQL over promoted
properties or a correlation object, checked against ``--contracts`` before anything is provisioned: see
:mod:`shared.topology.content_filters`). The management plane comes from the
``BUSBAR_*`` settings (see :mod:`shared.management`). Settings are the local app's, found as ``func`` finds
them (:mod:`shared.local_settings`): ``local.settings.json`` (``--settings``), the endpoints a running
``make run`` recorded (``--data-dir``), environment variables over both. Output is JSON on stdout;
``apply`` prints the plan before changing anything. ``plan``/``apply`` refuse to give the endpoint a second
path for an event (``"error": "duplicate-delivery"``, naming both paths), counted per concrete event (an
interface stands for the implementers ``--contracts`` knows, a topic for what the publish map sends there:
:mod:`shared.topology.event_carriers`), unless ``--migrate`` declares a
migration that deletes the old path (off the fallback topic, only after the router's snapshot interval,
``BUSBAR_ROUTER_SNAPSHOT_SECONDS``, plus 2 s: see :mod:`shared.topology.handover`). ``--ordered``: the
endpoint is ordered, its input queue requires sessions and its hold queue ``<queue>.held`` is wanted too
(:mod:`shared.topology.queues`); an existing queue whose ``RequiresSession`` differs is refused (``"error":
"needs-new-queue"``, the plan's ``refused`` item names it) and nothing is applied; so is a subscription to a
contract without an ordering key (``"error": "unkeyed-contract"``, naming the endpoint and the contract: see
:mod:`shared.topology.ordered_subscriptions`), the keys read from ``--contracts`` (the app's contract
registry, by default the app's: ``app.services:CONTRACTS``, every hosted endpoint's). ``--move-from QUEUE``:
the endpoint moves from its previous queue, whose subscriptions of the same name are redirected in place (an
``update`` in the plan; docs/topology-guide.md, "Making an endpoint ordered: a new queue"); a move that
would leave a subscription forwarding to the old queue, or redirect a rule of an event it does not list, is
refused (``"error": "incomplete-move"``). Exit codes:
0 done, 2 invalid options or request (a second path, a queue that needs a new name included), 3 quota
exceeded, 4 refused by the management plane.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, TextIO

from shared.contracts import ContractRegistry
from shared.local_settings import LocalSettingsError, add_settings_arguments, local_app_settings
from shared.management import ManagementClient, ManagementSettings, SettingsError
from shared.topology.content_filters import require_valid_filters
from shared.topology.delivery_paths import DuplicateDeliveryError
from shared.topology.desired import desired_state, parse_subscribed_events
from shared.topology.duplicate_detection import duplicate_detection_window
from shared.topology.errors import ProvisioningError, QuotaExceededError, TopologyValidationError
from shared.topology.event_carriers import registry_enclosed_of
from shared.topology.handover import snapshot_seconds
from shared.topology.options import TopologyOptions, load_topology_options, parse_topology_options
from shared.topology.ordered_subscriptions import UnkeyedSubscriptionError, require_keyed
from shared.topology.plan import EntityDefaults
from shared.topology.provisioner import Provisioner
from shared.topology.queue_move import IncompleteMoveError, check_complete_move
from shared.topology.single_delivery import PlanRefusedError, Subscriber, plan_delivery
from shared.topology.validation import validate

DEFAULT_CONTRACTS = "app.services:CONTRACTS"
"""The contract registry ``--ordered`` reads keys from, and the one-delivery check reads implementers
from, unless ``--contracts`` names another: the app's (every hosted endpoint's contracts and the
published-only ones, :mod:`app.services`). Loaded by name: the library itself never
depends on an app."""


def load_contracts(spec: str) -> ContractRegistry:
    """The :class:`ContractRegistry` ``MODULE:NAME`` names (the object, or what calling it returns);
    :class:`TopologyValidationError` when it cannot be loaded."""
    module_name, _, attribute = spec.partition(":")
    try:
        found: Any = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError, ValueError) as exc:
        raise TopologyValidationError([f"--contracts {spec}: cannot load it ({exc})"]) from None
    registry = found() if callable(found) and not isinstance(found, ContractRegistry) else found
    if not isinstance(registry, ContractRegistry):
        raise TopologyValidationError([f"--contracts {spec}: not a ContractRegistry ({type(registry)})"])
    return registry


def _duplicate_check_contracts(spec: str | None) -> ContractRegistry | None:
    """The registry the one-delivery check reads implementers from: the one ``--contracts`` names (an
    error when it cannot be loaded), else the default when it loads (the CLI may run where the app
    is not importable: then each subscribed name stands for itself, as a name the registry does not know
    does)."""
    if spec is not None:
        return load_contracts(spec)
    try:
        return load_contracts(DEFAULT_CONTRACTS)
    except TopologyValidationError:
        return None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m shared.topology", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("validate", "check the options (and, with --endpoint, the subscription request)"),
        ("plan", "show what apply would do; changes nothing"),
        ("apply", "print the plan, then create what is missing"),
        ("unsubscribe", "remove the endpoint's subscription or rule for each event"),
    ):
        sub = commands.add_parser(name, help=text)
        sub.add_argument(
            "--options",
            type=Path,
            help="TopologyOptions JSON file (default: the app's, AzureServiceBus__TopologyOptions)",
        )
        sub.add_argument("--hierarchy", help="hierarchy namespace (prefix of queue and topic paths)")
        sub.add_argument("--endpoint", required=name != "validate", help="the endpoint's input queue")
        sub.add_argument("--events", nargs="*", default=[], help="contract names or JSON objects")
        if name in ("validate", "plan", "apply"):
            sub.add_argument(
                "--ordered",
                action="store_true",
                help="the endpoint is ordered: its input queue requires sessions and its hold queue "
                "<queue>.held is provisioned too; an existing queue whose RequiresSession differs is "
                "refused (exit 2): it needs a new queue; so is an event without an ordering key",
            )
            sub.add_argument(
                "--move-from",
                metavar="QUEUE",
                help="the endpoint's previous input queue: its subscriptions (the same names, see "
                "QueueNameToSubscriptionNameMap) are redirected to --endpoint's queue in place, one atomic "
                "forwardTo update each, so every event reaches one of the two queues, never both",
            )
            sub.add_argument(
                "--contracts",
                metavar="MODULE:NAME",
                help="the app's contract registry (a ContractRegistry, or a function returning one), where "
                "--ordered reads each event's ordering key and plan/apply read which concrete events an "
                "interface stands for, to count each one's paths into the queue (default: "
                f"{DEFAULT_CONTRACTS}; when the default cannot be loaded, each event stands for itself)",
            )
        if name in ("plan", "apply"):
            sub.add_argument(
                "--migrate",
                action="store_true",
                help="a declared migration: also delete the endpoint's other paths for these events (after "
                "the new ones exist), so each event is delivered once",
            )
        sub.add_argument(
            "--no-false-default-rule",
            dest="false_default_rule",
            action="store_false",
            help="filtered subscriptions get only their event rules, not NServiceBus's $default 1=0 "
            "(one SQL filter less per subscription against the topic's 2,000)",
        )
        add_settings_arguments(sub)
    return parser


def _event_items(raw: Sequence[str]) -> list[Any]:
    return [json.loads(item) if item.lstrip().startswith("{") else item for item in raw]


def _options(args: argparse.Namespace, env: Mapping[str, str]) -> TopologyOptions:
    options = parse_topology_options(args.options.read_text()) if args.options else load_topology_options(env)
    if args.hierarchy:
        options = options.model_copy(update={"hierarchy_namespace": args.hierarchy})
    return validate(options)


def _window(env: Mapping[str, str]) -> timedelta:
    """``BUSBAR_DUPLICATE_DETECTION_WINDOW`` of ``env``; a bad value is a settings error naming it."""
    try:
        return duplicate_detection_window(env)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None


def _router_snapshot_seconds(env: Mapping[str, str]) -> float:
    try:
        return snapshot_seconds(env)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None


def run(
    argv: Sequence[str] | None = None, out: TextIO = sys.stdout, environment: Mapping[str, str] | None = None
) -> int:
    """Run the command; returns the exit status. ``environment``: default the process's."""
    args = _parser().parse_args(argv)

    def emit(document: object) -> None:
        out.write(json.dumps(document, indent=2) + "\n")

    try:
        env = local_app_settings(args.settings, args.data_dir, environment)
        options = _options(args, env)
        events = parse_subscribed_events(_event_items(args.events))
        if args.command != "unsubscribe" and args.ordered and args.endpoint:
            # Before any call: an unkeyed event would be dead-lettered on its way to the session queue.
            contracts = load_contracts(args.contracts or DEFAULT_CONTRACTS)
            require_keyed(args.endpoint, contracts, [e.event for e in events])
        if args.command != "unsubscribe" and any(e.filter is not None for e in events):
            # Before any call: a filter that reads what no publisher sets would silently match nothing.
            require_valid_filters(events, load_contracts(args.contracts or DEFAULT_CONTRACTS))
        if args.command == "validate":
            document: dict[str, Any] = {"valid": True, "options": options.to_json_dict()}
            if args.endpoint:
                document["desired"] = desired_state(
                    options,
                    args.endpoint,
                    events,
                    false_default_rule=args.false_default_rule,
                    ordered=args.ordered,
                    moved_from=args.move_from,
                    duplicate_detection_window=_window(env),
                ).to_dict()
            emit(document)
            return 0
        settings = ManagementSettings.from_env(env)
        with ManagementClient(settings) as management:
            window = _window(env)
            provisioner = Provisioner(management, EntityDefaults(duplicate_detection_window=window))
            if args.command == "unsubscribe":
                results = [provisioner.unsubscribe(options, args.endpoint, e.event).to_dict() for e in events]
                emit({"unsubscribed": results})
                return 0
            desired = desired_state(
                options,
                args.endpoint,
                events,
                false_default_rule=args.false_default_rule,
                ordered=args.ordered,
                moved_from=args.move_from,
                duplicate_detection_window=window,
            )
            registry = _duplicate_check_contracts(args.contracts)
            try:
                plan = plan_delivery(
                    provisioner,
                    options,
                    [Subscriber(args.endpoint, events)],
                    desired,
                    migrate=args.migrate,
                    enclosed_of=registry_enclosed_of(registry) if registry is not None else None,
                    router_snapshot_seconds=_router_snapshot_seconds(env),
                )
            except PlanRefusedError as refused:  # an immutable property differs: nothing is applied
                emit({"plan": refused.plan.to_dict(), "error": "needs-new-queue", "errors": refused.errors})
                return 2
            try:
                check_complete_move(plan, desired, lambda queue: provisioner.describe(queue, options))
            except IncompleteMoveError as exc:
                emit({"plan": plan.to_dict(), "error": "incomplete-move", "errors": exc.errors})
                return 2
            emit({"plan": plan.to_dict()})
            if args.command == "apply":
                emit({"applied": provisioner.apply(plan).to_dict()})
            return 0
    except UnkeyedSubscriptionError as exc:
        emit({"error": "unkeyed-contract", "errors": exc.errors, "contracts": exc.unkeyed})
        return 2
    except DuplicateDeliveryError as exc:
        emit(
            {
                "error": "duplicate-delivery",
                "errors": exc.errors,
                "duplicates": [d.to_dict() for d in exc.duplicates],
            }
        )
        return 2
    except (TopologyValidationError, SettingsError, LocalSettingsError, json.JSONDecodeError, OSError) as exc:
        errors = exc.errors if isinstance(exc, TopologyValidationError) else [str(exc)]
        emit({"error": "invalid", "errors": errors})
        return 2
    except QuotaExceededError as exc:
        emit({"error": "quota", "errors": exc.violations})
        return 3
    except ProvisioningError as exc:
        emit(
            {
                "error": "refused",
                "action": exc.action,
                "path": exc.path,
                "status": exc.status,
                "code": exc.code,
                "message": exc.message,
                "done": exc.done,
            }
        )
        return 4
