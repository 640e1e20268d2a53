"""The short chaos run (bench/chaos.py with a fixed seed, about a minute of load): the whole app, started as
``make run`` starts it, loses no accepted event while its worker and the whole host are killed, Azurite is
stopped (and started again by devhost), garbage arrives on HTTP and AMQP and the re-drive runs; at least
one fault of each kind is injected. Events nobody subscribes to end archived by the fallback router. No side
effect is committed twice (an invoice, a shipment, a CRM handling) and none is missing, counted from the
endpoints' table.

A regression anywhere that breaks the promise (the emulator's durability, the host's settlement or worker
restarts, the handlers, the re-drive) shows up here as a lost or parked event."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.timeout(900)
def test_a_minute_of_load_under_every_kind_of_fault_loses_no_event_and_commits_no_effect_twice(
    tmp_path: Path,
) -> None:
    if shutil.which("make") is None:
        pytest.fail("GNU make is required: the chaos run starts the app with make run")
    report_file = tmp_path / "chaos.json"
    result = subprocess.run(
        [
            sys.executable,
            "bench/chaos.py",
            *("--duration", "90", "--seed", "7", "--rate", "5"),
            *("--fault-interval", "9", "--min-faults-per-kind", "1"),
            *("--work-dir", str(tmp_path / "work"), "--out", str(report_file)),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=840,
    )
    output = result.stdout + result.stderr
    assert report_file.exists(), output
    report = json.loads(report_file.read_text())
    assert report["lost"] == 0, report["lost_examples"]
    assert report["outcomes"].get("parked instead of handled", 0) == 0, report
    assert report["events"]["accepted"] > 0 and report["outcomes"]["handled"] > 0
    assert report["events"]["poison_accepted"] == report["outcomes"].get(
        "poison dead-lettered or archived", 0
    )
    # Events nobody subscribes to: each one archived by the fallback router as NoMatchingSubscription.
    assert report["events"]["unsubscribed_accepted"] > 0
    assert report["events"]["unsubscribed_accepted"] == report["outcomes"].get(
        "unrouted archived by the router", 0
    )
    assert report["duplicate_side_effects"] == 0, report["duplicate_side_effect_examples"]
    assert report["effects_missing"] == 0, report["effects_missing_examples"]
    assert report["effects_counted"]["orders_with_rows"]["billing"] > 0
    assert set(report["faults"]["injected"]) >= {"kill-azurite", "kill-host", "kill-worker"}
    assert all(count >= 1 for count in report["faults"]["injected"].values()), report["faults"]
    assert report["verdict"] == "PASS" and result.returncode == 0, output[-4000:]
