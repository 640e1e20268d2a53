"""The re-drive run loop: receive from each dead-letter queue, decide, archive or re-send, then complete.

Safety comes from the order of operations (the SDK has no transactions):

* archive: write and close the Parquet file, **then** complete the dead-lettered messages;
* re-drive: send the copies, **then** complete the originals.

A crash in between leaves the original in the dead-letter queue next to its copy (or its archive row): a
duplicate, never a loss. Messages held (duplicate-detection window, session order), left by policy or
failed stay locked until the entity is done and are then abandoned, so one run never sees them twice; a
message seen twice means its lock expired and the run has gone round the whole queue, so the entity is
done. Within a session, once a message stays in the dead-letter queue (held, left or failed), the
session's later messages are held too, so a re-drive never overtakes an earlier message of the same
session (an archived message is out of the stream on purpose and blocks nothing).

Work is bounded by the message budget, the time budget (checked before every receive) and a rate limit.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from azure.servicebus import ServiceBusClient

from shared.amqp.kept_senders import KeptSenders
from shared.archive.writer import ArchiveWriter
from shared.ordering.parking import send_resume
from shared.rate_limit import TokenBucket
from shared.redrive.copy import CopyError, build_redrive_message, oversize
from shared.redrive.decision import Decision, Outcome, decide
from shared.redrive.entities import EntityPlan
from shared.redrive.message import DeadLetter
from shared.redrive.policy import Policy
from shared.redrive.received import archive_row, from_received
from shared.redrive.settings import Limits
from shared.redrive.summary import RunSummary
from shared.telemetry.conventions import DESTINATION_NAME
from shared.telemetry.instruments import count, redriven
from shared.telemetry.operations import record_archived

if TYPE_CHECKING:
    from shared.amqp.connection import Namespace
    from shared.amqp.outgoing import OutgoingMessage
    from shared.amqp.receiver import EntityReceiver

log = logging.getLogger(__name__)

PEEK_PAGE = 250


@dataclass(slots=True)
class RunHooks:
    """Observation points for tests and diagnostics: ``after_send`` runs after a send succeeded and
    ``after_archive`` after archive files were written, both before the originals are completed."""

    after_send: Callable[[Sequence[DeadLetter]], None] | None = None
    after_archive: Callable[[Sequence[DeadLetter]], None] | None = None


@dataclass(slots=True)
class _Item:
    message: Any
    dead_letter: DeadLetter
    decision: Decision
    copy: OutgoingMessage | None = None


@dataclass(slots=True)
class _Budget:
    remaining: int
    deadline: float
    stop_reason: str | None = None

    def exhausted(self) -> bool:
        if self.remaining <= 0:
            self.stop_reason = "max-messages"
        elif time.monotonic() >= self.deadline:
            self.stop_reason = "time-budget"
        return self.stop_reason is not None


@dataclass(slots=True)
class _EntityState:
    plan: EntityPlan
    receiver: Any
    senders: KeptSenders
    """The target's sender, opened on the first copy (a run that only archives never opens one)."""
    kept: list[Any] = field(default_factory=list)
    seen: set[int] = field(default_factory=set)
    blocked_sessions: set[str] = field(default_factory=set)
    # An operator's selection: only these sequence numbers are handled (None: every message).
    wanted: frozenset[int] | None = None
    found: int = 0

    def selects(self, sequence_number: int) -> bool:
        return self.wanted is None or sequence_number in self.wanted

    @property
    def complete(self) -> bool:
        """Every selected message was found (an unselected run is never complete early)."""
        return self.wanted is not None and self.found >= len(self.wanted)


class Redriver:
    """Runs re-drives (``run``) and dry runs (``plan``) over a set of dead-letter queues."""

    def __init__(
        self,
        client: ServiceBusClient,
        namespace: Namespace,
        archive: ArchiveWriter,
        policy: Policy,
        limits: Limits,
        *,
        batch_size: int = 50,
        receive_wait: float = 1.0,
        hooks: RunHooks | None = None,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.archive = archive
        self.policy = policy
        self.limits = limits
        self.batch_size = batch_size
        self.receive_wait = receive_wait
        self.hooks = hooks or RunHooks()

    # ------------------------------------------------------------------------------------------ run

    def run(
        self,
        plans: Sequence[EntityPlan],
        run_id: str,
        selection: Mapping[str, frozenset[int]] | None = None,
    ) -> RunSummary:
        """Re-drive, archive, hold or leave every message of ``plans``' dead-letter queues, within budget.

        ``selection`` (entity path, lower-case -> sequence numbers) limits the run to those messages, as an
        operator's retry or archive of a failure group does; the others stay untouched in their queue."""
        summary = RunSummary(run_id=run_id, started_at=datetime.now(UTC))
        budget = _Budget(self.limits.max_messages, time.monotonic() + self.limits.time_budget_seconds)
        limiter = TokenBucket(self.limits.rate_per_second)
        for plan in plans:
            wanted = None if selection is None else selection.get(plan.source.path.lower())
            if selection is not None and (not wanted or plan.transfer):
                continue  # an operator's selection names dead-letter queue messages only
            if budget.exhausted():
                break
            try:
                self._run_entity(plan, run_id, budget, limiter, summary, wanted)
            except Exception as exc:  # one broken entity must not stop the others
                log.exception("re-drive of %s failed", plan.source.path)
                summary.error(plan.source.path, f"{type(exc).__name__}: {exc}")
        summary.stop_reason = budget.stop_reason or "drained"
        summary.finished_at = datetime.now(UTC)
        return summary

    def _run_entity(
        self,
        plan: EntityPlan,
        run_id: str,
        budget: _Budget,
        limiter: TokenBucket,
        summary: RunSummary,
        wanted: frozenset[int] | None = None,
    ) -> None:
        with ExitStack() as stack:
            receiver = stack.enter_context(self._dead_letter_receiver(plan))
            state = _EntityState(plan, receiver, KeptSenders(self.namespace), wanted=wanted)
            stack.callback(state.senders.close)  # after the release below (an ExitStack unwinds)
            stack.callback(self._release, state)
            while not budget.exhausted() and not state.complete:
                count = min(self.batch_size, budget.remaining)
                batch = receiver.receive_messages(max_message_count=count, max_wait_time=self.receive_wait)
                if not batch:
                    return
                limiter.acquire(len(batch))
                fresh, handled = self._handle_batch(state, batch, run_id, summary)
                budget.remaining -= handled
                if fresh < len(batch):
                    return  # went round the queue: everything else here was already seen

    def _dead_letter_receiver(self, plan: EntityPlan) -> EntityReceiver:
        # Busbar's own AMQP receiver: every application property is copied and archived with its AMQP type.
        # Imported here: proton loads its C library only when a run receives (indexing the app never does).
        from shared.amqp.receiver import EntityReceiver

        sub_queue = "$Transfer/$deadletterqueue" if plan.transfer else "$deadletterqueue"
        return EntityReceiver(self.namespace, f"{plan.source.path}/{sub_queue}")

    def _handle_batch(
        self, state: _EntityState, batch: Sequence[Any], run_id: str, summary: RunSummary
    ) -> tuple[int, int]:
        """Handle one received batch: (messages not seen before, messages handled)."""
        now = datetime.now(UTC)
        items: list[_Item] = []
        fresh = handled = 0
        for message in batch:
            if message.sequence_number in state.seen:
                state.kept.append(message)
                continue
            state.seen.add(message.sequence_number)
            fresh += 1
            if not state.selects(message.sequence_number):
                state.kept.append(message)  # not the operator's: released untouched at the end
                continue
            state.found += 1
            handled += 1
            try:
                dead_letter = from_received(message, state.plan.source)
                decision, copy = self._decide(dead_letter, state, run_id, now)
            except Exception as exc:  # one unreadable message must not stop the queue behind it
                self._unreadable(state, message, exc, summary)
                continue
            items.append(_Item(message, dead_letter, decision, copy))
        archived = [item for item in items if item.decision.outcome is Outcome.ARCHIVE]
        if archived:
            self._archive(state, archived, run_id, now, summary)
        redriven = [item for item in items if item.decision.outcome is Outcome.REDRIVE]
        if redriven:
            self._redrive(state, redriven, summary)
        for item in items:
            if item.decision.outcome in (Outcome.HOLD, Outcome.LEAVE):
                state.kept.append(item.message)
                self._record(summary, item, item.decision.outcome)
        return fresh, handled

    @staticmethod
    def _unreadable(state: _EntityState, message: Any, exc: Exception, summary: RunSummary) -> None:
        """Keep a message the run cannot interpret in the dead-letter queue and report it."""
        path = state.plan.source.path
        log.exception("dead-lettered message %s of %s cannot be handled", message.sequence_number, path)
        summary.error(path, f"sequence number {message.sequence_number}: {type(exc).__name__}: {exc}")
        summary.record(path, getattr(message, "dead_letter_reason", None), Outcome.FAIL, "unreadable")
        session = getattr(message, "session_id", None)
        if session is not None:
            state.blocked_sessions.add(session)
        state.kept.append(message)

    def _decide(
        self, dead_letter: DeadLetter, state: _EntityState, run_id: str, now: datetime
    ) -> tuple[Decision, OutgoingMessage | None]:
        """The decision (with the checks that need the copy, and the session-order rule) and the copy."""
        decision = decide(dead_letter, state.plan, self.policy, self.limits.max_redrives, now)
        session = dead_letter.session_id
        copy = None
        if decision.outcome is Outcome.REDRIVE:
            if session is not None and session in state.blocked_sessions:
                decision = Decision(
                    Outcome.HOLD, "session-order", f"an earlier message of session {session} stays"
                )
            else:
                try:
                    copy = build_redrive_message(dead_letter, run_id, now)
                except CopyError as exc:
                    return Decision(Outcome.ARCHIVE, "uncopyable", str(exc)), None
                assert state.plan.target is not None
                limit = state.plan.target.max_message_size_bytes
                if oversize(copy, limit):
                    return Decision(Outcome.ARCHIVE, "oversize", f"larger than {limit} bytes"), None
        if decision.outcome in (Outcome.HOLD, Outcome.LEAVE) and session is not None:
            state.blocked_sessions.add(session)
        return decision, copy

    def _archive(
        self, state: _EntityState, items: Sequence[_Item], run_id: str, now: datetime, summary: RunSummary
    ) -> None:
        target = state.plan.target.name if state.plan.target else None
        rows, items = [], list(items)
        for item in list(items):
            try:
                rows.append(
                    archive_row(
                        item.dead_letter,
                        run_id=run_id,
                        archived_at=now,
                        decision=item.decision.decision,
                        detail=item.decision.detail,
                        target_entity=target,
                    )
                )
            except Exception as exc:  # e.g. a property the archive cannot encode: keep it dead-lettered
                summary.error(state.plan.source.path, f"archive row failed: {type(exc).__name__}: {exc}")
                items.remove(item)
                self._fail(state, [item], summary)
        if not rows:
            return
        try:
            files = self.archive.write(run_id, rows)
        except Exception as exc:
            log.exception("archive write for %s failed", state.plan.source.path)
            summary.error(state.plan.source.path, f"archive write failed: {type(exc).__name__}: {exc}")
            self._fail(state, items, summary)
            return
        summary.archive_files.extend(f.path for f in files)
        summary.archived_bytes += sum(f.size for f in files)
        if self.hooks.after_archive is not None:
            self.hooks.after_archive([item.dead_letter for item in items])
        for item in items:
            record_archived(
                None, item.decision.decision, attributes={DESTINATION_NAME: state.plan.source.path}
            )
        for item in items:
            self._complete(state, item, Outcome.ARCHIVE, summary)
        self._resume_keys(state, items, summary)

    def _resume_keys(self, state: _EntityState, items: Sequence[_Item], summary: RunSummary) -> None:
        """An archived message of an ordered endpoint's queue may hold its key: a resume signal asks the
        endpoint to handle the key's parked messages (ignored where the key is not held by
        it). Sent after the archive, so a key is never released while its blocker is still dead-lettered."""
        target = state.plan.target
        if target is None or not target.holds_keys:  # a plain session queue gets no signal of Busbar's
            return
        for item in items:
            session = item.dead_letter.session_id
            if not session or item.decision.outcome is not Outcome.ARCHIVE:
                continue
            try:
                send_resume(self.client, target.name, session, item.dead_letter.message_id)
            except Exception as exc:  # the key stays held; the console shows it and can release it
                summary.error(
                    state.plan.source.path,
                    f"archived {item.dead_letter.message_id} but could not resume its key {session}: "
                    f"{type(exc).__name__}: {exc}",
                )

    def _redrive(self, state: _EntityState, items: Sequence[_Item], summary: RunSummary) -> None:
        """Send the copies, then complete the originals whose copy the target took.

        Each copy has its own outcome (:meth:`EntitySender.send_all`), so the copies go in waves that hold
        at most one message of a session: a session whose copy was refused holds its later messages, and a
        later one is never taken while an earlier one stays dead-lettered."""
        waiting = list(items)
        while waiting:
            wave: list[_Item] = []
            later: list[_Item] = []
            sessions: set[str] = set()
            for item in waiting:
                session = item.dead_letter.session_id
                if session is not None and session in state.blocked_sessions:
                    # Kept and counted with the other held messages once the batch is done.
                    item.decision = Decision(
                        Outcome.HOLD, "session-order", f"an earlier message of {session} stays"
                    )
                elif session is not None and session in sessions:
                    later.append(item)
                else:
                    if session is not None:
                        sessions.add(session)
                    wave.append(item)
            self._send(state, wave, summary)
            waiting = later

    def _send(self, state: _EntityState, items: list[_Item], summary: RunSummary) -> None:
        from shared.amqp.sender import MessageTooLarge  # proton: loaded only when a run sends

        if not items:
            return
        copies = [item.copy for item in items if item.copy is not None]
        assert len(copies) == len(items)  # a re-driven item has its copy (_decide)
        assert state.plan.target is not None
        try:
            # Busbar's own AMQP sender: every application property goes out with its AMQP type.
            with state.senders.sending(state.plan.target.name) as sender:
                outcomes = sender.send_all(copies)
        except Exception as exc:
            log.exception("re-drive send to %s failed", state.plan.target)
            summary.error(state.plan.source.path, f"send failed: {type(exc).__name__}: {exc}")
            self._fail(state, items, summary)
            return
        sent: list[_Item] = []
        for item, outcome in zip(items, outcomes, strict=True):
            if outcome.error is None:
                sent.append(item)
                continue
            what = "copy too large to send" if isinstance(outcome.error, MessageTooLarge) else "send failed"
            summary.error(
                state.plan.source.path,
                f"{what}: sequence number {item.dead_letter.sequence_number}: "
                f"{type(outcome.error).__name__}: {outcome.error}",
            )
            self._fail(state, [item], summary)
        if not sent:
            return
        if self.hooks.after_send is not None:
            self.hooks.after_send([item.dead_letter for item in sent])
        count(redriven, len(sent), {DESTINATION_NAME: state.plan.source.path})
        for item in sent:
            self._complete(state, item, Outcome.REDRIVE, summary)

    def _complete(self, state: _EntityState, item: _Item, outcome: Outcome, summary: RunSummary) -> None:
        try:
            state.receiver.complete_message(item.message)
        except Exception as exc:
            # Sent or archived but still dead-lettered: the next run handles it again (a duplicate, no loss).
            summary.error(
                state.plan.source.path,
                f"complete of sequence number {item.dead_letter.sequence_number} failed after it was "
                f"{outcome.value} (it will be handled again): {type(exc).__name__}: {exc}",
            )
            self._record(summary, item, Outcome.FAIL)
            return
        self._record(summary, item, outcome)

    def _fail(self, state: _EntityState, items: Sequence[_Item], summary: RunSummary) -> None:
        for item in items:
            if item.dead_letter.session_id is not None:
                state.blocked_sessions.add(item.dead_letter.session_id)
            state.kept.append(item.message)
            self._record(summary, item, Outcome.FAIL)

    @staticmethod
    def _record(summary: RunSummary, item: _Item, outcome: Outcome) -> None:
        summary.record(
            item.dead_letter.source.path, item.dead_letter.dead_letter_reason, outcome, item.decision.decision
        )

    @staticmethod
    def _release(state: _EntityState) -> None:
        """Abandon every message kept locked, so the next run sees it again."""
        for message in state.kept:
            try:
                state.receiver.abandon_message(message)
            except Exception:  # lock already expired: the broker has released it anyway
                log.debug("abandon of %s failed", message.sequence_number, exc_info=True)
        state.kept.clear()

    # ----------------------------------------------------------------------------------------- plan

    def plan(self, plans: Sequence[EntityPlan], run_id: str) -> RunSummary:
        """A dry run: peek every dead-letter queue and count what a run would do, settling nothing."""
        summary = RunSummary(run_id=run_id, started_at=datetime.now(UTC), dry_run=True)
        budget = _Budget(self.limits.max_messages, time.monotonic() + self.limits.time_budget_seconds)
        for plan in plans:
            if budget.exhausted():
                break
            try:
                self._plan_entity(plan, run_id, budget, summary)
            except Exception as exc:
                summary.error(plan.source.path, f"{type(exc).__name__}: {exc}")
        summary.stop_reason = budget.stop_reason or "drained"
        summary.finished_at = datetime.now(UTC)
        return summary

    def _plan_entity(self, plan: EntityPlan, run_id: str, budget: _Budget, summary: RunSummary) -> None:
        with self._dead_letter_receiver(plan) as receiver:
            state = _EntityState(plan, receiver, KeptSenders(self.namespace))  # a plan sends nothing
            next_sequence = 0
            while not budget.exhausted():
                page = receiver.peek_messages(
                    max_message_count=min(PEEK_PAGE, budget.remaining), sequence_number=next_sequence
                )
                if not page:
                    return
                now = datetime.now(UTC)
                for message in page:
                    dead_letter = from_received(message, plan.source)
                    decision, _ = self._decide(dead_letter, state, run_id, now)
                    summary.record(
                        plan.source.path, dead_letter.dead_letter_reason, decision.outcome, decision.decision
                    )
                budget.remaining -= len(page)
                next_sequence = max(m.sequence_number for m in page) + 1
