"""The end of a chaos run: drain the endpoints, run the re-drive once more, and take the inventory of
what is parked (dead-letter queues, the archive), what is still in flight, and what the endpoints committed
to their table (the records of handled message ids and the handlers' rows)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
from azure.data.tables import TableClient
from azure.servicebus import ServiceBusClient, ServiceBusSubQueue

from bench.chaos_accounting import Parked, endpoint_of
from bench.chaos_app import AppInfo
from bench.chaos_effects import Commit, EffectRow, commit_of, effect_row
from shared.archive.reader import read_archive
from shared.idempotency.records import TABLE_NAME, HandledRecords
from shared.router.decision import NO_MATCHING_SUBSCRIPTION

FALLBACK_TOPIC_PREFIX = "busbar-fallback/"
ENDPOINT_QUEUES = ("billing", "crm", "shipping", "sales")


def entities(app: AppInfo) -> list[dict[str, Any]]:
    """The endpoint queues and the fallback topic's subscriptions, with their counts (console API)."""
    response = httpx.get(
        f"{app.base_url}/api/ops/entities", headers={"x-functions-key": app.master_key}, timeout=60.0
    )
    response.raise_for_status()
    body = response.json()
    found = [q for q in body["queues"] if q["path"] in ENDPOINT_QUEUES]
    found += [s for s in body["subscriptions"] if s["path"].startswith(FALLBACK_TOPIC_PREFIX)]
    return found


def in_flight(app: AppInfo) -> dict[str, dict[str, int]]:
    """Per entity, the messages still active (waiting or locked) and dead-lettered."""
    return {
        e["path"]: {"active": e["counts"]["active"], "deadLetter": e["counts"]["deadLetter"]}
        for e in entities(app)
    }


def wait_drained(current: Callable[[], AppInfo | None], probe: Path, timeout: float) -> bool:
    """Until no endpoint entity holds an active message and the probe record has stopped growing.
    ``current``: the app as it runs now (the supervisor may start it again meanwhile, on new ports)."""
    deadline = time.monotonic() + timeout
    quiet = 0
    size = -1
    while time.monotonic() < deadline:
        app = current()
        try:
            active = -1 if app is None else sum(counts["active"] for counts in in_flight(app).values())
        except httpx.HTTPError:
            active = -1
        now = probe.stat().st_size if probe.exists() else 0
        quiet = quiet + 1 if active == 0 and now == size else 0
        size = now
        if quiet >= 3:
            return True
        time.sleep(1.0)
    return False


def app_environment(settings: Mapping[str, str], app: AppInfo) -> dict[str, str]:
    """The app settings as the running app sees them (the emulator's connection and management plane)."""
    environment = {
        k: v for k, v in os.environ.items() if not k.startswith(("BUSBAR_", "ServiceBusConnection"))
    }
    environment.update(settings)
    environment["ServiceBusConnection"] = app.connection_string
    environment["BUSBAR_MANAGEMENT_ENDPOINT"] = app.management_endpoint
    return environment


def run_redrive(repo: Path, environment: Mapping[str, str], run_id: str) -> dict[str, Any]:
    """``python -m shared.redrive run`` once; its summary (``totals`` per outcome)."""
    result = subprocess.run(
        [sys.executable, "-m", "shared.redrive", "run", "--run-id", run_id],
        cwd=repo,
        env=dict(environment),
        capture_output=True,
        text=True,
        timeout=600,
    )
    try:
        summary: dict[str, Any] = json.loads(result.stdout)
    except ValueError:
        summary = {}
    if result.returncode not in (0, 1) or not summary:  # exit 1 is also Python's for an uncaught exception
        raise RedriveCrashed(f"the re-drive failed ({result.returncode}): {result.stderr[-2000:]}")
    return summary


class RedriveCrashed(RuntimeError):
    """The re-drive command ended without its summary (e.g. the app restarted under it: new ports)."""


def _key(body: bytes) -> str | None:
    try:
        document = json.loads(body)
    except ValueError:
        return None
    if not isinstance(document, dict):
        return None
    key = document.get("order_id") or document.get("customer_id")
    return str(key) if key is not None else None


def dead_letters(app: AppInfo) -> list[Parked]:
    """Every dead-lettered message of the endpoint queues and the fallback topic's subscriptions (peek)."""
    found: list[Parked] = []
    with ServiceBusClient.from_connection_string(app.connection_string) as client:
        for entity in entities(app):
            path = entity["path"]
            if entity["counts"]["deadLetter"] == 0:
                continue
            if "/Subscriptions/" in path:
                topic, _, subscription = path.partition("/Subscriptions/")
                receiver = client.get_subscription_receiver(
                    topic, subscription, sub_queue=ServiceBusSubQueue.DEAD_LETTER
                )
            else:
                receiver = client.get_queue_receiver(path, sub_queue=ServiceBusSubQueue.DEAD_LETTER)
            with receiver:
                sequence = 0
                while True:
                    page = receiver.peek_messages(max_message_count=250, sequence_number=sequence)
                    if not page:
                        break
                    for message in page:
                        key = _key(b"".join(message.body))
                        if key is not None:
                            reason = message.dead_letter_reason or "(no reason)"
                            found.append(Parked(endpoint_of(path), key, "dead-letter", reason))
                    sequence = (page[-1].sequence_number or 0) + 1
    return found


def archived(archive_url: str) -> list[Parked]:
    """Every archived message, as the endpoint it was dead-lettered on (or the router's subscription, for an
    event it archived as unrouted) and its reason."""
    found: list[Parked] = []
    for row in read_archive(archive_url).to_pylist():
        key = _key(row.get("body") or b"")
        if key is None:
            continue
        entity = row.get("target_entity") or row.get("source_entity") or ""
        if row.get("decision") == NO_MATCHING_SUBSCRIPTION:
            entity = row.get("source_subscription") or entity  # archived by the router, not an endpoint
        reason = f"{row.get('decision')} ({row.get('dead_letter_reason') or 'no reason'})"
        found.append(Parked(endpoint_of(entity), key, "archive", reason))
    return found


def committed(app: AppInfo) -> tuple[list[EffectRow], list[Commit]]:
    """Every handler's row and every record of a handled message in the app's table (Azurite)."""
    records = HandledRecords(TableClient.from_connection_string(app.storage_connection_string, TABLE_NAME))
    try:
        return [effect_row(e) for e in records.rows("row")], [commit_of(e) for e in records.rows("record")]
    finally:
        records.close()
