"""The tokenizer in front of the real engine (its fallback and version lock are
tests/graph/test_tokenizer.py; the generate engine mode is tested on the KV-cache graph,
tests/integration/test_kv_cache.py)."""

from ray import serve


def test_tokenizer_counts_tokenized_requests(app):
    stats_before = serve.get_deployment_handle("Tokenizer", "main").stats.remote().result()
    r = app.post("/v1/classify", json={"text": "my refund for the blue jacket please", "tenant": "tokenizer-test"})
    assert r.status_code == 200 and r.json()["route"] == "model", r.text
    stats = serve.get_deployment_handle("Tokenizer", "main").stats.remote().result()
    assert stats["tokenized"] == stats_before["tokenized"] + 1
    assert stats["max_tokens"] == 512  # min(2048 configured, MiniLM's 512 positions)
