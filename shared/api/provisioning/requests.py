"""Bodies of the provisioning API's requests: pydantic models with camelCase JSON names (every validation
problem is reported at once by :func:`shared.api.parse_body`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from shared.topology import TopicRoutingMode


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class EventSubscription(_Model):
    """One subscribed event, optionally on an explicit topic (and routing mode), optionally filtered by its
    content: ``filter`` is SQL over promoted and system properties (``"amount >= 1000"``) or a correlation
    filter, promoted properties to the values they must equal (``{"region": "emea"}``)."""

    type: str = Field(min_length=1)
    topic: str | None = Field(default=None, min_length=1)
    routing_mode: TopicRoutingMode | None = None
    filter: str | dict[str, str | int | float | bool] | None = None


class QueueSettings(_Model):
    """Properties of the endpoint's input queue when this request creates it (an existing queue is
    adopted as it is). Unset fields come from the ``BUSBAR_ENTITY_*`` settings."""

    lock_duration_seconds: int | None = Field(default=None, ge=5, le=300)
    max_delivery_count: int | None = Field(default=None, ge=1)
    max_size_in_megabytes: int | None = Field(default=None, ge=1)


class SubscriptionsRequest(_Model):
    """Body of ``PUT /api/endpoints/{endpoint}/subscriptions``."""

    events: list[str | EventSubscription]
    dry_run: bool = False
    queue: QueueSettings | None = None
    move_from: str | None = Field(default=None, min_length=1)
    """The endpoint's previous input queue: its subscriptions (of the same name) are redirected to the
    endpoint's queue in place (see ``shared.topology.desired.desired_state``'s ``moved_from``)."""

    def unmapped_event_types(self) -> list[str]:
        """The event types named without an explicit topic: those must be known contracts."""
        return [
            item if isinstance(item, str) else item.type
            for item in self.events
            if isinstance(item, str) or item.topic is None
        ]

    def entries(self) -> list[str | dict[str, Any]]:
        """The events in the topology library's request shape."""
        out: list[str | dict[str, Any]] = []
        for item in self.events:
            if isinstance(item, str):
                out.append(item)
            else:
                entry: dict[str, Any] = {"type": item.type}
                if item.topic is not None:
                    entry["topic"] = item.topic
                if item.routing_mode is not None:
                    entry["routingMode"] = str(item.routing_mode)
                if item.filter is not None:
                    entry["filter"] = item.filter
                out.append(entry)
        return out

    def event_types(self) -> list[str]:
        return [item if isinstance(item, str) else item.type for item in self.events]
