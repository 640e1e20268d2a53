"""Emulator start-up time and idle memory against the number of entities.

For each size N (default 1,000 / 4,000 / 10,000) the config holds N/2 queues and N/4 topics, each topic with
one subscription that auto-forwards to a queue (N entities in all, counting subscriptions; 10,000 is what a
Standard namespace allows). The emulator runs as its own process with a durable store on a fresh data dir,
as ``make run`` uses it, and is timed twice:

* ``first_start_s``: from process spawn to the first ``GET /health`` answered 200, empty data dir;
* ``restart_s``: the same after a SIGTERM, on the data the first run left (entities re-read from the store);
* ``idle_rss_mb``, ``idle_cpu_percent``: resident memory of the restarted process once healthy, and the
  CPU it uses over the next 2 s with no client.

``arm_created``: the same shape of namespace (default 10,000 entities) created over ARM with raw HTTP PUTs
(creates per second), then a restart on it: entities created at run time are restored from the store.

``interpreter_baseline_s`` is the same measure for the built-in one-queue config: the part of every figure
that is Python start-up and imports, not entities. Writes ``bench/results/emulator_startup.json``.
``--profile`` runs the largest size under cProfile (first start and restart) and prints the top functions.
Usage::

    .venv/bin/python bench/emulator_startup.py [--sizes 1000 4000 10000] [--profile]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import pstats
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULT_FILE = ROOT / "bench" / "results" / "emulator_startup.json"
HEALTH_DEADLINE_S = 300
IDLE_WINDOW_S = 2.0
ARM_TOKEN = "bench-startup-token"
ARM_NAMESPACE = (
    "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/bench/providers/"
    "Microsoft.ServiceBus/namespaces/sbemulatorns"
)


def entity_config(entities: int) -> dict[str, Any]:
    """N/2 queues and N/4 topics with one forwarding subscription each: N entities."""
    queues = entities // 2
    topics = entities // 4
    return {
        "UserConfig": {
            "Namespaces": [
                {
                    "Name": "sbemulatorns",
                    "Queues": [{"Name": f"queue-{i:05d}"} for i in range(queues)],
                    "Topics": [
                        {
                            "Name": f"topic-{i:05d}",
                            "Subscriptions": [
                                {
                                    "Name": "forward",
                                    "Properties": {"ForwardTo": f"queue-{i % max(queues, 1):05d}"},
                                }
                            ],
                        }
                        for i in range(topics)
                    ],
                }
            ],
            "Logging": {"Type": "Console"},
        }
    }


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def timed_start(
    config: Path | None,
    data_dir: Path,
    profile_to: Path | None,
    provision: Callable[[int], None] | None = None,
) -> tuple[float, float, float]:
    """Spawn the emulator, wait until /health answers 200, run ``provision(management_port)`` if given;
    (seconds to healthy, idle RSS MB, idle CPU %)."""
    cmd = [sys.executable]
    if profile_to is not None:
        cmd += ["-m", "cProfile", "-o", str(profile_to)]
    cmd += ["-m", "emulator", "--data-dir", str(data_dir)]
    if config is not None:
        cmd += ["--config", str(config)]
    cmd += ["--amqp-port", "0", "--management-port", "0", "--log-level", "WARNING"]
    cmd += ["--management-token", ARM_TOKEN]
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    assert proc.stdout is not None
    try:
        port = None
        while port is None:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"emulator exited with {proc.wait()} before it was ready")
            match = re.search(r"management=127\.0\.0\.1:(\d+)", line)
            if match:
                port = int(match.group(1))
        while not _healthy(port):
            if time.perf_counter() - started > HEALTH_DEADLINE_S:
                raise RuntimeError("emulator did not become healthy")
            time.sleep(0.01)
        elapsed = time.perf_counter() - started
        if provision is not None:
            provision(port)
        time.sleep(1.0)  # idle: let start-up garbage go before reading RSS
        cpu_before = _cpu_seconds(proc.pid)
        time.sleep(IDLE_WINDOW_S)
        idle_cpu = 100 * (_cpu_seconds(proc.pid) - cpu_before) / IDLE_WINDOW_S
        rss = _rss_mb(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return elapsed, rss, round(idle_cpu, 1)


def measure(entities: int, profile: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="busbar-startup-") as tmp:
        config = Path(tmp) / "config.json"
        config.write_text(json.dumps(entity_config(entities)))
        data = Path(tmp) / "data"
        first_profile = Path(tmp) / "first.prof" if profile else None
        restart_profile = Path(tmp) / "restart.prof" if profile else None
        first, first_rss, _ = timed_start(config, data, first_profile)
        restart, restart_rss, idle_cpu = timed_start(config, data, restart_profile)
        for label, path in (("first start", first_profile), ("restart", restart_profile)):
            if path is not None:
                print(f"--- {entities} entities, {label} (cProfile, cumulative)")
                pstats.Stats(str(path)).sort_stats("cumulative").print_stats(25)
    return {
        "entities": entities,
        "queues": entities // 2,
        "topics": entities // 4,
        "forwarding_subscriptions": entities // 4,
        "first_start_s": round(first, 2),
        "restart_s": round(restart, 2),
        "first_start_rss_mb": first_rss,
        "idle_rss_mb": restart_rss,
        "idle_cpu_percent": idle_cpu,
    }


def arm_provisioning(entities: int) -> dict[str, Any]:
    """Create the same shape of namespace over ARM (raw HTTP PUTs, one connection), then restart on it."""
    timings: dict[str, float] = {}

    def provision(port: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        headers = {"Authorization": f"Bearer {ARM_TOKEN}", "Content-Type": "application/json"}
        queues = entities // 2
        started = time.perf_counter()

        def put(path: str, properties: dict[str, Any]) -> None:
            body = json.dumps({"properties": properties})
            connection.request("PUT", f"{ARM_NAMESPACE}/{path}?api-version=2021-11-01", body, headers)
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                raise RuntimeError(f"PUT {path}: HTTP {response.status}")

        # Reverse order, so a restart must not depend on the store's (name) order to resolve forwarding.
        for i in reversed(range(queues)):
            put(f"queues/queue-{i:05d}", {})
        for i in range(entities // 4):
            put(f"topics/topic-{i:05d}", {})
            put(f"topics/topic-{i:05d}/subscriptions/forward", {"forwardTo": f"queue-{i % queues:05d}"})
        timings["seconds"] = time.perf_counter() - started
        connection.close()

    with tempfile.TemporaryDirectory(prefix="busbar-startup-") as tmp:
        data = Path(tmp) / "data"
        timed_start(None, data, None, provision)
        restart, rss, _ = timed_start(None, data, None)
    return {
        "entities": entities,
        "arm_creates_per_s": round(entities / timings["seconds"]),
        "arm_provisioning_s": round(timings["seconds"], 2),
        "restart_s": round(restart, 2),
        "idle_rss_mb": rss,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 4000, 10000])
    parser.add_argument("--profile", action="store_true", help="cProfile the largest size")
    parser.add_argument(
        "--arm-entities", type=int, default=10000, help="entities created over ARM, then restarted (0: skip)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="busbar-startup-") as tmp:
        baseline, baseline_rss, _ = timed_start(None, Path(tmp) / "data", None)
    runs = []
    for size in args.sizes:
        run = measure(size, args.profile and size == max(args.sizes))
        print(json.dumps(run))
        runs.append(run)
    arm = arm_provisioning(args.arm_entities) if args.arm_entities else None
    if arm is not None:
        print(json.dumps(arm))
    result = {
        "benchmark": "emulator_startup",
        "measured_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        },
        "measure": "process spawn to first GET /health 200; restart reuses the first run's data dir",
        "interpreter_baseline_s": round(baseline, 2),
        "interpreter_baseline_rss_mb": baseline_rss,
        "profiled": args.profile,
        "runs": runs,
        "arm_created": arm,
    }
    RESULT_FILE.parent.mkdir(parents=True, exist_ok=True)
    RESULT_FILE.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULT_FILE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
