"""Shared pieces of the benchmarks: a local Ray + Serve, a bounded closed-loop load (on
loadkit's generator), tables and result files."""

from __future__ import annotations

import asyncio
import csv
import json
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import psutil

from bench.stamp import stamped
from loadkit import generators
from loadkit.graph_args import merged, shipped_args
from loadkit.stats import percentile
from models.build import BUNDLED_DATA, DEFAULT_OUT, ROOT

RESULTS = ROOT / "bench" / "results"
# KV reservation per engine, as a fraction of RAM: a benchmark engine shares the machine.
BENCH_KV_FRACTION = 0.1


# A benchmark client is one address sending for many users: limits that cannot fire
# (the rate-limit hop is still taken).
LOAD_ANTISPAM = {
    "rate_limit": {"tiers": {"anonymous": {"requests_per_s": 100_000}, "standard": {"requests_per_s": 100_000}}},
    "duplicates": {"max_repeats": 100_000},
}


def graph_config(model_dir: Path = DEFAULT_OUT, edge: bool = False, policies: bool = True, fake_engine: bool = False):
    """serve_config.yaml's graph serving `model_dir`: edge answers on or off, control
    policies (adaptive batch knob, breaker, retries, fallbacks, replica queue bound) on or
    off, vLLM or the fake engine (answers at no cost: the graph's own work alone)."""
    from deployments.config import EDGE_OFF, POLICIES_OFF, AppConfig

    engine = {"mode": "fake"} if fake_engine else {"gpu_memory_utilization": BENCH_KV_FRACTION}
    # A store of its own, empty: the load's records stay out of the operator's queue.
    review_store = Path(tempfile.mkdtemp(prefix="bench-review-")) / "review.sqlite3"
    args = merged(
        shipped_args(),
        {
            "antispam": LOAD_ANTISPAM,
            "edge": {} if edge else EDGE_OFF,
            "model": {"engine": {"model_dir": str(model_dir), **engine}},
            "review": {"store_path": str(review_store)},
        },
    )
    return AppConfig.from_args(args if policies else merged(args, POLICIES_OFF))


def bundled_bodies() -> list[dict]:
    """Classify bodies for every ticket of the bundled data set."""
    with open(BUNDLED_DATA, encoding="utf-8") as f:
        return [{"text": row["text"]} for row in csv.DictReader(f)]


def cpu_seconds() -> dict[int, tuple[str, float]]:
    """Every process's (command line, user + system CPU seconds so far), by pid."""
    out = {}
    for p in psutil.process_iter(["cmdline", "name"]):
        try:
            t = p.cpu_times()
            out[p.pid] = ((" ".join(p.info["cmdline"] or []) or p.info["name"])[:60], t.user + t.system)
        except psutil.Error:
            continue
    return out


@dataclass
class LoadResult:
    name: str
    users: int
    seconds: float
    ok: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list, repr=False)

    def row(self) -> dict:
        lat = self.latencies_ms
        return {
            "target": self.name,
            "users": self.users,
            "requests": self.ok + sum(self.errors.values()),
            "errors": sum(self.errors.values()),
            "req_per_s": round(self.ok / self.seconds, 1),
            "p50_ms": percentile(lat, 50, 1),
            "p99_ms": percentile(lat, 99, 1),
            "mean_ms": round(statistics.fmean(lat), 1) if lat else float("nan"),
        }


async def closed_loop(
    name: str, url: str, bodies: list[dict], users: int, seconds: float, max_requests: int = 200_000
) -> LoadResult:
    """`users` clients, each sending its next request as soon as the last one answers (or
    after a refusal's Retry-After); bounded in time and count, to `url` only (127.0.0.1 here)."""
    parts = urlsplit(url)
    began = time.perf_counter()
    out = await generators.closed_loop(
        f"{parts.scheme}://{parts.netloc}/",
        bodies,
        users,
        seconds,
        timeout_s=60,
        path=parts.path.lstrip("/"),
        max_requests=max_requests,
    )
    result = LoadResult(name, users, time.perf_counter() - began, ok=out.counts["ok"], latencies_ms=out.ok_ms)
    result.errors = {str(k): v for k, v in out.statuses.items() if k != 200}
    for kind in ("lost", "hung"):
        if out.counts[kind]:
            result.errors[kind] = out.counts[kind]
    return result


def add_load_args(parser, seconds: float, warmup_seconds: float) -> None:
    """--users, --seconds, --warmup-seconds: the bounds of every closed-loop benchmark."""
    parser.add_argument("--users", type=int, default=50, help="concurrent closed-loop clients")
    parser.add_argument("--seconds", type=float, default=seconds, help="measured time per target")
    parser.add_argument("--warmup-seconds", type=float, default=warmup_seconds, help="unmeasured run before it")


def warm_then_measure(
    name: str, url: str, bodies: list[dict], users: int, seconds: float, warmup_seconds: float
) -> LoadResult:
    asyncio.run(closed_loop(name, url, bodies, users, warmup_seconds))
    return asyncio.run(closed_loop(name, url, bodies, users, seconds))


def markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def print_table(rows: list[dict]) -> str:
    cols = list(rows[0])
    text = "\n".join(markdown_table(cols, [[str(r[c]) for c in cols] for r in rows]))
    print(text)
    return text


def write_results(name: str, payload: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(stamped(payload), indent=2, default=lambda o: asdict(o)))
    print(f"wrote {path}")
    return path


def start_serve(port: int) -> None:
    import ray
    from ray import serve

    from deployments.ray_env import apply_ray_env

    apply_ray_env()
    # Its own cluster, never the one scripts/serve.sh left running (see tests/conftest.py).
    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False)
    serve.start(http_options={"host": "127.0.0.1", "port": port})
