"""The shipped topology, fused: anti-spam filter, edge router and tokenizer inside the
ingress replica, three deployments fewer than the chain, every stage still reported and
every route answered. (The chain, each stage a deployment of its own, is the real-vLLM
tier's observability graph and the reliability drills' replica-loss and bounded-queue
graphs; the fused graph's duplicate and rate-limit refusals: test_edge_tier's strict graph.)"""

from ray import serve


def test_fused_graph_runs_seven_deployments_and_reports_every_stage(app):
    deployments = set(serve.status().applications["fake-main"].deployments)
    assert deployments == {
        "Ingress",
        "RateLimiter",
        "ModelReplica",
        "Breaker",
        "ReviewQueue",
        "CanaryController",
        "Retrainer",
    }
    nodes = app.get("/healthz").json()["nodes"]
    assert set(nodes) == {
        "ingress",
        "antispam",
        "edge_router",
        "tokenizer",
        "rate_limiter",
        "model",
        "review_queue",
        "canary_controller",
        "retrainer",
    }
    assert set(nodes.values()) == {"ok"}


def test_fused_graph_answers_every_route(app):
    def send(text: str):
        return app.post("/v1/classify", json={"text": text, "user_id": "topology"})

    assert send("I forgot my password, how do I reset it?").json()["route"] == "template"
    first = send("the zipper of my new jacket broke after one day")
    assert first.status_code == 200 and first.json()["route"] == "model"
    assert send("the zipper of my new jacket broke after one day").json()["route"] == "cache"
    spam = send("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
    assert spam.status_code == 422 and "repeated_chars" in spam.json()["error"]["message"]
    tokenized = send("my parcel arrived wet and the box was torn open")
    assert tokenized.status_code == 200 and tokenized.json()["route"] in ("model", "edge_model")
