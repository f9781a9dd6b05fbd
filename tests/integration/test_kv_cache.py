"""KV-cache manager and prefix-affinity routing on a real graph: two generate-mode model
replicas (tiny decoder), four tenants with their own instruction prefix. The generate
engine mode itself is tested here too: a graph of its own cost another engine start."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import ray
import yaml

from deployments.config import EDGE_OFF
from tests.harness import generate_args, long_ticket, running, wait_healthy

APP = "kvcache"
TENANTS = [f"tenant-{t}" for t in range(4)]
TICKETS = [
    "my card was charged twice for the same order",
    "where is my parcel, it was due yesterday",
    "I cannot log in after the password reset",
    "please cancel my subscription before renewal",
]


@pytest.fixture(scope="module")
def kv_graph(ray_serve, tiny_decoder_dir, tmp_path_factory):
    text = long_ticket(4000)
    tenants = tmp_path_factory.mktemp("kv") / "tenants.yaml"
    # ~150-300 tokens each: at least one full KV block (128 tokens on CPU) per tenant.
    tenants.write_text(
        yaml.safe_dump({t: f"{t} rules. {text[i * 900 : (i + 1) * 900]}" for i, t in enumerate(TENANTS)})
    )
    args = generate_args(
        tiny_decoder_dir,
        topology="fused",
        edge=EDGE_OFF,
        kv_cache={
            "enabled": True,
            "hint_ttl_ms": 200,
            # A manager answer later than this sends the request by Serve's default router;
            # on a machine busy with the rest of the suite 50 ms is sometimes missed.
            "route_timeout_ms": 1000,
            "manager_retry_s": 1,
            "report_interval_ms": 200,
            # Affinity alone: the spill to the least loaded replica is unit-tested; here 8
            # concurrent tickets on one replica must not trigger it.
            "registry": {"max_imbalance_requests": 64},
        },
    )
    args["model"]["engine"]["tenant_instructions_file"] = str(tenants)
    with running(ray_serve, APP, args, {"ModelReplica": {"num_replicas": 2}}) as client:
        warm_up(client)
        yield client


def warm_up(client, timeout_s: float = 120) -> None:
    """Answered tickets first: a new engine's first passes are slow, and on a machine busy
    with the rest of the suite (CI) a first round got 503 from the retry budget before the
    engines had answered anything. Without a tenant: no prefix, so the registry's counts
    stay the tests' own."""
    deadline = time.monotonic() + timeout_s
    with ThreadPoolExecutor(4) as pool:
        while True:
            codes = list(
                pool.map(lambda i: client.post("/v1/classify", json={"text": TICKETS[i]}).status_code, range(4))
            )
            if codes == [200] * 4:
                return
            assert time.monotonic() < deadline, f"no answers within {timeout_s} s: {codes}"
            time.sleep(1)


def manager_snapshot(ray_serve, timeout_s: float = 5) -> dict:
    return ray_serve.get_deployment_handle("KVCacheManager", APP).snapshot.remote().result(timeout_s=timeout_s)


def send_round(client, rounds: int) -> None:
    """Every tenant's tickets at once, from 8 threads, so routing (not order) decides."""
    jobs = [(t, TICKETS[i % len(TICKETS)] + f" (case {i})") for i in range(rounds) for t in TENANTS]
    with ThreadPoolExecutor(8) as pool:
        codes = list(
            pool.map(lambda j: client.post("/v1/classify", json={"text": j[1], "tenant": j[0]}).status_code, jobs)
        )
    assert codes == [200] * len(jobs)


def served_by(ray_serve, uses: int, since: dict | None = None) -> dict[str, set[str]]:
    """Tenant -> replicas that served it (since the snapshot `since`), once the manager
    has `uses` reports."""
    deadline = time.monotonic() + 30
    while True:
        snap = manager_snapshot(ray_serve)
        if snap["totals"]["uses"] >= uses or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    before = (since or {}).get("served", {})
    out: dict[str, set[str]] = {}
    for replica, keys in snap["served"].items():
        for key, counts in keys.items():
            if counts["uses"] > before.get(replica, {}).get(key, {}).get("uses", 0):
                out.setdefault(key, set()).add(replica)
    return out


def test_generate_mode_answers_one_of_the_labels(kv_graph):
    # Without a tenant: no prefix, so the registry's counts stay the next tests' own.
    labels = {item["name"] for item in kv_graph.get("/v1/labels").json()["labels"]}
    for text in ["where is my refund", "我忘记密码了", "cancel it now!!!", long_ticket(3000)]:
        r = kv_graph.post("/v1/classify", json={"text": text})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["label"] in labels and body["route"] == "model"
        assert body["model_version"].startswith("tiny-decoder")


def test_a_generate_replica_compiles_the_label_grammar_before_it_takes_traffic(ray_serve, kv_graph):
    # vLLM compiles the structured-output grammar on its first constrained request (2.4 s on
    # the tiny decoder), which the first ticket after a start would otherwise wait.
    stats = ray_serve.get_deployment_handle("ModelReplica", APP).stats.remote().result(timeout_s=10)
    assert stats["warm_up_ms"] is not None and stats["warm_up_ms"] > 0, stats


def test_same_prefix_requests_go_to_the_same_replica(ray_serve, kv_graph):
    send_round(kv_graph, rounds=6)
    served = served_by(ray_serve, uses=24)
    assert set(served) == set(TENANTS)
    # Serve's default router would spread each tenant's 6 concurrent requests over both.
    assert all(len(replicas) == 1 for replicas in served.values()), served
    snap = manager_snapshot(ray_serve)
    assert snap["totals"]["hits"] >= snap["totals"]["uses"] - len(TENANTS)  # one miss per tenant at most
    assert snap["hot_prefixes"] >= 1


def test_routing_survives_a_manager_restart(ray_serve, kv_graph):
    send_round(kv_graph, rounds=2)
    served_by(ray_serve, uses=8)  # waits for the registry to have seen the rounds
    kill("KVCacheManager")
    send_round(kv_graph, rounds=2)  # answered meanwhile, by Serve's default router
    assert kv_graph.get("/healthz").status_code == 200

    deadline = time.monotonic() + 60
    while True:  # Serve replaces the manager's replica
        try:
            snap = manager_snapshot(ray_serve, timeout_s=2)
            break
        except Exception:
            assert time.monotonic() < deadline, "the KV-cache manager did not come back"
            time.sleep(1)
    assert snap["totals"]["uses"] <= 8  # a fresh registry: at most the requests sent while it was down
    # Both replicas rejoin at their next report; until then the holders of a prefix can
    # change under the routers (a busy machine makes that take seconds).
    while len(manager_snapshot(ray_serve)["replicas"]) < 2:
        assert time.monotonic() < deadline + 30, "the model replicas did not rejoin the manager"
        time.sleep(0.3)
    time.sleep(1.5)  # routers ask again after manager_retry_s; the last reports arrive
    send_round(kv_graph, rounds=1)  # the registry learns what each rejoined replica holds
    time.sleep(0.5)
    snap = manager_snapshot(ray_serve)
    send_round(kv_graph, rounds=4)
    after = served_by(ray_serve, uses=16 + snap["totals"]["uses"], since=snap)
    assert set(after) == set(TENANTS)
    # Replicas joined the new manager again; each tenant lands on one replica again (one
    # that holds its prefix: its old one, or where default routing put it meanwhile).
    assert all(len(replicas) == 1 for replicas in after.values()), after
    now = manager_snapshot(ray_serve)["totals"]
    assert now["hits"] - snap["totals"]["hits"] >= now["uses"] - snap["totals"]["uses"] - len(TENANTS)


def kill(deployment: str) -> None:
    """Kills one replica actor of `deployment`; Serve starts a replacement."""
    name = sorted(
        a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if f"{APP}#{deployment}#" in a["name"]
    )[0]
    ray.kill(ray.get_actor(name, namespace="serve"), no_restart=True)


@pytest.mark.drill
def test_a_replacement_replica_warms_the_hot_prefix_before_serving(ray_serve, kv_graph):
    hot = TENANTS[0]
    jobs = [(hot, f"my card was charged twice, case {i}") for i in range(12)] + [
        (t, f"where is my parcel, case {t}") for t in TENANTS[1:]
    ]
    with ThreadPoolExecutor(4) as pool:
        codes = set(
            pool.map(lambda j: kv_graph.post("/v1/classify", json={"text": j[1], "tenant": j[0]}).status_code, jobs)
        )
    assert codes == {200}
    time.sleep(1)
    known = manager_snapshot(ray_serve)
    assert known["hot_prefixes"] >= 1
    kill("ModelReplica")
    # The replacement joins, is told the hot prefix and computes it before taking traffic.
    deadline = time.monotonic() + 120
    while (snap := manager_snapshot(ray_serve))["totals"]["warmed"] < 1:
        assert time.monotonic() < deadline, snap["totals"]
        time.sleep(1)
    wait_healthy(kv_graph)
    [new] = set(snap["replicas"]) - set(known["replicas"])
    holders = ray_serve.get_deployment_handle("KVCacheManager", APP).holders.remote(hot, [new]).result()
    assert holders.get(new, 0) > 0, holders
