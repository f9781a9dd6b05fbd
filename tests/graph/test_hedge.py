"""Hedged model calls on a real graph (fake engine, 20 ms a ticket, two model replicas,
one of which makes a share of its calls 2 s slower): copies go out within their budget,
win, and keep the slowest answers far from the slowdown; every ticket gets its own label."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from ray import serve

from deployments.config import EDGE_OFF
from loadkit.generators import ticket_bodies
from loadkit.stats import percentile
from tests.harness import fake_args, running

# Its P99 bound needs the machine to itself: beside the real-vLLM tier the ordinary tail
# grows past the hedge delay, the copies' budget is spent on it and slowed calls go unhedged.
pytestmark = pytest.mark.serial

APP = "hedged"
SLOW_MS = 2000
TOKEN = "test-admin-token-hedge"


@pytest.fixture(scope="module")
def hedged(ray_serve, default_model_dir):
    args = fake_args(
        default_model_dir,
        edge=EDGE_OFF,
        # Copies for the ordinary tail past the P95 mark and for the slowed calls both.
        retry={"hedge": {"enabled": True, "min_calls": 30, "budget_percent": 10}},
        ingress={"admission": {"enabled": False, "max_limit": 64}},
        admin={"token": TOKEN},
    )
    args["model"]["engine"]["fake_latency_ms"] = 20
    with running(ray_serve, APP, args, {"ModelReplica": {"num_replicas": 2}}) as client:
        # One call, one replica: the other stays fast.
        serve.get_deployment_handle("ModelReplica", APP).set_faults.remote(
            {"failure": "slow", "rate": 0.05, "slow_ms": SLOW_MS}
        ).result()
        yield client


def classify(client, body: dict) -> tuple[float, dict]:
    start = time.perf_counter()
    r = client.post("/v1/classify", json={"text": body["text"]})
    assert r.status_code == 200, r.text
    return (time.perf_counter() - start) * 1000, r.json()


def hedges(client) -> dict[str, int]:
    return client.get("/admin/state", headers={"Authorization": f"Bearer {TOKEN}"}).json()["edge"]["hedges"]


def test_a_slow_replicas_calls_are_hedged_within_budget(hedged):
    bodies = list({b["text"]: b for b in ticket_bodies(1200, seed=5)}.values())[:400]
    with ThreadPoolExecutor(4) as pool:
        # Warm-up: the hedge delay is read from the answers of the first calls.
        list(pool.map(lambda b: classify(hedged, b), bodies[:60]))
        before = hedges(hedged)
        answers = list(pool.map(lambda b: classify(hedged, b), bodies[60:]))
    after = hedges(hedged)
    assert after["calls"] - before.get("calls", 0) >= len(answers)
    # About 2.5 % of calls are slowed (5 % of one replica's half) and the ordinary tail
    # past the P95 mark is another 5 %: the budget caps the copies at 10 % of calls.
    assert 0 < after["sent"] <= 0.10 * after["calls"] + 1, after
    # The copies of slowed calls, on the fast replica, answer first.
    assert after["won"] > before.get("won", 0), after
    latencies = [ms for ms, _ in answers]
    p99 = percentile(latencies, 99)
    assert p99 is not None and p99 < SLOW_MS / 2, sorted(latencies)[-10:]
    # The answers are the tickets' own: the same label as the ticket sent again.
    for body, (_, answer) in list(zip(bodies[60:], answers))[:40]:
        assert classify(hedged, body)[1]["label"] == answer["label"]
