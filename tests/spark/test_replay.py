"""End to end on a local SparkSession and the emulator: dry run, replay, re-run, bad rows."""

from __future__ import annotations

import json
import random
import uuid
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusReceivedMessage

from emulator.server import EmulatorThread
from emulator.testing import EmulatorHandle
from shared.archive.rows import ArchiveRow
from spark import ledger
from spark.archive import ArchiveNotFoundError
from spark.params import ReplayParams, parse_params
from spark.properties import REPLAY_RUN_ID_PROPERTY
from spark.replay import run
from spark.report import ReplaySummary
from tests.emulator.sdk_helpers import app_properties, drain, message_id
from tests.spark.archive_factory import archive_row, write_archive
from tests.spark.management_args import management_args

SESSIONS = ("s-a", "s-b", "s-c")
PER_SESSION = 12


@pytest.fixture(scope="module")
def broker(_shared_emulator: EmulatorThread) -> EmulatorHandle:
    return EmulatorHandle(_shared_emulator)


def _params(tmp: Path, broker: EmulatorHandle, *extra: str) -> ReplayParams:
    return parse_params(
        [
            *("--archive_path", str(tmp / "archive"), "--ledger_path", str(tmp / "ledger")),
            *("--report_path", str(tmp / "report"), "--connection_string", broker.connection_string),
            *("--partitions", "2", "--batch_size", "5", *management_args(broker.emulator), *extra),
        ],
        env={},
    )


def _active(broker: EmulatorHandle, queue: str) -> int:
    namespace = broker.emulator.namespace
    counts = broker.call(lambda: namespace.counts(namespace.queues[queue.lower()]))
    assert isinstance(counts, dict)
    return int(counts["activeMessageCount"])


def _receive_session(
    broker: EmulatorHandle, queue: str, session: str, count: int
) -> list[ServiceBusReceivedMessage]:
    with (
        ServiceBusClient.from_connection_string(broker.connection_string) as client,
        client.get_queue_receiver(queue, session_id=session) as receiver,
    ):
        return drain(receiver, count, wait=2)


def _receive(broker: EmulatorHandle, queue: str, count: int) -> list[ServiceBusReceivedMessage]:
    with (
        ServiceBusClient.from_connection_string(broker.connection_string) as client,
        client.get_queue_receiver(queue) as receiver,
    ):
        return drain(receiver, count, wait=2)


@pytest.fixture(scope="module")
def scenario(broker: EmulatorHandle, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """An archive of session messages of a queue and subscription-sourced messages, shuffled, with one
    message archived twice, and the queues a replay delivers them to."""
    suffix = uuid.uuid4().hex[:8]
    orders = broker.create_queue(f"orders-{suffix}", requires_session=True, requires_duplicate_detection=True)
    billing = broker.create_queue(f"billing-redrive-{suffix}", requires_duplicate_detection=True)
    subscription = f"sales-{suffix}/Subscriptions/billing"
    rows: list[ArchiveRow] = [
        archive_row(
            source_entity=orders,
            message_id=f"{session}-{n}",
            session_id=session,
            sequence_number=100 * n + i,
            properties={"n": n, "session": session},
        )
        for i, session in enumerate(SESSIONS)
        for n in range(PER_SESSION)
    ]
    rows += [
        archive_row(
            source_entity=subscription,
            target_entity=billing,
            message_id=f"bill-{n}",
            sequence_number=n,
            properties={"n": n, "raw": b"\x01\x02"},
        )
        for n in range(10)
    ]
    # an older copy of bill-3 from an earlier re-drive run: only the newest copy is replayed
    rows.append(
        archive_row(
            source_entity=subscription,
            target_entity=billing,
            message_id="bill-3",
            run_id="redrive-run-0",
            properties={"n": -1},
            archived_at=rows[-1].archived_at.replace(year=2025),
        )
    )
    random.Random(7).shuffle(rows)
    root = tmp_path_factory.mktemp("replay")
    write_archive(root / "archive", rows)
    return {"root": root, "orders": orders, "billing": billing, "subscription": subscription}


def test_a_dry_run_writes_the_plan_with_counts_and_sends_nothing(
    spark: Any, broker: EmulatorHandle, scenario: dict[str, Any]
) -> None:
    root: Path = scenario["root"]
    summary = run(_params(root, broker, "--dry_run", "--rate_limit", "10", "--replay_run_id", "dry-1"), spark)
    assert summary.dry_run
    assert summary.outcomes == {"planned": 3 * PER_SESSION + 10}
    counts = {(p["target_entity"], p["source_entity"]): p["messages"] for p in summary.plan}
    assert counts == {
        (scenario["orders"], scenario["orders"]): 3 * PER_SESSION,
        (scenario["billing"], scenario["subscription"]): 10,
    }
    assert summary.estimated_seconds_at_rate_limit == pytest.approx((3 * PER_SESSION + 10) / 10)
    plan = spark.read.parquet(str(root / "report" / "dry-1" / "plan"))
    assert plan.count() == 3 * PER_SESSION + 10
    assert {r.target_entity for r in plan.select("target_entity").distinct().collect()} == {
        scenario["orders"],
        scenario["billing"],
    }
    assert json.loads((root / "report" / "dry-1" / "summary.json").read_text())["dry_run"] is True
    assert _active(broker, scenario["orders"]) == 0
    assert _active(broker, scenario["billing"]) == 0
    assert ledger.read_ledger(spark, str(root / "ledger")).count() == 0


def test_a_dry_run_reports_what_the_ledger_shows_as_sent_as_already_sent_as_the_run_then_does(
    spark: Any, broker: EmulatorHandle, tmp_path: Path
) -> None:
    queue = broker.create_queue(f"dry-ledger-{uuid.uuid4().hex[:8]}")
    write_archive(
        tmp_path / "archive", [archive_row(source_entity=queue, message_id="first", sequence_number=1)]
    )
    assert run(_params(tmp_path, broker, "--replay_run_id", "sent-1"), spark).outcomes == {"sent": 1}
    # A later re-drive archived another failure; the archive now holds one sent row and one new one.
    later = [archive_row(source_entity=queue, message_id="second", sequence_number=2)]
    write_archive(tmp_path / "archive", later, run_id="redrive-run-2")

    dry = run(_params(tmp_path, broker, "--dry_run", "--replay_run_id", "dry-2"), spark)

    assert dry.outcomes == {"already_sent": 1, "planned": 1}
    results = spark.read.parquet(str(tmp_path / "report" / "dry-2" / "results")).collect()
    assert {r.message_id: r.outcome for r in results} == {"first": "already_sent", "second": "planned"}
    assert [
        r.message_id for r in spark.read.parquet(str(tmp_path / "report" / "dry-2" / "plan")).collect()
    ] == ["second"]
    assert [p["messages"] for p in dry.plan] == [1]
    # --force would send both again: its dry run plans both.
    forced = run(_params(tmp_path, broker, "--dry_run", "--force", "--replay_run_id", "dry-forced"), spark)
    assert forced.outcomes == {"planned": 2}
    # The run does what the dry run said.
    real = run(_params(tmp_path, broker, "--replay_run_id", "sent-2"), spark)
    assert real.outcomes == {"already_sent": 1, "sent": 1}
    assert sorted(message_id(m) for m in _receive(broker, queue, 2)) == ["first", "second"]


def test_a_replay_delivers_each_message_once_to_its_target_with_properties_and_sessions_in_order(
    spark: Any, broker: EmulatorHandle, scenario: dict[str, Any]
) -> None:
    root: Path = scenario["root"]
    summary = run(_params(root, broker, "--replay_run_id", "full-1"), spark)
    assert summary.outcomes == {"sent": 3 * PER_SESSION + 10}
    for session in SESSIONS:
        received = _receive_session(broker, scenario["orders"], session, PER_SESSION)
        assert [m.message_id for m in received] == [f"{session}-{n}" for n in range(PER_SESSION)]
        assert [app_properties(m)["n"] for m in received] == list(range(PER_SESSION))
        assert all(app_properties(m)[REPLAY_RUN_ID_PROPERTY] == "full-1" for m in received)
    billing = _receive(broker, scenario["billing"], 10)
    assert sorted(message_id(m) for m in billing) == sorted(f"bill-{n}" for n in range(10))
    by_id = {m.message_id: m.application_properties for m in billing}
    # the SDK hands strings back as bytes too; binary and int values arrive as they were archived
    assert by_id["bill-3"] == {b"n": 3, b"raw": b"\x01\x02", REPLAY_RUN_ID_PROPERTY.encode(): b"full-1"}
    results = spark.read.parquet(str(root / "report" / "full-1" / "results"))
    assert results.filter("outcome = 'sent' AND sent_at IS NOT NULL AND error IS NULL").count() == 46

    # A second run finds everything in the ledger as sent and sends nothing.
    again: ReplaySummary = run(_params(root, broker, "--replay_run_id", "full-2"), spark)
    assert again.outcomes == {"already_sent": 3 * PER_SESSION + 10}
    assert _active(broker, scenario["billing"]) == 0
    assert _active(broker, scenario["orders"]) == 0


def test_rows_that_cannot_be_sent_are_reported_and_a_rerun_sends_only_what_failed(
    spark: Any, broker: EmulatorHandle, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:8]
    good = broker.create_queue(f"good-{suffix}")
    missing = f"missing-{suffix}"
    rows = [archive_row(source_entity=good, message_id=f"ok-{n}", sequence_number=n) for n in range(6)]
    rows += [
        archive_row(
            source_entity=good, message_id="bad-key", sequence_number=50, session_id="s", partition_key="p"
        ),
        archive_row(source_entity=f"other-{suffix}", message_id="to-missing", sequence_number=1),
        archive_row(source_entity=f"t-{suffix}/Subscriptions/audit", message_id="nowhere", sequence_number=1),
    ]
    write_archive(tmp_path / "archive", rows)
    override = ("--target_overrides", f"other-{suffix}={missing}")
    summary = run(
        _params(tmp_path, broker, *override, "--max_attempts", "2", "--backoff_seconds", "0.01"), spark
    )
    assert summary.outcomes == {"sent": 6, "invalid": 1, "failed": 1, "unroutable": 1}
    results = {
        r.message_id: r
        for r in spark.read.parquet(str(tmp_path / "report" / summary.replay_run_id / "results")).collect()
    }
    assert "partition_key" in results["bad-key"].error
    # A missing target's token is refused (404 "could not be found"), as on Azure.
    assert "amqp:not-found" in results["to-missing"].error
    assert "could not be found" in results["to-missing"].error
    assert results["nowhere"].error.startswith("no target")
    assert sorted(message_id(m) for m in _receive(broker, good, 6)) == [f"ok-{n}" for n in range(6)]

    # Once the missing queue exists, a re-run sends the failed row (and only it).
    broker.create_queue(missing)
    rerun = run(_params(tmp_path, broker, *override), spark)
    assert rerun.outcomes == {"already_sent": 6, "sent": 1, "invalid": 1, "unroutable": 1}
    assert [m.message_id for m in _receive(broker, missing, 1)] == ["to-missing"]
    assert _active(broker, missing) == 0
    assert _active(broker, good) == 0


def test_a_missing_archive_is_refused_before_anything_is_planned(
    spark: Any, broker: EmulatorHandle, tmp_path: Path
) -> None:
    with pytest.raises(ArchiveNotFoundError, match="no archive files under"):
        run(_params(tmp_path, broker), spark)
    assert not (tmp_path / "ledger").exists()
