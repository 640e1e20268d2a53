"""The operations console's API hosted by devhost against the emulator: failure groups for a mix of poison,
transient and unmatched failures, one message, retry and archive through the re-drive's code, looking
that changes nothing, and admin-key auth."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from azure.servicebus import ServiceBusClient, ServiceBusSubQueue

from app.endpoints.sample import sample_catalog
from app.services import app_entities
from devhost.testing import HostHandle, running_host
from shared.archive.reader import read_archive
from tests.functions import ops_scene
from tests.functions.ops_scene import FOREIGN_ENDPOINT, provision, sample_namespace, scene
from tests.shared.redrive.redrive_support import (
    Provisioner,
    dead_letter_queue_messages,
    drain_queue,
    message,
    peek_queue,
    peek_subscription,
    redrive_env,
    text_properties,
)

POISON, TRANSIENT, UNMATCHED = ops_scene.POISON, ops_scene.TRANSIENT, ops_scene.UNMATCHED
__all__ = ["provision", "sample_namespace", "scene"]  # fixtures used by name below


def admin(host: HostHandle) -> httpx.Client:
    return httpx.Client(base_url=host.base_url, headers={"x-functions-key": host.master_key}, timeout=60)


def groups_by_reason(client: httpx.Client) -> dict[str | None, dict[str, Any]]:
    response = client.get("/api/ops/failures")
    assert response.status_code == 200, response.text
    return {g["reason"]: g for g in response.json()["groups"]}


def test_failures_are_grouped_by_endpoint_reason_and_exception_with_the_policy_preview(
    scene: dict[str, Any],
) -> None:
    with admin(scene["host"]) as client:
        groups = groups_by_reason(client)
        body = client.get("/api/ops/failures").json()
    assert body["total"] == 6 and body["errors"] == {}
    poison, transient, unmatched = groups[POISON], groups[TRANSIENT], groups[UNMATCHED]
    assert (poison["endpoint"], poison["exception"], poison["count"]) == (scene["billing"], "ValueError", 3)
    assert poison["policy"]["action"] == "archive"
    assert (transient["endpoint"], transient["exception"], transient["count"]) == (scene["billing"], None, 2)
    assert transient["policy"]["action"] == "redrive"
    # A subscription's failures belong to the endpoint its subscription forwards to.
    assert (unmatched["endpoint"], unmatched["count"]) == (scene["shipping"], 1)
    assert unmatched["entities"] == {scene["path"]: 1}
    assert unmatched["policy"]["action"] == "archive"
    assert [m["entity"] for m in poison["messages"]] == [scene["billing"]] * 3
    assert poison["first"] is not None and poison["last"] >= poison["first"]


def test_looking_locks_and_changes_nothing(scene: dict[str, Any]) -> None:
    before = peek_queue(scene["cs"], scene["billing"], ServiceBusSubQueue.DEAD_LETTER)
    with admin(scene["host"]) as client:
        groups = groups_by_reason(client)
        number = groups[POISON]["messages"][0]["sequenceNumber"]
        assert client.get(f"/api/ops/failures/{scene['billing']}/{number}").status_code == 200
    after = peek_queue(scene["cs"], scene["billing"], ServiceBusSubQueue.DEAD_LETTER)
    assert [(m.sequence_number, m.delivery_count) for m in after] == [
        (m.sequence_number, m.delivery_count) for m in before
    ]
    # Not locked: a receiver gets all five at once.
    with (
        ServiceBusClient.from_connection_string(scene["cs"]) as sb,
        sb.get_queue_receiver(
            scene["billing"], sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=5
        ) as receiver,
    ):
        received = receiver.receive_messages(max_message_count=5, max_wait_time=5)
        assert len(received) == 5
        for m in received:
            receiver.abandon_message(m)


def test_one_message_shows_body_properties_and_why_it_failed(scene: dict[str, Any]) -> None:
    with admin(scene["host"]) as client:
        transient = groups_by_reason(client)[TRANSIENT]
        first = transient["messages"][0]
        response = client.get(
            f"/api/ops/failures/{quote(first['entity'], safe='')}/{first['sequenceNumber']}"
        )
        subscription = groups_by_reason(client)[UNMATCHED]["messages"][0]
        via_path = client.get(
            f"/api/ops/failures/{quote(subscription['entity'], safe='')}/{subscription['sequenceNumber']}"
        )
        missing = client.get(f"/api/ops/failures/{scene['billing']}/999999")
    assert response.status_code == 200
    view = response.json()
    assert view["body"]["json"] is True and json.loads(view["body"]["text"]) == {"order": 9}
    assert view["system"]["deadLetterReason"] == TRANSIENT
    assert view["system"]["messageId"].startswith("t-")
    assert view["applicationProperties"]["tenant"] == "acme"
    assert via_path.status_code == 200 and via_path.json()["entity"] == scene["path"]
    assert missing.status_code == 404


def test_retry_of_a_group_puts_exactly_those_messages_back_with_their_properties(
    scene: dict[str, Any],
) -> None:
    with admin(scene["host"]) as client:
        group = groups_by_reason(client)[TRANSIENT]
        response = client.post("/api/ops/failures/retry", json={"groupId": group["id"]})
        again = client.post("/api/ops/failures/retry", json={"groupId": group["id"]})
        remaining = groups_by_reason(client)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["selected"] == 2
    assert result["summary"]["totals"]["redriven"] == 2
    assert again.status_code == 200 and again.json()["selected"] == 0  # idempotent: already handled
    assert TRANSIENT not in remaining and remaining[POISON]["count"] == 3
    back = drain_queue(scene["cs"], scene["billing"])
    assert sorted(str(m.message_id) for m in back) == ["t-0", "t-1"]
    for m in back:
        properties = text_properties(m)
        assert properties["tenant"] == "acme"
        assert properties["busbar.redrive.count"] == 1
        assert properties["busbar.redrive.reason"] == TRANSIENT
    assert len(peek_queue(scene["cs"], scene["billing"], ServiceBusSubQueue.DEAD_LETTER)) == 3


def test_archive_of_a_group_writes_parquet_and_empties_only_that_group(scene: dict[str, Any]) -> None:
    with admin(scene["host"]) as client:
        group = groups_by_reason(client)[UNMATCHED]
        response = client.post("/api/ops/failures/archive", json={"groupId": group["id"]})
        view = client.get("/api/ops/archive").json()
        poison = groups_by_reason(client)[POISON]
        one = client.post(
            "/api/ops/failures/archive",
            json={"entity": scene["billing"], "sequenceNumbers": [poison["messages"][0]["sequenceNumber"]]},
        )
    assert response.status_code == 200, response.text
    assert response.json()["summary"]["totals"]["archived"] == 1
    rows = read_archive(str(scene["archive"])).to_pylist()
    assert [r["message_id"] for r in rows if r["source_entity"] == scene["path"]] == ["u-1"]
    assert (
        peek_subscription(scene["cs"], scene["topic"], scene["subscription"], ServiceBusSubQueue.DEAD_LETTER)
        == []
    )
    assert view["total"] == 1 and view["groups"][0]["reason"] == UNMATCHED
    assert "--dry_run" in view["groups"][0]["replay"]["dryRun"]
    assert one.status_code == 200 and one.json()["summary"]["totals"]["archived"] == 1
    assert len(peek_queue(scene["cs"], scene["billing"], ServiceBusSubQueue.DEAD_LETTER)) == 4


def test_entities_report_counts_and_dead_letters_per_endpoint(scene: dict[str, Any]) -> None:
    with admin(scene["host"]) as client:
        response = client.get("/api/ops/entities")
    assert response.status_code == 200
    body = response.json()
    queues = {q["path"]: q["counts"] for q in body["queues"]}
    assert queues[scene["billing"]]["deadLetter"] == 5
    assert queues[scene["shipping"]]["deadLetter"] == 0
    subscriptions = {s["path"]: s for s in body["subscriptions"]}
    assert subscriptions[scene["path"]]["counts"]["deadLetter"] == 1
    assert body["deadLettersPerEndpoint"][scene["billing"]] == 5
    assert body["deadLettersPerEndpoint"][scene["shipping"]] == 1


def test_entities_list_the_apps_endpoints_first_and_busbars_infrastructure_and_foreign_entities_apart(
    sample_namespace: dict[str, Any],
) -> None:
    with admin(sample_namespace["host"]) as client:
        response = client.get("/api/ops/entities")
    assert response.status_code == 200, response.text
    body = response.json()

    # The endpoints the app hosts, in its catalog's order: each one's input queue, then the subscriptions
    # forwarding to it (the sample config's bundle-1/Shipping feeds the app's shipping: its dead letters
    # would be shipping's).
    assert [(e["endpoint"], e["queue"]) for e in body["endpoints"]] == [
        ("billing", "billing"),
        ("crm", "crm"),
        ("shipping", "shipping"),
        ("sales", "sales"),
    ]
    listed = {
        e["endpoint"]: [(r["kind"], r["path"], r["role"]) for r in e["entities"]] for e in body["endpoints"]
    }
    assert listed == {
        "billing": [
            ("queue", "billing", "input queue"),
            ("subscription", "busbar-fallback/Subscriptions/billing", "subscription forwarding to billing"),
        ],
        "crm": [
            ("queue", "crm", "input queue"),
            ("subscription", "busbar-fallback/Subscriptions/crm", "subscription forwarding to crm"),
        ],
        "shipping": [
            ("queue", "shipping", "input queue"),
            ("subscription", "bundle-1/Subscriptions/Shipping", "subscription forwarding to shipping"),
            ("subscription", "busbar-fallback/Subscriptions/shipping", "subscription forwarding to shipping"),
        ],
        "sales": [
            ("queue", "sales", "input queue"),
            ("subscription", "busbar-fallback/Subscriptions/sales", "subscription forwarding to sales"),
        ],
    }
    billing_queue = body["endpoints"][0]["entities"][0]
    assert billing_queue["section"] == "app" and billing_queue["counts"]["deadLetter"] == 1

    # What Busbar keeps to run them, apart.
    assert {r["path"]: r["role"] for r in body["infrastructure"]} == {
        "crm.held": "hold queue of crm (held keys wait here)",
        "busbar-provisioning-locks": "provisioning locks (no message is ever sent here)",
        "busbar-fallback/Subscriptions/busbar-router": "the fallback router's subscription",
        "busbar-fallback": "fallback topic (the router reads it)",
    }
    # And everything else: the emulator's sample entities and another host's endpoint.
    foreign = {r["path"]: r for r in body["foreign"]}
    assert set(foreign) == {
        "orders",
        "orders-errors",
        "wallet-transactions",
        FOREIGN_ENDPOINT,
        f"{FOREIGN_ENDPOINT}.held",
        f"busbar-fallback/Subscriptions/{FOREIGN_ENDPOINT}",
        "bundle-1",
    }
    assert foreign[f"{FOREIGN_ENDPOINT}.held"]["role"] == f"hold queue of {FOREIGN_ENDPOINT}"
    assert foreign["orders"]["counts"]["deadLetter"] == 1
    assert {r["section"] for r in body["foreign"]} == {"foreign"}

    # The lists by kind still hold every entity, each naming its section.
    by_kind = body["queues"] + body["topics"] + body["subscriptions"]
    assert len(by_kind) == sum(len(e["entities"]) for e in body["endpoints"]) + len(
        body["infrastructure"]
    ) + len(foreign)
    assert {r["path"]: r["section"] for r in by_kind}["orders"] == "foreign"
    # Dead letters per endpoint: the app's endpoints first.
    assert list(body["deadLettersPerEndpoint"])[:4] == ["billing", "crm", "shipping", "sales"]
    assert body["deadLettersPerEndpoint"]["orders"] == 1
    assert body["notes"] == []


def test_the_apps_entities_are_its_endpoints_and_busbars_names_under_the_hierarchy_prefix() -> None:
    settings = {
        "BUSBAR_HIERARCHY_NAMESPACE": "team-a",
        "BUSBAR_BILLING_QUEUE": "billing-q",
        "BUSBAR_FALLBACK_TOPIC": "busbar-fallback",
        "BUSBAR_PROVISIONING_LOCK_QUEUE": "locks",
    }

    known = app_entities(settings, sample_catalog())

    assert dict(known.endpoints) == {
        "team-a/billing-q": "billing",
        "team-a/crm": "crm",
        "team-a/shipping": "shipping",
        "team-a/sales": "sales",
    }
    assert (known.lock_queue, known.fallback_topic, known.router_subscription) == (
        "team-a/locks",
        "team-a/busbar-fallback",
        "busbar-router",
    )
    # Every event goes to the fallback topic here (nothing mapped): the endpoints' subscriptions are on it.
    assert known.topics == {"team-a/busbar-fallback"}
    assert "team-a/busbar-fallback/Subscriptions/billing-q" in known.subscriptions
    assert known.notes == ()


def test_invalid_topology_options_still_tell_the_endpoints_and_say_why_the_topics_are_not() -> None:
    known = app_entities(
        {"AzureServiceBus__TopologyOptions": '{"$type": "nonsense"}', "BUSBAR_FALLBACK_TOPIC": "fb"},
        sample_catalog(),
    )

    assert list(known.endpoints) == ["billing", "crm", "shipping", "sales"]
    assert known.fallback_topic == "fb" and known.topics == frozenset()
    [note] = known.notes
    assert note.startswith("the topology options are invalid") and "nonsense" in note


def test_the_console_needs_the_admin_key(scene: dict[str, Any]) -> None:
    host: HostHandle = scene["host"]
    with httpx.Client(base_url=host.base_url, timeout=30) as anonymous:
        assert anonymous.get("/api/ops").status_code == 401
        assert anonymous.get("/api/ops/failures").status_code == 401
        host_key = anonymous.get("/api/ops/entities", headers={"x-functions-key": host.host_key})
        assert host_key.status_code == 401  # a host key opens function-level functions, not admin ones
        page = anonymous.get("/api/ops", params={"code": host.master_key})
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "<title>Busbar console</title>" in page.text
    assert "http://" not in page.text.replace("http://www.w3.org", "")  # no CDN: nothing from elsewhere


def test_the_console_opened_without_a_key_answers_401_with_how_to_open_it(scene: dict[str, Any]) -> None:
    host: HostHandle = scene["host"]
    with httpx.Client(base_url=host.base_url, timeout=30) as anonymous:
        page = anonymous.get("/api/ops")
        other = anonymous.get("/api/ops/entities")
    assert page.status_code == 401
    assert page.headers["content-type"].startswith("text/html")
    text = page.text
    assert "master key" in text and "make master-key" in text and "?code=" in text
    assert "az functionapp keys list" in text and "--query masterKey" in text
    assert '<input id="code" name="code"' in text  # a form that reopens the page with ?code=
    assert "http://" not in text  # no CDN: nothing from elsewhere
    # The other ops functions keep the host's own 401 (an empty body), as Azure's host answers.
    assert other.status_code == 401 and other.content == b""


def test_the_console_page_with_a_key_leaves_checking_it_to_the_admin_api(scene: dict[str, Any]) -> None:
    host: HostHandle = scene["host"]
    with httpx.Client(base_url=host.base_url, timeout=30) as client:
        page = client.get("/api/ops", params={"code": "not-the-master-key"})
        data = client.get("/api/ops/entities", headers={"x-functions-key": "not-the-master-key"})
    # The page is static (no data): the refused key shows when the page calls the API, which asks again.
    assert page.status_code == 200 and "<title>Busbar console</title>" in page.text
    assert "make master-key" in page.text  # the key form says which key and where to get it
    assert data.status_code == 401


def test_bad_selections_get_a_precise_400(scene: dict[str, Any]) -> None:
    with admin(scene["host"]) as client:
        empty = client.post("/api/ops/failures/retry", json={})
        unknown = client.post("/api/ops/failures/retry", json={"groupId": "x", "extra": 1})
        bad_path = client.post("/api/ops/failures/archive", json={"entity": "a/b/c", "sequenceNumbers": [1]})
    assert empty.status_code == 400 and "groupId" in empty.json()["error"]["message"]
    assert unknown.status_code == 400
    assert bad_path.status_code == 400


def test_a_console_retry_sends_a_dead_lettered_message_back_with_its_session_id(
    emulator: Any, provision: Provisioner, tmp_path: Path
) -> None:
    # An ordered endpoint's queue: the retried copy must be back in its key's session, not refused by the
    # queue for lacking one, nor in another session.
    queue = provision.queue(requires_session=True)
    cs = emulator.connection_string
    failed = message(b'{"customer_id": "c-9"}', message_id="keyed-1", session_id="c-9")
    dead_letter_queue_messages(cs, queue, [failed], TRANSIENT, session_id="c-9")
    [dead] = peek_queue(cs, queue, ServiceBusSubQueue.DEAD_LETTER)
    app = tmp_path / "app" / "function_app.py"
    app.parent.mkdir()
    app.write_text(ops_scene.APP)

    settings = redrive_env(emulator, tmp_path / "archive", [queue])
    with running_host(app, settings=settings) as host, admin(host) as client:
        response = client.post(
            "/api/ops/failures/retry", json={"entity": queue, "sequenceNumbers": [dead.sequence_number]}
        )

    assert response.status_code == 200, response.text
    assert response.json()["summary"]["totals"]["redriven"] == 1
    [back] = drain_queue(cs, queue, session_id="c-9")
    assert (back.message_id, back.session_id) == ("keyed-1", "c-9")
    assert peek_queue(cs, queue, ServiceBusSubQueue.DEAD_LETTER) == []
