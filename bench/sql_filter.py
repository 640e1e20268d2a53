"""SQL filter evaluation speed: evaluations per second, one core, for representative filters.

Each filter is compiled once and evaluated against a small set of realistic messages (matching and
non-matching, cycled) the way the broker calls it: ``CompiledFilter.matches(MessageProperties)``.
Also times compilation (rules are compiled once, at creation) and one rule action.
Writes ``bench/results/sql_filter.json``. Usage::

    .venv/bin/python bench/sql_filter.py [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from emulator.filters.sql import MessageProperties, compile_action, compile_filter  # noqa: E402

RESULTS = ROOT / "bench" / "results"
TARGET = 200_000  # evaluations per second per core (the requirement)

FILTERS = {
    "nservicebus_like": "[NServiceBus.EnclosedMessageTypes] LIKE '%Shipping.OrderAccepted%'",
    "and_compare": "color = 'red' AND quantity > 10",
    "in_or_compare": "sys.Label IN ('a','b') OR user.priority >= 3",
    "regex_like_not_null": "sys.To LIKE 'store_%' AND NOT (region IS NULL OR region = 'eu')",
    "arithmetic": "(price * quantity) / 2 > 100.5 AND EXISTS(discount)",
    "true_filter": "1=1",
}
ACTION = "SET quantity = quantity / 2; REMOVE priority; SET sys.CorrelationId = 'low'"


def messages() -> list[MessageProperties]:
    now = datetime.now(UTC)
    base_system: dict[str, Any] = {
        "MessageId": str(uuid.uuid4()),
        "SequenceNumber": 42,
        "EnqueuedTimeUtc": now,
        "TimeToLive": timedelta(minutes=5),
        "DeliveryCount": 0,
        "Size": 512,
    }
    users: list[tuple[dict[str, Any], dict[str, Any]]] = [
        (
            {"Label": "a", "To": "store_12"},
            {
                "NServiceBus.EnclosedMessageTypes": "Shipping.OrderAccepted, Shipping.Messages, Version=1.0",
                "NServiceBus.MessageId": str(uuid.uuid4()),
                "color": "red",
                "quantity": 12,
                "priority": 1,
                "price": 20.0,
                "region": "us",
                "discount": 0.1,
            },
        ),
        (
            {"Label": "c", "To": "warehouse"},
            {
                "NServiceBus.EnclosedMessageTypes": "Billing.OrderBilled, Billing.Messages, Version=1.0.0.0",
                "color": "blue",
                "quantity": 3,
                "priority": 5,
                "price": 1.5,
            },
        ),
        ({"Label": "b"}, {"Color": "red", "Quantity": 11.5}),
        ({}, {}),
    ]
    return [MessageProperties(system={**base_system, **s}, user=u) for s, u in users]


def rate(fn: Callable[[MessageProperties], object], props: list[MessageProperties], seconds: float) -> float:
    """Calls per second of ``fn`` over ``props`` (cycled), best of three runs."""
    batch = props * 2500  # 10,000 calls per timed batch
    best = 0.0
    for _ in range(3):
        calls = 0
        start = time.perf_counter()
        deadline = start + seconds / 3
        while True:
            for p in batch:
                fn(p)
            calls += len(batch)
            now = time.perf_counter()
            if now >= deadline:
                break
        best = max(best, calls / (now - start))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.5, help="time per filter (default 1.5)")
    args = parser.parse_args()
    props = messages()
    results: dict[str, Any] = {}
    for name, text in FILTERS.items():
        compiled = compile_filter(text)
        evals = rate(compiled.matches, props, args.seconds)
        start = time.perf_counter()
        for _ in range(200):
            compile_filter(text)
        compile_us = (time.perf_counter() - start) / 200 * 1e6
        matched = sum(compiled.matches(p) for p in props)
        results[name] = {
            "expression": text,
            "evaluations_per_second": round(evals),
            "meets_target": evals >= TARGET,
            "compile_microseconds": round(compile_us, 1),
            "matching_messages": f"{matched}/{len(props)}",
        }
        print(f"{name:22} {evals:>12,.0f} evals/s   compile {compile_us:7.1f} us   {text}")
    action = compile_action(ACTION)
    applies = rate(action.apply, props, args.seconds)
    results["action"] = {"expression": ACTION, "applies_per_second": round(applies)}
    print(f"{'action':22} {applies:>12,.0f} applies/s  {ACTION}")
    report = {
        "benchmark": "sql_filter",
        "target_evaluations_per_second": TARGET,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "messages_cycled": len(props),
        "results": results,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "sql_filter.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {RESULTS / 'sql_filter.json'}")


if __name__ == "__main__":
    main()
