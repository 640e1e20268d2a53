"""Decide, for one dead-lettered message, what a run does with it. Pure.

The policy gives the intent (:mod:`shared.redrive.policy`); the guards can turn a re-drive into an archive
or a hold. Archive rows carry the decision name (``decision`` column) and what led to it
(``decision_detail``):

==================== ======================================================================
decision             meaning
==================== ======================================================================
archive              the policy archives this reason / exception
redrive-limit        re-driven ``max_redrives`` times already: a poison message
duplicate-window     the target would drop the re-send as a duplicate (policy: archive)
no-private-target    a subscription without a forward-to queue: re-sending to the topic would
                     reach every subscription, so it is never done
oversize             the copy exceeds the target's maximum message size
uncopyable           the copy cannot be sent faithfully (e.g. binary properties)
no-session-id        the target requires sessions and the message has no SessionId
==================== ======================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from shared.redrive.entities import EntityPlan
from shared.redrive.guards import duplicate_window_end, redrive_limit_reached
from shared.redrive.message import DeadLetter
from shared.redrive.policy import Action, Policy, classify, exception_type_of


class Outcome(StrEnum):
    """What a run does with a message (and the summary's counters)."""

    REDRIVE = "redriven"
    ARCHIVE = "archived"
    HOLD = "held"
    LEAVE = "left"
    FAIL = "failed"


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome for one message; ``decision`` names the archive decision, ``detail`` explains."""

    outcome: Outcome
    decision: str
    detail: str


def decide(
    dead_letter: DeadLetter, plan: EntityPlan, policy: Policy, max_redrives: int, now: datetime
) -> Decision:
    """What to do with ``dead_letter`` from ``plan``'s dead-letter queue (size is checked on the copy)."""
    if dead_letter.body is None:
        return Decision(Outcome.LEAVE, "leave", f"unsupported body type {dead_letter.body_type}")
    classification = classify(
        policy, dead_letter.dead_letter_reason, exception_type_of(dead_letter.application_properties)
    )
    if classification.action is Action.LEAVE:
        return Decision(Outcome.LEAVE, "leave", classification.rule)
    if classification.action is Action.ARCHIVE:
        return Decision(Outcome.ARCHIVE, "archive", classification.rule)
    target = plan.target
    if target is None:
        outcome = Outcome.ARCHIVE if policy.no_private_target is Action.ARCHIVE else Outcome.LEAVE
        return Decision(outcome, "no-private-target", plan.no_target_reason or "no target queue")
    if redrive_limit_reached(dead_letter, max_redrives):
        return Decision(
            Outcome.ARCHIVE,
            "redrive-limit",
            f"re-driven {dead_letter.redrive_count} times (max {max_redrives})",
        )
    if target.requires_session and dead_letter.session_id is None:
        return Decision(Outcome.ARCHIVE, "no-session-id", f"{target.name} requires sessions")
    window_end = duplicate_window_end(dead_letter, target, now)
    if window_end is not None:
        detail = f"MessageId inside {target.name}'s duplicate-detection window until {window_end.isoformat()}"
        if policy.duplicate_window is Action.ARCHIVE:
            return Decision(Outcome.ARCHIVE, "duplicate-window", detail)
        return Decision(Outcome.HOLD, "duplicate-window", detail)
    return Decision(Outcome.REDRIVE, "redrive", classification.rule)
