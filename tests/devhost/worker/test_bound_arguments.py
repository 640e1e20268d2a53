"""The bound-arguments monitor notes the classes of the arguments the runtime hands a function, per running
invocation, through ``sys.monitoring`` events local to the runtime's two call helpers and nothing else.

Driven with the runtime's own helpers (``azure_functions_runtime.utils.executor``), called as its
``invocation_request`` calls them: a coroutine function awaited through ``execute_async`` in the
invocation's context, a plain function through ``run_sync_func`` on a pool thread."""

from __future__ import annotations

import asyncio
import contextvars
import sys
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import azure.functions as func
import pytest
from azure_functions_runtime.utils.executor import execute_async, run_sync_func

from devhost.worker.bound_arguments import TOOL_NAME, BoundArgumentsMonitor

pytestmark = pytest.mark.timeout(30)

INVOCATION: contextvars.ContextVar[str | None] = contextvars.ContextVar("test_invocation", default=None)


def plain(body: str, count: int) -> str:
    return body * count


async def coroutine(req: func.HttpRequest, body: bytes) -> int:
    await asyncio.sleep(0)
    return len(body) + len(req.get_body())


@pytest.fixture
def running() -> dict[str, str]:
    """The invocations running, by id (the worker's ``_RUNNING``)."""
    return {}


@pytest.fixture
def monitor(running: dict[str, str]) -> Iterator[BoundArgumentsMonitor]:
    opened = BoundArgumentsMonitor(INVOCATION, running)
    try:
        yield opened
    finally:
        opened.close()


def _run_plain(invocation_id: str, arguments: dict[str, Any]) -> Any:
    context = SimpleNamespace(thread_local_storage=threading.local())
    with ThreadPoolExecutor(1, thread_name_prefix="runtime-pool") as pool:
        return pool.submit(run_sync_func, invocation_id, context, plain, arguments).result(10)


async def _run_coroutine(invocation_id: str, arguments: dict[str, Any]) -> Any:
    token = INVOCATION.set(invocation_id)
    try:
        return await execute_async(coroutine, arguments)
    finally:
        INVOCATION.reset(token)


def test_a_plain_function_on_a_pool_thread_has_its_bound_classes_noted_for_its_invocation(
    monitor: BoundArgumentsMonitor, running: dict[str, str]
) -> None:
    invocation_id = str(uuid.uuid4())
    running[invocation_id] = "plain"
    assert _run_plain(invocation_id, {"body": "ab", "count": 2}) == "abab"
    assert dict(monitor.take(invocation_id)) == {"body": "builtins.str", "count": "builtins.int"}
    assert monitor.take(invocation_id) == ()  # taken once


def test_a_coroutine_function_has_its_bound_classes_noted_for_the_invocation_its_task_runs(
    monitor: BoundArgumentsMonitor, running: dict[str, str]
) -> None:
    invocation_id = str(uuid.uuid4())
    running[invocation_id] = "coroutine"
    request = func.HttpRequest("POST", "http://127.0.0.1/api/x", body=b"xyz")
    assert asyncio.run(_run_coroutine(invocation_id, {"req": request, "body": b"12"})) == 5
    assert dict(monitor.take(invocation_id)) == {
        "req": "azure.functions._http.HttpRequest",
        "body": "builtins.bytes",
    }


def test_a_call_for_no_running_invocation_leaves_no_note(monitor: BoundArgumentsMonitor) -> None:
    stale = str(uuid.uuid4())
    _run_plain(stale, {"body": "a", "count": 1})
    asyncio.run(
        _run_coroutine(stale, {"req": func.HttpRequest("GET", "http://127.0.0.1/", body=b""), "body": b""})
    )
    assert monitor.take(stale) == ()


def test_only_the_runtimes_two_call_helpers_are_instrumented_and_no_tracing_is_enabled(
    running: dict[str, str],
) -> None:
    trace, profile = sys.gettrace(), sys.getprofile()
    opened = BoundArgumentsMonitor(INVOCATION, running)
    try:
        monitoring = sys.monitoring
        assert monitoring.get_tool(opened.tool) == TOOL_NAME
        assert monitoring.get_events(opened.tool) == 0  # no global event: other code runs as it would
        assert {code.co_name for code in opened.codes} == {"execute_async", "run_sync_func"}
        for code in opened.codes:
            assert monitoring.get_local_events(opened.tool, code) == monitoring.events.PY_START
        assert monitoring.get_local_events(opened.tool, plain.__code__) == 0
        assert (sys.gettrace(), sys.getprofile()) == (trace, profile)
    finally:
        opened.close()
    assert sys.monitoring.get_tool(opened.tool) is None


def test_a_closed_monitor_frees_its_tool_and_notes_nothing_more(running: dict[str, str]) -> None:
    opened = BoundArgumentsMonitor(INVOCATION, running)
    opened.close()
    opened.close()  # closing twice is harmless
    invocation_id = str(uuid.uuid4())
    running[invocation_id] = "plain"
    _run_plain(invocation_id, {"body": "a", "count": 1})
    assert opened.take(invocation_id) == ()
    again = BoundArgumentsMonitor(INVOCATION, running)  # the freed id can be taken again
    again.close()
