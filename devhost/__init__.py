"""devhost: run a Python v2-model ``function_app.py`` on one machine the way the Azure Functions host does.

``python -m devhost`` (or ``make run``) loads ``host.json`` and ``local.settings.json``, starts the app's
worker process, and serves its Service Bus triggers (real ``azure-servicebus`` SDK, PEEK_LOCK,
complete/abandon, lock renewal, sessions, batches, SDK-type settlement), timer triggers (NCRONTAB) and HTTP
triggers (route prefix, auth levels, keys, admin endpoints). Tests use :mod:`devhost.testing`.

The packages follow the processes and sides of a Functions app in Azure, each package's docstring says what
is in it:

* ``worker``: what runs in the worker process (``python -m devhost.worker``), Azure's proxy worker's part:
  ``azure_functions_runtime`` imports, indexes, binds and runs the app's functions there;
* ``channel``: the host's end of the host <-> worker channel (the worker process it starts and restarts,
  FunctionRpc messages over a socket pair, the start-up handshake and the host's index of the app read from
  what the worker indexed, invocation requests and trigger data);
* ``servicebus``: the Service Bus listeners (sessions, batches, lock renewal) and the Settlement gRPC
  service the binding extension settles through;
* ``http``: the HTTP front end (routes, auth levels and keys, the admin endpoints);
* ``dotnet``: values in the text forms the .NET host writes them in (TimeSpan, Json.NET);
* ``storage``: Azurite, the child process that serves ``AzureWebJobsStorage``.

The host itself is the top level: ``host`` (orchestration, graceful shutdown), ``__main__`` (the CLI;
``endpoints_record``: what it listens on, for command-line tools), ``local_settings`` / ``host_config``
(the two files), ``bindings`` (``%Name%`` and connections), ``startup_problems``, ``dispatcher`` +
``invocation_log`` (an invocation through the channel, logged), ``ncrontab`` + ``timer_trigger``, and
``testing``. devhost's own process never imports the app nor ``azure_functions_runtime``: the runtime keeps
one app per process in module globals and changes ``os.environ``, ``sys.path``, the working directory and
logging.
"""
