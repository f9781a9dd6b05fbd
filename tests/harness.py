"""What the graph tests share: ports, graph arguments (real vLLM or the fake engine) and
deploying a graph of its own for a test module."""

from __future__ import annotations

import contextlib
import csv
import os
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, cast

import httpx
import psutil

from loadkit.graph_args import shipped_args
from models.build import BUNDLED_DATA

if TYPE_CHECKING:
    from ray.serve.handle import DeploymentHandle

HTTP_PORT = int(os.environ.get("TICKETSERVE_TEST_PORT", "18000"))
# Ray's Prometheus export for the test cluster (what `ray start --metrics-export-port` opens).
METRICS_PORT = int(os.environ.get("TICKETSERVE_TEST_METRICS_PORT", "18080"))
# Per-engine KV reservation, as a fraction of RAM: several engines share this machine.
CLASSIFY_KV_FRACTION = 0.1
GENERATE_KV_FRACTION = 0.15
REVIEW_DIR = Path(tempfile.gettempdir()) / "ticketserve-test-review"

# Many tests share one graph and send the same texts from one address: limits that
# cannot fire there; the rate-limit tests deploy their own strict graph.
LENIENT_ANTISPAM = {
    "rate_limit": {"tiers": {"anonymous": {"requests_per_s": 10_000}, "standard": {"requests_per_s": 10_000}}},
    "duplicates": {"max_repeats": 10_000},
}


# The breaker's host-CPU trigger (80 % for 60 s: reject_new) reads the whole machine, and
# in CI the real-vLLM tier runs beside the graph tier (scripts/test.sh): both cores stay
# busy for minutes, which every test graph would read as its own load. Tests of the
# trigger pass a breaker section of their own.
NO_HOST_CPU_TRIGGER = {"cpu_reject_percent": None}

# The admin API's bearer token in test graphs that share it (tests/graph/conftest.py `app`).
ADMIN_TOKEN = "test-admin-token-main"

# What every test graph's arguments start from. Test graphs run serve_config.yaml's
# topology (fused: three replica processes fewer per deploy than chain); a test of a
# stage's own deployment asks for chain.
BASE_ARGS = {
    "topology": shipped_args()["topology"],
    "antispam": LENIENT_ANTISPAM,
    "breaker": NO_HOST_CPU_TRIGGER,
}


def long_ticket(chars: int) -> str:
    """Real, non-repetitive text of about `chars` characters: bundled tickets one after
    another (a ticket made by repeating one sentence is refused as repeated_words)."""
    with open(BUNDLED_DATA, encoding="utf-8") as f:
        return " ".join(row["text"] for row in csv.DictReader(f) if row["lang"] == "en")[:chars].strip()


def classify_args(model_dir: str, **sections) -> dict:
    """The CPU default graph on a real vLLM engine."""
    return {
        **BASE_ARGS,
        "model": {"engine": {"model_dir": model_dir, "gpu_memory_utilization": CLASSIFY_KV_FRACTION}},
        **sections,
    }


def fake_args(model_dir: str, **sections) -> dict:
    """The same graph on the fake engine (deployments/engines/fake.py): the model's labels,
    thresholds and tokenizer, answers from its pre-classifier, no vLLM."""
    return {
        **BASE_ARGS,
        "model": {"engine": {"mode": "fake", "model_dir": model_dir}},
        **sections,
    }


# The reliability tests (tests/graph/reliability) test the graph around the model: the
# fake engine by default; scripts/reliability.sh runs them on vLLM for the published figures.
RELIABILITY_ENGINE = os.environ.get("TICKETSERVE_RELIABILITY_ENGINE", "fake")


def reliability_engine(model_dir: str) -> dict:
    """The `model.engine` section of the reliability tests' graphs."""
    if RELIABILITY_ENGINE == "vllm":
        return {"model_dir": model_dir, "gpu_memory_utilization": CLASSIFY_KV_FRACTION}
    if RELIABILITY_ENGINE != "fake":
        raise ValueError(f"TICKETSERVE_RELIABILITY_ENGINE={RELIABILITY_ENGINE!r}: use fake or vllm")
    return {"mode": "fake", "model_dir": model_dir}


def generate_args(model_dir: str, **sections) -> dict:
    return {
        **BASE_ARGS,
        "model": {
            "engine": {"mode": "generate", "model_dir": model_dir, "gpu_memory_utilization": GENERATE_KV_FRACTION}
        },
        **sections,
    }


def graph_options(options: dict | None = None) -> dict:
    """Serve options per deployment name for a test graph: `options` over a short drain
    loop. A stopping replica first sleeps its `graceful_shutdown_wait_loop_s` (Serve's
    default 2 s) before it counts its ongoing requests; the suite deletes ~30 graphs, idle
    by then, and spent a minute of CI in those sleeps."""
    from deployments.graph import DEPLOYMENT_NAMES

    options = options or {}
    return {name: {"graceful_shutdown_wait_loop_s": 0.2, **options.get(name, {})} for name in DEPLOYMENT_NAMES}


def graph_config(name: str, args: dict, under: Path = REVIEW_DIR):
    """`args` as the AppConfig of the test graph `name`, with a review queue file and a
    retrain record of its own in `under`, outside the checkout (the defaults are under var/)."""
    from deployments.config import AppConfig

    review = {"store_path": str(under / f"{name}.sqlite3"), **args.get("review", {})}
    retrain = {
        "state_path": str(under / f"{name}.retrain.json"),
        "candidates_dir": str(under / f"{name}-candidates"),
        **args.get("retrain", {}),
    }
    return AppConfig.from_args({**args, "review": review, "retrain": retrain})


def deploy(serve, name: str, args: dict, options: dict | None = None) -> httpx.Client:
    """`options`: Serve options per deployment name, as serve_config.yaml's `deployments`."""
    from serve_app import bind_graph

    serve.run(bind_graph(graph_config(name, args), graph_options(options)), name=name, route_prefix=f"/{name}")
    return httpx.Client(base_url=f"http://127.0.0.1:{HTTP_PORT}/{name}", timeout=60)


@contextlib.contextmanager
def running(serve, name: str, args: dict, options: dict | None = None):
    """A graph of its own for a test module: deployed, healthy, deleted afterwards."""
    client = deploy(serve, name, args, options)
    try:
        wait_healthy(client)
        yield client
    finally:
        client.close()
        delete(serve, name)


def delete(serve, name: str, timeout_s: float = 60) -> None:
    """`serve.delete`, polled every 0.1 s: Serve's own blocking delete polls every 1 s, and
    an idle test graph, gone in ~0.3 s, took 3 s to delete that way (~30 graphs a suite)."""
    serve.delete(name, _blocking=False)
    deadline = time.monotonic() + timeout_s
    while name in serve.status().applications:
        assert time.monotonic() < deadline, f"{name} not deleted after {timeout_s}s"
        time.sleep(0.1)


def wait_healthy(client: httpx.Client, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if client.get("/healthz").status_code == 200:
            return
        time.sleep(0.5)
    raise AssertionError(f"{client.base_url} not healthy after {timeout_s}s")


def as_handle(fake: object) -> DeploymentHandle:
    """A small fake where a caller takes a Serve handle: the callers only call
    `handle.method.remote(...)` and await it, which the fakes answer."""
    return cast("DeploymentHandle", fake)


def engine_processes(title: str, timeout_s: float = 10) -> list[psutil.Process]:
    """vLLM's processes under the one replica whose title holds `title`: the children vLLM
    spawns, known by their title (VLLM::EngineCore) or, where the command line still reads
    as multiprocessing's spawn (seen after runs it had answered, in CI too), by that. The
    process table is read again for a while, and a failure lists it."""
    deadline = time.monotonic() + timeout_s
    while True:
        replicas = [p for p in psutil.process_iter(["cmdline"]) if title in " ".join(p.info["cmdline"] or [])]
        below = [(c, " ".join(c.cmdline())) for r in replicas for c in r.children(recursive=True)]
        engines = [c for c, cmdline in below if "VLLM::" in cmdline or "multiprocessing.spawn" in cmdline]
        if len(replicas) == 1 and engines or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert len(replicas) == 1 and engines, (replicas, [(c.pid, cmdline[:120]) for c, cmdline in below])
    return engines
