"""The host <-> worker channel, the host's end of it: how the Functions host talks to a language worker.

``process_worker`` starts the worker process (``python -m devhost.worker``) with the real worker arguments,
starts it as the host starts a worker (``handshake``: init, functions metadata, a load per function; the
host's index of the app is read from the worker's answer, ``function_indexing``), sends it invocations
(``invocation_rpc``, with the trigger's data in FunctionRpc form: ``trigger_data``; an HTTP function's return
made the response: ``http_return``), logs its ``RpcLog``s (``logs``) and restarts it within the host's bounds
(``restarts``). What crosses is FunctionRpc ``StreamingMessage``s on a socket pair (``frames``), built with
the protobuf classes compiled from the vendored ``.proto`` files (``protos``, ``proto/``); what the rest of
the host hands the channel is the plain values of ``protocol``.

A package of its own because it is neither the worker process nor a trigger: the triggers and the HTTP
front end reach the function code only through it. The worker process imports ``frames`` and ``protos``
(the wire both ends speak), never the host's end (``process_worker``).
"""
