"""The console's view of held keys: every ordered endpoint's keys held by a dead-lettered blocker.

For each ordered endpoint of the app's catalog: its queue and each held key's row (the blocking message's
id and sequence number, the reason, since when, how many later messages are parked behind it and whether it
is being released). The blocker itself is in the failure groups (the endpoint queue's dead-letter queue, or
its hold queue's when a parked message failed during a release): retrying it or archiving it there resolves
the key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from shared.api.protocol import Misconfigured
from shared.entity_paths import endpoint_queue_path
from shared.handlers.endpoints import Endpoint
from shared.ordering.held_keys import HeldKeys
from shared.storage_tables import StorageNotConfigured


def held_keys_view(
    endpoints: Iterable[Endpoint], env: Mapping[str, str], store: Callable[[], HeldKeys]
) -> dict[str, Any]:
    """``{"endpoints": [{"endpoint", "queue", "heldKeys": [...]}], "total": n}`` for the ordered ones."""
    ordered = [e for e in endpoints if e.ordered]
    try:
        keys = store() if ordered else None
    except StorageNotConfigured as error:
        raise Misconfigured(
            "the held keys live in Table Storage, which is not configured", [str(error)]
        ) from None
    views = []
    for endpoint in ordered:
        assert keys is not None
        queue = endpoint_queue_path(endpoint, env)
        held = sorted(keys.of_queue(queue), key=lambda row: row.since)
        views.append({"endpoint": endpoint.name, "queue": queue, "heldKeys": [row.to_dict() for row in held]})
    return {"endpoints": views, "total": sum(len(v["heldKeys"]) for v in views)}
