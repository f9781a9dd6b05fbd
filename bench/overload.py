"""Step load to a multiple of capacity, with and without the control policies.

    python -m bench.overload [--steps 0.5,1,2,3] [--step-seconds 20] [--timeout-s 15]

First the model path's capacity (closed loop, --users clients) and its unloaded P99
(one client). Then, per variant, an open-loop load on 127.0.0.1: arrivals at a fixed
rate whatever the answers do, stepped through the given multiples of capacity.
Every request ends as one of: 200 from the model, 200 degraded (a fallback answered),
429, 503 (with Retry-After), hung (no answer within --timeout-s), lost (connection
error) or unexpected (any other status, or a refusal without Retry-After); on loadkit's
open-loop generator. Variants:
  policies  serve_config.yaml: adaptive admission limit at the ingress, adaptive batch
            knob, replica queue bound, breaker, retry matrix and budget, degraded answers
  off       the same graph with those off (Serve's bounded queues and a fixed ingress limit)
Capacity and the unloaded P99 are measured on `off`, where nothing is shed.
Tickets are the bundled ones with no edge answers (every ticket is meant for the model).
Prints a table and writes bench/results/overload.json.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from ray import serve

from bench.common import (
    bundled_bodies,
    closed_loop,
    graph_config,
    print_table,
    start_serve,
    write_results,
)
from deployments.config import AppConfig
from loadkit.generators import CLASSIFY, Step, open_loop_steps
from loadkit.graph_args import merged
from loadkit.stats import percentile
from serve_app import bind_graph

PORT = 18800
# The pre-classifier stays loaded for degraded answers but answers nothing at the edge.
# Arrivals past this many unanswered count as lost on the client side (never reached here).
MAX_IN_FLIGHT = 4000
MODEL_ONLY_EDGE = {"templates_enabled": False, "cache_enabled": False, "pre_classifier_intents": []}


def summarize(variant: str, factors: list[float], steps: list[Step]) -> list[dict]:
    rows = []
    for factor, step in zip(factors, steps):
        o, seconds = step.outcomes, step.seconds
        n = o.total or 1
        degraded = o.counts["degraded"]
        rows.append(
            {
                "variant": variant,
                "load": f"{factor:g}x",
                "offered_rps": round(step.offered_per_s, 1),
                "accepted_rps": round(o.counts["ok"] / seconds, 1),
                "model_rps": round(len(o.model_ms) / seconds, 1),
                "p99_accepted_ms": percentile(o.ok_ms, 99, 1),
                "p99_model_ms": percentile(o.model_ms, 99, 1),
                "p99_in_service_ms": percentile(o.service_ms, 99, 1),
                "p99_refusal_ms": percentile(o.refused_ms, 99, 1),
                "model_%": round(100 * (o.counts["ok"] - degraded) / n, 1),
                "degraded_%": round(100 * degraded / n, 1),
                "429_%": round(100 * o.statuses[429] / n, 1),
                "503_%": round(100 * o.statuses[503] / n, 1),
                "hung": o.counts["hung"],
                "lost": o.counts["lost"],
                "unexpected": o.counts["unexpected"],
                "no_retry_after": o.statuses[429] + o.statuses[503] - o.counts["refused"],
            }
        )
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--steps", default="0.5,1,2,3", help="multiples of the measured capacity")
    p.add_argument("--step-seconds", type=float, default=20)
    p.add_argument("--timeout-s", type=float, default=15, help="client timeout: slower answers count as hung")
    p.add_argument("--users", type=int, default=32, help="closed-loop clients for the capacity run")
    p.add_argument("--variants", default="off,policies", help="which variants to run, in order")
    p.add_argument(
        "--capacity-rps", type=float, default=None, help="use this capacity (and skip the unloaded and capacity runs)"
    )
    a = p.parse_args()
    factors = [float(x) for x in a.steps.split(",")]
    bodies = bundled_bodies()
    base_url = f"http://127.0.0.1:{PORT}/"
    url = base_url + CLASSIFY

    on = graph_config(edge=True)
    on = AppConfig.from_args(merged(on.model_dump(), {"edge": MODEL_ONLY_EDGE}))
    off = graph_config(edge=False, policies=False)

    start_serve(PORT)
    rows, baseline = [], {"capacity_rps": a.capacity_rps}
    configs = {"off": off, "policies": on}
    state: dict[str, dict] = {}
    for variant in a.variants.split(","):
        serve.run(bind_graph(configs[variant]), name="overload", route_prefix="/")
        asyncio.run(closed_loop("warm-up", url, bodies, 8, 5))
        if baseline["capacity_rps"] is None:  # measured on the first variant (`off`: nothing shed)
            unloaded = asyncio.run(closed_loop("unloaded", url, bodies, 1, 10))
            baseline = {
                "capacity_rps": asyncio.run(closed_loop("capacity", url, bodies, a.users, 20)).row()["req_per_s"],
                "unloaded_p50_ms": unloaded.row()["p50_ms"],
                "unloaded_p99_ms": unloaded.row()["p99_ms"],
            }
            print(baseline)
        rates = [f * baseline["capacity_rps"] for f in factors]
        steps = asyncio.run(
            open_loop_steps(
                base_url, bodies, [(r, a.step_seconds) for r in rates], a.timeout_s, max_in_flight=MAX_IN_FLIGHT
            )
        )
        rows += summarize(variant, factors, steps)
        state[variant] = {
            "breaker": serve.get_deployment_handle("Breaker", "overload").state.remote().result(),
            "model_replica": serve.get_deployment_handle("ModelReplica", "overload").stats.remote().result(),
        }
        if configs[variant].topology == "chain":  # fused: the edge router lives inside each ingress
            state[variant]["edge_router"] = (
                serve.get_deployment_handle("EdgeRouter", "overload").stats.remote().result()
            )
        print(variant, state[variant])
        serve.delete("overload")
        time.sleep(2)
    table = print_table(rows)
    write_results("overload", {"baseline": baseline, "rows": rows, "table": table, "state": state, "args": vars(a)})


if __name__ == "__main__":
    main()
