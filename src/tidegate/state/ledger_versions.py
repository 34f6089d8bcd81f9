"""Ledger tables of versions, active versions and the history of deploys, shared by both
stores."""

from __future__ import annotations

from typing import Any

from tidegate.domain.model import Version
from tidegate.state.base import Event, ModelState
from tidegate.state.codec import (
    event_from_row,
    event_params,
    model_state_from_row,
    version_from_row,
    version_row,
)
from tidegate.state.ledger_tables import LedgerTables

INSERT_VERSION = (
    "INSERT INTO versions (version_id, model, seq, fingerprint, sql_text, spec, upstream, "
    "git_commit, git_dirty, tool_versions, change, created_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (model, fingerprint) DO NOTHING"
)


class VersionTables(LedgerTables):
    def save_version(self, version: Version) -> Version:
        with self._tx() as con:
            # a concurrent save of the same (model, fingerprint) waits for the first, then
            # stores nothing and reads the first one's version
            if con.execute(INSERT_VERSION, version_row(version)).rowcount == 1:
                return version
            existing = con.execute(
                "SELECT * FROM versions WHERE model = ? AND fingerprint = ?",
                (version.model, version.fingerprint),
            ).fetchone()
        return version_from_row(existing)

    def find_version(self, model: str, fingerprint: str) -> Version | None:
        row = self._one(
            "SELECT * FROM versions WHERE model = ? AND fingerprint = ?", (model, fingerprint)
        )
        return version_from_row(row) if row else None

    def get_version(self, version_id: str) -> Version | None:
        row = self._one("SELECT * FROM versions WHERE version_id = ?", (version_id,))
        return version_from_row(row) if row else None

    def resolve_version(self, model: str, ref: str) -> Version | None:
        if ref[:1] in ("v", "V") and ref[1:].isdigit():
            row = self._one(
                "SELECT * FROM versions WHERE model = ? AND seq = ?", (model, int(ref[1:]))
            )
            return version_from_row(row) if row else None
        rows = self._all(
            "SELECT * FROM versions WHERE model = ? AND substr(version_id, 1, ?) = ? LIMIT 2",
            (model, len(ref), ref),
        )
        return version_from_row(rows[0]) if len(rows) == 1 else None

    def active_version(self, model: str) -> Version | None:
        row = self._one(
            "SELECT versions.* FROM model_state JOIN versions "
            "ON versions.version_id = model_state.active_version WHERE model_state.model = ?",
            (model,),
        )
        return version_from_row(row) if row else None

    def versions(self, model: str) -> list[Version]:
        rows = self._all("SELECT * FROM versions WHERE model = ? ORDER BY seq", (model,))
        return [version_from_row(r) for r in rows]

    def next_seq(self, model: str) -> int:
        row = self._one("SELECT coalesce(max(seq), 0) + 1 FROM versions WHERE model = ?", (model,))
        return int(row[0]) if row else 1

    # deploys and history -------------------------------------------------------------------
    def model_state(self, model: str) -> ModelState | None:
        row = self._one("SELECT * FROM model_state WHERE model = ?", (model,))
        return model_state_from_row(row) if row else None

    def model_states(self) -> list[ModelState]:
        rows = self._all("SELECT * FROM model_state ORDER BY model")
        return [model_state_from_row(r) for r in rows]

    def activate(self, model: str, version_id: str, at: str, event: Event) -> None:
        with self._tx() as con:
            con.execute(
                "INSERT INTO model_state (model, active_version, deployed_at, deploy_mark) "
                "VALUES (?, ?, ?, (SELECT coalesce(max(rowid), 0) FROM attempts)) "
                "ON CONFLICT (model) DO UPDATE SET previous_version = CASE "
                "WHEN model_state.active_version = excluded.active_version "
                "THEN model_state.previous_version ELSE model_state.active_version END, "
                "active_version = excluded.active_version, deployed_at = excluded.deployed_at, "
                "deploy_mark = excluded.deploy_mark",
                (model, version_id, at),
            )
            insert_event(con, event)

    def set_paused(self, model: str, paused: bool, event: Event) -> None:
        with self._tx() as con:
            con.execute(
                "INSERT INTO model_state (model, paused) VALUES (?, ?) "
                "ON CONFLICT (model) DO UPDATE SET paused = excluded.paused",
                (model, int(paused)),
            )
            insert_event(con, event)

    def confirming_run(self, model: str) -> str | None:
        row = self._one(
            "SELECT attempts.run_id FROM model_state JOIN attempts "
            "ON attempts.model = model_state.model "
            "AND attempts.version_id = model_state.active_version "
            "AND attempts.rowid > coalesce(model_state.deploy_mark, 0) "
            "WHERE model_state.model = ? AND attempts.state = 'published' "
            "ORDER BY attempts.rowid LIMIT 1",
            (model,),
        )
        return str(row[0]) if row else None

    def record_event(self, event: Event) -> None:
        with self._tx() as con:
            insert_event(con, event)

    def events(self, model: str) -> list[Event]:
        rows = self._all("SELECT * FROM events WHERE model = ? ORDER BY event_id", (model,))
        return [event_from_row(r) for r in rows]


def insert_event(con: Any, event: Event) -> None:
    """One event, in the transaction of `con`."""
    con.execute(
        "INSERT INTO events (model, kind, version_id, run_id, actor, reason, at, detail) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        event_params(event),
    )
