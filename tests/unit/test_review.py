"""The review queue's SQLite store and the admin token's sources."""

import pytest

from deployments.config import AdminConfig
from deployments.review import ReviewStore


def item(i: int, **kw) -> dict:
    return {
        "request_id": f"r{i}",
        "ticket_id": f"t{i}",
        "tenant": None,
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
    store = ReviewStore(path, clock=lambda: "2026-11-30T00:00:00+00:00")
    assert store.add([item(1), item(2), item(3, lang="ja")]) == [1, 2, 3]
    store.close()

    store = ReviewStore(path)  # a restart of the graph
    assert store.counts() == {"open": 3, "resolved": 0}
    resolved = store.resolve(3, "cancel_order")
    assert resolved["resolved_label"] == "cancel_order" and resolved["label"] == "refund_request"
    assert store.resolve(99, "cancel_order") is None
    assert [i["id"] for i in store.items("open")] == [1, 2]
    assert [i["id"] for i in store.items("resolved")] == [3]
    assert [i["id"] for i in store.items("all", limit=2, offset=1)] == [2, 3]
    assert store.training_rows() == [{"text": "ticket number 3", "label": "cancel_order", "lang": "ja"}]
    assert store.counts() == {"open": 2, "resolved": 1}


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
