"""The replay sends an archived message's described application properties (a .NET ``Uri``,
``DateTimeOffset`` and ``TimeSpan``, and descriptors nobody knows) with each descriptor and the described
value's type, as the re-drive archived them; a row whose ``$described`` JSON is not valid is reported invalid
by the property's name while the rest of its batch is sent. Wire types read with qpid-proton."""

from __future__ import annotations

import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from emulator.testing import EmulatorHandle
from spark.params import parse_params
from spark.replay import run
from tests.shared.envelope.wire_types import DESCRIBED, DESCRIBED_EXACT, stored_properties, types_of
from tests.spark.archive_factory import archive_row, write_archive
from tests.spark.management_args import management_args

BAD_DESCRIBED = '{"tenant": "acme", "when": {"$described": {"descriptor": true, "value": {"$long": "5"}}}}'
"""A row edited by hand: its descriptor is neither a symbol nor a ulong code."""


def test_replayed_messages_carry_every_archived_described_property_with_descriptor_and_type(
    spark: Any, emulator: EmulatorHandle, tmp_path: Path
) -> None:
    queue = emulator.create_queue(f"described-replay-{uuid.uuid4().hex[:8]}")
    rows = [
        archive_row(source_entity=queue, target_entity=queue, message_id="described", properties=DESCRIBED),
        replace(
            archive_row(source_entity=queue, target_entity=queue, message_id="bad", sequence_number=2),
            application_properties=BAD_DESCRIBED,
        ),
    ]
    write_archive(tmp_path / "archive", rows)
    params = parse_params(
        [
            *("--archive_path", str(tmp_path / "archive"), "--ledger_path", str(tmp_path / "ledger")),
            *("--report_path", str(tmp_path / "report"), "--connection_string", emulator.connection_string),
            *("--replay_run_id", "described-replay"),
            *management_args(emulator.emulator),
        ],
        env={},
    )

    assert run(params, spark).outcomes == {"sent": 1, "invalid": 1}

    results = pq.read_table(tmp_path / "report" / "described-replay" / "results").to_pylist()
    [invalid] = [r for r in results if r["outcome"] == "invalid"]
    assert invalid["message_id"] == "bad"
    assert "application property 'when'" in invalid["error"]
    assert "invalid $described descriptor True" in invalid["error"]
    [stored] = stored_properties(emulator, queue)
    assert types_of(stored) == {**DESCRIBED_EXACT, "x-replay-run-id": "string"}
    assert {name: stored[name].value for name in ("uri", "offset", "duration")} == {
        name: DESCRIBED[name].value for name in ("uri", "offset", "duration")
    }
