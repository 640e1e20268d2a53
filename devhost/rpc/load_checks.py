"""``azure_functions_runtime``'s loader, run on an app devhost imported itself (the in-process worker).

In the worker process the runtime's ``worker_init_request`` imports and indexes the app. In devhost's own
process it may not (it keeps one app in module globals), so the in-process worker imports the app and hands
its functions to the same loader the runtime's init uses (``loader.process_indexed_function``, into a
registry of its own, not the runtime's global one): Azure refuses at start-up what it cannot load (a
parameter annotated with a builtin generic such as ``list[func.ServiceBusMessage]``: runtime 1.3.0 accepts
``typing.List[...]`` only; an HTTP function whose return annotation is not an HTTP response...), and so
does devhost, with the runtime's message. The loader yields what the worker process's runtime does: each
function's ``FunctionInfo`` (each parameter's binding and type: how the in-process worker binds
arguments) and ``RpcFunctionMetadata`` (what the host reads its index from).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devhost.rpc.protos import load as load_protos


class RuntimeLoadError(ValueError):
    """The runtime refuses to load a function of the app (its ``FunctionLoadError`` message)."""


@dataclass(frozen=True, slots=True)
class RuntimeIndex:
    """What the runtime's loader made of an app: its ``RpcFunctionMetadata`` per function (in the app's
    order) and its ``FunctionInfo`` per function name."""

    metadata: list[Any]
    functions: dict[str, Any]


def runtime_functions(functions: Sequence[Any], app_directory: Path) -> RuntimeIndex:
    """The runtime's index of ``functions`` (the ``azure.functions`` function objects the app's
    ``FunctionApp`` indexed). Raises :class:`RuntimeLoadError` if the runtime would not load them."""
    from azure_functions_runtime.bindings.meta import load_binding_registry
    from azure_functions_runtime.functions import Registry
    from azure_functions_runtime.loader import process_indexed_function

    load_binding_registry()  # which SDK-type extensions are installed: the runtime's worker init does this
    # The runtime looks for the SDK-type (deferred) binding registry once per process, and only if the app
    # imported azurefunctions.extensions.base: in Azure one app per process. Here one process may load
    # several apps (in-process workers, tests), and the first without SDK types would make it None for
    # good; importing the base first makes every app find the registry, which is inert for apps without.
    with contextlib.suppress(ImportError):
        importlib.import_module("azurefunctions.extensions.base")
    registry = Registry()
    try:
        metadata, _ = process_indexed_function(load_protos(), registry, list(functions), str(app_directory))
    except Exception as failure:  # the runtime's FunctionLoadError, or what the library raised
        raise RuntimeLoadError(f"{type(failure).__name__}: {failure}") from failure
    return RuntimeIndex(
        list(metadata), {entry.name: registry.get_function(entry.function_id) for entry in metadata}
    )
