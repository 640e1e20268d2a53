"""Where devhost's CPU per message goes, for SDK-type functions: devhost's own code, Azure's worker runtime
(``azure_functions_runtime``), the Service Bus binding extension, the azure-servicebus SDK, ...

The configuration is bench/host_throughput.py's (its emulator, no-op app, preload and ``running_host``
set-up, imported from there) at ``maxConcurrentCalls`` 16: the SDK-type function (``BENCH_SDK_QUEUE``:
``ServiceBusReceivedMessage`` decoded by the extension from ``model_binding_data``, completed through
devhost's Settlement gRPC service) and, for comparison, the plain function (``BENCH_QUEUE``). Once the
host has warmed up (``--warmup`` invocations), both devhost processes are sampled at the same time with
py-spy (``record --format raw --nonblocking``, which reads the target's memory without pausing it): the
host side (this process: receivers, Settlement gRPC service) and the worker process(es) (the runtime, the
extension, the function). Over the same window the processes' CPU time (``/proc/<pid>/stat``) and the
invocations finished give CPU ms per message per process.

Each sample's *self* frame (the innermost Python frame, by file path) goes to a bucket (``BUCKETS``); a
bucket's share of the samples is its share of the process's measured CPU. Two samplings run side by side:

* ``running``: the threads the OS shows running (``--idle`` off), the split reported in ms/msg. A running
  thread whose self frame waits (``selectors.select``, ``threading`` waits, the thread pool's
  ``work_queue.get``) is counted apart as ``idle_wait``. On a busy machine a woken thread waits for a core
  in the same state, so wake-up points weigh more than their CPU; ``sample_coverage`` (running samples /
  rate / measured CPU seconds) above 1 says so.
* ``gil``: the thread holding the GIL (``--gil``): Python code and the C code it calls without releasing the
  GIL, but none of the GIL-free C work (syscalls, grpc's C core). Where the two agree, the split is firm.

C or Cython code shows as the Python frame that called it (protobuf's upb, uamqp's decoder); code with no
Python frame of its own run by the event loop or as a thread's target is ``native_callback`` (here grpc's
aio server and poller thread: devhost's Settlement service). ``by_caller`` charges each sample to the
innermost frame outside the standard library instead, i.e. to whoever asked for the stdlib work (asyncio,
logging, a thread-pool hop). ``top_self_frames`` lists the busiest lines. Writes
``bench/results/host_cpu_split.json`` (``--raw-dir`` also keeps py-spy's stacks, flamegraph.pl's input).
Usage (py-spy from a venv of its own, e.g. ``python3 -m venv /tmp/pyspy && /tmp/pyspy/bin/pip install
py-spy``; it reads other processes' memory, so it needs ptrace rights over them: root, or
``kernel.yama.ptrace_scope`` 0, or CAP_SYS_PTRACE)::

    .venv/bin/python bench/host_cpu_split.py [--py-spy /tmp/pyspy/bin/py-spy] [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import linecache
import os
import platform
import re
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.host_throughput import (  # noqa: E402
    APP,
    FUNCTION_QUEUES,
    _cpu_seconds,
    _worker_pids,
    preload,
    start_emulator,
)
from devhost.testing import running_host  # noqa: E402

RESULT_FILE = ROOT / "bench" / "results" / "host_cpu_split.json"
CONCURRENCY = 16
# kind -> host_throughput's function kind (whose queue setting the run points at the loaded queue).
CONFIGURATIONS = {"sdk_types": "host-sdk", "plain": "host"}
PACKAGES = (
    "azure-functions-runtime",
    "azurefunctions-extensions-bindings-servicebus",
    "azure-servicebus",
    "python-qpid-proton",
)
PACKAGES_TOO = ("azure-functions", "azurefunctions-extensions-base", "uamqp", "grpcio", "protobuf")

SITE_PACKAGES = "/site-packages/"
STDLIB = Path(sysconfig.get_paths()["stdlib"])
IDLE = "idle_wait"
# How each process is sampled: the threads the OS shows running (the split), and the thread holding the GIL
# (a check on the first: a thread woken on a busy machine shows running while it waits for a core).
MODES = {"running": [], "gil": ["--gil"]}
# Bucket -> path prefixes of a self frame's file under site-packages (first match wins).
PACKAGE_BUCKETS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("azure_functions_runtime", ("azure_functions_runtime/",)),
    ("extension", ("azurefunctions/extensions/", "uamqp/")),
    ("azure_servicebus", ("azure/servicebus/",)),
    # devhost's listeners receive through Busbar's seam on proton (its Python reactor and its C binding).
    ("proton", ("proton/", "cproton")),
    ("azure_functions_lib", ("azure/functions/",)),
    ("grpc_protobuf", ("grpc/", "google/protobuf/")),
)
IO_STDLIB = ("asyncio/", "selectors.py", "socket.py", "ssl.py")
# (file, function): a frame that calls C or Cython code which has no Python frame of its own: a callback the
# event loop runs, a thread's target. In these processes that is grpc's aio server and its poller thread.
NATIVE_CALLBACKS = {("asyncio/events.py", "_run"), ("threading.py", "run")}
# (file, function, text on the line): a thread waiting for work, events or a lock.
WAITS = (
    ("selectors.py", "select", ""),
    ("threading.py", "wait", ""),
    ("threading.py", "_wait_for_tstate_lock", ""),
    ("queue.py", "get", ""),
    ("concurrent/futures/thread.py", "_worker", "work_queue.get("),
)
BUCKETS = (
    "devhost",
    *(name for name, _ in PACKAGE_BUCKETS),
    "native_callback",
    "asyncio_io",
    "app_function",
    "other",
)
FRAME = re.compile(r"^(?P<name>.*) \((?P<path>[^()]*?)(?::(?P<line>\d+))?\)$")


def parse_frame(frame: str) -> tuple[str, str, int]:
    """``(function, file, line)`` of one py-spy raw frame, ``Qualified.name (path:line)``."""
    match = FRAME.match(frame)
    if not match:
        return frame, "", 0
    return match["name"].rsplit(".", 1)[-1], match["path"], int(match["line"] or 0)


def stdlib_part(path: str) -> str | None:
    """``path`` relative to the standard library's folder, or None outside it."""
    file = Path(path)
    return file.relative_to(STDLIB).as_posix() if file.is_relative_to(STDLIB) else None


def is_idle_wait(frame: str) -> bool:
    """A running thread whose self frame waits (for events, a lock, work): no work for any bucket."""
    name, path, line = parse_frame(frame)
    part = stdlib_part(path)
    return any(
        part == file and name == function and text in linecache.getline(path, line)
        for file, function, text in WAITS
    )


def bucket_of(frame: str) -> str:
    """The bucket of a self frame, by its file's path."""
    name, path, _ = parse_frame(frame)
    file = Path(path)
    if file.is_relative_to(ROOT / "devhost"):
        return "devhost"
    if file == APP:
        return "app_function"
    if SITE_PACKAGES in path:
        relative = path.rsplit(SITE_PACKAGES, 1)[1]
        for bucket, prefixes in PACKAGE_BUCKETS:
            if relative.startswith(prefixes):
                return bucket
    part = stdlib_part(path)
    if (part, name) in NATIVE_CALLBACKS:
        return "native_callback"
    if part is not None and part.startswith(IO_STDLIB):
        return "asyncio_io"
    return "other"


def caller_of(frames: tuple[str, ...]) -> str:
    """The bucket of the innermost frame outside the standard library (``stdlib`` if there is none)."""
    for frame in reversed(frames):
        if stdlib_part(parse_frame(frame)[1]) is None:
            return bucket_of(frame)
    return "stdlib"


def short(frame: str) -> str:
    """A frame with the site-packages, stdlib or repository folder cut off its path."""
    name, path, line = parse_frame(frame)
    part = stdlib_part(path)
    if part is None:
        part = path.rsplit(SITE_PACKAGES, 1)[-1]
        if Path(part).is_relative_to(ROOT):
            part = Path(part).relative_to(ROOT).as_posix()
    return f"{name} ({part}:{line})"


def parse_raw(text: str) -> Counter[tuple[str, ...]]:
    """py-spy's raw (collapsed) output: ``outer;...;inner count`` per line -> samples per stack."""
    stacks: Counter[tuple[str, ...]] = Counter()
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks[tuple(stack.split(";"))] += int(count)
    return stacks


def split(stacks: Counter[tuple[str, ...]], cpu_ms_per_msg: float) -> dict[str, Any]:
    """Samples per bucket (by self frame and by caller), each bucket's share of the process's CPU per
    message, and the busiest self frames."""
    by_self: Counter[str] = Counter()
    by_caller: Counter[str] = Counter()
    frames_seen: Counter[str] = Counter()
    idle = 0
    for frames, count in stacks.items():
        if is_idle_wait(frames[-1]):
            idle += count
            continue
        by_self[bucket_of(frames[-1])] += count
        by_caller[caller_of(frames)] += count
        frames_seen[short(frames[-1])] += count
    busy = sum(by_self.values())

    def shares(counts: Counter[str], names: tuple[str, ...]) -> dict[str, dict[str, float]]:
        return {
            name: {
                "ms_per_msg": round(cpu_ms_per_msg * counts[name] / busy, 4) if busy else 0.0,
                "percent": round(100 * counts[name] / busy, 1) if busy else 0.0,
                "samples": counts[name],
            }
            for name in names
        }

    return {
        "samples": {"cpu": busy, IDLE: idle},
        "self": shares(by_self, BUCKETS),
        "by_caller": shares(by_caller, (*BUCKETS, "stdlib")),
        "top_self_frames": {frame: round(100 * n / busy, 1) for frame, n in frames_seen.most_common(12)},
    }


def record(pids: list[int], seconds: int, rate: int, py_spy: str, work: Path) -> dict[tuple[str, int], str]:
    """Sample every pid in every mode at once for ``seconds``: the raw stacks by (mode, pid)."""
    runs = {}
    for mode, flags in MODES.items():
        for pid in pids:
            out = work / f"{mode}-{pid}.txt"
            command = [py_spy, "record", "--pid", str(pid), "--duration", str(seconds), "--rate", str(rate)]
            command += ["--format", "raw", "--nonblocking", "--full-filenames", *flags, "-o", str(out)]
            spy = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            runs[mode, pid] = (out, spy)
    texts = {}
    for (mode, pid), (out, spy) in runs.items():
        said, _ = spy.communicate(timeout=seconds + 60)
        if spy.returncode != 0 or not out.exists():
            if "ermission" in said or "ptrace" in said.lower():
                raise PermissionError(
                    f"py-spy cannot read process {pid} (it needs ptrace rights over it: run as root, or set "
                    f"kernel.yama.ptrace_scope to 0, or grant CAP_SYS_PTRACE): {said.strip()}"
                )
            raise RuntimeError(f"py-spy on process {pid} exited {spy.returncode}: {said.strip()}")
        texts[mode, pid] = out.read_text()
    return texts


def profile(conn: str, emulator_pid: int, kind: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """One configuration: warm up, then sample both devhost processes over one window."""
    queue = f"{kind}-{CONCURRENCY}"
    preload(conn, queue, args.messages)
    host_json = {"version": "2.0", "extensions": {"serviceBus": {"maxConcurrentCalls": CONCURRENCY}}}
    settings = {"ServiceBusConnection": conn}
    settings.update({setting: queue if k == kind else "idle" for k, setting in FUNCTION_QUEUES.items()})
    with running_host(APP, settings=settings, host_json=host_json) as host:
        host.wait_for_invocations(args.warmup, timeout=600)
        roles = {"host": [os.getpid()], "worker": _worker_pids()}
        if not roles["worker"]:
            raise RuntimeError("no devhost worker process found")
        everyone = [*roles["host"], *roles["worker"], emulator_pid]
        before, done_before, started = (
            {p: _cpu_seconds(p) for p in everyone},
            host.log.count,
            time.monotonic(),
        )
        texts = record([*roles["host"], *roles["worker"]], args.seconds, args.rate, args.py_spy, work)
        window = time.monotonic() - started
        after, done_after = {p: _cpu_seconds(p) for p in everyone}, host.log.count
        failed = [r for r in host.invocations if not r.succeeded]
    if args.raw_dir:  # py-spy's stacks as recorded, for a closer look (flamegraph.pl reads them)
        for (mode, pid), text in texts.items():
            (args.raw_dir / f"{kind}-{mode}-{pid}.txt").write_text(text)
    if failed:
        raise RuntimeError(f"{len(failed)} invocations failed, e.g. {failed[0].error}")
    if done_after >= args.messages:
        raise RuntimeError(
            f"the queue ran dry inside the window: preload more than --messages {args.messages}"
        )
    messages = done_after - done_before
    result: dict[str, Any] = {
        "window_s": round(window, 2),
        "invocations": messages,
        "msgs_per_s": round(messages / window, 1),
        "emulator_cpu_ms_per_msg": round((after[emulator_pid] - before[emulator_pid]) * 1000 / messages, 3),
        "processes": {},
    }
    for role, pids in roles.items():
        cpu_s = sum(after[p] - before[p] for p in pids)
        ms = cpu_s * 1000 / messages
        views = {}
        for mode in MODES:
            stacks: Counter[tuple[str, ...]] = Counter()
            for pid in pids:
                stacks.update(parse_raw(texts[mode, pid]))
            views[mode] = split(stacks, ms)
        running = views["running"]["samples"]["cpu"]
        result["processes"][role] = {
            "pids": pids,
            "cpu_s": round(cpu_s, 3),
            "cpu_ms_per_msg": round(ms, 3),
            # Running-thread samples per measured CPU second over the rate: above 1, threads the OS shows
            # running wait for a core; below 1, threads without a Python frame (C-only) used CPU unseen.
            "sample_coverage": round(running / args.rate / cpu_s, 3) if cpu_s else None,
            # Share of the window some thread held the GIL (Python and C code run under it).
            "gil_held_share": round(views["gil"]["samples"]["cpu"] / args.rate / window, 3),
            **views,
        }
    return result


def table(kind: str, run: dict[str, Any]) -> str:
    """A readable rendering: a row per bucket; per process the CPU ms/msg and % by self frame (running
    threads), the % of GIL-holding samples by self frame, and the % by caller (first non-stdlib frame)."""
    roles = list(run["processes"])
    processes = [run["processes"][role] for role in roles]
    lines = [
        f"{kind}: {run['invocations']} invocations in {run['window_s']} s ({run['msgs_per_s']} msg/s), "
        f"maxConcurrentCalls {CONCURRENCY}; emulator {run['emulator_cpu_ms_per_msg']:.2f} ms/msg "
        "(not sampled)",
        f"  {'':<24}" + "".join(f"{role + ' process':^33}" for role in roles),
        f"  {'bucket':<24}" + f"{'ms/msg':>9}{'self%':>8}{'gil%':>8}{'caller%':>8}" * len(roles),
    ]
    for bucket in (*BUCKETS, "stdlib"):
        cells = ""
        for process in processes:
            running = process["running"]["self"].get(bucket)
            gil = process["gil"]["self"].get(bucket)
            caller = process["running"]["by_caller"][bucket]["percent"]
            if running is None or gil is None:
                cells += f"{'':>9}{'':>8}{'':>8}{caller:>8.1f}"
            else:
                cells += f"{running['ms_per_msg']:>9.3f}{running['percent']:>8.1f}"
                cells += f"{gil['percent']:>8.1f}{caller:>8.1f}"
        lines.append(f"  {bucket:<24}{cells}")
    lines.append(
        f"  {'total CPU (measured)':<24}"
        + "".join(f"{p['cpu_ms_per_msg']:>9.3f}{100:>8.1f}{100:>8.1f}{100:>8.1f}" for p in processes)
    )
    for role, process in zip(roles, processes, strict=True):
        lines.append(
            f"  {role}: samples {process['running']['samples']['cpu']} running + "
            f"{process['running']['samples'][IDLE]} idle waits, "
            f"{process['gil']['samples']['cpu']} holding the GIL; "
            f"coverage {process['sample_coverage']}, GIL held {process['gil_held_share']:.0%} of the window"
        )
    return "\n".join(lines)


def load_note(before: tuple[float, ...], after: tuple[float, ...], cpus: int) -> str | None:
    """A warning when the shared machine was busy: then woken threads wait for a core (inflating the
    running-thread samples at wake-up points) and rates drop; the per-message CPU holds up better."""
    peak = max(before[0], after[0])
    if peak <= 0.75 * cpus:
        return None
    return (
        f"machine loaded: 1-minute load average up to {peak:.2f} on {cpus} cores (shared with other work, "
        "and py-spy's samplers); rates are low, and a woken thread that waits for a core counts as running"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--py-spy", default="/tmp/pyspy/bin/py-spy", help="the py-spy executable")
    parser.add_argument(
        "--messages", type=int, default=12000, help="1 KB messages preloaded per configuration"
    )
    parser.add_argument("--warmup", type=int, default=400, help="invocations before sampling starts")
    parser.add_argument("--seconds", type=int, default=10, help="sampling window")
    parser.add_argument("--raw-dir", type=Path, help="also keep py-spy's raw stacks in this folder")
    parser.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    args = parser.parse_args()
    load_before = os.getloadavg()
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        queues = [f"{kind}-{CONCURRENCY}" for kind in CONFIGURATIONS.values()] + ["idle"]
        proc, conn = start_emulator(work, queues)
        try:
            for name, kind in CONFIGURATIONS.items():
                runs[name] = profile(conn, proc.pid, kind, args, work)
                print(table(name, runs[name]), flush=True)
        finally:
            proc.terminate()
            proc.wait(30)
    load_after = os.getloadavg()
    result = {
        "benchmark": "host_cpu_split",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip(),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
        "load_average": {"before": load_before, "after": load_after},
        "load_note": load_note(load_before, load_after, os.cpu_count() or 1),
        "versions": {package: version(package) for package in (*PACKAGES, *PACKAGES_TOO)},
        "py_spy": subprocess.run([args.py_spy, "--version"], capture_output=True, text=True).stdout.strip(),
        "settings": {
            "max_concurrent_calls": CONCURRENCY,
            "message_bytes": 1024,
            "preloaded": args.messages,
            "warmup_invocations": args.warmup,
            "sampling_seconds": args.seconds,
            "sampling_rate_hz": args.rate,
        },
        "buckets": {
            "devhost": "devhost/ (host side: listeners, FunctionRpc adapter, Settlement service; "
            "worker: its process loop)",
            **{name: "site-packages/" + ", ".join(prefixes) for name, prefixes in PACKAGE_BUCKETS},
            "asyncio_io": "stdlib " + ", ".join(IO_STDLIB) + " (event loop and I/O; idle waits apart)",
            "app_function": str(APP.relative_to(ROOT)),
            "other": "everything else (stdlib logging/threading/concurrent, azure-core, ...)",
        },
        "runs": runs,
    }
    RESULT_FILE.parent.mkdir(parents=True, exist_ok=True)
    RESULT_FILE.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULT_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
