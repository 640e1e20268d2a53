"""The replay sends every archived property with its AMQP type: typed rows exactly, rows archived before
types were recorded with Busbar's stamps typed by name and any int past 32 bits as a long (the replay
used to fail on ``busbar.redrive.at``), and a row whose property cannot be sent is reported invalid by the
property's name while the rest of its batch is sent. Wire types read with qpid-proton."""

from __future__ import annotations

import uuid
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from emulator.testing import EmulatorHandle
from shared.envelope.properties import Char, Long, ULong
from spark.params import parse_params
from spark.replay import run
from tests.shared.envelope.wire_types import EXACT, SENT, stored_properties, types_of
from tests.spark.archive_factory import archive_row, write_archive
from tests.spark.management_args import management_args

OLD_ROW_PROPERTIES = (
    '{"busbar.redrive.at": 1795749929335, "busbar.redrive.sequence_number": 12, "n": 1795749929335}'
)
"""A row the re-drive archived before property types were recorded: the SDK's ints, as they came."""


def test_replayed_messages_carry_every_archived_property_with_its_type(
    spark: Any, emulator: EmulatorHandle, tmp_path: Path
) -> None:
    queue = emulator.create_queue(f"typed-replay-{uuid.uuid4().hex[:8]}")
    typed = {
        **SENT,
        "grade": Char("A"),
        "price": Decimal("19.99"),
        "busbar.redrive.at": SENT["timestamp"],
        "busbar.redrive.sequence_number": Long(12),
    }
    rows = [
        archive_row(source_entity=queue, target_entity=queue, message_id="typed", properties=typed),
        replace(
            archive_row(source_entity=queue, target_entity=queue, message_id="old", sequence_number=2),
            application_properties=OLD_ROW_PROPERTIES,
        ),
        archive_row(
            source_entity=queue,
            target_entity=queue,
            message_id="huge-decimal",
            sequence_number=3,
            properties={"tenant": "acme", "price": Decimal("1E+7000")},
        ),
    ]
    write_archive(tmp_path / "archive", rows)
    params = parse_params(
        [
            *("--archive_path", str(tmp_path / "archive"), "--ledger_path", str(tmp_path / "ledger")),
            *("--report_path", str(tmp_path / "report"), "--connection_string", emulator.connection_string),
            *("--replay_run_id", "typed-replay"),
            *management_args(emulator.emulator),
        ],
        env={},
    )

    assert run(params, spark).outcomes == {"sent": 2, "invalid": 1}

    results = pq.read_table(tmp_path / "report" / "typed-replay" / "results").to_pylist()
    [invalid] = [r for r in results if r["outcome"] == "invalid"]
    assert invalid["message_id"] == "huge-decimal"
    assert "application property 'price' cannot be sent" in invalid["error"]
    assert "does not fit an AMQP decimal128" in invalid["error"]
    stored = {("typed" if "text" in p else "old"): p for p in stored_properties(emulator, queue)}
    assert len(stored) == 2
    assert types_of(stored["typed"]) == {
        **EXACT,
        "grade": "char",  # sent by Busbar's own AMQP sender (shared.amqp.sender): the SDK has no char
        "price": "decimal128",
        "busbar.redrive.at": "timestamp",
        "busbar.redrive.sequence_number": "long",
        "x-replay-run-id": "string",
    }
    assert types_of(stored["old"]) == {
        "busbar.redrive.at": "timestamp",
        "busbar.redrive.sequence_number": "long",
        "n": "long",
        "x-replay-run-id": "string",
    }
    assert int(stored["old"]["busbar.redrive.at"]) == 1_795_749_929_335
    assert int(stored["typed"]["ulong"]) == ULong(2**64 - 1)
