"""The wire between the host and a worker process: length-prefixed pickle frames on a stream socket.

The host starts ``python -m devhost.worker`` with one end of a socket pair (``--devhost-channel-fd``) and
sends :class:`StartWorker`; then it starts the worker as the Functions host does, with FunctionRpc
messages (``StreamingMessage``: init, functions metadata, a load per function; ``devhost.worker_handshake``)
carried as :class:`RpcMessage` frames, each answered by one. Then the host sends ``InvocationRequest``s
(and :class:`CancelInvocation`, :class:`ShutdownWorker`), the worker answers :class:`InvocationDone` per
invocation, tagged with its id, and forwards what the function code logs as :class:`WorkerLog` -- as the
Python worker streams its invocation responses and logs to the host over gRPC in Azure. Both ends are
asyncio streams.
"""

from __future__ import annotations

import asyncio
import pickle
import struct
from dataclasses import dataclass

from devhost.worker_protocol import InvocationOutcome

CHANNEL_FD_ARGUMENT = "--devhost-channel-fd"
_HEADER = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class StartWorker:
    """Host -> worker, first frame: the app and what devhost's worker needs beyond FunctionRpc."""

    function_timeout_seconds: float | None  # host.json's functionTimeout (devhost's worker enforces it)
    log_level: int  # the host's root log level: what the worker forwards
    # Loggers the host set a level on (e.g. "azure": WARNING), so the worker does not forward what the host
    # would drop.
    logger_levels: dict[str, int]


@dataclass(frozen=True, slots=True)
class RpcMessage:
    """Either way: one FunctionRpc ``StreamingMessage``, serialised (a request, or the answer to one)."""

    data: bytes


@dataclass(frozen=True, slots=True)
class InvocationDone:
    """Worker -> host: how invocation ``invocation_id`` ended."""

    invocation_id: str
    outcome: InvocationOutcome


@dataclass(frozen=True, slots=True)
class CancelInvocation:
    """Host -> worker: the host gave up on ``invocation_id`` (drain time exceeded)."""

    invocation_id: str


@dataclass(frozen=True, slots=True)
class ShutdownWorker:
    """Host -> worker: let running invocations finish, then exit."""


@dataclass(frozen=True, slots=True)
class WorkerLog:
    """Worker -> host: one log record of the function code (or the worker), already formatted, with the
    invocation it was logged in (if any) and whether it is a system log, as the Python worker's ``RpcLog``
    carries them."""

    logger: str
    level: int
    message: str
    invocation_id: str | None = None
    function_name: str | None = None
    system: bool = False


def encode(value: object) -> bytes:
    """``value`` as one frame."""
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


async def read_frame(reader: asyncio.StreamReader) -> object | None:
    """The next frame's value; None when the other end has closed the stream (or died)."""
    try:
        header = await reader.readexactly(_HEADER.size)
        (length,) = _HEADER.unpack(header)
        data = await reader.readexactly(length)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    value: object = pickle.loads(data)
    return value
