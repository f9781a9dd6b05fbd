"""Micro-batched model calls on a real graph (fake engine, 50 ms a ticket): tickets that
pile up share calls, each caller gets its own ticket's answer, and a ticket that fails in
the replica fails alone (about one in three fails here, on purpose; without retries and
with the edge off, a failed ticket is answered 503 overloaded)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from deployments.config import EDGE_OFF
from loadkit.generators import ticket_bodies
from tests.harness import fake_args, running

APP = "microbatch"
FAILING = 0.3
TOKEN = "test-admin-token-microbatch"


@pytest.fixture(scope="module")
def batched(ray_serve, default_model_dir):
    args = fake_args(
        default_model_dir,
        edge=EDGE_OFF,
        micro_batch={"enabled": True, "max_calls_in_flight": 1, "max_batch_tickets": 16, "max_wait_ms": 200},
        retry={"enabled": False},
        breaker={"enabled": False},
        # Every ticket reaches the model path: no adaptive shedding at the door.
        ingress={"admission": {"enabled": False, "max_limit": 64}},
        admin={"token": TOKEN},
    )
    args["model"]["engine"]["fake_latency_ms"] = 50
    args["model"]["faults"] = {"failure": "unavailable", "rate": FAILING}
    # Failures on purpose are no reason to restart the engine.
    args["model"]["reclaim"] = {"enabled": False}
    with running(ray_serve, APP, args) as client:
        yield client


def classify(client, body: dict) -> dict | None:
    """The answer, or None for the 503 a failed ticket gets."""
    r = client.post("/v1/classify", json={"text": body["text"], "ticket_id": body["ticket_id"]})
    if r.status_code == 503 and r.json()["error"]["code"] == "overloaded":
        return None
    assert r.status_code == 200 and r.json()["route"] == "model", r.text
    return r.json()


def sent(client) -> dict[str, int]:
    """The ingress's own edge stage's counts (the shipped fused topology: one ingress replica here)."""
    return client.get("/admin/state", headers={"Authorization": f"Bearer {TOKEN}"}).json()["edge"]["micro_batched"]


def test_each_caller_gets_its_own_tickets_answer_and_failures_stay_per_ticket(batched):
    bodies = list({b["text"]: b for b in ticket_bodies(400, seed=11)}.values())[:96]
    alone = [classify(batched, b) for b in bodies]  # one at a time: one ticket per call
    before = sent(batched)
    assert before["calls"] == before["tickets"] >= len(bodies)
    with ThreadPoolExecutor(24) as pool:
        together = list(pool.map(lambda b: classify(batched, b), bodies))
    after = sent(batched)
    calls, tickets = after["calls"] - before["calls"], after["tickets"] - before["tickets"]
    assert tickets == len(bodies) and calls < tickets / 1.5, (calls, tickets)  # they piled up and went together

    # The fake engine answers a text the same every time: a mixed-up batch shows as a label
    # that belongs to another ticket.
    both = [(a, t) for a, t in zip(alone, together) if a and t]
    assert len({a["label"] for a, _ in both}) > 3 and all(a["label"] == t["label"] for a, t in both)
    # A ticket that fails in the replica fails alone: had a failure failed its whole call
    # (3 tickets or more each), nearly every ticket would have failed.
    failed = together.count(None)
    assert 0 < failed < 2 * FAILING * len(bodies), failed
