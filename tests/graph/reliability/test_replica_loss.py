"""Replica loss under load: one replica of the model, the tokenizer or the edge router
(two of each, chain topology), or the one breaker or canary-controller actor, is killed
in the middle of a closed-loop run. Over the run at most 0.5 % of tickets may fail,
none may hang, and the graph must answer /healthz 200 again within 30 s (every replica
back is reported too). The KV-cache manager's loss is in test_kv_cache.py."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest
import ray
from ray import serve

from loadkit.generators import Outcomes, closed_loop, ticket_bodies
from tests.graph.reliability.figures import record
from tests.harness import LENIENT_ANTISPAM, NO_HOST_CPU_TRIGGER, reliability_engine, running

pytestmark = [pytest.mark.reliability, pytest.mark.drill]

APP = "replicaloss"
REPLICAS = {"ModelReplica": 2, "Tokenizer": 2, "EdgeRouter": 2}
# The load run's length; the kill comes 6 s in, and what is left must outlast the
# replica's replacement being noticed.
RUN_S, KILL_AT_S = float(os.environ.get("TICKETSERVE_REPLICA_LOSS_RUN_S", "24")), 6.0
WATCH_S = 60.0  # how long after the kill the replica count is watched (an engine starts in 20-40 s)
TARGETS = ["ModelReplica", "Tokenizer", "EdgeRouter", "Breaker", "CanaryController"]
RESULTS: dict[str, dict] = {}


@pytest.fixture(scope="module")
def graph(ray_serve, default_model_dir):
    # The shipped breaker: no host-CPU trigger (a 2-core box at capacity is always above it).
    args = {
        "antispam": LENIENT_ANTISPAM,
        "model": {"engine": reliability_engine(default_model_dir)},
        "topology": "chain",
        "breaker": NO_HOST_CPU_TRIGGER,
    }
    options = {name: {"num_replicas": n} for name, n in REPLICAS.items()}
    with running(ray_serve, APP, args, options) as client:
        yield client, args
    record("replica_loss", RESULTS)


def kill_one(deployment: str) -> str:
    names = sorted(
        a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if f"{APP}#{deployment}#" in a["name"]
    )
    ray.kill(ray.get_actor(names[0], namespace="serve"), no_restart=True)
    return names[0]


def running_replicas(deployment: str) -> int:
    return serve.status().applications[APP].deployments[deployment].replica_states.get("RUNNING", 0)


@pytest.mark.parametrize("target", TARGETS)
def test_losing_a_replica_mid_run_fails_few_and_recovers(graph, target):
    client, args = graph
    url = str(client.base_url).rstrip("/")
    timeout_s = args.get("ingress", {}).get("request_timeout_s", 30) + 5
    out, began = Outcomes(), time.perf_counter()
    marks: dict[str, float] = {}

    def chaos():
        time.sleep(KILL_AT_S)
        marks["killed_at_s"] = time.perf_counter() - began
        kill_one(target)
        want = REPLICAS.get(target, 1)
        # Replicas back: Serve counted fewer running, then all again. A light replica can be
        # replaced between two looks; then only /healthz is timed.
        while True:
            now = time.perf_counter() - began
            if "healthz_at_s" not in marks and client.get("/healthz").status_code == 200:
                marks["healthz_at_s"] = now
            count = running_replicas(target)
            if count < want:
                marks.setdefault("noticed_at_s", now)
            elif "noticed_at_s" in marks:
                marks["all_back_at_s"] = now
            if ("healthz_at_s" in marks and "all_back_at_s" in marks) or now > KILL_AT_S + WATCH_S:
                return
            time.sleep(0.25)

    watcher = threading.Thread(target=chaos)
    watcher.start()
    asyncio.run(
        closed_loop(
            url,
            ticket_bodies(20_000, seed=hash(target) % 1000),
            users=16,
            seconds=RUN_S,
            timeout_s=timeout_s,
            out=out,
            began=began,
        )
    )
    watcher.join()
    summary = out.summary()
    killed = marks["killed_at_s"]
    failures = [at for at, kind in out.timeline if kind in ("unexpected", "lost", "hung")]
    result = {
        **summary,
        "killed_at_s": round(killed, 1),
        "healthz_ok_after_s": round(marks["healthz_at_s"] - killed, 1) if "healthz_at_s" in marks else None,
        "serve_noticed_after_s": round(marks["noticed_at_s"] - killed, 1) if "noticed_at_s" in marks else None,
        "all_replicas_back_after_s": round(marks["all_back_at_s"] - killed, 1) if "all_back_at_s" in marks else None,
        "failures_at_s": failures[:20],
    }
    RESULTS[target] = result
    print(target, result)
    assert summary["hung"] == 0, result
    assert summary["error_rate_percent"] <= 0.5, result
    assert result["healthz_ok_after_s"] is not None and result["healthz_ok_after_s"] <= 30, result
