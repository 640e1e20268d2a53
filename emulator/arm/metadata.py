"""What ARM reports about an entity that the broker does not keep: creation and update times, and the
partitioning / express flags (accepted, reported and kept immutable, but without effect on the broker).

Kept per entity path in ``arm-metadata.json`` next to the broker's store when the emulator has a data
directory (written atomically after every change), in memory otherwise. Entities the management plane
has not seen (config-file entities, or entities from before the file existed) report the emulator's start
time and no partitioning.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from emulator.arm.models import Extras

log = logging.getLogger("emulator.arm")

FILE_NAME = "arm-metadata.json"


@dataclass(frozen=True, slots=True)
class EntityMeta:
    created_at: datetime
    updated_at: datetime
    extras: Extras


def utc_now() -> datetime:
    return datetime.now(UTC)


class Metadata:
    """Entity metadata keyed by entity path (case-insensitive)."""

    def __init__(self, directory: Path | None, clock: Callable[[], datetime] = utc_now) -> None:
        self._clock = clock
        self.started_at = clock()
        self._path = None if directory is None else directory / FILE_NAME
        self._entries: dict[str, EntityMeta] = self._load()

    def get(self, path: str) -> EntityMeta:
        found = self._entries.get(path.lower())
        return found or EntityMeta(self.started_at, self.started_at, Extras())

    def record(self, path: str, extras: Extras, created: bool) -> EntityMeta:
        """Note that ``path`` was just created (or updated) with ``extras``."""
        now = self._clock()
        before = self.get(path)
        entry = EntityMeta(now if created else before.created_at, now, extras)
        self._entries[path.lower()] = entry
        self._save()
        return entry

    def forget(self, path: str, with_children: bool = False) -> None:
        key = path.lower()
        prefix = key + "/"
        doomed = [k for k in self._entries if k == key or (with_children and k.startswith(prefix))]
        for k in doomed:
            del self._entries[k]
        if doomed:
            self._save()

    # ------------------------------------------------------------------------------------------ file

    def _load(self) -> dict[str, EntityMeta]:
        if self._path is None or not self._path.exists():
            return {}
        try:
            raw = json.loads(self._path.read_text(encoding="utf-8"))
            return {
                key: EntityMeta(
                    datetime.fromisoformat(item["createdAt"]),
                    datetime.fromisoformat(item["updatedAt"]),
                    Extras(
                        bool(item.get("enablePartitioning")),
                        bool(item.get("enableExpress")),
                        str(item.get("authorizationRules") or ""),
                    ),
                )
                for key, item in raw.items()
            }
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("ignoring unreadable %s: %s", self._path, exc)
            return {}

    def _save(self) -> None:
        if self._path is None:
            return
        document = {
            key: {
                "createdAt": entry.created_at.isoformat(),
                "updatedAt": entry.updated_at.isoformat(),
                "enablePartitioning": entry.extras.enable_partitioning,
                "enableExpress": entry.extras.enable_express,
                "authorizationRules": entry.extras.authorization_rules,
            }
            for key, entry in sorted(self._entries.items())
        }
        self._path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self._path.with_suffix(".tmp")
        temporary.write_text(json.dumps(document, indent=1), encoding="utf-8")
        os.replace(temporary, self._path)
