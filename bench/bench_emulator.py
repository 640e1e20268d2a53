"""Start the emulator as its own process for a benchmark and wait until it is ready."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def start_emulator(config: Path, data_dir: Path | None) -> tuple[subprocess.Popen[str], str]:
    """Run ``python -m emulator`` on free ports; return the process and its connection string."""
    cmd = [sys.executable, "-m", "emulator", "--config", str(config)]
    cmd += ["--data-dir", str(data_dir)] if data_dir is not None else ["--in-memory"]
    cmd += ["--amqp-port", "0", "--management-port", "0", "--log-level", "WARNING"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            break
        match = re.search(r"Connection string: (\S+)", line)
        if match:
            return proc, match.group(1)
    proc.kill()
    raise RuntimeError("the emulator did not become ready")
