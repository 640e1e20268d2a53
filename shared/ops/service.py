"""The operations console's API: entities and their counts, failure groups, one message, retry and
archive, and what the archive holds. HTTP-independent (``ApiRequest`` in, ``ApiResponse`` out).

Everything is read through the management plane (counts) and by peek (messages), so looking changes
nothing. Retry and archive run :func:`shared.redrive.job.run_redrive` (the timer's code: same guards,
same archive) limited to the selected messages, with the operator's action instead of the policy's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from urllib.parse import unquote

from pydantic import BaseModel, Field

from shared.api import (
    ApiError,
    ApiRequest,
    ApiResponse,
    Misconfigured,
    NotFound,
    ValidationFailed,
    parse_body,
)
from shared.management import ManagementClient, SettingsError
from shared.monitoring.table import MonitoringTable
from shared.monitoring.view import DEFAULT_MINUTES, MAX_MINUTES
from shared.ops.archive_view import archive_view
from shared.ops.dead_letters import peek_failures, peek_one
from shared.ops.entities_view import entities_view
from shared.ops.entity_sections import AppEntities
from shared.ops.failures import FailureGroup, group_failures
from shared.ops.message_view import message_view
from shared.ops.monitoring import endpoints_now, monitoring
from shared.redrive.entities import EntityPlan, EntityRef
from shared.redrive.job import RunInProgress, run_redrive
from shared.redrive.policy import Action
from shared.redrive.received import from_received
from shared.redrive.settings import RedriveSettings
from shared.redrive.targets import discover

if TYPE_CHECKING:
    from shared.amqp.connection import Namespace

DEFAULT_PAGE = 50
MAX_PAGE = 500


class RunConflict(ApiError):
    status = 409
    code = "RunInProgress"


class Selection(BaseModel):
    """What to retry or archive: a whole failure group, or messages of one entity."""

    group_id: str | None = Field(default=None, alias="groupId")
    entity: str | None = None
    sequence_numbers: list[int] = Field(default_factory=list, alias="sequenceNumbers")

    model_config = {"populate_by_name": True, "extra": "forbid"}


class OpsService:
    """One console request's worth of work against the app's namespace and archive."""

    def __init__(
        self,
        env: Mapping[str, str],
        management: Callable[[], ManagementClient],
        namespace: Callable[[], Namespace],
    ) -> None:
        self.env = env
        self._management = management
        self._namespace = namespace
        try:
            self.settings = RedriveSettings.from_env(env)
        except (SettingsError, ValueError) as error:
            raise Misconfigured("the re-drive / archive settings are invalid", [str(error)]) from None

    # ------------------------------------------------------------------------------------------ reads

    def _plans(self) -> list[EntityPlan]:
        try:
            return discover(self._management(), self.settings.entities).plans
        except SettingsError as error:
            raise Misconfigured("the management settings are incomplete", [str(error)]) from None

    def entities(self, request: ApiRequest, app: AppEntities) -> ApiResponse:
        """Every queue, topic and subscription with its message counts by kind: ``app``'s endpoints first,
        Busbar's infrastructure and foreign entities apart (:mod:`shared.ops.entities_view`)."""
        management = self._management()
        scope = management.scope
        queues = list(management.queues.list_by_namespace(*scope))
        topics = [
            (topic, list(management.subscriptions.list_by_topic(*scope, topic.name)))
            for topic in management.topics.list_by_namespace(*scope)
        ]
        return ApiResponse(200, entities_view(queues, topics, app))

    def monitoring(
        self, request: ApiRequest, app: AppEntities, table: Callable[[], MonitoringTable]
    ) -> ApiResponse:
        """Per endpoint over the last ``minutes`` minutes (default 15): throughput, retries, dead letters,
        processing and critical time, and the queue now and per minute (:mod:`shared.ops.monitoring`)."""
        minutes = _int(request.query, "minutes", DEFAULT_MINUTES, MAX_MINUTES)
        if minutes < 1:
            raise ValidationFailed(f"'minutes' must be 1..{MAX_MINUTES}, got {minutes}")
        entities = self.entities(request, app).body
        assert isinstance(entities, dict)
        body = monitoring(endpoints_now(entities), table, datetime.now(UTC), minutes)
        return ApiResponse(200, body)

    def _groups(self) -> tuple[list[FailureGroup], dict[str, str], int]:
        # The transfer dead-letter queues (failed send-via transfers) are left to the timer: their counts
        # show in the entities view, their messages are not grouped here.
        plans = [p for p in self._plans() if p.dead_letter_count != 0 and not p.transfer]
        failures, errors = peek_failures(self._namespace(), plans)
        return group_failures(failures, self.settings.policy), errors, len(failures)

    def failures(self, request: ApiRequest) -> ApiResponse:
        """Failure groups (largest first), paged with ``skip`` / ``top``."""
        skip = _int(request.query, "skip", 0, None)
        top = _int(request.query, "top", DEFAULT_PAGE, MAX_PAGE)
        groups, errors, total = self._groups()
        body = {
            "total": total,
            "groupCount": len(groups),
            "skip": skip,
            "top": top,
            "groups": [g.to_dict() for g in groups[skip : skip + top]],
            "errors": errors,
        }
        return ApiResponse(200, body)

    def failure(self, request: ApiRequest) -> ApiResponse:
        """One dead-lettered message (by entity path and sequence number)."""
        params = request.route_params
        if "subscription" in params:
            path = EntityRef.subscription(params.get("topic", ""), params["subscription"]).path
        else:
            path = unquote(params.get("entity", ""))
        try:
            source = EntityRef.parse(path)
        except ValueError as error:
            raise ValidationFailed(str(error)) from None
        number = _int(request.route_params, "sequenceNumber", 0, None)
        message = peek_one(self._namespace(), source, number)
        if message is None:
            raise NotFound(f"no dead-lettered message {number} in {source.path}")
        return ApiResponse(200, message_view(from_received(message, source)))

    def archive(self, request: ApiRequest) -> ApiResponse:
        """What the archive holds, by day, endpoint and reason, with the replay command lines."""
        return ApiResponse(
            200, archive_view(self.settings.archive_url, self.settings.archive_storage_options, self.env)
        )

    # ------------------------------------------------------------------------------------------ actions

    def retry(self, request: ApiRequest) -> ApiResponse:
        return self._act(request, Action.REDRIVE)

    def archive_messages(self, request: ApiRequest) -> ApiResponse:
        return self._act(request, Action.ARCHIVE)

    def _selection(self, choice: Selection) -> dict[str, frozenset[int]]:
        if choice.group_id:
            groups, _, _ = self._groups()
            group = next((g for g in groups if g.key.id == choice.group_id), None)
            if group is None:
                # Already handled (a repeated request) or never existed: nothing to do, said plainly.
                return {}
            return {path.lower(): frozenset(numbers) for path, numbers in group.entities.items()}
        if choice.entity and choice.sequence_numbers:
            try:
                path = EntityRef.parse(choice.entity).path
            except ValueError as error:
                raise ValidationFailed(str(error)) from None
            return {path.lower(): frozenset(choice.sequence_numbers)}
        raise ValidationFailed("give either groupId, or entity with sequenceNumbers")

    def _act(self, request: ApiRequest, action: Action) -> ApiResponse:
        choice = parse_body(Selection, request.body)
        selection = self._selection(choice)
        selected = sum(len(v) for v in selection.values())
        if not selection:
            return ApiResponse(200, {"action": action.value, "selected": 0, "summary": None})
        try:
            summary = run_redrive(self.env, selection=selection, operator_action=action)
        except RunInProgress as busy:
            raise RunConflict(
                f"a re-drive run is in progress ({busy.run_id}); try again when it is done",
                runId=busy.run_id,
            ) from None
        except SettingsError as error:
            raise Misconfigured("the management settings are incomplete", [str(error)]) from None
        return ApiResponse(200, {"action": action.value, "selected": selected, "summary": summary.to_dict()})


def _int(values: Mapping[str, str], name: str, default: int, high: int | None) -> int:
    text = values.get(name)
    if text is None or text == "":
        return default
    if not text.isdigit() or (high is not None and int(text) > high):
        limit = f"0..{high}" if high is not None else "a non-negative integer"
        raise ValidationFailed(f"'{name}' must be {limit}, got {json.dumps(text)}")
    return int(text)


__all__ = ["OpsService", "RunConflict", "Selection"]
