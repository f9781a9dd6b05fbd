"""The review queue's SQLite store, its open-items count and the admin token's sources."""

import asyncio
import datetime
import sqlite3

import pytest

from deployments.config_loop import AdminConfig, ReviewConfig
from deployments.nodes.review import ReviewQueue
from deployments.nodes.review_store import ReviewStore


def item(i: int, **kw) -> dict:
    return {
        "request_id": f"r{i}",
        "ticket_id": f"t{i}",
        "tenant": None,
        "user_id": None,
        "text": f"ticket number {i}",
        "lang": "en",
        "label": "refund_request",
        "confidence": 0.31,
        "route": "model",
        "model_version": "v1",
        **kw,
    }


def test_items_survive_reopening_and_resolve_into_training_rows(tmp_path):
    path = tmp_path / "sub" / "review.sqlite3"
    store = ReviewStore(path, clock=lambda: datetime.datetime(2026, 11, 30, tzinfo=datetime.UTC))
    ids = store.add([item(1), item(2), item(3, lang="ja", kind="audit", runners_up=[["cancel_order", 0.2]])])
    assert ids == [1, 2, 3]
    store.close()

    store = ReviewStore(path)  # a restart of the graph
    assert store.counts() == {"open": 3, "resolved": 0, "open_review": 2, "open_audit": 1, "proposed": 0}
    assert [i["runners_up"] for i in store.items("all")] == [[], [], [["cancel_order", 0.2]]]
    resolved = store.resolve(3, "cancel_order")
    assert resolved is not None
    assert resolved["resolved_label"] == "cancel_order" and resolved["label"] == "refund_request"
    assert store.resolve(99, "cancel_order") is None
    assert [i["id"] for i in store.items("open")] == [1, 2]
    assert [i["id"] for i in store.items("resolved")] == [3]
    assert [i["id"] for i in store.items("all", limit=2, offset=1)] == [2, 3]
    assert store.training_rows() == [{"text": "ticket number 3", "label": "cancel_order", "lang": "ja"}]
    assert store.counts() == {"open": 2, "resolved": 1, "open_review": 2, "open_audit": 0, "proposed": 0}


def test_a_proposed_label_holds_its_items_until_accepted_or_rejected(tmp_path):
    now = [datetime.datetime(2026, 12, 1, tzinfo=datetime.UTC)]
    store = ReviewStore(tmp_path / "review.sqlite3", clock=lambda: now[0])
    store.add([item(i) for i in range(1, 6)])
    assert store.propose(99, "gift_cards", "gift cards") is None
    proposed = store.propose(1, "gift_cards", "buying gift cards")
    assert proposed is not None and proposed["proposed_label"] == "gift_cards"
    store.propose(2, "gift_cards", "a second wording: the first one stays")
    store.propose(3, "pets", "pets in the shop")
    assert store.counts() == {"open": 2, "resolved": 0, "open_review": 2, "open_audit": 0, "proposed": 3}
    assert [i["id"] for i in store.items("open")] == [4, 5]
    gift, pets = store.proposals("open")
    assert pets.name == "pets"
    assert (gift.description, gift.items, gift.examples) == (
        "buying gift cards",
        2,
        ("ticket number 1", "ticket number 2"),
    )

    now[0] += datetime.timedelta(hours=1)
    accepted = store.decide("gift_cards", accept=True)
    assert (accepted.status, accepted.decided_at, accepted.items) == ("accepted", "2026-12-01T01:00:00+00:00", 2)
    assert store.decide("gift_cards", accept=False) is None  # decided already
    assert [r["label"] for r in store.training_rows()] == ["gift_cards", "gift_cards"]
    # Filed under an accepted label: resolved at once.
    filed = store.propose(4, "gift_cards", "")
    assert filed is not None and filed["resolved_label"] == "gift_cards"

    rejected = store.decide("pets", accept=False)
    assert (rejected.status, rejected.items) == ("rejected", 0)
    assert [i["id"] for i in store.items("open")] == [3, 5]
    # Proposed again: open again, with its first description.
    store.propose(3, "pets", "other words")
    assert [(p.name, p.status, p.description) for p in store.proposals("open")] == [
        ("pets", "open", "pets in the shop")
    ]
    # Resolved with a served label instead: out of the proposal.
    store.resolve(3, "refund_request")
    assert [p.items for p in store.proposals("open")] == [0]
    assert [p.name for p in store.proposals("accepted")] == ["gift_cards"]


def test_personal_data_is_masked_before_it_is_written(tmp_path):
    path = tmp_path / "review.sqlite3"
    store = ReviewStore(path)
    store.add([item(1, text="refund to joe@example.com, card 4111 1111 1111 1111, order 100000000")])
    store.resolve(1, "refund_request")
    masked = "refund to [email], card [card], order 100000000"
    assert store.items("all")[0]["text"] == masked
    assert store.training_rows()[0]["text"] == masked
    store.close()
    assert b"example.com" not in path.read_bytes() and b"4111" not in path.read_bytes()


def test_erase_deletes_a_tenants_or_a_users_items_only(tmp_path):
    store = ReviewStore(tmp_path / "r.sqlite3")
    store.add([item(1, tenant="acme", user_id="u1"), item(2, tenant="acme", user_id="u2"), item(3, user_id="u1")])
    store.add([item(4, tenant="globex", user_id="u2")])
    assert store.erase(user_id="u1") == 2
    assert [i["id"] for i in store.items("all")] == [2, 4]
    assert store.erase(tenant="acme", user_id="u9") == 0
    assert store.erase(tenant="acme") == 1
    assert [i["id"] for i in store.items("all")] == [4]
    with pytest.raises(ValueError, match="tenant, a user_id or both"):
        store.erase()


def test_items_older_than_the_retention_period_expire(tmp_path):
    now = [datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)]
    store = ReviewStore(tmp_path / "r.sqlite3", clock=lambda: now[0])
    store.add([item(1)])
    now[0] += datetime.timedelta(days=20)
    store.add([item(2)])
    now[0] += datetime.timedelta(days=15)
    assert store.expire(30) == 1
    assert [i["id"] for i in store.items("all")] == [2]
    assert store.expire(30) == 0


def test_a_store_written_before_user_ids_gains_the_column(tmp_path):
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE review (id INTEGER PRIMARY KEY AUTOINCREMENT, created_at TEXT NOT NULL, request_id TEXT "
        "NOT NULL, ticket_id TEXT, tenant TEXT, text TEXT NOT NULL, lang TEXT, label TEXT NOT NULL, confidence "
        "REAL NOT NULL, route TEXT NOT NULL, model_version TEXT NOT NULL, resolved_label TEXT, resolved_at TEXT)"
    )
    db.execute(
        "INSERT INTO review (created_at, request_id, text, label, confidence, route, model_version) "
        "VALUES ('2026-11-30T00:00:00+00:00', 'r0', 'old ticket', 'refund_request', 0.4, 'model', 'v0')"
    )
    db.commit()
    db.close()
    store = ReviewStore(path)
    store.add([item(1, user_id="u1")])
    assert [(i["text"], i["user_id"], i["kind"]) for i in store.items("all")] == [
        ("old ticket", None, "review"),
        ("ticket number 1", "u1", "review"),
    ]


def test_audit_items_are_listed_apart_and_estimate_the_wrong_share(tmp_path):
    store = ReviewStore(tmp_path / "r.sqlite3")
    store.add([item(1), item(2, kind="audit"), item(3, kind="audit"), item(4, kind="audit")])
    assert [i["id"] for i in store.items("all", kind="audit")] == [2, 3, 4]
    assert [i["id"] for i in store.items("all", kind="review")] == [1]
    assert store.audit().checked == 0 and store.audit().wrong_share is None
    store.resolve(2, "refund_request")  # the answer was right
    store.resolve(3, "cancel_order")  # it was wrong
    store.resolve(1, "cancel_order")  # a flagged item: not part of the audit
    estimate = store.audit()
    assert (estimate.checked, estimate.wrong, estimate.wrong_share) == (2, 1, 0.5)
    assert [i["id"] for i in store.items("open", kind="audit")] == [4]


def test_unknown_status_names_the_allowed_ones(tmp_path):
    with pytest.raises(ValueError, match="'closed'.*open, resolved, all"):
        ReviewStore(tmp_path / "r.sqlite3").items("closed")


def test_admin_token_from_config_else_environment(monkeypatch):
    monkeypatch.delenv("TICKETSERVE_ADMIN_TOKEN", raising=False)
    assert AdminConfig().resolved_token() is None  # no token: every admin call is refused
    monkeypatch.setenv("TICKETSERVE_ADMIN_TOKEN", "from-env")
    assert AdminConfig().resolved_token() == "from-env"
    config = AdminConfig(token="from-config")
    assert config.resolved_token() == "from-config"
    assert "from-config" not in repr(config) and "from-config" not in str(config.model_dump())


def test_the_caller_role_is_the_one_whose_token_matches(monkeypatch):
    from deployments.http.admin_auth import caller_role

    monkeypatch.delenv("TICKETSERVE_REVIEWER_TOKEN", raising=False)
    config = AdminConfig(token="admin-secret")
    assert caller_role(config, "Bearer admin-secret") == "admin"
    assert caller_role(config, "Bearer reviewer-secret") is None  # no reviewer token configured
    monkeypatch.setenv("TICKETSERVE_REVIEWER_TOKEN", "reviewer-secret")
    assert caller_role(config, "bearer reviewer-secret") == "reviewer"
    for header in ("admin-secret", "Basic admin-secret", "Bearer", "", "Bearer admin-secret2"):
        assert caller_role(config, header) is None, header


class CountingStore(ReviewStore):
    """Counts its whole-store scans."""

    scans = 0

    def counts(self) -> dict[str, int]:
        self.scans += 1
        return super().counts()


def test_records_move_the_open_counts_without_scanning_the_store(tmp_path):
    stores: list[CountingStore] = []

    def store(path: str) -> CountingStore:
        stores.append(CountingStore(path))
        return stores[-1]

    async def run() -> tuple[dict, int, dict]:
        queue = ReviewQueue(ReviewConfig(store_path=str(tmp_path / "review.sqlite3")), store=store)
        scans = stores[0].scans
        for i in range(4):
            await queue.record([item(i), item(10 + i, kind="audit")][: 1 + i % 2])
        recorded, scanned = dict(queue._open_counts), stores[0].scans - scans
        await queue.resolve(1, "cancel_order")  # any other change counts the store again
        return recorded, scanned, dict(queue._open_counts)

    recorded, scanned, resolved = asyncio.run(run())
    assert recorded == {"review": 4, "audit": 2} and scanned == 0
    assert resolved == {"review": 3, "audit": 2}
    assert stores[0].counts()["open_review"] == 3
