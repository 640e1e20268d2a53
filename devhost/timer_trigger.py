"""Timer trigger: fires a function on its NCRONTAB schedule (UTC, or ``WEBSITE_TIME_ZONE``).

``runOnStartup`` fires once when the host starts. One run at a time per function: a scheduled run that
comes due while the previous one (or an admin-requested run) is still going waits for it, and then runs
once with ``past_due`` true, however many occurrences were missed -- as the host does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from devhost.channel.protocol import FunctionMetadata, TimerInput
from devhost.dispatcher import Dispatcher
from devhost.invocation_log import InvocationRecord
from devhost.ncrontab import CronSchedule, parse_ncrontab

logger = logging.getLogger("devhost.Timer")

PAST_DUE_TOLERANCE_SECONDS = 1.0


def schedule_zone(settings: Mapping[str, str]) -> tzinfo:
    """The zone schedules are read in: ``WEBSITE_TIME_ZONE`` (an IANA name) or UTC."""
    name = settings.get("WEBSITE_TIME_ZONE", "").strip()
    if not name:
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"WEBSITE_TIME_ZONE '{name}' is not a known time zone (use an IANA name)") from exc


class TimerListener:
    """Runs one timer function on schedule until stopped."""

    def __init__(self, function: FunctionMetadata, dispatcher: Dispatcher, zone: tzinfo) -> None:
        self.function = function
        self.dispatcher = dispatcher
        self.zone = zone
        self.schedule: CronSchedule = parse_ncrontab(str(function.trigger["schedule"]))
        self.run_on_startup = bool(function.trigger.get("runOnStartup"))
        self._lock = asyncio.Lock()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._last: datetime | None = None
        self.next_occurrence: datetime | None = None

    async def start(self) -> None:
        """Start the schedule loop."""
        self._task = asyncio.create_task(self._run(), name=f"{self.function.name}-timer")
        logger.info("Functions.%s: schedule '%s'", self.function.name, self.schedule.expression)

    async def stop(self, drain_seconds: float) -> None:
        """Stop scheduling; a run in progress may finish within ``drain_seconds``."""
        self._stopping.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), drain_seconds)
            except TimeoutError:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)

    async def invoke_now(self, *, past_due: bool = False, reason: str = "Timer fired") -> InvocationRecord:
        """Run once now (after any run in progress), e.g. for ``POST /admin/functions/{name}``."""
        async with self._lock:
            now = datetime.now(self.zone)
            self.next_occurrence = self.schedule.next_after(now)
            timer = TimerInput(
                past_due=past_due,
                schedule_status={
                    "Last": (self._last or now).isoformat(),
                    "Next": self.next_occurrence.isoformat(),
                    "LastUpdated": now.isoformat(),
                },
                schedule={"AdjustForDST": True},
            )
            record, _ = await self.dispatcher.invoke(self.function, timer, reason=reason)
            self._last = now
            return record

    async def _run(self) -> None:
        if self.run_on_startup and not self._stopping.is_set():
            await self.invoke_now(reason="Timer fired at startup (runOnStartup)")
        due = self.schedule.next_after(datetime.now(self.zone))
        while not self._stopping.is_set():
            self.next_occurrence = due
            delay = (due - datetime.now(self.zone)).total_seconds()
            if delay > 0:
                try:
                    await asyncio.wait_for(self._stopping.wait(), delay)
                    return
                except TimeoutError:
                    pass
            late = (datetime.now(self.zone) - due).total_seconds() > PAST_DUE_TOLERANCE_SECONDS
            await self.invoke_now(past_due=late, reason=f"Timer fired at {due.isoformat()}")
            following = self.schedule.next_after(due)
            # Missed occurrences collapse into one past-due run; after that, back on schedule from now.
            if late and following <= datetime.now(self.zone):
                following = self.schedule.next_after(datetime.now(self.zone))
            due = following
