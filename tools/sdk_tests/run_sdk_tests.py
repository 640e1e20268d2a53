"""Run the azure-servicebus source distribution's live tests against a fresh Busbar emulator.

usage: python tools/sdk_tests/run_sdk_tests.py <sdist tests dir> [pytest args...]

Starts ``python -m emulator --in-memory --management-tls`` on ports the OS picks, points the tests at it
through the SERVICEBUS_* variables the SDK's test settings read, and runs pytest in the tests directory with
the stand-ins for Microsoft's test tooling in ``shim/`` (see docs/emulator.md, "The SDK's own tests").
EMULATOR_ARGS adds emulator options.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def _read_banner(emulator: subprocess.Popen[str]) -> dict[str, str]:
    """The emulator's ready lines, ``key: value``, up to the admin connection string (the last one)."""
    assert emulator.stdout is not None
    banner: dict[str, str] = {}
    for line in emulator.stdout:
        key, _, value = line.partition(": ")
        banner[key.strip()] = value.strip()
        if key.startswith("Admin connection string"):
            return banner
    raise SystemExit(f"the emulator stopped before it was ready: {banner}")


def _environment(banner: dict[str, str], tests_dir: Path) -> dict[str, str]:
    admin_connection_string = banner["Admin connection string"].split(" ")[0]
    tls_port = re.search(r"localhost:(\d+)", admin_connection_string)
    assert tls_port is not None, admin_connection_string
    ca_file = banner["Management CA file"]
    env = dict(os.environ)
    env.update(
        PYTHONPATH=os.pathsep.join(
            [
                str(HERE / "shim"),
                str(tests_dir),
                str(tests_dir / "mgmt_tests"),
                str(tests_dir / "mgmt_tests/async"),
            ]
        ),
        # The administration client and the mgmt tests: the namespace's HTTPS management endpoint.
        SERVICEBUS_FULLY_QUALIFIED_NAMESPACE=f"localhost:{tls_port.group(1)}",
        SERVICEBUS_CONNECTION_STR=admin_connection_string,
        SERVICEBUS_ENDPOINT_SUFFIX=os.environ.get(
            "SERVICEBUS_ENDPOINT_SUFFIX", f"localhost:{tls_port.group(1)}"
        ),
        SERVICEBUS_SAS_POLICY="RootManageSharedAccessKey",
        SERVICEBUS_SAS_KEY="SAS_KEY_VALUE",
        # The data-plane tests' preparers: entities over ARM (TLS), messages over AMQP.
        SERVICEBUS_RESOURCE_MANAGER_URL=banner["ARM endpoint (TLS)"] + "/",
        SERVICEBUS_MANAGEMENT_TOKEN=banner["Management token"],
        SERVICEBUS_DATA_CONNECTION_STR=banner["Connection string"],
        AZURE_RESOURCEGROUP_NAME="busbar-sdk-tests",
        REQUESTS_CA_BUNDLE=ca_file,
        SSL_CERT_FILE=ca_file,
    )
    return env


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    tests_dir = Path(argv[0]).resolve()
    python = sys.executable
    emulator = subprocess.Popen(
        [python, "-m", "emulator", "--in-memory", "--management-tls", "--amqp-port", "0",
         "--management-port", "0", "--management-tls-port", "0", "--amqps-port", "0",
         "--log-level", "WARNING",
         *os.environ.get("EMULATOR_ARGS", "").split()],
        cwd=REPO, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        env = _environment(_read_banner(emulator), tests_dir)
        command = [python, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                   "-p", "devtools_testutils", *argv[1:]]  # fmt: skip
        return subprocess.call(command, cwd=tests_dir, env=env)
    finally:
        emulator.terminate()
        emulator.wait(10)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
