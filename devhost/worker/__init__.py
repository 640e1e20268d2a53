"""The worker side of devhost: what the Python worker does in Azure, in its own process there.

The worker process (``__main__`` + ``process_loop``: ``python -m devhost.worker``) is Azure's proxy worker's
part: it hands the host's FunctionRpc requests to ``azure_functions_runtime``, which imports, indexes,
binds and invokes (``runtime_driver``, ``runtime_invocation``). ``python -m devhost.worker.index_app`` runs
the same runtime in a process of its own to print what it indexes in an app.

These are the modules that import the runtime, so they live here: the worker process imports only this
package, the channel's wire (``devhost.channel.frames``) and the FunctionRpc classes
(``devhost.channel.protos``). The host side never imports this package; it talks to it through the
channel (``devhost.channel.process_worker``; ``tests/test_layers.py`` checks both).
"""
