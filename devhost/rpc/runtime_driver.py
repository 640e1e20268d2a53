"""Drives ``azure_functions_runtime`` as Azure's Python proxy worker does: one FunctionRpc request at a time,
through the runtime's ``handle_event`` entry points.

Since Python 3.13 Azure runs a Python app's code with this package (pinned in the app's requirements.txt):
the proxy worker, bundled with the host, only forwards the host's ``StreamingMessage`` contents to it,
wrapped with two properties (``host``, where the runtime's HTTP streaming and the SDK-type extensions reach
the host, and ``protos``, the FunctionRpc classes). The runtime keeps the indexed app in module globals and
changes ``sys.path``, the working directory, ``os.environ`` and logging: a process drives one app, and that
process must not be devhost's own.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devhost.rpc.protos import load as load_protos


@dataclass(frozen=True, slots=True)
class RuntimeRequest:
    """What the proxy worker hands a ``handle_event`` entry point: the host's message and its properties."""

    request: Any  # a StreamingMessage
    properties: dict[str, Any] = field(default_factory=dict)


class RuntimeDriver:
    """The runtime behind one worker process: init, metadata, load, invoke."""

    def __init__(self, app_directory: Path, host: str = "127.0.0.1") -> None:
        self.app_directory = app_directory.resolve()
        self.host = host
        self.protos = load_protos()
        # The host starts the worker in the app's directory with the app's root importable (the proxy
        # worker's ``sys.path`` setup); the runtime imports ``function_app`` from there.
        if str(self.app_directory) not in sys.path:
            sys.path.insert(0, str(self.app_directory))
        from azure_functions_runtime import handle_event
        from azure_functions_runtime.version import VERSION

        self._events = handle_event
        self.version: str = VERSION

    def _wrap(self, **content: Any) -> RuntimeRequest:
        message = self.protos.StreamingMessage(**content)
        return RuntimeRequest(message, {"host": self.host, "protos": self.protos})

    async def init(self, host_version: str = "4.1040.0") -> Any:
        """``WorkerInitRequest``: the runtime imports and indexes the app; its ``WorkerInitResponse``."""
        request = self.protos.WorkerInitRequest(
            host_version=host_version, function_app_directory=str(self.app_directory)
        )
        return await self._events.worker_init_request(self._wrap(worker_init_request=request))

    async def metadata(self) -> Any:
        """``FunctionsMetadataRequest``: the indexed functions (``RpcFunctionMetadata`` with raw bindings)."""
        request = self.protos.FunctionsMetadataRequest(function_app_directory=str(self.app_directory))
        return await self._events.functions_metadata_request(self._wrap(functions_metadata_request=request))

    async def load(self, function_id: str) -> Any:
        """``FunctionLoadRequest`` for one indexed function."""
        request = self.protos.FunctionLoadRequest(function_id=function_id)
        return await self._events.function_load_request(self._wrap(function_load_request=request))

    async def invoke(self, invocation: Any) -> Any:
        """``InvocationRequest`` -> ``InvocationResponse`` (the function ran, or the failure it raised)."""
        return await self._events.invocation_request(self._wrap(invocation_request=invocation))
