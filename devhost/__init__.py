"""devhost: run a Python v2-model ``function_app.py`` on one machine the way the Azure Functions host does.

``python -m devhost`` (or ``make run``) loads ``host.json`` and ``local.settings.json``, imports the app,
and serves its Service Bus triggers (real ``azure-servicebus`` SDK, PEEK_LOCK, complete/abandon, lock
renewal, sessions, batches, SDK-type settlement), timer triggers (NCRONTAB) and HTTP triggers (route
prefix, auth levels, keys, admin endpoints). Tests use :mod:`devhost.testing`.

Modules: ``local_settings`` / ``host_config`` (the two files), ``bindings`` (``%Name%`` and connections),
``app_loader`` (import + index), ``invoker`` (thread pool / coroutine, functionTimeout),
``invocation_log``, ``message_conversion`` (SDK message -> ``func.ServiceBusMessage``),
``servicebus_trigger``, ``settlement``, ``ncrontab`` + ``timer_trigger``, ``routes`` + ``keys`` +
``http_server``, ``host`` (orchestration, graceful shutdown), ``__main__`` (CLI) and ``testing``.
"""
