"""The worker side of devhost: what the Python worker does in Azure, in its own process there.

The worker process (``__main__`` + ``process_loop``: ``python -m devhost.worker``) is Azure's proxy worker's
part: it hands the host's FunctionRpc requests to ``azure_functions_runtime``, which imports, indexes,
binds and invokes (``devhost.rpc.runtime_driver``, ``devhost.rpc.runtime_invocation``).

The host side never imports this package; it talks to it through ``devhost.worker_channel``
(``tests/test_layers.py`` checks that).
"""
