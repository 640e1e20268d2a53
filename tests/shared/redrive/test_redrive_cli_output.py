"""What ``python -m shared.redrive`` (``make redrive-plan`` / ``make redrive-run``) prints: the JSON summary,
without the Azure SDK's per-request HTTP logging unless ``--verbose`` asks for it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.shared.redrive.redrive_support import (
    Provisioner,
    dead_letter_queue_messages,
    message,
    redrive_env,
)

REPO = Path(__file__).resolve().parents[3]


def run_cli(arguments: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command line as make runs it, in a directory without local.settings.json (``env`` is all)."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("BUSBAR_", "ServiceBus"))}
    return subprocess.run(
        [sys.executable, "-m", "shared.redrive", *arguments],
        cwd=cwd,
        env={**inherited, **env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.subprocess
@pytest.mark.timeout(180)
def test_the_redrive_command_prints_its_summary_without_http_request_logging_unless_verbose(
    emulator: Any, provision: Provisioner, tmp_path: Path
) -> None:
    queue = provision.queue()
    dead_letter_queue_messages(emulator.connection_string, queue, [message()], reason="Unfixable")
    env = redrive_env(emulator, tmp_path / "archive", [queue])

    quiet = run_cli(["plan"], env, tmp_path)
    verbose = run_cli(["plan", "--verbose"], env, tmp_path)

    # The run's result on stdout either way; the log (stderr) without the SDK's INFO lines by default.
    for result in (quiet, verbose):
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["totals"]["archived"] == 1, result.stdout
    assert "http_logging_policy" not in quiet.stderr and "Request URL" not in quiet.stderr, quiet.stderr
    assert "INFO azure." not in quiet.stderr, quiet.stderr
    assert "INFO proton" not in quiet.stderr, quiet.stderr
    # --verbose: every management call's request and response, and the AMQP connections (a plan only peeks:
    # Busbar's own receiver, python-qpid-proton, shared/amqp/receiver.py).
    assert "INFO azure.core.pipeline.policies.http_logging_policy: Request URL: " in verbose.stderr
    assert "Response status: 200" in verbose.stderr
    assert "INFO proton: Connected to " in verbose.stderr


def test_the_make_targets_pass_redrive_args_to_the_command_line() -> None:
    # `make redrive-plan REDRIVE_ARGS=--verbose`, as docs/operations.md says.
    for target in ("redrive-plan", "redrive-run"):
        shown = subprocess.run(
            ["make", "--no-print-directory", "-n", target, "REDRIVE_ARGS=--verbose"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        line = next(x for x in shown.splitlines() if "-m shared.redrive" in x)
        assert line.rstrip().endswith("--verbose"), shown
