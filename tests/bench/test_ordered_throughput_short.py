"""The ordered-throughput bench (bench/ordered_throughput.py) with a tiny load: one round of 64 events over
8 keys per endpoint (for the ordered one also with a shorter sessionIdleTimeout, and 8 events of one key)
runs to its end and files a well-formed result, and the ordered endpoint handled no event after a later one
of its key. Timings are not asserted: the machine is shared."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.timeout(600)
def test_one_tiny_round_files_both_endpoints_rates_their_ratio_and_the_ordered_overhead(
    tmp_path: Path,
) -> None:
    out = tmp_path / "ordered_throughput.json"
    out.write_text(json.dumps({"benchmark": "ordered_throughput", "runs": {"earlier": {"kept": True}}}))
    result = subprocess.run(
        [
            sys.executable,
            "bench/ordered_throughput.py",
            *("--messages", "64", "--keys", "8", "--rounds", "1", "--reads", "20"),
            *("--session-idle-variants", "0.5", "--one-key-messages", "8"),
            *("--label", "smoke", "--out", str(out)),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    filed = json.loads(out.read_text())
    assert filed["benchmark"] == "ordered_throughput"
    assert filed["runs"]["earlier"] == {"kept": True}  # appended per label, earlier runs kept
    run = filed["runs"]["smoke"]
    assert (run["messages_per_run"], run["keys"], run["rounds"]) == (64, 8, 1)
    assert len(run["load_average_at_end"]) == 3
    rates = run["ordered_msgs_per_s"], run["unordered_msgs_per_s"]
    assert all(rate > 0 for rate in rates)
    assert run["ratio_ordered_vs_unordered"] == pytest.approx(rates[0] / rates[1], rel=0.01)
    names = {"ordered", "unordered", "ordered_session_idle_0.5s", "ordered_one_key"}
    assert set(run["rounds_msgs_per_s"]) == set(run["steady_msgs_per_s"]) == names
    assert set(run["ordered_cpu_overhead_ms_per_msg"]) == {"total", "azurite"}
    assert run["table_point_read_ms"]["reads"] == 20 and run["table_point_read_ms"]["median"] > 0
    assert {"client", "worker", "emulator", "azurite", "total"} <= set(run["cpu_ms_per_msg"]["ordered"])
    [variant] = run["session_idle_variants"].values()
    assert variant["sessionIdleTimeout"] == "00:00:00.500" and variant["msgs_per_s"] > 0
    # The ordered endpoint keeps each key's order (the unordered one may not: not asserted).
    assert run["ordered_one_key"]["messages_per_run"] == 8 and run["ordered_one_key"]["msgs_per_s"] > 0
    assert set(run["mean_invocations_in_flight"]) == names
    late = run["handled_after_a_later_event_of_their_key"]
    assert (late["ordered"], late["ordered_session_idle_0.5s"], late["ordered_one_key"]) == ([0], [0], [0])
