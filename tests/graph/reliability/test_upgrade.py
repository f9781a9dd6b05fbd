"""Upgrades under load: `serve deploy` of a changed config (here `serve.run` of the same
application with another model directory: the same call into Serve's controller) while
tickets arrive at half the capacity measured just before (open loop). Serve replaces
every replica whose arguments changed, the ingress and the model replica included, and
the new engine takes its time to start (on the fake engine `fake_start_s` stands in for
vLLM's 20-50 s; scripts/reliability.sh runs vLLM with the load capped at 240 s).
No ticket may be lost or hang, every answer is the contract's JSON (a 503 carries
Retry-After), and once the new version is running no answer comes from the old one."""

from __future__ import annotations

import asyncio
import collections
import operator
import os
import threading
import time
from pathlib import Path

import pytest
from ray import serve

from loadkit.generators import closed_loop, open_loop, ticket_bodies
from models.artifacts import ModelMetadata
from models.variant import derive
from tests.graph.reliability.figures import record
from tests.harness import LENIENT_ANTISPAM, NO_HOST_CPU_TRIGGER, deploy, reliability_engine, running

pytestmark = [pytest.mark.reliability, pytest.mark.drill]

APP = "upgrade"
UPGRADE_AT_S = 5.0
# The load runs until the new version has answered for TAIL_S, at most RUN_S: an upgrade
# took 25 s on one day's machine and 47 s on CI's, and a fixed run cut the slow one short.
RUN_S = float(os.environ.get("TICKETSERVE_UPGRADE_RUN_S", "150"))
# How long the new version answers before the run stops (CI: 5 s, scripts/test.sh).
TAIL_S = float(os.environ.get("TICKETSERVE_UPGRADE_TAIL_S", "10"))
ENGINE_START_S = 5.0
CAPACITY_S = 6.0
LOAD_SHARE = 0.5  # of the measured capacity: the load an upgrade must carry through
# With the model replica's surge (max_surge_percent) Serve starts a new replica before an
# old one stops: one replica (the CPU default) or two, old and new answer side by side.
MODEL_REPLICAS = [int(n) for n in os.environ.get("TICKETSERVE_UPGRADE_MODEL_REPLICAS", "1,2").split(",")]
# Answers sent this long after the new version runs must all be the new version's: the
# old ingress may still be answering the tickets it held when it was told to stop.
SETTLE_S = 2.0


def graph_args(model_dir: str) -> dict:
    args = {
        "antispam": LENIENT_ANTISPAM,
        "model": {"engine": reliability_engine(model_dir)},
        "breaker": NO_HOST_CPU_TRIGGER,
        "topology": "fused",
    }
    if args["model"]["engine"].get("mode") == "fake":
        args["model"]["engine"].update(fake_latency_ms=20, fake_start_s=ENGINE_START_S)
    return args


def replica_starts(deployed_unix_s: float, replicas: int) -> list[dict[str, float | None]]:
    """The running model replicas' start, in phases: from the deploy call to the replica's
    constructor (Serve's scheduling, the worker process and its imports), the engine's
    start (weights, memory profiling, compilation) and the warm-up."""
    handle = serve.get_deployment_handle("ModelReplica", APP)
    seen: dict[float, dict] = {}
    for _ in range(4 * replicas):  # calls land on replicas at random: enough to meet each
        stats = handle.stats.remote().result(timeout_s=30)
        seen[stats["init_started_unix_s"]] = stats
    return [
        {
            "to_constructor_s": round(at - deployed_unix_s, 1),
            "engine_start_s": round(st["engine_start_ms"] / 1000, 1),
            "warm_up_s": None if st["warm_up_ms"] is None else round(st["warm_up_ms"] / 1000, 1),
        }
        for at, st in sorted(seen.items())
    ]


@pytest.mark.parametrize("model_replicas", MODEL_REPLICAS)
def test_a_model_upgrade_under_load_loses_no_ticket_and_mixes_no_versions(
    ray_serve, default_model_dir, tmp_path_factory, model_replicas
):
    old = ModelMetadata.load(default_model_dir).version
    next_dir = tmp_path_factory.mktemp("upgrade") / "next"
    new = derive(Path(default_model_dir), next_dir).version
    marks: dict[str, float] = {}
    starts: list[dict[str, float | None]] = []
    upgraded = threading.Event()
    options = {"ModelReplica": {"num_replicas": model_replicas}}
    with running(ray_serve, APP, graph_args(default_model_dir), options) as client:
        url = str(client.base_url).rstrip("/")
        bodies = ticket_bodies(20_000, seed=11)
        capacity = asyncio.run(closed_loop(url, bodies[15_000:], users=32, seconds=CAPACITY_S, timeout_s=60))
        rate = LOAD_SHARE * capacity.counts["ok"] / CAPACITY_S
        assert rate > 2, capacity.summary()
        began = time.perf_counter()

        def upgrade() -> None:
            time.sleep(UPGRADE_AT_S)
            marks["deployed_at_s"] = time.perf_counter() - began
            deployed_unix_s = time.time()
            deploy(ray_serve, APP, graph_args(str(next_dir)), options).close()
            marks["running_at_s"] = time.perf_counter() - began
            starts.extend(replica_starts(deployed_unix_s, model_replicas))
            time.sleep(TAIL_S)
            upgraded.set()

        upgrader = threading.Thread(target=upgrade)
        upgrader.start()
        # Answers' times count from the generator's own start, within a millisecond of `began`.
        out, _ = asyncio.run(open_loop(url, bodies, [(rate, RUN_S)], timeout_s=60, max_in_flight=4096, stop=upgraded))
        # Read before the join: an upgrade outlasting RUN_S sets the event after the run ended.
        outlasted = upgraded.is_set()
        upgrader.join()
    settled = marks["running_at_s"] + SETTLE_S
    sent = sorted(at for at, _ in out.versions)
    result = {
        "offered_per_s": round(rate, 1),
        **out.summary(),
        **{k: round(v, 1) for k, v in marks.items()},
        "answered_by_version": {v: sum(1 for _, got in out.versions if got == v) for v in {old, new}},
        "old_version_after_running": sum(1 for at, v in out.versions if at > settled and v == old),
        # The longest stretch of sends none of which was answered: "keeps answering throughout".
        "longest_unanswered_s": round(max(map(operator.sub, sent[1:], sent[:-1]), default=RUN_S), 2),
        "refused_per_5s": dict(
            sorted(collections.Counter(5 * int(at // 5) for at, k in out.timeline if k == "refused").items())
        ),
        "foreign_versions": sorted({v for _, v in out.versions} - {old, new}),
        "new_replica_starts": starts,
        "samples": out.samples[:5],
    }
    record(f"upgrade-{model_replicas}-model-replicas", result)
    print(result)
    assert outlasted, result  # the run outlasted the upgrade and its tail
    assert out.counts["lost"] == out.counts["hung"] == out.counts["unexpected"] == 0, result
    assert not result["foreign_versions"], result
    assert result["answered_by_version"][old] > 0 and result["answered_by_version"][new] > 0, result
    assert result["old_version_after_running"] == 0, result
