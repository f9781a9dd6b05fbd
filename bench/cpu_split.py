"""Where the CPU goes: CPU seconds of every process during a bounded load on the default graph.

    python -m bench.cpu_split --users 50 --seconds 20 [--no-access-log] [--fake-engine] [--edge] [--haproxy]
                              [--micro-batch on|off]

Prints the top processes with their share and the CPU-ms per answered request; writes
bench/results/cpu_split.json (`--out` another name).
`--fake-engine`: the model answers at no cost, so what is measured is the graph's own
work (HTTP proxy, ingress, stages, Serve's hops). `--edge`: templates, result cache and
pre-classifier on (off by default: every ticket takes the model path). `--haproxy`: Serve's
HAProxy mode, as served (deployments/ray_env.py), instead of its Python proxy.
`--micro-batch`: the model path's micro-batching on or off (default: as serve_config.yaml).
"""

from __future__ import annotations

import argparse
import asyncio
import os

from ray import serve

from bench.common import (
    add_load_args,
    bundled_bodies,
    closed_loop,
    cpu_seconds,
    graph_config,
    start_serve,
    write_results,
)
from deployments.config import AppConfig
from deployments.graph import DEPLOYMENT_NAMES
from deployments.ray_env import HAPROXY_ENV
from loadkit.graph_args import merged
from serve_app import bind_graph

PORT = 18300


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add_load_args(p, seconds=20, warmup_seconds=5)
    p.add_argument("--no-access-log", action="store_true", help="turn Serve's access logs off")
    p.add_argument("--fake-engine", action="store_true", help="the fake engine at no cost instead of vLLM")
    p.add_argument("--edge", action="store_true", help="edge answers on (off: every ticket takes the model path)")
    p.add_argument("--haproxy", action="store_true", help="Serve's HAProxy mode (the served default)")
    p.add_argument("--micro-batch", choices=("on", "off"), help="micro-batched model calls (default: as shipped)")
    p.add_argument("--out", default="cpu_split", help="results name under bench/results/")
    a = p.parse_args()
    if a.haproxy:
        os.environ.update(HAPROXY_ENV)
    config = graph_config(edge=a.edge, fake_engine=a.fake_engine)
    if a.micro_batch:
        config = AppConfig.from_args(merged(config.model_dump(), {"micro_batch": {"enabled": a.micro_batch == "on"}}))
    options = {}
    if a.no_access_log:
        options = {n: {"logging_config": {"enable_access_log": False}} for n in DEPLOYMENT_NAMES}
    start_serve(PORT)
    serve.run(bind_graph(config, options), name="cpu", route_prefix="/cpu")
    bodies = bundled_bodies()
    url = f"http://127.0.0.1:{PORT}/cpu/v1/classify"
    asyncio.run(closed_loop("warm-up", url, bodies, a.users, a.warmup_seconds))
    before = cpu_seconds()
    result = asyncio.run(closed_loop("cpu split", url, bodies, a.users, a.seconds))
    after = cpu_seconds()
    me = os.getpid()
    used = sorted(
        (
            (after[pid][1] - before[pid][1], after[pid][0] + (" [load client + driver]" if pid == me else ""))
            for pid in after
            if pid in before
        ),
        reverse=True,
    )
    total = sum(d for d, _ in used)
    print(result.row())
    for seconds, name in used[:10]:
        print(f"{seconds:6.1f} s  {100 * seconds / total:5.1f} %  {name}")
    per_request_ms = 1000 * total / max(1, result.ok)
    print(f"total {total:.1f} CPU-s over {result.seconds:.1f} s; {per_request_ms:.1f} CPU-ms per request")
    write_results(
        a.out,
        {
            **result.row(),
            "cpu_ms_per_request": per_request_ms,
            "engine": "fake" if a.fake_engine else "vllm",
            "micro_batch": config.micro_batch.enabled,
            "edge": a.edge,
            "proxy": "haproxy" if a.haproxy else "python",
            "processes": [{"name": n, "cpu_s": s} for s, n in used[:15]],
        },
    )


if __name__ == "__main__":
    main()
