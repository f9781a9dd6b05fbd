"""Step load to a multiple of capacity, with and without the control policies.

    python -m bench.overload [--steps 0.5,1,2,3] [--step-seconds 20] [--timeout-s 15]

First the model path's capacity (closed loop, --users clients) and its unloaded P99
(one client). Then, per variant, an open-loop load on 127.0.0.1: arrivals at a fixed
rate whatever the answers do, stepped through the given multiples of capacity.
Every request ends as one of: 200 from the model, 200 degraded (a fallback answered),
429, 503 (with Retry-After), hung (no answer within --timeout-s) or lost (connection
error or any other status). Variants:
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
from collections import Counter
from dataclasses import dataclass

import aiohttp
from ray import serve

from bench.common import (
    bundled_bodies,
    closed_loop,
    graph_config,
    merged,
    percentile,
    print_table,
    start_serve,
    write_results,
)
from deployments.config import AppConfig
from serve_app import bind_graph

PORT = 18800
# The pre-classifier stays loaded for degraded answers but answers nothing at the edge.
MODEL_ONLY_EDGE = {"templates_enabled": False, "cache_enabled": False, "pre_classifier_intents": []}


@dataclass
class Outcome:
    sent_at: float
    kind: str  # model, degraded, 429, 503, hung, lost
    latency_ms: float
    retry_after: bool = True
    service_ms: float | None = None  # the answer's latency_ms: time inside the ingress handler


async def open_loop(
    url: str, bodies: list[dict], rates: list[float], step_s: float, timeout_s: float
) -> list[tuple[int, Outcome]]:
    """Sends at each rate for step_s, one after the other; returns (step index, outcome).
    On aiohttp: an httpx client spends so much CPU per request that at 3x its own loop
    fell seconds behind on these shared cores, and its late sends counted as hung."""
    out: list[tuple[int, Outcome]] = []
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=4000)) as client:

        async def one(step: int, body: dict) -> None:
            start = time.perf_counter()
            try:
                async with client.post(url, json=body) as r:
                    status, headers = r.status, r.headers
                    answer = await r.json() if status == 200 else None
            except TimeoutError:
                out.append((step, Outcome(start, "hung", timeout_s * 1000)))
                return
            except aiohttp.ClientError:
                out.append((step, Outcome(start, "lost", 0.0)))
                return
            ms = (time.perf_counter() - start) * 1000
            service_ms = None
            if status == 200:
                kind = "degraded" if answer.get("degraded") else "model"
                service_ms = answer.get("latency_ms")
            elif status in (429, 503):
                kind = str(status)
            else:
                kind = "lost"
            out.append((step, Outcome(start, kind, ms, "retry-after" in headers or status == 200, service_ms)))

        tasks = []
        i = 0
        for step, rate in enumerate(rates):
            began = time.perf_counter()
            for k in range(int(rate * step_s)):
                delay = began + k / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.create_task(one(step, bodies[i % len(bodies)])))
                i += 1
        await asyncio.gather(*tasks)
    return out


def summarize(variant: str, rates: list[float], factors: list[float], outcomes, step_s: float) -> list[dict]:
    rows = []
    for step, (rate, factor) in enumerate(zip(rates, factors)):
        mine = [o for s, o in outcomes if s == step]
        kinds = Counter(o.kind for o in mine)
        accepted = [o.latency_ms for o in mine if o.kind in ("model", "degraded")]
        model = [o.latency_ms for o in mine if o.kind == "model"]
        n = len(mine) or 1
        rows.append(
            {
                "variant": variant,
                "load": f"{factor:g}x",
                "offered_rps": round(rate, 1),
                "accepted_rps": round(len(accepted) / step_s, 1),
                "model_rps": round(len(model) / step_s, 1),
                "p99_accepted_ms": round(percentile(accepted, 99), 1),
                "p99_model_ms": round(percentile(model, 99), 1),
                "p99_in_service_ms": round(percentile([o.service_ms for o in mine if o.service_ms is not None], 99), 1),
                "p99_refusal_ms": round(percentile([o.latency_ms for o in mine if o.kind in ("429", "503")], 99), 1),
                "model_%": round(100 * kinds["model"] / n, 1),
                "degraded_%": round(100 * kinds["degraded"] / n, 1),
                "429_%": round(100 * kinds["429"] / n, 1),
                "503_%": round(100 * kinds["503"] / n, 1),
                "hung": kinds["hung"],
                "lost": kinds["lost"],
                "no_retry_after": sum(1 for o in mine if o.kind in ("429", "503") and not o.retry_after),
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
    url = f"http://127.0.0.1:{PORT}/v1/classify"

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
        outcomes = asyncio.run(open_loop(url, bodies, rates, a.step_seconds, a.timeout_s))
        rows += summarize(variant, rates, factors, outcomes, a.step_seconds)
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
