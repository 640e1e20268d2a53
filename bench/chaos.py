"""Chaos run: the whole app under faults, and proof that no accepted event is lost (issue 29).

Starts the app as ``make run`` does (its own data directory, OS-picked ports), publishes events of every
sample contract through ``POST /api/events/{eventType}`` at a steady rate (valid ones, poison ones and
``Billing.PaymentReceived``, which nobody subscribes to: ``bench/chaos_load.py``) and meanwhile injects
faults at seeded random intervals (``bench/chaos_faults.py``): kill -9 of the worker, kill -9 of the whole
``make run`` (then ``make run`` again on the same data), Azurite (the app's storage) stopped while events
flow and started again by devhost, bursts of invalid HTTP requests and garbage AMQP
connections, the re-drive timer and a console retry.

The sample handlers record what they handled in a durable probe file (``BUSBAR_PROBE_RECORD``,
``app/probe.py``). At the end the run drains, runs the re-drive once more (``python -m shared.redrive run``)
and accounts for every accepted event per endpoint: handled (how many times), dead-lettered, archived, or
lost; an event nobody subscribes to, per the fallback router: archived as ``NoMatchingSubscription`` or lost
(``bench/chaos_accounting.py``). Then it counts the side effects the endpoints committed to their table
(invoices, shipments, CRM's committed handlings) per order: a second one is a **duplicate side effect**, none
for an event owed handling a **missing** one (``bench/chaos_effects.py``); handler invocations that ran more
than once (probe lines) are reported apart, as repeated invocations. It writes ``bench/results/chaos.json``
and exits 1 when an event is lost or parked instead of handled, when an event nobody subscribes to was
handled, on any duplicate or missing side effect, or when a fault kind was injected fewer than
``--min-faults-per-kind`` times. ``--simulate-loss N`` takes N messages off the crm
queue during the load and completes them unhandled, as a handler that completes without doing its work
would: the run must then fail.

Usage::

    .venv/bin/python bench/chaos.py --duration 600          # or: make chaos DURATION=600
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from azure.servicebus import ServiceBusClient

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import chaos_drain  # noqa: E402
from bench.chaos_accounting import Handled, account, recovery_by_kind, recovery_times  # noqa: E402
from bench.chaos_app import AppProcess  # noqa: E402
from bench.chaos_effects import side_effects  # noqa: E402
from bench.chaos_faults import KINDS, ROUND, FaultScheduler, Supervisor  # noqa: E402
from bench.chaos_load import EventFactory, Publisher, PublishLog  # noqa: E402

RESULT_FILE = ROOT / "bench" / "results" / "chaos.json"
STORAGE_UNREACHABLE = "storage unreachable for message"  # shared.idempotency.once's log lines
TWIN = "committed first; this copy's effects are discarded"
HANDLED_BEFORE = "completed without its handlers"  # shared.handlers.subscriber's


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/chaos.py", description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of load and faults")
    parser.add_argument("--seed", type=int, default=29, help="seed of the events and the faults")
    parser.add_argument("--rate", type=float, default=10.0, help="events published per second")
    parser.add_argument(
        "--fault-interval",
        type=float,
        default=None,
        help="mean seconds between faults (default: enough "
        "for --min-faults-per-kind of each kind, plus some)",
    )
    parser.add_argument("--min-faults-per-kind", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULT_FILE, help="the JSON report")
    parser.add_argument("--work-dir", type=Path, default=None, help="data, settings, probe and logs")
    parser.add_argument("--drain-timeout", type=float, default=300.0)
    parser.add_argument("--simulate-loss", type=int, default=0, metavar="N")
    return parser.parse_args(argv)


def write_settings(work: Path) -> dict[str, str]:
    """The run's local.settings.json: the sample's, with the probe on and the archive in the run's folder."""
    sample = json.loads((ROOT / "local.settings.sample.json").read_text())
    values: dict[str, str] = dict(sample["Values"])
    values.update(
        {
            "BUSBAR_PROBE_RECORD": str(work / "probe.jsonl"),
            "BUSBAR_ARCHIVE_URL": str(work / "archive"),
            "BUSBAR_REDRIVE_SCHEDULE": "0 */2 * * * *",  # runs during the load; failures gather between
            "BUSBAR_REDRIVE_TIME_BUDGET_SECONDS": "60",
        }
    )
    (work / "local.settings.json").write_text(json.dumps({**sample, "Values": values}, indent=2))
    return values


def read_probe(path: Path) -> list[Handled]:
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        records.append(
            Handled(entry["endpoint"], entry["key"], float(entry["at"]), entry.get("message_id") or None)
        )
    return records


def count_lines(path: Path, text: str) -> int:
    """How many lines of ``path`` contain ``text``."""
    with path.open(errors="replace") as lines:
        return sum(1 for line in lines if text in line)


def steal_messages(supervisor: Supervisor, count: int, stop: threading.Event) -> list[str]:
    """Simulated loss: take ``count`` messages off the crm queue and complete them unhandled, as a handler
    that completed its message without doing (or recording) its work would; the keys taken."""
    stolen: list[str] = []
    while len(stolen) < count and not stop.is_set():
        app = supervisor.current()
        if app is None:
            stop.wait(1.0)
            continue
        try:
            with (
                ServiceBusClient.from_connection_string(app.connection_string) as client,
                client.get_queue_receiver("crm", max_wait_time=5) as receiver,
            ):
                for message in receiver.receive_messages(max_message_count=count - len(stolen)):
                    receiver.complete_message(message)
                    body = json.loads(b"".join(message.body))
                    stolen.append(body.get("customer_id") or body.get("order_id") or "?")
        except Exception:  # the app was killed under it: try again on the next one
            stop.wait(1.0)
    return stolen


def _final_redrive(supervisor: Supervisor, settings: dict[str, str], run_id: str) -> dict[str, Any]:
    """The re-drive once, against the app as it runs now: a host that gave up on its worker during the
    drain is started again by the supervisor, on new ports, and a re-drive aimed at the old ones crashes;
    it is tried again (three times) against the new one, and a third crash is the run's error."""
    for attempt in range(3):
        while (app := supervisor.current()) is None:
            time.sleep(0.5)
        try:
            return chaos_drain.run_redrive(ROOT, chaos_drain.app_environment(settings, app), run_id)
        except chaos_drain.RedriveCrashed as crash:
            if attempt == 2:
                raise
            print(f"chaos: final re-drive {run_id} crashed, trying again: {crash}", flush=True)
            time.sleep(5)
    raise AssertionError("unreachable")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="busbar-chaos-"))
    work.mkdir(parents=True, exist_ok=True)
    settings = write_settings(work)
    interval = args.fault_interval or max(5.0, args.duration / (len(ROUND) * (args.min_faults_per_kind + 3)))
    load_before = os.getloadavg()
    print(
        f"chaos: seed {args.seed}, {args.duration:g} s, {args.rate:g} events/s, "
        f"a fault every ~{interval:.0f} s; work dir {work}",
        flush=True,
    )
    with (work / "make-run.log").open("w", buffering=1) as log:
        supervisor = Supervisor(lambda: AppProcess(ROOT, work / "data", work / "local.settings.json", log))
        # SIGTERM ends the run as Ctrl-C does: the finally below kills the app's process group.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        try:
            return _run(args, work, settings, supervisor, interval, load_before)
        finally:
            supervisor.abandon()


def _run(
    args: argparse.Namespace,
    work: Path,
    settings: dict[str, str],
    supervisor: Supervisor,
    interval: float,
    load_before: tuple[float, float, float],
) -> int:
    supervisor.start()
    published = PublishLog()
    publisher = Publisher(
        EventFactory(args.seed, f"chaos{args.seed}"), args.rate, supervisor.current, published
    )
    faults = FaultScheduler(supervisor, args.seed, interval)
    started = time.monotonic()
    publisher.start()
    faults.start()
    stolen: list[str] = []
    if args.simulate_loss:
        time.sleep(args.duration / 4)
        stolen = steal_messages(supervisor, args.simulate_loss, publisher.stopping)
    time.sleep(max(0.0, args.duration - (time.monotonic() - started)))
    faults.stopping.set()
    faults.join()
    publisher.stopping.set()
    publisher.join()
    load_seconds = time.monotonic() - started
    print(f"chaos: load done, {len(published.accepted)} accepted; draining", flush=True)

    drained = chaos_drain.wait_drained(supervisor.current, work / "probe.jsonl", args.drain_timeout)
    redrives = []
    for round_number in range(4):  # re-driven messages must be handled; then re-drive again
        summary = _final_redrive(supervisor, settings, f"chaos-final-{round_number}")
        redrives.append(summary.get("totals", summary))
        drained = (
            chaos_drain.wait_drained(supervisor.current, work / "probe.jsonl", args.drain_timeout) and drained
        )
        if not redrives[-1].get("redriven"):
            break
    while (app := supervisor.current()) is None:
        time.sleep(0.5)
    end_state = chaos_drain.in_flight(app)
    parked = chaos_drain.dead_letters(app) + chaos_drain.archived(settings["BUSBAR_ARCHIVE_URL"])
    rows, commits = chaos_drain.committed(app)
    supervisor.stop()

    handled = read_probe(work / "probe.jsonl")
    accounting = account(published.accepted, handled, parked)
    effects = side_effects(published.accepted, rows, commits, handled)
    times = recovery_times(faults.faults, published.accepted, handled)
    injected = {kind: sum(1 for f in faults.faults if f.kind == kind) for kind in KINDS}
    report: dict[str, Any] = {
        "benchmark": "chaos",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
        },
        "seed": args.seed,
        "duration_s": round(load_seconds, 1),
        "rate_per_s": args.rate,
        "simulated_loss": {"messages_completed_unhandled": args.simulate_loss, "keys": stolen},
        "events": {
            "attempted": published.attempts,
            "accepted": len(published.accepted),
            "poison_accepted": sum(1 for a in published.accepted if a.event.poison),
            "unsubscribed_accepted": sum(1 for a in published.accepted if a.event.unsubscribed),
            "not_accepted": dict(published.refused),
        },
        "faults": {
            "injected": injected,
            "skipped_and_dealt_again": dict(faults.skipped),
            "host_restarts": dict(supervisor.restarts),
            "host_restart_seconds": [round(s, 1) for s in supervisor.downtimes],
            # Messages retried because storage could not be reached (the endpoints' log line): how often an
            # Azurite outage outlasted the storage client's own retries.
            "azurite_away_seconds": [
                float(m.group(1))
                for f in faults.faults
                if (m := re.search(r"again as \d+ after ([\d.]+) s", f.detail))
            ],
            "storage_unreachable_retries": count_lines(work / "make-run.log", STORAGE_UNREACHABLE),
            "log": [{"kind": f.kind, "at": round(f.at, 3), "detail": f.detail} for f in faults.faults],
        },
        # Deliveries the endpoints recognised as handled before and completed without their handlers, and
        # copies whose twin committed first (their effects discarded): the store at work (the log's lines).
        "store": {
            "completed_as_handled_before": count_lines(work / "make-run.log", HANDLED_BEFORE),
            "discarded_as_twin": count_lines(work / "make-run.log", TWIN),
        },
        "recovery": recovery_by_kind(faults.faults, times),
        **accounting,
        **effects,
        "final_redrives": redrives,
        "drained": drained,
        "end_state": end_state,
        "still_in_flight": sum(c["active"] for c in end_state.values()),
    }
    failures = []
    if accounting["lost"]:
        failures.append(f"{accounting['lost']} lost")
    if accounting["outcomes"].get("parked instead of handled"):
        failures.append(f"{accounting['outcomes']['parked instead of handled']} parked instead of handled")
    if accounting["outcomes"].get("poison handled (a bug)"):
        failures.append("poison handled")
    if accounting["outcomes"].get("unrouted handled (a bug)"):
        failures.append("unrouted handled")
    if effects["duplicate_side_effects"]:
        failures.append(f"{effects['duplicate_side_effects']} duplicate side effects")
    if effects["effects_missing"]:
        failures.append(f"{effects['effects_missing']} side effects missing")
    short = [kind for kind, n in injected.items() if n < args.min_faults_per_kind]
    if short:
        failures.append(f"fewer than {args.min_faults_per_kind} faults of {short}")
    report["verdict"] = "FAIL: " + "; ".join(failures) if failures else "PASS"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(
        json.dumps(
            {
                k: report[k]
                for k in (
                    *("verdict", "events", "outcomes", "lost", "duplicate_side_effects", "effects_missing"),
                    "repeated_invocations",
                )
            },
            indent=2,
        )
    )
    print(f"chaos: {report['verdict']}; report {args.out}", flush=True)
    if not failures and args.work_dir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
