"""The wire between the host and a worker process: FunctionRpc ``StreamingMessage``s, each serialised and
length-prefixed, on a stream socket -- what the Functions host and the Python worker exchange over their
gRPC stream in Azure.

The host starts ``python -m devhost.worker`` with one end of a socket pair (``--devhost-channel-fd``) and
starts it as the Functions host starts a worker (``devhost.channel.handshake``: ``WorkerInitRequest``,
``FunctionsMetadataRequest``, a ``FunctionLoadRequest`` per function, each answered by its response).
Then the host sends ``InvocationRequest``s (and ``InvocationCancel``, ``WorkerTerminate``); the worker
answers an ``InvocationResponse`` per invocation, in whatever order they finish, and streams what the code
logs as ``RpcLog``s. Both ends are asyncio streams.

One thing devhost adds, named here: before each ``InvocationResponse`` the worker sends an ``RpcLog``
of category :data:`BOUND_ARGUMENTS_CATEGORY` listing the classes of the arguments the runtime bound (the
invocation log records them; the host consumes it and logs nothing).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import Any

from devhost.channel.protos import load as load_protos

CHANNEL_FD_ARGUMENT = "--devhost-channel-fd"
BOUND_ARGUMENTS_CATEGORY = "devhost.BoundArguments"
ROOT_LOG_CATEGORY = "root"
_HEADER = struct.Struct(">I")

# logging's levels and RpcLog.Level (ILogger's): Trace 0, Debug 1, Information 2, Warning 3, Error 4,
# Critical 5, None 6.
_TO_RPC = (
    (logging.CRITICAL, 5),
    (logging.ERROR, 4),
    (logging.WARNING, 3),
    (logging.INFO, 2),
    (logging.DEBUG, 1),
)
_FROM_RPC = {0: logging.DEBUG, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}


def rpc_level(level: int) -> int:
    """``RpcLog.Level`` for a ``logging`` level (a level past CRITICAL: None, nothing is logged)."""
    if level > logging.CRITICAL:
        return 6
    return next((rpc for python, rpc in _TO_RPC if level >= python), 0)


def python_level(level: int) -> int:
    """The ``logging`` level for an ``RpcLog.Level``."""
    if level >= 6:
        return logging.CRITICAL + 10
    return _FROM_RPC.get(level, logging.CRITICAL)


def encode(message: Any) -> bytes:
    """``message`` (a ``StreamingMessage``) as one frame."""
    data: bytes = message.SerializeToString()
    return _HEADER.pack(len(data)) + data


class FrameWriter:
    """Writes frames to ``writer`` in order, those sent during one pass of the event loop together: the
    requests a receive hands out at once (host) or the responses of invocations that finish together
    (worker) cost one socket write, not one each. Call on the writer's loop only; :meth:`flush` before
    draining or closing."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self._pending: list[bytes] = []

    def send(self, message: Any) -> None:
        """Queue ``message`` (a ``StreamingMessage``) for this pass's write."""
        self.send_frame(encode(message))

    def send_frame(self, frame: bytes) -> None:
        """Queue an encoded frame for this pass's write."""
        if not self._pending:
            asyncio.get_running_loop().call_soon(self.flush)
        self._pending.append(frame)

    def flush(self) -> None:
        """Write what is queued now (dropped if the stream is closing: the other end is gone)."""
        pending = self._pending
        if not pending:
            return
        self._pending = []
        if not self.writer.is_closing():
            self.writer.write(pending[0] if len(pending) == 1 else b"".join(pending))


async def read_frame(reader: asyncio.StreamReader) -> Any | None:
    """The next ``StreamingMessage``; None when the other end has closed the stream (or died)."""
    try:
        header = await reader.readexactly(_HEADER.size)
        (length,) = _HEADER.unpack(header)
        data = await reader.readexactly(length)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    return load_protos().StreamingMessage.FromString(data)
