"""``python -m devhost.http.show_key master|host``: print the master or host key the local app serves with.

The key ``make run`` uses: fixed under ``Keys`` in local.settings.json, else the one devhost keeps in the
data directory (``.data/devhost/secrets/host.json``, created on the first start). ``make master-key`` and
``make host-key`` run it with ``make run``'s own ``SETTINGS`` and ``DATA_DIR``, so a shell sets
``KEY=$(make host-key)`` as it would set ``KEY=$(az functionapp keys list ...)`` against Azure.
Exit status: 0 printed, 2 no such key yet (``make run`` has not started on this data) or unreadable files.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from devhost.http.key_store import KeyStore, KeyStoreError
from devhost.local_settings import LocalSettingsError, load_local_settings

SECRETS = "secrets"  # under --data-dir, as devhost keeps them


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser."""
    parser = argparse.ArgumentParser(
        prog="python -m devhost.http.show_key", description=__doc__.split("\n")[0]
    )
    parser.add_argument("key", choices=("master", "host"), help="master: admin endpoints; host: any function")
    parser.add_argument(
        "--settings", type=Path, default=Path("local.settings.json"), help="local.settings.json"
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(".data/devhost"),
        help="devhost's data (make run: .data/devhost)",
    )
    return parser


def effective_key(which: str, settings: Path, data_dir: Path) -> str | None:
    """The key devhost serves with: configured in ``settings``, else kept under ``data_dir``."""
    configured = load_local_settings(settings).keys
    fixed = configured.master if which == "master" else configured.host
    if fixed:
        return fixed
    master, host = KeyStore(data_dir / SECRETS).host_keys()
    return master if which == "master" else host


def main(argv: Sequence[str] | None = None) -> int:
    """Print the key; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        key = effective_key(args.key, args.settings, args.data_dir)
    except (KeyStoreError, LocalSettingsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if key is None:
        print(
            f"error: no {args.key} key yet: `make run` creates the keys on its first start "
            f"(kept in {args.data_dir / SECRETS})",
            file=sys.stderr,
        )
        return 2
    print(key)
    return 0


if __name__ == "__main__":
    sys.exit(main())
