"""The checks ``azure_functions_runtime`` makes when it loads an indexed app, run on devhost's index.

Azure refuses at start-up what the runtime cannot load: a parameter annotated with a builtin generic such as
``list[func.ServiceBusMessage]`` (runtime 1.3.0 accepts ``typing.List[...]`` only), an HTTP function whose
return annotation is not an HTTP response, a binding whose direction does not fit... devhost's own worker
would run such a function happily, and the app would first fail in Azure. So devhost hands the functions
it indexed to the runtime's own loader (``loader.process_indexed_function``, into a registry of its own,
not the runtime's global one) and refuses the app with the runtime's message when it fails. What the
runtime's loader records for each function (``FunctionInfo``: each parameter's binding and type) is what
devhost's worker then binds arguments with.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from devhost.rpc.protos import load as load_protos


class RuntimeLoadError(ValueError):
    """The runtime refuses to load a function of the app (its ``FunctionLoadError`` message)."""


def runtime_functions(functions: Sequence[Any], app_directory: Path) -> dict[str, Any]:
    """The runtime's ``FunctionInfo`` for each of ``functions`` (the ``azure.functions`` function objects the
    app's ``FunctionApp`` indexed), by function name: how the runtime binds each parameter. Raises
    :class:`RuntimeLoadError` if the runtime would not load them."""
    from azure_functions_runtime.bindings.meta import load_binding_registry
    from azure_functions_runtime.functions import Registry
    from azure_functions_runtime.loader import process_indexed_function

    load_binding_registry()  # which SDK-type extensions are installed: the runtime's worker init does this
    registry = Registry()
    try:
        metadata, _ = process_indexed_function(load_protos(), registry, list(functions), str(app_directory))
    except Exception as failure:  # the runtime's FunctionLoadError, or what the library raised
        raise RuntimeLoadError(f"{type(failure).__name__}: {failure}") from failure
    return {entry.name: registry.get_function(entry.function_id) for entry in metadata}
