"""Hedged model calls against one slow replica: P50 to P99.9 with hedging off and on.

    python -m bench.hedge [--users 8] [--seconds 40] [--slow-rate 0.05] [--slow-ms 1000]
                          [--engine fake|vllm]

Two model replicas; one is slowed by fault injection (`set_faults`: `--slow-rate` of its
calls take `--slow-ms` longer, a noisy neighbour or a long pause). A closed loop of
`--users` clients (about half the graph's capacity here) sends the bundled tickets with
the edge tier off, so every ticket is a model call. Variants, same graph otherwise:
  off  retry.hedge.enabled false (the shipped default)
  on   retry.hedge.enabled true: a call unanswered past the P95 of recent calls gets a
       copy, within 5 % of calls
Extra calls are the copies the model path sent over its first calls (`/admin/state`).
The fake engine (default) answers in `--engine-ms`, a model-like cost without two vLLM
engines on two cores; `--engine vllm` runs the real one. Prints a table and writes
bench/results/hedge.json.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import httpx
from ray import serve

from bench.common import add_load_args, bundled_bodies, graph_config, print_table, start_serve, write_results
from deployments.config import AppConfig
from loadkit.generators import closed_loop
from loadkit.graph_args import merged
from loadkit.stats import percentile
from serve_app import bind_graph

PORT = 18810
APP = "hedge"
TOKEN = "bench-hedge-admin"


def summarize(variant: str, ok_ms: list[float], seconds: float, errors: int, hedges: dict | None) -> dict:
    hedges = hedges or {}
    calls = hedges.get("calls", 0)
    return {
        "variant": variant,
        "answered": len(ok_ms),
        "tickets_per_s": round(len(ok_ms) / seconds, 1),
        "errors": errors,
        **{f"p{q:g}_ms": percentile(ok_ms, q, 1) for q in (50, 95, 99, 99.9)},
        "extra_calls_%": round(100 * hedges.get("sent", 0) / calls, 2) if calls else 0.0,
        "copies_won": hedges.get("won", 0),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add_load_args(p, seconds=40, warmup_seconds=8)  # the warm-up fills the P95 window
    p.set_defaults(users=8)
    p.add_argument("--slow-rate", type=float, default=0.05, help="share of the slow replica's calls slowed")
    p.add_argument("--slow-ms", type=float, default=1000, help="extra time of a slowed call")
    p.add_argument("--engine", choices=("fake", "vllm"), default="fake")
    p.add_argument("--engine-ms", type=float, default=20, help="fake engine: time each answer takes")
    p.add_argument("--variants", default="off,on")
    a = p.parse_args()
    bodies = bundled_bodies()
    base = graph_config(edge=False).model_dump()
    if a.engine == "fake":
        base = merged(base, {"model": {"engine": {"mode": "fake", "fake_latency_ms": a.engine_ms}}})
    start_serve(PORT)
    base_url = f"http://127.0.0.1:{PORT}/"
    rows = []
    for variant in a.variants.split(","):
        config = AppConfig.from_args(
            merged(base, {"retry": {"hedge": {"enabled": variant == "on"}}, "admin": {"token": TOKEN}})
        )
        serve.run(bind_graph(config, {"ModelReplica": {"num_replicas": 2}}), name=APP, route_prefix="/")
        # One call, one replica: the other stays fast.
        slowed = (
            serve.get_deployment_handle("ModelReplica", APP)
            .set_faults.remote({"failure": "slow", "rate": a.slow_rate, "slow_ms": a.slow_ms})
            .result()
        )
        asyncio.run(closed_loop(base_url, bodies, a.users, a.warmup_seconds, timeout_s=60))
        began = time.perf_counter()
        out = asyncio.run(closed_loop(base_url, bodies, a.users, a.seconds, timeout_s=60))
        seconds = time.perf_counter() - began
        state = httpx.get(f"{base_url}admin/state", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10).json()
        errors = out.total - out.counts["ok"]
        # The warm-up's calls count too: the share of copies is the same policy's.
        rows.append(summarize(variant, out.ok_ms, seconds, errors, state["edge"].get("hedges")))
        print(variant, slowed, state["edge"])
        serve.delete(APP)
        time.sleep(2)
    table = print_table(rows)
    write_results("hedge", {"rows": rows, "table": table, "args": vars(a)})


if __name__ == "__main__":
    main()
