"""A worker's logs, as the Functions host deals with them: the levels it tells the worker at init
(``WorkerInitRequest.log_categories``), and each ``RpcLog`` the worker streams, logged as the host logs it
(``GrpcWorkerChannel.Log`` and ``SystemLog``: a function's own records under ``Function.<name>.User``
with the invocation's id, the worker's and the runtime's system records kept off the console).
"""

from __future__ import annotations

import logging
from typing import Any

from devhost.channel.frames import ROOT_LOG_CATEGORY, python_level, rpc_level
from devhost.channel.protos import load as load_protos


def log_categories() -> dict[str, int]:
    """The host's log levels, as the init request's ``log_categories`` tell a worker: the root's, and each
    logger the host set a level on (e.g. "azure": WARNING), so the worker does not send what the host would
    drop."""
    categories = {ROOT_LOG_CATEGORY: rpc_level(logging.getLogger().getEffectiveLevel())}
    for name, known in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(known, logging.Logger) and known.level != logging.NOTSET:
            categories[name] = rpc_level(known.level)
    return categories


def relog(log: Any, function_name: str | None) -> None:
    """Log a worker's ``RpcLog`` as the Functions host does: a function's own log under the category
    ``Function.<name>.User`` with its invocation id; a system log (the runtime's, the worker's) kept off
    the console as the host keeps it (here: at DEBUG, under its own logger)."""
    extra = {"invocation_id": log.invocation_id or None, "worker_logger": log.category}
    if log.log_category == load_protos().RpcLog.System:
        logging.getLogger(log.category).log(logging.DEBUG, "%s", log.message, extra=extra)
    elif function_name is not None:
        category = f"Function.{function_name}.User"
        logging.getLogger(category).log(python_level(log.level), "%s", log.message, extra=extra)
    else:  # the app's code outside an invocation (at import, in its own threads)
        logging.getLogger(log.category).log(python_level(log.level), "%s", log.message, extra=extra)
