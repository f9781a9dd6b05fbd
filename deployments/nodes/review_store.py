"""The review store: a SQLite file (durable across restarts of the graph, one writer) of
answers the model was unsure of, kept for a person to check. Resolved items export as
training rows (`text,label,lang`) for `python -m models.build`. Personal data in a
ticket's text is masked before it is written (policies/personal_data.py); items older
than the retention period are deleted, and a tenant's or a user's items are erased on
request.

A reviewer who finds no fitting label proposes a new one with the item: the item leaves
the open queue and waits under its proposal; an admin accepts the label (its items
resolve to it, and the next retrain learns it) or rejects it (its items reopen).
"""

from __future__ import annotations

import datetime
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from policies.audit import AuditEstimate, audit_estimate
from policies.personal_data import mask_personal_data

_SCHEMA = """
CREATE TABLE IF NOT EXISTS review (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at TEXT NOT NULL,
    request_id TEXT NOT NULL,
    ticket_id TEXT,
    tenant TEXT,
    user_id TEXT,
    text TEXT NOT NULL,
    lang TEXT,
    label TEXT NOT NULL,
    confidence REAL NOT NULL,
    route TEXT NOT NULL,
    model_version TEXT NOT NULL,
    resolved_label TEXT,
    resolved_at TEXT,
    kind TEXT NOT NULL DEFAULT 'review',
    runners_up TEXT
)
"""
_PROPOSAL_SCHEMA = """
CREATE TABLE IF NOT EXISTS proposal (
    name TEXT PRIMARY KEY,
    description TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at TEXT NOT NULL,
    decided_at TEXT
)
"""
_ADDED_COLUMNS = {
    "user_id": "TEXT",
    "kind": "TEXT NOT NULL DEFAULT 'review'",
    "runners_up": "TEXT",
    "proposed_label": "TEXT",
}
# "review": flagged by the model's confidence; "audit": drawn from the answers nobody flagged.
ItemKind = Literal["review", "audit"]
ITEM_KINDS: tuple[ItemKind, ...] = ("review", "audit")
ProposalStatus = Literal["open", "accepted", "rejected"]
# Open: neither resolved nor waiting under a proposed label.
_OPEN = "resolved_label IS NULL AND proposed_label IS NULL"
PROPOSAL_EXAMPLES = 5
FIELDS = (
    "request_id",
    "ticket_id",
    "tenant",
    "user_id",
    "text",
    "lang",
    "label",
    "confidence",
    "route",
    "model_version",
    "kind",
    "runners_up",
)


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _masked(text: str) -> str:
    return mask_personal_data(text).text


def _stamp(t: datetime.datetime) -> str:
    return t.isoformat(timespec="seconds")


@dataclass(frozen=True)
class Proposal:
    """A label reviewers asked for, with the tickets they filed under it."""

    name: str
    description: str
    status: ProposalStatus
    created_at: str
    decided_at: str | None
    items: int  # filed under it (resolved to it, once accepted)
    examples: tuple[str, ...]  # the first few of those tickets' (masked) texts


def _item(row: sqlite3.Row) -> dict[str, Any]:
    item = dict(row)
    item["runners_up"] = json.loads(item["runners_up"] or "[]")
    return item


class ReviewStore:
    def __init__(
        self,
        path: str | Path,
        clock: Callable[[], datetime.datetime] = utc_now,
        mask: Callable[[str], str] = _masked,
    ):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        # Autocommit: every write is durable at once. The replica builds the store on one
        # thread and serves from its event loop's; its methods are async, so one at a time.
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(_SCHEMA)
        self._db.execute(_PROPOSAL_SCHEMA)
        # A store written before user_id, kind, runners_up and proposals were kept gains
        # the columns (its items have no user, no runners-up, no proposal and are all
        # flagged ones).
        columns = {r["name"] for r in self._db.execute("PRAGMA table_info(review)")}
        for column, declared in _ADDED_COLUMNS.items():
            if column not in columns:
                self._db.execute(f"ALTER TABLE review ADD COLUMN {column} {declared}")
        self._clock = clock
        self._mask = mask

    def add(self, items: list[dict[str, Any]]) -> list[int]:
        now = _stamp(self._clock())
        ids = []
        with self._db:  # one transaction per batch
            for item in items:
                values = [self._mask(item["text"]) if f == "text" else item.get(f) for f in FIELDS]
                values[FIELDS.index("kind")] = item.get("kind", "review")
                values[FIELDS.index("runners_up")] = json.dumps(item.get("runners_up") or [])
                cur = self._db.execute(
                    f"INSERT INTO review (created_at, {', '.join(FIELDS)}) VALUES (?{', ?' * len(FIELDS)})",
                    [now, *values],
                )
                assert cur.lastrowid is not None  # set by every INSERT
                ids.append(cur.lastrowid)
        return ids

    def items(
        self, status: str = "open", limit: int = 50, offset: int = 0, kind: ItemKind | None = None
    ) -> list[dict[str, Any]]:
        """Items by status ("open", "resolved", "all") and, given one, of one kind only."""
        where = {"open": _OPEN, "resolved": "resolved_label IS NOT NULL", "all": "1"}
        if status not in where:
            raise ValueError(f"status={status!r}: one of {', '.join(where)}")
        rows = self._db.execute(
            f"SELECT * FROM review WHERE {where[status]} AND (? IS NULL OR kind = ?) ORDER BY id LIMIT ? OFFSET ?",
            (kind, kind, limit, offset),
        )
        return [_item(r) for r in rows]

    def resolve(self, item_id: int, label: str) -> dict[str, Any] | None:
        """Sets the correct label (taking the item out of any proposal it was filed
        under); None when no item has this id."""
        cur = self._db.execute(
            "UPDATE review SET resolved_label = ?, resolved_at = ?, proposed_label = NULL WHERE id = ?",
            (label, _stamp(self._clock()), item_id),
        )
        if cur.rowcount == 0:
            return None
        return _item(self._db.execute("SELECT * FROM review WHERE id = ?", (item_id,)).fetchone())

    def propose(self, item_id: int, name: str, description: str) -> dict[str, Any] | None:
        """Files the item under the proposed label `name` (a new proposal, or one made
        before: a rejected one is open again); resolves it to `name` where that label was
        accepted already. None when no item has this id."""
        if self._db.execute("SELECT 1 FROM review WHERE id = ?", (item_id,)).fetchone() is None:
            return None
        now = _stamp(self._clock())
        with self._db:
            self._db.execute(
                "INSERT INTO proposal (name, description, status, created_at) VALUES (?, ?, 'open', ?) "
                "ON CONFLICT(name) DO UPDATE SET status = 'open', decided_at = NULL WHERE status = 'rejected'",
                (name, description, now),
            )
            status = self._db.execute("SELECT status FROM proposal WHERE name = ?", (name,)).fetchone()[0]
            if status == "accepted":
                self._db.execute(
                    "UPDATE review SET proposed_label = ?, resolved_label = ?, resolved_at = ? WHERE id = ?",
                    (name, name, now, item_id),
                )
            else:
                self._db.execute("UPDATE review SET proposed_label = ? WHERE id = ?", (name, item_id))
        return _item(self._db.execute("SELECT * FROM review WHERE id = ?", (item_id,)).fetchone())

    def _proposal(self, row: sqlite3.Row) -> Proposal:
        name = row["name"]
        filed = self._db.execute("SELECT COUNT(*) FROM review WHERE proposed_label = ?", (name,)).fetchone()[0]
        examples = self._db.execute(
            "SELECT text FROM review WHERE proposed_label = ? ORDER BY id LIMIT ?", (name, PROPOSAL_EXAMPLES)
        )
        return Proposal(
            name,
            row["description"],
            row["status"],
            row["created_at"],
            row["decided_at"],
            filed,
            tuple(r["text"] for r in examples),
        )

    def proposals(self, status: ProposalStatus | None = None) -> list[Proposal]:
        """Proposed labels, newest first, of one status or all."""
        rows = self._db.execute(
            "SELECT * FROM proposal WHERE ? IS NULL OR status = ? ORDER BY created_at DESC, name", (status, status)
        ).fetchall()
        return [self._proposal(row) for row in rows]

    def decide(self, name: str, accept: bool) -> Proposal | None:
        """Accepts `name` (its waiting items resolve to it) or rejects it (they reopen,
        filed under no proposal). None when no open proposal has this name."""
        now = _stamp(self._clock())
        with self._db:
            cur = self._db.execute(
                "UPDATE proposal SET status = ?, decided_at = ? WHERE name = ? AND status = 'open'",
                ("accepted" if accept else "rejected", now, name),
            )
            if cur.rowcount == 0:
                return None
            if accept:
                self._db.execute(
                    "UPDATE review SET resolved_label = ?, resolved_at = ? "
                    "WHERE proposed_label = ? AND resolved_label IS NULL",
                    (name, now, name),
                )
            else:
                self._db.execute(
                    "UPDATE review SET proposed_label = NULL WHERE proposed_label = ? AND resolved_label IS NULL",
                    (name,),
                )
        return self._proposal(self._db.execute("SELECT * FROM proposal WHERE name = ?", (name,)).fetchone())

    def counts(self) -> dict[str, int]:
        """Open items (all, and of each kind), resolved ones, and those waiting under a
        proposed label."""
        row = self._db.execute(
            f"SELECT COALESCE(SUM({_OPEN}), 0) AS open, COUNT(resolved_label) AS resolved, "
            f"COALESCE(SUM({_OPEN} AND kind = 'review'), 0) AS open_review, "
            f"COALESCE(SUM({_OPEN} AND kind = 'audit'), 0) AS open_audit, "
            "COALESCE(SUM(resolved_label IS NULL AND proposed_label IS NOT NULL), 0) AS proposed FROM review"
        ).fetchone()
        return dict(row)

    def oldest_open(self) -> dict[str, datetime.datetime]:
        """When the oldest open item of each kind that has one was recorded."""
        rows = self._db.execute(f"SELECT kind, MIN(created_at) AS oldest FROM review WHERE {_OPEN} GROUP BY kind")
        return {r["kind"]: datetime.datetime.fromisoformat(r["oldest"]) for r in rows}

    def audit(self) -> AuditEstimate:
        """The share of audited answers that people resolved with another label."""
        row = self._db.execute(
            "SELECT COUNT(resolved_label) AS checked, COALESCE(SUM(resolved_label != label), 0) AS wrong "
            "FROM review WHERE kind = 'audit'"
        ).fetchone()
        return audit_estimate(row["checked"], row["wrong"])

    def training_rows(self) -> list[dict[str, str]]:
        """Resolved items as rows for `models.build` (columns text, label, lang)."""
        rows = self._db.execute(
            "SELECT text, resolved_label, lang FROM review WHERE resolved_label IS NOT NULL ORDER BY id"
        )
        return [{"text": r["text"], "label": r["resolved_label"], "lang": r["lang"] or ""} for r in rows]

    def erase(self, tenant: str | None = None, user_id: str | None = None) -> int:
        """Deletes every item of `tenant`, of `user_id`, or of both together; returns how many."""
        if tenant is None and user_id is None:
            raise ValueError("erase needs a tenant, a user_id or both")
        cur = self._db.execute(
            "DELETE FROM review WHERE (? IS NULL OR tenant = ?) AND (? IS NULL OR user_id = ?)",
            (tenant, tenant, user_id, user_id),
        )
        return cur.rowcount

    def expire(self, retention_days: float) -> int:
        """Deletes the items recorded more than `retention_days` ago; returns how many."""
        cutoff = _stamp(self._clock() - datetime.timedelta(days=retention_days))
        return self._db.execute("DELETE FROM review WHERE created_at < ?", (cutoff,)).rowcount

    def close(self) -> None:
        self._db.close()
