"""The harness the comparison benches share (bench/host_comparison.py): the configurations run interleaved,
round by round, and are summarised by their medians; and both benches that use it (bench/store_cost.py,
bench/tracing_overhead.py) run a tiny load to its end and file a well-formed result. Timings are not
asserted: the machine is shared."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.host_comparison import RunMeasure, measure_level

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(10)
def test_the_kinds_run_interleaved_round_by_round_and_are_summarised_by_their_medians() -> None:
    order: list[tuple[str, int]] = []
    rates = {("a", 0): 10.0, ("b", 0): 20.0, ("a", 1): 30.0, ("b", 1): 40.0, ("a", 2): 50.0, ("b", 2): 5.0}

    def run_one(kind: str, round_number: int) -> RunMeasure:
        order.append((kind, round_number))
        rate = rates[(kind, round_number)]
        return RunMeasure(rate, rate / 2, {"worker": rate / 10, "total": rate / 5})

    level = measure_level(["a", "b"], 3, run_one)

    assert order == [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2), ("b", 2)]
    assert (level.rate("a"), level.rate("b")) == (30.0, 20.0)
    assert (level.steady("a"), level.steady("b")) == (15.0, 10.0)
    assert level.rounds() == {"a": [10.0, 30.0, 50.0], "b": [20.0, 40.0, 5.0]}
    assert level.steady_rounds() == {"a": [5.0, 15.0, 25.0], "b": [10.0, 20.0, 2.5]}
    assert level.cpu_ms_per_msg() == {"a": {"worker": 3.0, "total": 6.0}, "b": {"worker": 2.0, "total": 4.0}}


def run_bench(script: str, out: Path) -> dict[str, Any]:
    """``script`` over one round of 20 messages at maxConcurrentCalls 2, filed at ``out``."""
    command = [
        sys.executable,
        script,
        *("--messages", "20", "--rounds", "1", "--levels", "2", "--out", str(out)),
    ]
    # A session of its own: a bench that overruns is stopped with its emulator and host (a plain kill would
    # leave them running, as its cleanup never runs).
    process = subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        output, _ = process.communicate(timeout=540)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"{script} did not finish: {output[-4000:]}")
    assert process.returncode == 0, output[-4000:]
    filed: dict[str, Any] = json.loads(out.read_text())
    assert (filed["messages_per_run"], filed["rounds"]) == (20, 1)
    assert len(filed["machine"]["load_average_after"]) == 3
    assert list(filed["levels"]) == ["2"]
    return filed


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.timeout(600)
def test_the_store_cost_bench_files_both_kinds_rates_ratio_and_cpu(tmp_path: Path) -> None:
    filed = run_bench("bench/store_cost.py", tmp_path / "store_cost.json")

    assert filed["benchmark"] == "store_cost"
    level = filed["levels"]["2"]
    rates = level["with_store_msgs_per_s"], level["without_store_msgs_per_s"]
    assert all(rate > 0 for rate in rates)
    assert level["with_vs_without"] == pytest.approx(rates[0] / rates[1], rel=0.01)
    assert set(level["rounds"]) == set(level["steady_rounds"]) == {"with_store", "without_store"}
    assert all(len(rounds) == 1 for rounds in level["rounds"].values())
    assert {"client", "worker", "emulator", "azurite", "total"} <= set(level["cpu_ms_per_msg"]["with_store"])


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.timeout(600)
def test_the_tracing_overhead_bench_files_both_modes_rates_ratio_cpu_and_the_spans_it_received(
    tmp_path: Path,
) -> None:
    filed = run_bench("bench/tracing_overhead.py", tmp_path / "tracing_overhead.json")

    assert filed["benchmark"] == "tracing_overhead"
    level = filed["levels"]["2"]
    rates = level["tracing_on_msgs_per_s"], level["tracing_off_msgs_per_s"]
    assert all(rate > 0 for rate in rates)
    assert level["on_vs_off"] == pytest.approx(rates[0] / rates[1], rel=0.01)
    assert set(level["rounds"]) == set(level["steady_rounds"]) == {"off", "on"}
    assert {"client", "worker", "emulator", "total"} <= set(level["cpu_ms_per_msg"]["on"])
    assert level["worker_cpu_off_vs_on"] > 0
    # Traced orders, exported: the receiver got spans (the process and publish spans of the "on" runs).
    assert filed["spans_received"] > 0
