"""The worker side of devhost: what the Python worker does in Azure, in its own process there.

``app_loader`` + ``trigger_shape`` + ``indexing`` (import the app, describe its functions; the checks
and ``FunctionInfo`` of ``azure_functions_runtime``'s loader), ``binding`` (the host's trigger data ->
the function's arguments, by the runtime's ``from_incoming_proto``), ``invoker`` (thread pool /
coroutine, functionTimeout, context) and
``function_worker`` (an ``InvocationRequest`` in, an ``InvocationOutcome`` out), ``process_loop`` +
``__main__`` (the worker process: ``python -m devhost.worker``).

The host side never imports this package; it talks to it through ``devhost.worker_channel``
(``tests/test_layers.py`` checks that).
"""
