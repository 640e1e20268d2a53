"""Your endpoints, not the sample's (issue 37): ``make run`` in a fresh copy of the repository with the sample
switched off (``BUSBAR_SAMPLE_ENDPOINTS=false``) hosts exactly the endpoints of the modules under
``app/endpoints/``, and its HTTP API knows exactly their contracts.

One new file is the whole change: ``app/endpoints/loyalty.py``, a new contract and its handler, which appends
what it handled to a file outside the app (so the test reads it from outside the worker process). Its event
is published over HTTP and handled; the sample's events are unknown (404). With no endpoint module at all,
the app still starts and serves its HTTP API and console.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.devhost.test_make_run import REPO, MakeRun
from tests.docs.repo_copy import copy_repository

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]

READY_SECONDS = 240.0  # start-up under a loaded machine (emulator, Azurite, provisioning, worker)
WAIT = 120.0

LOYALTY_MODULE = '''"""A user's endpoint, written by the test."""

from __future__ import annotations

import json

from shared.handlers import ContractRegistry, Endpoint, Event, HandlerContext, HandlerRegistry

LEDGER = {ledger!r}


class PointsEarned(Event, contract="Loyalty.PointsEarned", ordering_key="customer_id"):
    """A customer earned loyalty points."""

    customer_id: str
    points: int


handlers = HandlerRegistry()


@handlers.handles(PointsEarned)
def credit_points(event: PointsEarned, context: HandlerContext) -> None:
    """Credit the points: one line per handled event."""
    with open(LEDGER, "a", encoding="utf-8") as ledger:
        ledger.write(json.dumps({{"customer_id": event.customer_id, "points": event.points}}) + "\\n")


LOYALTY = Endpoint("loyalty", ContractRegistry(PointsEarned), handlers)
'''


def wait_for(condition: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def copy_without_the_sample(tmp_path: Path) -> Path:
    """A fresh copy of the repository whose settings switch the sample off (``make run`` reads them from
    beside its data directory, ``MakeRun``'s ``SETTINGS``)."""
    if shutil.which("make") is None:
        pytest.fail("GNU make is required for the newcomer path")
    copy = copy_repository(tmp_path / "busbar")
    document = json.loads((REPO / "local.settings.sample.json").read_text())
    document["Values"]["BUSBAR_SAMPLE_ENDPOINTS"] = "false"
    (tmp_path / "local.settings.json").write_text(json.dumps(document, indent=2))
    return copy


def subscribers(client: httpx.Client, master_key: str) -> list[str]:
    status = client.get("/admin/host/status", headers={"x-functions-key": master_key})
    assert status.status_code == 200, status.text
    return sorted(name for name in status.json()["functions"] if name.endswith("_subscriber"))


@pytest.mark.timeout(600)
def test_with_the_sample_off_make_run_hosts_only_the_new_modules_endpoint_and_knows_only_its_contracts(
    tmp_path: Path,
) -> None:
    copy = copy_without_the_sample(tmp_path)
    ledger = tmp_path / "ledger.jsonl"
    (copy / "app" / "endpoints" / "loyalty.py").write_text(LOYALTY_MODULE.format(ledger=str(ledger)))
    run = MakeRun(tmp_path / "data", cwd=copy)
    try:
        run.reader.wait_ready(timeout=READY_SECONDS)
        customer = f"C-{uuid.uuid4().hex[:8]}"
        headers = {"x-functions-key": run.banner("Host key")}
        with httpx.Client(base_url=run.base_url, headers=headers, timeout=60) as http:
            assert subscribers(http, run.banner("Master key")) == ["loyalty_subscriber"]
            topology = http.get("/api/topology")
            assert topology.status_code == 200, topology.text
            assert topology.json()["contracts"] == ["Loyalty.PointsEarned"]

            published = http.post(
                "/api/events/Loyalty.PointsEarned", json={"customer_id": customer, "points": 10}
            )
            sample = http.post("/api/events/Shipping.OrderAccepted", json={"order_id": "A-1", "amount": 1.0})
            put = http.put("/api/endpoints/loyalty/subscriptions", json={"events": ["Loyalty.PointsEarned"]})
            listed = http.get("/api/endpoints/loyalty/subscriptions")

        assert published.status_code == 202, published.text
        assert sample.status_code == 404, sample.text
        assert sample.json()["error"]["message"] == "unknown event type(s): Shipping.OrderAccepted"
        assert put.status_code in (200, 201), put.text  # make run provisioned it already: unchanged
        assert listed.status_code == 200, listed.text
        assert "Loyalty.PointsEarned" in json.dumps(listed.json())

        def credits() -> list[dict[str, object]]:
            lines = ledger.read_text().splitlines() if ledger.exists() else []
            return [json.loads(line) for line in lines]

        wait_for(lambda: credits() != [], "the loyalty handler to credit the points")
        assert credits() == [{"customer_id": customer, "points": 10}]
        output = run.interrupt()
    finally:
        run.kill()
    # The sample's endpoints were neither hosted nor provisioned.
    assert not re.search(r"^\s+(billing|crm|shipping|sales)_subscriber:", output, re.M), output


@pytest.mark.timeout(600)
def test_with_the_sample_off_and_no_endpoint_module_the_app_still_starts_and_serves_its_api(
    tmp_path: Path,
) -> None:
    copy = copy_without_the_sample(tmp_path)
    run = MakeRun(tmp_path / "data", cwd=copy)
    try:
        run.reader.wait_ready(timeout=READY_SECONDS)
        master_key = run.banner("Master key")
        with httpx.Client(base_url=run.base_url, timeout=60) as http:
            assert subscribers(http, master_key) == []
            published = http.post(
                "/api/events/Shipping.OrderAccepted",
                json={"order_id": "A-1", "amount": 1.0},
                headers={"x-functions-key": run.banner("Host key")},
            )
            entities = http.get("/api/ops/entities", headers={"x-functions-key": master_key})

        assert published.status_code == 404, published.text
        assert entities.status_code == 200, entities.text
        run.interrupt()
    finally:
        run.kill()


@pytest.mark.timeout(600)
def test_an_endpoint_module_that_cannot_be_imported_stops_make_run_naming_the_module(tmp_path: Path) -> None:
    copy = copy_without_the_sample(tmp_path)
    (copy / "app" / "endpoints" / "broken.py").write_text("import no_such_module_anywhere\n")
    run = MakeRun(tmp_path / "data", cwd=copy)
    try:
        run.process.wait(timeout=READY_SECONDS)
        output = run.reader.rest(timeout=10)
    finally:
        run.kill()

    assert run.process.returncode != 0, output
    assert not any(line.startswith("devhost ready: ") for line in run.reader.lines), output
    assert "endpoint module app.endpoints.broken" in output, output
    assert "No module named 'no_such_module_anywhere'" in output, output


@pytest.mark.timeout(600)
def test_an_endpoint_whose_queue_name_is_invalid_stops_make_run_naming_the_module_and_the_rule(
    tmp_path: Path,
) -> None:
    copy = copy_without_the_sample(tmp_path)
    (copy / "app" / "endpoints" / "points.py").write_text(
        "from shared.handlers import ContractRegistry, Endpoint, HandlerRegistry\n\n"
        'POINTS = Endpoint("loyalty points", ContractRegistry(), HandlerRegistry())\n'
    )
    run = MakeRun(tmp_path / "data", cwd=copy)
    try:
        run.process.wait(timeout=READY_SECONDS)
        output = run.reader.rest(timeout=10)
    finally:
        run.kill()

    assert run.process.returncode != 0, output
    assert not any(line.startswith("devhost ready: ") for line in run.reader.lines), output
    assert "app.endpoints.points: endpoint 'loyalty points' cannot listen on its queue (its name)" in output
    assert "'loyalty points': an endpoint name is its input queue's name: 1-260 characters" in output, output
