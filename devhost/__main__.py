"""Command line: run ``function_app.py`` locally the way the Azure Functions host runs it.

    python -m devhost [--app function_app.py] [--settings local.settings.json] [--host-json host.json]
                      [--port 7071] [--data-dir .data/devhost] [--with-emulator ...] [--with-azurite ...]
                      [--startup-hook module:function] [--master-key-url FUNCTION ...]

Against a real namespace: leave out ``--with-emulator`` and set ``ServiceBusConnection`` (connection
string) or ``ServiceBusConnection__fullyQualifiedNamespace`` (DefaultAzureCredential) in
local.settings.json or the environment, plus the ``BUSBAR_*`` management settings.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from devhost.endpoints_record import remove_record, write_record
from devhost.host import FunctionsHost, HostOptions, StartupHook
from devhost.host_config import HostConfig, HostConfigError, load_host_config
from devhost.local_settings import LocalSettings, LocalSettingsError, load_local_settings
from devhost.storage.azurite import AzuriteError, AzuritePorts
from devhost.storage.azurite_service import AzuriteService
from devhost.storage.settings import STORAGE_SETTING, storage_configured_elsewhere

READY_LINE = "devhost ready"
EMULATOR_NAMESPACE = "sbemulatorns"
EMULATOR_SUBSCRIPTION_ID = "00000000-0000-0000-0000-000000000000"
EMULATOR_RESOURCE_GROUP = "busbar-local"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m devhost",
        description="Run a Python v2-model Azure Functions app locally with the Functions host's trigger "
        "semantics (Service Bus, timer, HTTP), against the embedded emulator (--with-emulator) or a real "
        "Service Bus namespace (set ServiceBusConnection or ServiceBusConnection__fullyQualifiedNamespace "
        "in local.settings.json or the environment).",
    )
    parser.add_argument("--app", type=Path, default=Path("function_app.py"), help="the app script")
    parser.add_argument(
        "--settings",
        type=Path,
        default=Path("local.settings.json"),
        help="local.settings.json (Values become environment variables; environment variables win)",
    )
    parser.add_argument("--host-json", type=Path, default=Path("host.json"), help="host.json")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP interface (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=None, help="HTTP port (default Host.LocalHttpPort or 7071; 0 = free)"
    )
    parser.add_argument(
        "--drain-seconds", type=float, default=30.0, help="how long Ctrl-C waits for in-flight invocations"
    )
    parser.add_argument(
        "--with-emulator",
        action="store_true",
        help="start the embedded Service Bus emulator and point ServiceBusConnection and BUSBAR_* at it",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="devhost's own data (make run: .data/devhost): HTTP keys kept across restarts under secrets/, "
        "as the Functions host keeps them in storage, and endpoints.json naming the URLs and ports it "
        "listens on while it runs (for command-line tools). Default: none (new keys each start)",
    )
    parser.add_argument("--emulator-data-dir", type=Path, default=Path(".data/emulator"))
    parser.add_argument("--emulator-config", type=Path, default=None, help="emulator Config.json")
    parser.add_argument("--amqp-port", type=int, default=5672, help="emulator AMQP port (0 = free)")
    parser.add_argument(
        "--management-port", type=int, default=5300, help="emulator management port (0 = free)"
    )
    parser.add_argument(
        "--management-tls",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="serve the emulator's management API over HTTPS too, for ServiceBusAdministrationClient "
        "(which always speaks HTTPS); its CA file is kept in --emulator-data-dir (default: on)",
    )
    parser.add_argument(
        "--management-tls-port", type=int, default=5301, help="emulator HTTPS management port (0 = free)"
    )
    parser.add_argument(
        "--emulator-sku",
        choices=("Standard", "Premium"),
        default="Standard",
        help="the emulated namespace's tier (default Standard; see docs/emulator.md)",
    )
    parser.add_argument(
        "--amqps-port",
        type=int,
        default=5671,
        help="with --management-tls: the emulator's namespace TLS port, serving the admin API and AMQP over "
        "TLS alike (SERVICEBUS_FULLY_QUALIFIED_NAMESPACE=localhost:<port>; the SDK's AMQP client always "
        "uses 5671 for a namespace name; 0 = free)",
    )
    parser.add_argument(
        "--with-azurite",
        action="store_true",
        help=f"start Azurite (tools/azurite: blob, queue, table) and point {STORAGE_SETTING} at it, unless "
        f"the settings name another account ({STORAGE_SETTING} not meant for the development storage, or an "
        f"identity-based {STORAGE_SETTING}__*)",
    )
    parser.add_argument(
        "--azurite-data-dir", type=Path, default=Path(".data/azurite"), help="Azurite's data (kept)"
    )
    parser.add_argument("--azurite-blob-port", type=int, default=10000, help="Azurite blob port (0 = free)")
    parser.add_argument("--azurite-queue-port", type=int, default=10001, help="Azurite queue port (0 = free)")
    parser.add_argument("--azurite-table-port", type=int, default=10002, help="Azurite table port (0 = free)")
    parser.add_argument(
        "--startup-hook",
        default=None,
        metavar="MODULE:FUNCTION",
        help="callable taking the settings mapping, run before the triggers start (e.g. provisioning)",
    )
    parser.add_argument(
        "--master-key-url",
        action="append",
        default=[],
        metavar="FUNCTION",
        help="list this HTTP function's URL with ?code=<master key>: a page a browser opens with the master "
        "key, such as Busbar's ops_console (repeatable)",
    )
    parser.add_argument("--log-level", default="INFO", help="devhost log level (default INFO)")
    return parser.parse_args(argv)


def load_hook(reference: str | None) -> StartupHook | None:
    """``module:function`` -> the callable."""
    if not reference:
        return None
    module_name, _, attribute = reference.partition(":")
    if not attribute:
        raise ValueError(f"--startup-hook '{reference}' must look like module:function")
    hook = getattr(importlib.import_module(module_name), attribute)
    if not callable(hook):
        raise ValueError(f"--startup-hook '{reference}' is not callable")
    return hook  # type: ignore[no-any-return]


def emulator_settings(emulator: Any) -> dict[str, str]:
    """The settings that point the app and its triggers at an embedded emulator."""
    return {
        "ServiceBusConnection": emulator.connection_string,
        "BUSBAR_MANAGEMENT_ENDPOINT": f"http://127.0.0.1:{emulator.management_port}",
        "BUSBAR_MANAGEMENT_TOKEN": emulator.management_token,
        "BUSBAR_SUBSCRIPTION_ID": EMULATOR_SUBSCRIPTION_ID,
        "BUSBAR_RESOURCE_GROUP": EMULATOR_RESOURCE_GROUP,
        "BUSBAR_NAMESPACE": EMULATOR_NAMESPACE,
    }


IDENTITY_SETTINGS = ("IDENTITY_ENDPOINT", "IDENTITY_HEADER")


def identity_settings(emulator: Any, *configured: Mapping[str, str]) -> dict[str, str]:
    """``IDENTITY_ENDPOINT`` / ``IDENTITY_HEADER`` of the emulator's managed identity, as Azure's host gives
    an app with a managed identity; none when the app settings or the environment set either (the pair
    belongs together: an endpoint from one place and a header from another would never match)."""
    if any(name in values for values in configured for name in IDENTITY_SETTINGS):
        return {}
    return {"IDENTITY_ENDPOINT": emulator.identity_endpoint, "IDENTITY_HEADER": emulator.identity_header}


def identity_banner(emulator: Any) -> list[str]:
    """The banner's lines for code that signs in as the SDK's samples do (``DefaultAzureCredential`` with
    a fully qualified namespace), one ``NAME=value`` a line, to export as they are."""
    lines = ["Managed identity and namespace for DefaultAzureCredential (export these; docs/emulator.md):"]
    if emulator.fully_qualified_namespace is not None:
        lines.append(f"SERVICEBUS_FULLY_QUALIFIED_NAMESPACE={emulator.fully_qualified_namespace}")
    lines.append(f"IDENTITY_ENDPOINT={emulator.identity_endpoint}")
    lines.append(f"IDENTITY_HEADER={emulator.identity_header}")
    if emulator.certifi_trust is not None:
        # ServiceBusClient's AMQP over TLS trusts certifi's bundle only; this certifi adds the emulator's CA.
        lines.append(f"PYTHONPATH={emulator.certifi_trust}")
    return lines


def emulator_admin_endpoints(emulator: Any) -> dict[str, str]:
    """Where ServiceBusAdministrationClient reaches an embedded emulator (empty without HTTPS): its
    connection string, the HTTPS management URL and the CA file a client trusts it with."""
    if emulator.admin_connection_string is None:
        return {}
    return {
        "adminConnectionString": emulator.admin_connection_string,
        "managementTls": f"https://localhost:{emulator.management_tls_port}",
        "managementCaFile": str(Path(emulator.management_ca_file).resolve()),
    }


def admin_banner(admin: Mapping[str, str]) -> list[str]:
    """The banner's lines for the admin API: the connection string and how to trust the CA file."""
    if not admin:
        return ["Service Bus admin connection string: none (start with --management-tls)"]
    ca_file = admin["managementCaFile"]
    return [
        f"Service Bus admin connection string: {admin['adminConnectionString']}",
        f"Emulator management (HTTPS): {admin['managementTls']}",
        f"Emulator management CA file: {ca_file}",
        f"    (ServiceBusAdministrationClient trusts it with connection_verify={ca_file!r}, or without",
        f"    code changes: export REQUESTS_CA_BUNDLE={ca_file} SSL_CERT_FILE={ca_file})",
    ]


def _points_at_local_emulator(value: str) -> bool:
    text = value.replace(" ", "").lower()
    return "usedevelopmentemulator=true" in text or text.startswith(("http://127.0.0.1", "http://localhost"))


def effective_settings(
    file_values: Mapping[str, str], environment: Mapping[str, str], emulator: Mapping[str, str]
) -> dict[str, str]:
    """local.settings.json Values, overridden by the environment; emulator settings fill what neither sets.

    File values meant for a local emulator -- a connection string with ``UseDevelopmentEmulator=true``, a
    management endpoint on 127.0.0.1/localhost -- are replaced by the embedded emulator's, whose ports may
    differ (e.g. ``make run AMQP_PORT=...``)."""
    settings = dict(emulator)
    for name, value in file_values.items():
        if name in emulator and _points_at_local_emulator(value):
            continue
        settings[name] = value
    for name in list(settings):
        if name in environment:
            settings[name] = environment[name]
    return settings


def start_emulator(args: argparse.Namespace, management_token: str | None) -> Any:
    """An embedded emulator on its own thread (data under ``--emulator-data-dir``)."""
    from emulator.broker.properties import default_config
    from emulator.config import load_config
    from emulator.server import EmulatorOptions, EmulatorThread
    from emulator.tier import Sku

    config = load_config(args.emulator_config) if args.emulator_config else default_config()
    args.emulator_data_dir.mkdir(parents=True, exist_ok=True)
    thread = EmulatorThread(
        EmulatorOptions(
            config=config,
            data_dir=args.emulator_data_dir,
            amqp_port=args.amqp_port,
            management_port=args.management_port,
            management_token=management_token,  # None: a random one
            management_tls=args.management_tls,
            management_tls_port=args.management_tls_port,
            sku=Sku(args.emulator_sku),
            amqps_port=args.amqps_port if args.management_tls else None,
        )
    )
    try:
        thread.start()
    except BaseException:
        thread.stop()
        raise
    return thread


async def serve(options: HostOptions, banner: Callable[[FunctionsHost], None]) -> bool:
    """Run until Ctrl-C (True) or until the worker failed too often (False): the Functions host then stops
    itself to be recycled, and so does devhost."""
    host = FunctionsHost(options)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await host.start()
    banner(host)
    waits = {asyncio.ensure_future(stop.wait()), asyncio.ensure_future(host.recycle_requested.wait())}
    _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for waiting in pending:
        waiting.cancel()
    recycled = host.recycle_requested.is_set()
    if recycled:
        print("Stopping: the worker process failed too often to be restarted again...", flush=True)
    else:
        print("Stopping: draining in-flight invocations...", flush=True)
    await host.stop()
    return not recycled


def _with_invocation(record: logging.LogRecord) -> bool:
    """Console lines of a function's logs end with its invocation id, as the host's logs carry it."""
    invocation_id = getattr(record, "invocation_id", None)
    record.invocation = f" (Id={invocation_id})" if invocation_id else ""
    return True


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="[%(asctime)s] %(name)s: %(message)s%(invocation)s"
    )
    for handler in logging.getLogger().handlers:
        handler.addFilter(_with_invocation)
    logging.getLogger("azure").setLevel(logging.WARNING)  # the SDK's link-state chatter
    try:
        local = load_local_settings(args.settings)
        host_config = load_host_config(args.host_json if args.host_json.exists() else None)
        hook = load_hook(args.startup_hook)
    except (LocalSettingsError, HostConfigError, ValueError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    azurite: AzuriteService | None = None
    storage_elsewhere = storage_configured_elsewhere(local.values, os.environ)
    if args.with_azurite and storage_elsewhere is None:
        try:
            # First, while devhost has no other thread: Popen runs a function in the child before exec.
            azurite = start_azurite(args)
        except AzuriteError as exc:
            print(f"error: cannot start Azurite: {exc}", file=sys.stderr)
            return 1
    try:
        return run(args, local, host_config, hook, azurite, storage_elsewhere)
    finally:
        if azurite is not None:
            azurite.stop()


def start_azurite(args: argparse.Namespace) -> AzuriteService:
    """Azurite with its data under ``--azurite-data-dir`` on the ``--azurite-*-port`` ports."""
    ports = AzuritePorts(args.azurite_blob_port, args.azurite_queue_port, args.azurite_table_port)
    return AzuriteService.start(args.azurite_data_dir, ports)


def storage_banner(azurite: AzuriteService | None, elsewhere: str | None) -> list[str]:
    """The banner's lines for the app's storage account."""
    if azurite is not None:
        urls = ", ".join(f"{service} {url}" for service, url in azurite.endpoints().items())
        return [
            f"{STORAGE_SETTING}: {azurite.connection_string}",
            f"    (Azurite: {urls}; data in {azurite.location})",
        ]
    return [f"Storage: {elsewhere}; Azurite not started"] if elsewhere else []


def run(
    args: argparse.Namespace,
    local: LocalSettings,
    host_config: HostConfig,
    hook: StartupHook | None,
    azurite: AzuriteService | None,
    storage_elsewhere: str | None,
) -> int:
    """Everything after Azurite: the emulator, then the host until it stops."""
    emulator_thread = None
    extra: dict[str, str] = {}
    admin: dict[str, str] = {}
    if args.with_emulator:
        try:
            # The app's configured token (local.settings.json / environment) is the one the emulator accepts.
            token = os.environ.get("BUSBAR_MANAGEMENT_TOKEN") or local.values.get("BUSBAR_MANAGEMENT_TOKEN")
            emulator_thread = start_emulator(args, token or None)
        except Exception as exc:
            print(f"error: cannot start the emulator: {exc}", file=sys.stderr)
            return 1
        extra = emulator_settings(emulator_thread.emulator)
        extra |= identity_settings(emulator_thread.emulator, local.values, os.environ)
        admin = emulator_admin_endpoints(emulator_thread.emulator)
    if azurite is not None:
        extra[STORAGE_SETTING] = azurite.connection_string  # recorded for tools, as the emulator's settings
    settings = effective_settings(local.values, os.environ, extra)
    if azurite is not None:
        # Over the environment too: a value there meant for the development storage names this Azurite.
        settings[STORAGE_SETTING] = azurite.connection_string
    port = args.port if args.port is not None else (local.http_port or 7071)
    options = HostOptions(
        app_path=args.app,
        settings=settings,
        host_config=host_config,
        keys=local.keys,
        secrets_dir=None if args.data_dir is None else args.data_dir / "secrets",
        http_host=args.host,
        http_port=port,
        drain_seconds=args.drain_seconds,
        startup_hook=hook,
    )

    def banner(host: FunctionsHost) -> None:
        assert host.http is not None and host.keys is not None
        described = host.describe(with_master_key=args.master_key_url)
        lines = ["", "Functions:", *(f"    {line}" for line in described), ""]
        http_functions = {f.name.lower() for f in host.functions if f.trigger_type == "httpTrigger"}
        for name in args.master_key_url:
            if name.lower() not in http_functions:
                lines.append(f"warning: --master-key-url {name}: the app has no HTTP function of that name")
        lines.append(f"Host status: {host.http.base_url}/admin/host/status (master key)")
        lines.append(f"Master key:   {host.keys.master}")
        lines.append(f"Host key:     {host.keys.host}   (any function-level function)")
        for name, key in host.keys.functions.items():
            lines.append(f"Function key: {name} = {key}")
        if emulator_thread is not None:
            emulator = emulator_thread.emulator
            lines.append(f"Service Bus connection string: {emulator.connection_string}")
            lines.append(f"Emulator management (ARM): http://127.0.0.1:{emulator.management_port}")
            lines.extend(admin_banner(admin))
            lines.extend(identity_banner(emulator))
        lines.extend(storage_banner(azurite, storage_elsewhere))
        if args.data_dir is not None:
            storage = azurite.endpoints() if azurite is not None else {}
            record = write_record(args.data_dir, host.http.base_url, extra, admin, storage)
            lines.append(f"Keys kept in {args.data_dir / 'secrets'}; endpoints recorded in {record}")
        lines.append(f"{READY_LINE}: {host.http.base_url} (Ctrl-C to stop)")
        print("\n".join(lines), flush=True)

    try:
        stopped = asyncio.run(serve(options, banner))
    except Exception as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.data_dir is not None:
            remove_record(args.data_dir)
        if emulator_thread is not None:
            emulator_thread.stop()
    print("devhost stopped", flush=True)
    return 0 if stopped else 1


if __name__ == "__main__":
    sys.exit(main())
