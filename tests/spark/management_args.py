"""The replay's management parameters for an in-process emulator (its ARM endpoint and token): the
duplicate-detection check reads the targets through them."""

from __future__ import annotations

from typing import Any


def management_args(emulator: Any) -> list[str]:
    """``--subscription_id … --management_token …`` for ``emulator`` (an ``Emulator``)."""
    return [
        *("--subscription_id", "00000000-0000-0000-0000-000000000000", "--resource_group", "replay-tests"),
        *("--namespace", emulator.namespace.name),
        *("--management_endpoint", f"http://127.0.0.1:{emulator.management_port}"),
        # "=": a random token may start with "-", which argparse would take for an option
        f"--management_token={emulator.management_token}",
    ]
