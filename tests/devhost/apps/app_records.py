"""What every test app does per invocation: append one JSON line to its record file (``DEVHOST_TEST_RECORD``),
so a test sees exactly what each function received, whether the function ran in the host's process or in
the worker's."""

import json
import threading
from collections.abc import Callable


def recorder(path: str) -> Callable[..., None]:
    """``record(function, **fields)`` appending to ``path``: bound when the app is imported, so hosts that
    run at the same time in one process (sharing ``os.environ``) keep their own files."""
    lock = threading.Lock()

    def record(function: str, **fields: object) -> None:
        with lock, open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"function": function, **fields}, default=str) + "\n")

    return record
