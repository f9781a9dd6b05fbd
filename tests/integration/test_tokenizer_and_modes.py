"""The tokenizer in front of the real engine (its fallback and version lock are
tests/graph/test_tokenizer.py; the generate engine mode is tested on the KV-cache graph,
tests/integration/test_kv_cache.py)."""

from tests.harness import ADMIN_TOKEN


def tokenizer_counts(app) -> dict[str, int]:
    return app.get("/admin/state", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).json()["tokenizer"]


def test_tokenizer_counts_tokenized_requests(app):
    before = tokenizer_counts(app)
    r = app.post("/v1/classify", json={"text": "my refund for the blue jacket please", "tenant": "tokenizer-test"})
    assert r.status_code == 200 and r.json()["route"] == "model", r.text
    counts = tokenizer_counts(app)
    assert counts["tokenized"] == before["tokenized"] + 1
    assert counts["max_tokens"] == 512  # min(2048 configured, the model's 512 positions)
