"""The event loop the host side runs on: uvloop when the function code runs in a worker process.

The host side is one Python process doing what the Functions host does in .NET on many threads: it
receives and settles for every trigger with the SDK, serves the Settlement gRPC service the binding
extension settles through, runs the HTTP front end and hands each invocation to the worker. All of it
runs on one event loop, and that loop is what bounds devhost's throughput (an SDK-typed function that
settles over gRPC keeps it about 80 % busy). uvloop runs the same coroutines with less overhead per
callback, socket read and gRPC call; nothing of it is visible to the function code, which runs on the
worker process's own standard asyncio loop, as in the Python worker.

With the in-process worker (``--in-process-worker``), coroutine functions run on this very loop, so it
stays the standard asyncio loop the Python worker gives them. Where uvloop is not installed (Windows
has none) the standard loop is used too. ``DEVHOST_EVENT_LOOP=asyncio`` forces the standard loop
(e.g. to compare, or to rule uvloop out when something behaves oddly).
"""

from __future__ import annotations

import asyncio
import importlib
import os
from collections.abc import Callable

LOOP_SETTING = "DEVHOST_EVENT_LOOP"  # "asyncio" forces the standard loop; anything else: the default


def host_loop_factory(*, worker_process: bool) -> Callable[[], asyncio.AbstractEventLoop]:
    """How to make the host's loop: uvloop's for a host whose function code runs in a worker process
    (when uvloop is installed and not ruled out by ``DEVHOST_EVENT_LOOP=asyncio``), else asyncio's."""
    if not worker_process or os.environ.get(LOOP_SETTING, "").strip().lower() == "asyncio":
        return asyncio.new_event_loop
    try:
        uvloop = importlib.import_module("uvloop")
    except ImportError:
        return asyncio.new_event_loop
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def loop_kind(loop: asyncio.AbstractEventLoop) -> str:
    """``uvloop`` or ``asyncio``: what the host status reports."""
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"
