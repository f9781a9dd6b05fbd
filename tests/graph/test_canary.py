"""Blue-green model sides on real graphs: a canary with shuffled labels, tried in shadow
mode, rolls back by itself (worse on the golden set and on its reviewed set) and its cached answers are never served again (on a colocated
graph, whose stable model lives in the ingress); a good canary is promoted step by step
to all traffic; the split keeps each ticket id on one side."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

import pytest
import ray
from ray import serve

from deployments.config import EDGE_OFF
from models.artifacts import REVIEWED_SET_FILE
from models.golden import load
from models.variant import derive
from tests.harness import fake_args, running

pytestmark = pytest.mark.rollout

TOKEN = "test-rollout-token-9c1e"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CANARY = {"x-traffic-color": "canary"}
# Small samples and short holds so a rollout finishes in a test; P99 is left loose: both
# sides share two cores with the test itself.
POLICY = {"min_compared": 20, "min_canary_answers": 5, "min_p99_answers": 5, "hold_s": 1, "max_p99_ratio": 10}
TEXTS = [
    "my parcel arrived broken and the box was crushed",
    "I want my money back for the shoes I returned",
    "where is my order, it should have arrived last week",
    "please cancel my subscription before the next charge",
]


def rollout_args(model_dir: str, canary_dir: Path, state: Path, **rollout) -> dict:
    args = fake_args(
        model_dir,
        edge={**EDGE_OFF, "cache_enabled": True},  # every ticket reaches a model side; repeats hit the cache
        admin={"token": TOKEN},
        rollout={
            "canary_model_dir": str(canary_dir),
            "judge_interval_s": 1,
            "golden_tickets": 58,
            "sync_interval_ms": 200,
            "state_path": str(state),
            **rollout,
        },
    )
    # A model's latency, not a stand-in's 5 ms: the judge compares the sides' P99s, and at
    # 5 ms one scheduling hiccup on a busy machine is a 10x ratio.
    args["model"]["engine"]["fake_latency_ms"] = 50
    return args


def rollout(client) -> dict:
    r = client.get("/admin/state", headers=AUTH)
    return r.json()["rollout"] if r.status_code == 200 else {}


def wait_for(client, done, timeout_s: float, drive=None) -> dict:
    deadline = time.monotonic() + timeout_s
    state = None
    while time.monotonic() < deadline:
        if drive:
            drive()
        state = rollout(client)
        if done(state):
            return state
        time.sleep(0.5)
    raise AssertionError(f"rollout not done after {timeout_s}s: {state}")


def classify(client, text: str, ticket_id: str, headers: dict | None = None) -> dict:
    r = client.post("/v1/classify", json={"text": text, "ticket_id": ticket_id}, headers=headers or {})
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture(scope="module")
def models(default_model_dir, tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("canary-models")
    derive(Path(default_model_dir), out / "shuffled", shuffle_seed=1)
    # As if retrained from reviews: resolved items it never trained on (models.retrain).
    with open(out / "shuffled" / REVIEWED_SET_FILE, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label", "lang", "style"])
        writer.writerows([item.text, item.intent, item.lang, "review"] for item in load()[::12])
    derive(Path(default_model_dir), out / "copy")
    return {"shuffled": out / "shuffled", "copy": out / "copy"}


def test_a_shuffled_label_canary_rolls_back_by_itself(ray_serve, default_model_dir, models, tmp_path):
    state_file = tmp_path / "canary.json"
    args = rollout_args(default_model_dir, models["shuffled"], state_file, policy={**POLICY, "start_percent": 0})
    # Colocated: the stable model answers inside the ingress, and the controller asks it for
    # the golden set there (the good canary's graph is the shipped, fused one).
    with running(ray_serve, "canary_bad", {**args, "topology": "colocated"}) as client:
        deployments = set(serve.status().applications["canary_bad"].deployments)
        assert "ModelReplica" not in deployments and "CanaryModelReplica" in deployments
        idle = rollout(client)
        assert idle["status"] == "idle" and idle["percent"] == 0
        stable, canary = idle["stable_version"], idle["canary_version"]
        assert stable != canary and "shuffled" in canary

        # The colouring header picks a side; the cache keeps each side's answers apart.
        first = classify(client, TEXTS[0], "t-0", CANARY)
        assert (first["model_version"], first["route"]) == (canary, "model")
        assert classify(client, TEXTS[0], "t-0", CANARY)["route"] == "cache"
        plain = classify(client, TEXTS[0], "t-0")
        assert (plain["model_version"], plain["route"]) == (stable, "model")

        # Shadow mode: the canary answers copies of every ticket, customers get stable's.
        split = client.post("/admin/rollout", headers=AUTH, json={"percent": 100, "shadow": True}).json()
        assert (split["status"], split["shadow"], split["percent"]) == ("rolling", True, 100)
        time.sleep(0.5)  # every caller's view has the new split
        answers = [classify(client, f"{TEXTS[1]} (order {i})", f"s-{i}") for i in range(10)]
        assert {a["model_version"] for a in answers} == {stable}

        state = wait_for(client, lambda s: s["status"] == "rolled_back", timeout_s=120)
        assert (state["percent"], state["shadow"]) == (0, False)
        last = state["history"][-1]
        assert last["action"] == "rollback" and "golden accuracy" in last["reason"], last
        assert "reviewed-set accuracy" in last["reason"], last
        assert state["golden"]["canary_accuracy"] < 0.2 < 0.7 < state["golden"]["stable_accuracy"]
        assert state["golden"]["reviewed_canary_accuracy"] < 0.2 < 0.7 < state["golden"]["reviewed_stable_accuracy"]
        assert json.loads(state_file.read_text())["status"] == "rolled_back"

        time.sleep(1.0)  # the rollback's cache flush reaches every caller at its next sync
        again = [classify(client, TEXTS[0], "t-0", CANARY) for _ in range(2)]
        assert [a["route"] for a in again] == ["model", "model"]  # the demoted side is never served from cache
        after = [classify(client, f"{TEXTS[2]} (order {i})", f"a-{i}") for i in range(10)]
        assert {a["model_version"] for a in after} == {stable}
        # The shadow copies' comparisons, sent by the callers' sync loop. Not necessarily all
        # ten: the judge's golden run (58 tickets, milliseconds on the fake engine) may roll
        # back before the last shadowed ticket is sent.
        totals = rollout(client)["totals"]
        assert totals["compared"] >= 1 and totals["agreed"] < totals["compared"]

        # A restarted controller keeps the rollback: the same canary does not come back.
        name = next(
            a["name"]
            for a in ray.util.list_named_actors(all_namespaces=True)
            if "canary_bad#CanaryController#" in a["name"]
        )
        ray.kill(ray.get_actor(name, namespace="serve"), no_restart=True)
        killed = time.monotonic()
        restarted = wait_for(client, lambda s: s.get("uptime_s", 1e9) < time.monotonic() - killed, timeout_s=60)
        assert (restarted["status"], restarted["percent"]) == ("rolled_back", 0)
        assert restarted["history"][-1]["action"] == "rollback"


def test_a_good_canary_is_promoted_to_all_traffic(ray_serve, default_model_dir, models, tmp_path):
    # Hold long enough at 50 % to check the split before the first promotion. The rollout
    # starts once the graph is up: a hold counted from the controller's start would have
    # to outlast the slowest replica's (20-30 s here) and then hold again at 100 %.
    policy = {**POLICY, "start_percent": 0, "step_percent": 50, "hold_s": 8}
    args = rollout_args(default_model_dir, models["copy"], tmp_path / "canary.json", policy=policy)
    with running(ray_serve, "canary_good", args) as client:
        start = client.post("/admin/rollout", headers=AUTH, json={"percent": 50}).json()
        stable, canary = start["stable_version"], start["canary_version"]
        assert (start["status"], start["percent"], start["shadow"]) == ("rolling", 50, False)
        time.sleep(0.5)  # every caller's view has the new split

        # The same ticket id lands on the same side, whatever its text; both sides get some.
        sides = {}
        for i in range(16):
            versions = {classify(client, f"{TEXTS[j]} (ticket {i})", f"d-{i}")["model_version"] for j in (1, 2)}
            assert len(versions) == 1, (i, versions)
            sides[i] = versions.pop()
        assert set(sides.values()) == {stable, canary}
        assert rollout(client)["percent"] == 50

        sent = iter(range(10_000))

        def drive():
            for _ in range(4):
                i = next(sent)
                classify(client, f"{TEXTS[i % 4]} (round {i})", f"p-{i}", CANARY if i % 2 else None)

        state = wait_for(client, lambda s: s["status"] == "complete", timeout_s=150, drive=drive)
        actions = [(h["action"], h["to_percent"]) for h in state["history"]]
        assert actions == [("set", 50), ("promote", 100), ("complete", 100)], actions
        assert {classify(client, f"{TEXTS[3]} (after {i})", f"f-{i}")["model_version"] for i in range(8)} == {canary}
