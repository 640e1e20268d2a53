"""Durable message and entity store on SQLite (standard library).

WAL journal with ``synchronous=NORMAL``: a committed transaction survives the emulator process being
killed (``kill -9``), which is the durability the emulator promises; it does not promise survival of a
power cut. The broker commits before it acknowledges a send, so every send the SDK saw succeed is here.
Locks are deliberately not stored: after a restart a message that was locked is available again.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from emulator.broker.message import StoredMessage

_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    entity TEXT NOT NULL,
    seq INTEGER NOT NULL,
    enqueued_ms INTEGER NOT NULL,
    expires_ms INTEGER,
    delivery_count INTEGER NOT NULL,
    state INTEGER NOT NULL,
    scheduled_ms INTEGER,
    dead_letter_source TEXT,
    blob BLOB NOT NULL,
    PRIMARY KEY (entity, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sequences (
    entity TEXT PRIMARY KEY,
    last_seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS session_states (
    entity TEXT NOT NULL,
    session_id TEXT NOT NULL,
    state BLOB,
    updated_ms INTEGER NOT NULL,
    PRIMARY KEY (entity, session_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS duplicate_history (
    entity TEXT NOT NULL,
    message_id TEXT NOT NULL,
    expires_ms INTEGER NOT NULL,
    PRIMARY KEY (entity, message_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS entities (
    path TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    origin TEXT NOT NULL,
    definition TEXT NOT NULL
);
-- Entity names are case-insensitive: rows are found by lower(path), which without this index is a scan of
-- the whole table per entity saved, i.e. quadratic start-up in the number of entities.
CREATE INDEX IF NOT EXISTS entities_by_name ON entities (lower(path));
"""

Row = tuple[int, int, int | None, int, int, int | None, str | None, bytes]


class Store:
    """All persistent state of one emulator namespace."""

    def __init__(self, path: Path | None) -> None:
        target = ":memory:" if path is None else str(path)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(target, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._depth = 0
        self._on_rollback: list[Callable[[], None]] = []

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group writes into one commit; nested uses join the outer transaction."""
        if self._depth == 0:
            self._db.execute("BEGIN")
        self._depth += 1
        try:
            yield
        except BaseException:
            self._depth -= 1
            if self._depth == 0:
                self._db.execute("ROLLBACK")
                self._undo_in_memory()
            raise
        self._depth -= 1
        if self._depth == 0:
            try:
                self._db.execute("COMMIT")
            except BaseException:
                self._undo_in_memory()
                raise
            self._on_rollback.clear()

    def on_rollback(self, undo: Callable[[], None]) -> None:
        """Run ``undo`` if the current transaction rolls back: in-memory state the broker changed with the
        transaction's writes goes back with them (a message id remembered for duplicate detection, above
        all, which would otherwise drop the sender's retry of a send that was never accepted)."""
        if self._depth > 0:
            self._on_rollback.append(undo)

    def _undo_in_memory(self) -> None:
        undo, self._on_rollback = self._on_rollback, []
        for step in reversed(undo):
            step()

    # ------------------------------------------------------------------------------------------ messages

    def insert(self, entity: str, messages: Iterable[StoredMessage]) -> None:
        rows = [
            (
                entity,
                m.sequence_number,
                m.enqueued_ms,
                m.expires_ms,
                m.delivery_count,
                int(m.state),
                m.scheduled_ms,
                m.dead_letter_source,
                m.encode_for_store(),
            )
            for m in messages
        ]
        self._db.executemany("INSERT OR REPLACE INTO messages VALUES (?,?,?,?,?,?,?,?,?)", rows)

    def delete(self, entity: str, sequence_numbers: Iterable[int]) -> None:
        self._db.executemany(
            "DELETE FROM messages WHERE entity=? AND seq=?", [(entity, s) for s in sequence_numbers]
        )

    def update_state(self, entity: str, message: StoredMessage) -> None:
        self._db.execute(
            "UPDATE messages SET delivery_count=?, state=? WHERE entity=? AND seq=?",
            (message.delivery_count, int(message.state), entity, message.sequence_number),
        )

    def load(self, entity: str) -> Iterator[Row]:
        cursor = self._db.execute(
            "SELECT seq, enqueued_ms, expires_ms, delivery_count, state, scheduled_ms, dead_letter_source, "
            "blob FROM messages WHERE entity=? ORDER BY seq",
            (entity,),
        )
        yield from cursor

    def drop_entity_messages(self, entity: str) -> None:
        for table in ("messages", "sequences", "session_states", "duplicate_history"):
            self._db.execute(f"DELETE FROM {table} WHERE entity=?", (entity,))

    def save_sequence(self, entity: str, last_seq: int) -> None:
        self._db.execute("INSERT OR REPLACE INTO sequences VALUES (?,?)", (entity, last_seq))

    def last_sequence(self, entity: str) -> int:
        row = self._db.execute("SELECT last_seq FROM sequences WHERE entity=?", (entity,)).fetchone()
        stored = int(row[0]) if row else 0
        top = self._db.execute("SELECT MAX(seq) FROM messages WHERE entity=?", (entity,)).fetchone()
        return max(stored, int(top[0] or 0))

    # ------------------------------------------------------------------------------------------ sessions

    def save_session_state(self, entity: str, session_id: str, state: bytes | None, updated_ms: int) -> None:
        if state is None:
            self._db.execute(
                "DELETE FROM session_states WHERE entity=? AND session_id=?", (entity, session_id)
            )
        else:
            self._db.execute(
                "INSERT OR REPLACE INTO session_states VALUES (?,?,?,?)",
                (entity, session_id, state, updated_ms),
            )

    def session_states(self, entity: str) -> list[tuple[str, bytes, int]]:
        return list(
            self._db.execute(
                "SELECT session_id, state, updated_ms FROM session_states WHERE entity=?", (entity,)
            )
        )

    # ------------------------------------------------------------------------------------------ duplicates

    def remember_message_ids(self, entity: str, entries: list[tuple[str, int]]) -> None:
        self._db.executemany(
            "INSERT OR REPLACE INTO duplicate_history VALUES (?,?,?)", [(entity, m, e) for m, e in entries]
        )

    def forget_message_ids(self, entity: str, before_ms: int) -> None:
        self._db.execute(
            "DELETE FROM duplicate_history WHERE entity=? AND expires_ms<=?", (entity, before_ms)
        )

    def message_ids(self, entity: str) -> list[tuple[str, int]]:
        return list(
            self._db.execute("SELECT message_id, expires_ms FROM duplicate_history WHERE entity=?", (entity,))
        )

    # ------------------------------------------------------------------------------------------ entities

    def save_entity(self, path: str, kind: str, origin: str, definition: str) -> None:
        self.delete_entity(path)  # names are case-insensitive: one row per entity whatever its casing
        self._db.execute("INSERT INTO entities VALUES (?,?,?,?)", (path, kind, origin, definition))

    def delete_entity(self, path: str) -> None:
        self._db.execute("DELETE FROM entities WHERE lower(path)=lower(?)", (path,))

    def entities(self) -> list[tuple[str, str, str, str]]:
        return list(self._db.execute("SELECT path, kind, origin, definition FROM entities ORDER BY path"))
