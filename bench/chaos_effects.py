"""The chaos run's side effects (pure): what the sample endpoints *committed* to their table, per order,
against what each accepted event is owed. A duplicate side effect is what a person would call one: a
second invoice for an order, a second shipment, an event CRM committed twice.

Every endpoint records the message ids it handled in Table Storage, with its handlers' rows in the same
transaction (``shared.idempotency``). Billing keeps an ``invoice`` row and shipping a ``shipment`` row
(``app.endpoints.sample``), each holding its order id: counted per (endpoint, order) across the whole
table, whatever partition or message id they were written under, so an order invoiced twice under two
message ids (a hop that re-sent with a new id, a record lost) would show as two rows. CRM keeps no rows: its
effect is its committed handling, the record of a message id, mapped to the event's key through the probe
(``app.probe``: the handler notes the message id it handled); two records for one event are two committed
handlings of it.

A handler *invocation* that ran to its end more than once is not a duplicate side effect by itself: the
probe line is written while the handler runs, before the commit, so a worker killed between the two, or a
copy whose twin committed first, leaves a probe line without an effect. Those are counted apart
(``repeated_invocations``, :func:`bench.chaos_accounting.account`).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.chaos_accounting import Handled
from bench.chaos_load import HANDLED, AcceptedEvent

EFFECT_ROWS = {"invoice": "billing", "shipment": "shipping"}
"""The sample's rows, by name: the endpoint that writes each (one per order)."""
RECORD_EFFECT_ENDPOINTS = ("crm",)
"""Endpoints that keep no rows: their effect is the committed handling (the record) itself."""


@dataclass(frozen=True, slots=True)
class EffectRow:
    """A handler's row in the table: ``endpoint`` wrote row ``name`` about order ``order``."""

    endpoint: str
    name: str
    order: str


@dataclass(frozen=True, slots=True)
class Commit:
    """A record in the table: ``endpoint`` committed its handling of message ``message_id``."""

    endpoint: str
    message_id: str


def partition_endpoint(partition_key: str) -> str:
    """The endpoint of a stored partition key (``table_key`` of ``<endpoint>|<ordering key>``)."""
    try:
        decoded = base64.urlsafe_b64decode(partition_key + "=" * (-len(partition_key) % 4)).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return "?"
    return decoded.split("|", 1)[0]


def effect_row(entity: Mapping[str, Any]) -> EffectRow:
    """A handler's row entity (``Kind`` 'row') as the order it is about (``?`` when its data names none)."""
    try:
        data = json.loads(str(entity.get("Data") or "{}"))
    except ValueError:
        data = {}
    order = data.get("order_id") if isinstance(data, dict) else None
    return EffectRow(
        partition_endpoint(str(entity.get("PartitionKey") or "")),
        str(entity.get("Name") or "?"),
        str(order) if order is not None else "?",
    )


def commit_of(entity: Mapping[str, Any]) -> Commit:
    """A record entity (``Kind`` 'record') as the endpoint and message id it commits."""
    return Commit(str(entity.get("Endpoint") or "?"), str(entity.get("MessageId") or "?"))


def side_effects(
    accepted: Sequence[AcceptedEvent],
    rows: Iterable[EffectRow],
    commits: Iterable[Commit],
    handled: Iterable[Handled],
) -> dict[str, Any]:
    """Duplicate and missing side effects (see the module docstring)."""
    rows_of: Counter[tuple[str, str]] = Counter()
    other_rows: Counter[str] = Counter()
    for row in rows:
        if EFFECT_ROWS.get(row.name) == row.endpoint:
            rows_of[(row.endpoint, row.order)] += 1
        else:
            other_rows[f"{row.endpoint}/{row.name}"] += 1
    key_of = {(h.endpoint, h.message_id): h.key for h in handled if h.message_id}
    commits_of: Counter[tuple[str, str]] = Counter()
    unknown_commits: Counter[str] = Counter()
    for commit in commits:
        key = key_of.get((commit.endpoint, commit.message_id))
        if key is None:  # handled without a probe line: billing finding the order invoiced already
            unknown_commits[commit.endpoint] += 1
        else:
            commits_of[(commit.endpoint, key)] += 1

    def effects(endpoint: str, key: str) -> int:
        table = commits_of if endpoint in RECORD_EFFECT_ENDPOINTS else rows_of
        return table.get((endpoint, key), 0)

    missing: list[dict[str, str]] = []
    for item in accepted:
        for endpoint, owed in sorted(item.event.expected.items()):
            counted = endpoint in RECORD_EFFECT_ENDPOINTS or endpoint in EFFECT_ROWS.values()
            if owed == HANDLED and counted and effects(endpoint, item.event.key) == 0:
                missing.append({"key": item.event.key, "contract": item.event.contract, "endpoint": endpoint})

    effect_counts = {**rows_of, **{p: n for p, n in commits_of.items() if p[0] in RECORD_EFFECT_ENDPOINTS}}
    doubled = {pair: n for pair, n in effect_counts.items() if n > 1}
    per_endpoint: Counter[str] = Counter()
    for (endpoint, _), n in doubled.items():
        per_endpoint[endpoint] += n - 1
    return {
        "duplicate_side_effects": sum(per_endpoint.values()),
        "duplicate_side_effects_by_endpoint": dict(sorted(per_endpoint.items())),
        "duplicate_side_effect_examples": [
            {"endpoint": endpoint, "key": key, "effects": n} for (endpoint, key), n in sorted(doubled.items())
        ][:20],
        "effects_missing": len(missing),
        "effects_missing_examples": missing[:20],
        "effects_counted": {
            "orders_with_rows": dict(sorted(Counter(e for e, _ in rows_of).items())),
            "rows": dict(sorted(Counter(e for e, _ in rows_of.elements()).items())),
            "records_by_endpoint": dict(
                sorted((Counter(e for e, _ in commits_of.elements()) + unknown_commits).items())
            ),
            "records_without_probe_line": dict(sorted(unknown_commits.items())),
            "other_rows": dict(sorted(other_rows.items())),
        },
        "events_committed_more_than_once": sum(1 for n in commits_of.values() if n > 1),
    }
