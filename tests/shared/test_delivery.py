"""One delivery observed once (shared.delivery): the settlement it made is its outcome, nothing settled is
``failed``, a dead-lettering keeps its reason, and the critical time runs from the broker's enqueued time,
read as UTC when naive and never negative. The span and the console's monitoring both read this one
observation, so what is pinned here is what both report."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared.delivery import ObservedSettlement, Outcome, critical_seconds

pytestmark = pytest.mark.timeout(10)

T0 = datetime(2026, 11, 29, 2, 15, 30, tzinfo=UTC)


class RecordedSettlement:
    """The trigger's actions object as far as the observation sees it: which call it got, with what."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, tuple[str | None, ...]]] = []

    def complete(self, message: Any) -> None:
        self.calls.append(("complete", message, ()))

    def abandon(self, message: Any) -> None:
        self.calls.append(("abandon", message, ()))

    def deadletter(
        self,
        message: Any,
        deadletter_reason: str | None = None,
        deadletter_error_description: str | None = None,
    ) -> None:
        self.calls.append(("deadletter", message, (deadletter_reason, deadletter_error_description)))


@pytest.mark.parametrize(
    ("settle", "outcome"),
    [("complete", Outcome.HANDLED), ("abandon", Outcome.RETRIED), ("deadletter", Outcome.DEAD_LETTERED)],
)
def test_each_settlement_goes_through_to_the_trigger_and_is_the_deliverys_outcome(
    settle: str, outcome: Outcome
) -> None:
    actions = RecordedSettlement()
    observed = ObservedSettlement(actions, None)
    getattr(observed, settle)("message-1")
    assert [(name, message) for name, message, _ in actions.calls] == [(settle, "message-1")]
    assert observed.observation().outcome is outcome


def test_a_delivery_nothing_settled_is_failed() -> None:
    observation = ObservedSettlement(RecordedSettlement(), None).observation()
    assert (observation.outcome, observation.dead_lettering, observation.critical_seconds) == (
        Outcome.FAILED,
        None,
        None,
    )
    assert observation.seconds >= 0


def test_a_dead_lettering_keeps_its_reason_and_description_and_passes_them_on() -> None:
    actions = RecordedSettlement()
    observed = ObservedSettlement(actions, None)
    observed.deadletter("m", deadletter_reason="PayloadValidationFailed", deadletter_error_description="bad")
    assert actions.calls == [("deadletter", "m", ("PayloadValidationFailed", "bad"))]
    dead = observed.observation().dead_lettering
    assert dead is not None and (dead.reason, dead.description) == ("PayloadValidationFailed", "bad")


def test_the_outcomes_are_the_span_attributes_values() -> None:
    # busbar.outcome on the process span and the metrics, as dashboards and tests/functions read them.
    assert [o.value for o in Outcome] == ["handled", "retried", "dead_lettered", "failed"]


def test_the_critical_time_runs_from_the_enqueued_time_read_as_utc_when_naive_and_never_negative() -> None:
    assert critical_seconds(T0 - timedelta(seconds=3), T0) == 3.0
    assert critical_seconds((T0 - timedelta(seconds=2)).replace(tzinfo=None), T0) == 2.0
    assert critical_seconds(T0 + timedelta(seconds=5), T0) == 0.0  # the broker's clock ran ahead
    assert critical_seconds(None, T0) is None
