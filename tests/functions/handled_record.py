"""What the sample handlers handled, as the end-to-end tests see it from outside the worker process.

The handlers run in devhost's worker process, where the sample's in-memory journal lives; with
``BUSBAR_PROBE_RECORD`` set they also append each handled event to a file (:mod:`app.probe`), fsynced before
the message is completed. A test gives the host :meth:`HandledRecord.settings` and reads the file back.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.probe import PROBE_RECORD


@dataclass(frozen=True, slots=True)
class Handled:
    """One handler call that ran to its end: which endpoint, which contract arrived, the key, the ids."""

    endpoint: str
    contract: str
    key: str  # the order or customer id
    message_id: str | None
    correlation_id: str | None
    delivery_count: int
    detail: str = ""  # what the handler recorded (crm: the customer's name)


class HandledRecord:
    """The probe file of one host's sample handlers."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def settings(self) -> dict[str, str]:
        """The app setting that makes the handlers write to this record."""
        return {PROBE_RECORD.name: str(self.path)}

    def entries(self, key: str | None = None) -> list[Handled]:
        """Everything handled so far, oldest first; only entries about ``key`` when given."""
        if not self.path.exists():
            return []
        entries = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            if not line.endswith("}"):  # a line still being written (a line is one write, then fsync)
                continue
            entry = json.loads(line)
            if key is None or entry["key"] == key:
                entries.append(
                    Handled(
                        entry["endpoint"],
                        entry["contract"],
                        entry["key"],
                        entry["message_id"],
                        entry["correlation_id"],
                        entry["delivery_count"],
                        entry.get("detail", ""),
                    )
                )
        return entries

    def wait_for(self, condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
        """Block until ``condition`` holds (AssertionError naming ``what`` after ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.05)
