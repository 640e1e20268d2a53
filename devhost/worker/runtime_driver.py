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
from typing import Any

from devhost.channel.protos import load as load_protos


@dataclass(frozen=True, slots=True)
class RuntimeRequest:
    """What the proxy worker hands a ``handle_event`` entry point: the host's message and its properties."""

    request: Any  # a StreamingMessage
    properties: dict[str, Any] = field(default_factory=dict)


# The host's requests the proxy worker hands the runtime: message field -> (entry point, response field).
_ENTRY_POINTS = {
    "worker_init_request": ("worker_init_request", "worker_init_response"),
    "functions_metadata_request": ("functions_metadata_request", "function_metadata_response"),
    "function_load_request": ("function_load_request", "function_load_response"),
    "function_environment_reload_request": (
        "function_environment_reload_request",
        "function_environment_reload_response",
    ),
}


class RuntimeDriver:
    """The runtime behind one worker process: each host request to its entry point, each answer back."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.protos = load_protos()
        from azure_functions_runtime import handle_event
        from azure_functions_runtime.version import VERSION

        self._events = handle_event
        self.version: str = VERSION

    def handles(self, message: Any) -> bool:
        """Whether ``message`` (a ``StreamingMessage``) is a request this driver hands the runtime."""
        return message.WhichOneof("content") in _ENTRY_POINTS

    async def handle(self, message: Any) -> Any:
        """The runtime's answer to one host request (init, functions metadata, function load, environment
        reload), as a ``StreamingMessage`` with the request's id."""
        kind = message.WhichOneof("content")
        entry_point, answer = _ENTRY_POINTS[kind]
        directory = getattr(message, kind).function_app_directory if kind != "function_load_request" else ""
        if directory and directory not in sys.path:
            # The worker starts with the app's root importable: the runtime imports ``function_app`` (or
            # PYTHON_SCRIPT_FILE_NAME) from there.
            sys.path.insert(0, directory)
        request = RuntimeRequest(message, {"host": self.host, "protos": self.protos})
        response = await getattr(self._events, entry_point)(request)
        return self.protos.StreamingMessage(request_id=message.request_id, **{answer: response})
