"""devhost: run a Python v2-model ``function_app.py`` on one machine the way the Azure Functions host does.

``python -m devhost`` (or ``make run``) loads ``host.json`` and ``local.settings.json``, starts the app's
worker process, and serves its Service Bus triggers (real ``azure-servicebus`` SDK, PEEK_LOCK,
complete/abandon, lock renewal, sessions, batches, SDK-type settlement), timer triggers (NCRONTAB) and HTTP
triggers (route prefix, auth levels, keys, admin endpoints). Tests use :mod:`devhost.testing`.

The function code runs in a worker process, as the Python worker runs beside the host in Azure: the
``worker`` package (``python -m devhost.worker``: ``azure_functions_runtime`` imports, indexes, binds and
runs; see its docstring) answers ``worker_protocol`` requests through a ``worker_channel``:
``process_worker`` (a child process started with the real worker arguments, FunctionRpc
``StreamingMessage``s over a socket pair (``worker_frames``): started with the init / functions metadata /
load requests by ``worker_handshake``, invoked with ``invocation_rpc``'s requests, its ``RpcLog``s logged
by ``worker_logs``, restarted if it dies; its start-up and restarts bounded as the host's,
``worker_restarts``). The host reads its index from the runtime's ``RpcFunctionMetadata``
(``function_indexing``). devhost's own process never imports the app nor ``azure_functions_runtime``: the
runtime keeps one app per process in module globals and changes ``os.environ``, ``sys.path``, the working
directory and logging.

Host-side modules: ``local_settings`` / ``host_config`` (the two files), ``bindings`` (``%Name%`` and
connections), ``dispatcher`` + ``invocation_log`` (an invocation through the channel, logged),
``message_reading`` / ``model_binding_data`` (a received message as plain data for the worker),
``servicebus_trigger`` + ``session_listener`` + ``batch_cache`` + ``lock_renewal``, ``settlement``,
``ncrontab`` + ``timer_trigger``, ``routes`` + ``keys`` + ``key_store`` (keys kept across restarts) +
``http_server``, ``host`` (orchestration, graceful shutdown), ``__main__`` (CLI; ``endpoints_record``: what
it listens on, for command-line tools; ``azurite`` + ``storage_settings``: Azurite as ``AzureWebJobsStorage``)
and ``testing``.
"""
