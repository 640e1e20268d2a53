"""The worker side of devhost: what the Python worker does in Azure, in its own process there.

The worker process (``__main__`` + ``process_loop``: ``python -m devhost.worker``) is Azure's proxy worker's
part: it hands the host's FunctionRpc requests to ``azure_functions_runtime``, which imports, indexes,
binds and invokes (``devhost.rpc.runtime_driver``, ``devhost.rpc.runtime_invocation``).

The in-process worker (``--in-process-worker``, for debuggers) cannot leave the process to the runtime,
which keeps one app in module globals: ``app_loader`` imports the app under a fresh module name and indexes
it with the runtime's loader, ``binding`` turns the host's trigger data into the function's arguments by
the runtime's ``from_incoming_proto``, ``invoker`` runs the function (thread pool / coroutine,
functionTimeout, context) and ``function_worker`` answers an ``InvocationRequest`` with an
``InvocationOutcome``.

The host side never imports this package; it talks to it through ``devhost.worker_channel``
(``tests/test_layers.py`` checks that).
"""
