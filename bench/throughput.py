"""Throughput and latency at a fixed number of concurrent users, on 127.0.0.1 only.

    python -m bench.throughput --users 50 --seconds 30

Targets, each on the same Ray + Serve instance and HTTP proxy:
  echo            one FastAPI deployment answering a fixed JSON (the floor of a Serve hop)
  model path      the default graph (ingress -> anti-spam (+ rate limiter) -> edge router ->
                  tokenizer -> vLLM model replica) with edge answers off: every ticket
                  takes every hop
  model path, Serve defaults   the same graph with Serve's default max_ongoing_requests (5)
Prints a table and writes bench/results/throughput.json.
"""

from __future__ import annotations

import argparse

from fastapi import FastAPI
from ray import serve

from bench.common import (
    add_load_args,
    bundled_bodies,
    graph_config,
    print_table,
    start_serve,
    warm_then_measure,
    write_results,
)
from deployments.graph import DEPLOYMENT_NAMES
from serve_app import bind_graph

PORT = 18200


def echo_app():
    app = FastAPI()

    class Echo:
        @app.post("/v1/classify")
        async def classify(self) -> dict:
            return {"label": "echo", "confidence": 1.0, "route": "model"}

    options = serve.deployment(max_ongoing_requests=1024, ray_actor_options={"num_cpus": 0})
    return options(serve.ingress(app)(Echo)).bind()


def graph(serve_defaults: bool):
    config = graph_config()
    if not serve_defaults:
        return bind_graph(config)
    defaults = {"max_ongoing_requests": 5, "max_queued_requests": -1}
    return bind_graph(config, {name: defaults for name in DEPLOYMENT_NAMES if name != "RateLimiter"})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add_load_args(p, seconds=30, warmup_seconds=5)
    a = p.parse_args()
    bodies = bundled_bodies()

    start_serve(PORT)
    targets = [
        ("echo (1 deployment)", echo_app, "echo"),
        ("model path (our limits)", lambda: graph(False), "graph"),
        ("model path (Serve default max_ongoing_requests=5)", lambda: graph(True), "defaults"),
    ]
    rows, raw = [], {}
    for label, make, name in targets:
        serve.run(make(), name=name, route_prefix=f"/{name}")
        url = f"http://127.0.0.1:{PORT}/{name}/v1/classify"
        result = warm_then_measure(label, url, bodies, a.users, a.seconds, a.warmup_seconds)
        serve.delete(name)
        rows.append(result.row())
        raw[name] = {**result.row(), "errors_by_status": result.errors}
    raw["table"] = print_table(rows)
    write_results("throughput", raw)


if __name__ == "__main__":
    main()
