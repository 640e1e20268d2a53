"""Command line.

``python -m emulator --config FILE --data-dir DIR --amqp-port 5672 --management-port 5300``
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from emulator.auth import DEFAULT_KEY, DEFAULT_KEY_NAME
from emulator.broker.properties import default_config
from emulator.config import ConfigError, load_config
from emulator.server import Emulator, EmulatorOptions
from emulator.tier import Sku


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m emulator",
        description="Busbar's Azure Service Bus emulator: AMQP 1.0 for the azure-servicebus SDK "
        "(UseDevelopmentEmulator=true) plus a management/health HTTP port.",
    )
    parser.add_argument("--config", type=Path, help="Config.json in the official emulator's format")
    parser.add_argument(
        "--data-dir", type=Path, default=Path(".data/emulator"), help="where messages persist"
    )
    parser.add_argument("--in-memory", action="store_true", help="keep nothing on disk (throwaway runs)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    parser.add_argument("--amqp-port", type=int, default=5672, help="AMQP port; 0 picks a free one")
    parser.add_argument(
        "--management-port", type=int, default=5300, help="HTTP port (/health); 0 picks a free one"
    )
    parser.add_argument("--key-name", default=DEFAULT_KEY_NAME, help="shared access key name")
    parser.add_argument("--key", default=DEFAULT_KEY, help="shared access key")
    parser.add_argument(
        "--management-token",
        metavar="TOKEN",
        help="bearer token the ARM endpoints on the management port accept (default: a random one, printed)",
    )
    parser.add_argument(
        "--management-tls",
        action="store_true",
        help="also serve the management API over HTTPS, with a certificate generated at start "
        "(its CA file is written to the data directory and printed)",
    )
    parser.add_argument(
        "--management-tls-port", type=int, default=5301, help="HTTPS management port; 0 picks a free one"
    )
    parser.add_argument(
        "--amqps-port",
        type=int,
        default=5671,
        help="with --management-tls: the namespace's TLS port, serving the admin API (HTTPS) and AMQP over "
        "TLS alike, as SERVICEBUS_FULLY_QUALIFIED_NAMESPACE=localhost:<port> (the SDK's AMQP client always "
        "uses 5671 for a namespace name; default 5671; 0 picks a free one)",
    )
    parser.add_argument(
        "--arm-subscription-id",
        metavar="ID",
        help="the only subscription id ARM requests may use (default: any)",
    )
    parser.add_argument(
        "--arm-resource-group",
        metavar="NAME",
        help="the only resource group ARM requests may use (default: any)",
    )
    parser.add_argument(
        "--sku",
        choices=[sku.value for sku in Sku],
        default=Sku.STANDARD.value,
        help="the namespace's tier (default Standard): what ARM and $namespaceinfo report, and the maximum "
        "message size (Standard 256 KB fixed; Premium per queue/topic, 1024 KB unless set, up to 102400)",
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    return parser.parse_args(argv)


def identity_banner(emulator: Emulator) -> list[str]:
    """What a user exports to run code that authenticates as Azure's samples do (DefaultAzureCredential and
    a fully qualified namespace): the managed identity an App Service / Functions app has, and the
    namespace's TLS port."""
    lines = [
        f"Managed identity: IDENTITY_ENDPOINT={emulator.identity_endpoint} "
        f"IDENTITY_HEADER={emulator.identity_header}"
    ]
    if emulator.fully_qualified_namespace is not None:
        lines.append(
            f"Fully qualified namespace (admin API and AMQP over TLS): "
            f"SERVICEBUS_FULLY_QUALIFIED_NAMESPACE={emulator.fully_qualified_namespace}"
        )
    if emulator.certifi_trust is not None:
        lines.append(
            f"AMQP over TLS trusts the CA through certifi (the SDK ignores SSL_CERT_FILE there): "
            f"PYTHONPATH={emulator.certifi_trust}"
        )
    return lines


async def serve(options: EmulatorOptions) -> None:
    emulator = Emulator(options)
    await emulator.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(
        f"Service Bus emulator ready: amqp=127.0.0.1:{emulator.amqp_port} "
        f"management=127.0.0.1:{emulator.management_port}"
    )
    print(f"Health: http://127.0.0.1:{emulator.management_port}/health")
    print(f"ARM endpoint: http://127.0.0.1:{emulator.management_port} (plain HTTP: enforce_https=False)")
    if emulator.management_tls_port is not None:
        print(f"ARM endpoint (TLS): https://localhost:{emulator.management_tls_port}")
        print(f"Management CA file: {emulator.management_ca_file}")
    print(f"Namespace tier: {options.sku.value}")
    print(f"Management token: {emulator.management_token}")
    print(f"Connection string: {emulator.connection_string}")
    if emulator.admin_connection_string is not None:
        print(
            f"Admin connection string: {emulator.admin_connection_string} "
            f"(ServiceBusAdministrationClient: connection_verify={emulator.management_ca_file})"
        )
    else:
        print("Admin connection string: start with --management-tls (the admin client needs HTTPS)")
    for line in identity_banner(emulator):
        print(line)
    sys.stdout.flush()
    await stop.wait()
    print("Shutting down.", flush=True)
    await emulator.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        config = load_config(args.config) if args.config else default_config()
    except ConfigError as exc:
        print(f"Invalid configuration in {args.config}:\n{exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"Cannot read configuration {args.config}: {exc}", file=sys.stderr)
        return 2
    options = EmulatorOptions(
        config=config,
        data_dir=None if args.in_memory else args.data_dir,
        host=args.host,
        amqp_port=args.amqp_port,
        management_port=args.management_port,
        key_name=args.key_name,
        key=args.key,
        management_token=args.management_token,
        management_tls=args.management_tls,
        management_tls_port=args.management_tls_port,
        amqps_port=args.amqps_port if args.management_tls else None,
        arm_subscription_id=args.arm_subscription_id,
        arm_resource_group=args.arm_resource_group,
        sku=Sku(args.sku),
    )
    try:
        asyncio.run(serve(options))
    except OSError as exc:
        print(f"Cannot start the emulator: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
