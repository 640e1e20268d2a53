"""The chaos run's test probe (app/probe.py): with BUSBAR_PROBE_RECORD set, each sample handler that ran to
its end leaves one durable JSON line; unset or 'off', nothing is written."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from app.endpoints.sample import sample_catalog
from shared.handlers.dispatch import Complete, DeadLetter
from shared.messages import IncomingMessage


def _message(contract: str, body: dict[str, object], delivery_count: int = 1) -> IncomingMessage:
    return IncomingMessage(
        body=json.dumps(body).encode(),
        message_id=str(uuid.uuid4()),
        content_type="application/json",
        application_properties={"NServiceBus.EnclosedMessageTypes": contract},
        delivery_count=delivery_count,
    )


def _dispatch(endpoint_name: str, message: IncomingMessage) -> object:
    endpoint = next(e for e in sample_catalog() if e.name == endpoint_name)
    return endpoint.dispatcher().dispatch(message)


def test_a_handled_event_appends_one_line_with_endpoint_key_message_and_delivery_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "probe.jsonl"
    monkeypatch.setenv("BUSBAR_PROBE_RECORD", str(record))
    key = f"c-{uuid.uuid4().hex}"
    message = _message("Tenant.CustomerCreated", {"customer_id": key, "name": "n"}, delivery_count=3)

    assert isinstance(_dispatch("crm", message), Complete)

    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(lines) == 1
    entry = lines[0]
    assert (entry["endpoint"], entry["contract"], entry["key"]) == ("crm", "Tenant.CustomerCreated", key)
    assert (entry["message_id"], entry["delivery_count"]) == (message.message_id, 3)
    assert entry["pid"] > 0 and entry["at"] > 0


def test_an_event_the_handler_gives_up_on_leaves_no_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "probe.jsonl"
    monkeypatch.setenv("BUSBAR_PROBE_RECORD", str(record))
    poison = _message("Shipping.OrderAccepted", {"order_id": f"o-{uuid.uuid4().hex}", "amount": -1})

    assert isinstance(_dispatch("billing", poison), DeadLetter)

    assert not record.exists()


@pytest.mark.parametrize("value", [None, "", "off", "OFF"])
def test_no_record_is_written_when_the_probe_is_unset_or_off(
    value: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    if value is None:
        monkeypatch.delenv("BUSBAR_PROBE_RECORD", raising=False)
    else:
        monkeypatch.setenv("BUSBAR_PROBE_RECORD", value)
    message = _message("Tenant.CustomerDeleted", {"customer_id": f"c-{uuid.uuid4().hex}"})

    assert isinstance(_dispatch("crm", message), Complete)

    assert list(tmp_path.iterdir()) == []
