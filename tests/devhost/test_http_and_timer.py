"""HTTP triggers (routes, methods, auth levels and keys), the admin endpoints, and timer triggers."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC

import httpx
import pytest

from devhost.testing import HostHandle, running_host
from devhost.timer_trigger import schedule_zone
from emulator.server import EmulatorThread
from emulator.testing import EmulatorHandle
from tests.devhost.conftest import APPS, Records


@pytest.fixture(scope="module")
def host(_shared_emulator: EmulatorThread, module_records: Records) -> Iterator[HostHandle]:
    emulator = EmulatorHandle(_shared_emulator)
    settings = {
        "ServiceBusConnection": emulator.connection_string,
        "WORK_QUEUE": emulator.create_queue(),
        "TICK_SCHEDULE": "* * * * * *",  # every second
        "DEVHOST_TEST_RECORD": str(module_records.path),
    }
    with running_host(APPS / "basic_app.py", settings=settings) as handle:
        yield handle


@pytest.fixture
def client(host: HostHandle) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=host.base_url, timeout=30) as http:
        yield http


def test_a_function_level_route_refuses_requests_without_a_valid_key(
    host: HostHandle, client: httpx.Client
) -> None:
    assert client.get("/api/items/a/parts/1").status_code == 401
    assert client.get("/api/items/a/parts/1", headers={"x-functions-key": "wrong"}).status_code == 401
    other_function_key = host.function_key("boom")
    assert client.get("/api/items/a/parts/1", params={"code": other_function_key}).status_code == 401


def test_a_function_level_route_accepts_its_own_key_the_host_key_and_the_master_key(
    host: HostHandle, client: httpx.Client
) -> None:
    for key in (host.function_key("item_part"), host.host_key, host.master_key):
        response = client.put("/api/items/widget/parts/42", headers={"x-functions-key": key})
        assert response.status_code == 200
        assert response.json() == {"item": "widget", "part": "42", "method": "PUT"}
    assert (
        client.get("/api/items/w/parts/7", params={"code": host.function_key("item_part")}).status_code == 200
    )


def test_routes_enforce_methods_and_constraints(host: HostHandle, client: httpx.Client) -> None:
    key = {"x-functions-key": host.master_key}
    assert client.delete("/api/items/w/parts/1", headers=key).status_code == 404
    assert client.get("/api/items/w/parts/not-a-number", headers=key).status_code == 404
    assert client.get("/api/nothing-here", headers=key).status_code == 404
    assert client.get("/items/w/parts/1", headers=key).status_code == 404  # outside the route prefix


def test_anonymous_admin_level_empty_and_failing_functions(host: HostHandle, client: httpx.Client) -> None:
    assert client.get("/api/public", params={"name": "ada"}).text == "hello ada"
    assert client.get("/api/admin-only", headers={"x-functions-key": host.host_key}).status_code == 401
    assert client.get("/api/admin-only", headers={"x-functions-key": host.master_key}).status_code == 204
    assert client.get("/api/boom").status_code == 500
    failed = host.wait_for_invocations(lambda rs: any(r.function_name == "boom" for r in rs))
    assert next(r for r in failed if r.function_name == "boom").error == "ValueError: boom"


def test_a_function_listed_with_the_master_key_gets_the_url_that_opens_it_and_the_others_keep_theirs(
    host: HostHandle, client: httpx.Client
) -> None:
    plain = host.host.describe()
    listed = host.host.describe(with_master_key=["ADMIN_ONLY"])  # function names are case-insensitive
    line = next(x for x in listed if x.startswith("admin_only: "))
    url = f"{host.base_url}/api/admin-only?code={host.master_key}"
    methods = "DELETE,GET,HEAD,OPTIONS,PATCH,POST,PUT"
    assert line == f"admin_only: [{methods}] {url} (auth: admin; opens with the master key)"
    assert [x for x in listed if not x.startswith("admin_only: ")] == [
        x for x in plain if not x.startswith("admin_only: ")
    ]
    assert not any("?code=" in x for x in plain)
    assert client.get(url).status_code == 204
    assert client.get(url.split("?")[0]).status_code == 401


def test_admin_endpoints_need_the_master_key(host: HostHandle, client: httpx.Client) -> None:
    assert client.get("/admin/host/status").status_code == 401
    assert client.get("/admin/host/status", headers={"x-functions-key": host.host_key}).status_code == 401
    status = client.get("/admin/host/status", params={"code": host.master_key}).json()
    assert status["state"] == "Running"
    assert "item_part" in status["functions"] and "tick" in status["functions"]
    assert client.get("/admin/host/ping").status_code == 200
    assert client.post("/admin/functions/tick").status_code == 401
    headers = {"x-functions-key": host.master_key}
    assert client.post("/admin/functions/no-such-function", headers=headers).status_code == 404
    assert (
        client.post("/admin/functions/item_part", headers=headers).status_code == 404
    )  # HTTP: use its route


def test_a_timer_fires_on_its_schedule(host: HostHandle, module_records: Records) -> None:
    records = host.wait_for_invocations(
        lambda rs: (
            len([r for r in rs if r.function_name == "tick" and r.reason.startswith("Timer fired at")]) >= 2
        )
    )
    scheduled = [r for r in records if r.function_name == "tick" and r.reason.startswith("Timer fired at")]
    assert all(r.succeeded for r in scheduled)
    assert module_records.of("tick", past_due=False)


def test_the_admin_endpoint_runs_a_timer_function_now(host: HostHandle, client: httpx.Client) -> None:
    response = client.post(
        "/admin/functions/tick", headers={"x-functions-key": host.master_key}, json={"input": ""}
    )
    assert response.status_code == 202
    records = host.wait_for_invocations(
        lambda rs: any(r.function_name == "tick" and "host APIs" in r.reason for r in rs)
    )
    assert any(r.function_name == "tick" and "host APIs" in r.reason and r.succeeded for r in records)


def test_a_timer_runs_one_at_a_time_and_a_late_run_is_past_due(records: Records) -> None:
    settings = {"DEVHOST_TEST_RECORD": str(records.path), "TIMER_SLEEP": "1.5"}
    with running_host(APPS / "timer_app.py", settings=settings) as timer_host:
        timer_host.wait_for_invocations(3, timeout=30)
    runs = sorted(records.of("overrunning"), key=lambda r: r["start"])
    assert len(runs) >= 3
    assert all(earlier["end"] <= later["start"] for earlier, later in itertools.pairwise(runs))
    assert runs[0]["past_due"] is False  # runOnStartup
    assert any(r["past_due"] for r in runs[1:])  # an occurrence that came due during a 1.5 s run


def test_website_time_zone_selects_the_schedule_zone() -> None:
    assert str(schedule_zone({"WEBSITE_TIME_ZONE": "Europe/Berlin"})) == "Europe/Berlin"
    assert schedule_zone({}) is UTC
    with pytest.raises(ValueError, match="'Mars/Olympus' is not a known time zone"):
        schedule_zone({"WEBSITE_TIME_ZONE": "Mars/Olympus"})


def test_the_admin_endpoint_runs_a_service_bus_function_with_the_given_input(
    host: HostHandle, client: httpx.Client, module_records: Records
) -> None:
    headers = {"x-functions-key": host.master_key}
    assert client.post("/admin/functions/work", headers=headers, content=b"{not json").status_code == 400
    assert (
        client.post("/admin/functions/work", headers=headers, json={"input": "ok-admin"}).status_code == 202
    )
    (seen,) = module_records.wait(
        lambda rs: any(r.get("body") == "ok-admin" for r in rs)
    ) and module_records.of("work", body="ok-admin")
    assert seen["delivery_count"] == 1 and seen["message_id"]
