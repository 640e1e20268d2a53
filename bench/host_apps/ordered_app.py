"""Two endpoints of one app with the same handler, one ordered and one not, for bench/ordered_throughput.py.

Both are Busbar endpoints (:class:`~shared.handlers.endpoints.Endpoint`) declared with Busbar's own trigger
factory (:func:`functions.subscribers.register_subscriber`), so each message goes the way a real endpoint's
does: the SDK-type binding, the dispatcher, settlement through ``ServiceBusMessageActions``, and for the
ordered endpoint its session-enabled trigger and the point read of its key's row in Table Storage
(:mod:`shared.ordering`). Only the contract and the handler are the bench's.

The handler sleeps ``BENCH_WORK_MS`` (default 5 ms): it stands for a handler waiting on I/O (a database
write, an HTTP call), which is what running handlers concurrently buys time on. A CPU job would measure the
machine's cores instead (the worker's threads share one GIL), the same whether the endpoint is ordered or
not. When ``BENCH_HANDLED_RECORD`` names a file, each handled event appends ``<key> <n>`` to it (one
unsynced ``O_APPEND`` write, microseconds), so the bench can count events handled out of their key's order.
"""

from __future__ import annotations

import os
import time

import azure.functions as func

from functions.subscribers import register_subscriber
from shared.app_settings import AppSetting
from shared.contracts import ContractRegistry, Event
from shared.handlers import Endpoint, HandlerContext, HandlerRegistry

WORK_MS = AppSetting("BENCH_WORK_MS", "Milliseconds the bench handler sleeps per event.", "5")
HANDLED_RECORD = AppSetting("BENCH_HANDLED_RECORD", "File the bench handler appends '<key> <n>' to.")


class KeyedWork(Event, contract="Bench.KeyedWork", ordering_key="key"):
    """One unit of work for one key; ``n`` counts the key's events in send order."""

    key: str
    n: int


CONTRACTS = ContractRegistry(KeyedWork)
HANDLERS = HandlerRegistry()


@HANDLERS.handles(KeyedWork)
def do_work(event: KeyedWork, context: HandlerContext) -> None:
    """Wait as a handler waits on I/O, then note the event (see the module docstring)."""
    time.sleep(int(os.environ.get(WORK_MS.name) or WORK_MS.default or "0") / 1000)
    record = os.environ.get(HANDLED_RECORD.name)
    if record:
        fd = os.open(record, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{event.key} {event.n}\n".encode())
        finally:
            os.close(fd)


# Their input queues: BUSBAR_BENCH_ORDERED_QUEUE and BUSBAR_BENCH_UNORDERED_QUEUE (the bench names them).
ORDERED = Endpoint("bench_ordered", CONTRACTS, HANDLERS, ordered=True)
UNORDERED = Endpoint("bench_unordered", CONTRACTS, HANDLERS)

app = func.FunctionApp()
_subscribers = func.Blueprint()  # type: ignore[no-untyped-call]
for _endpoint in (ORDERED, UNORDERED):
    register_subscriber(_subscribers, _endpoint, os.environ)
app.register_functions(_subscribers)
