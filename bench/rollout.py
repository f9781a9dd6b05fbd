"""Blue-green rollout on this machine: what a canary costs, and how soon a bad one is gone.

    python -m bench.rollout [--users 32] [--seconds 60] [--arms stable,shadow,split,bad]

Each arm is its own graph with serve_config.yaml's settings (fused, edge tier on) and the
bundled default model as stable, under a closed loop of `--users` clients on 127.0.0.1
sending the load-test mix with ticket ids:

    stable   no canary model (the baseline)
    shadow   a copy of the stable model answers a shadow copy of every model ticket
    split    the copy answers 50 % of the tickets live
    bad      a shuffled-label model (models.variant) at 5 % live, judged every 5 s with
             the whole golden set: seconds until the rollback, wrong answers it gave

The first three arms are measured after `--warmup-seconds`; the bad arm from the moment
the graph is healthy (its canary takes traffic from then on). A rollback in any arm is
reported with its time and reason. Prints a table and writes bench/results/rollout.json.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from collections import Counter
from typing import Any

import httpx

from bench.common import (
    BENCH_KV_FRACTION,
    LOAD_ANTISPAM,
    RESULTS,
    print_table,
    start_serve,
    write_results,
)
from loadkit.graph_args import merged, shipped_args
from loadkit.mix import TicketMix
from loadkit.stats import percentile
from models.build import DEFAULT_OUT

PORT = 8000
TOKEN = "bench-rollout"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ARMS = ("stable", "shadow", "split", "bad")


def bodies(n: int) -> list[tuple[dict, str]]:
    """(classify body, intent the text was written for)."""
    rng = random.Random(0)
    mix = TicketMix.load()
    out = []
    for i in range(n):
        t = mix.draw(rng)
        out.append(({"text": t.text, "ticket_id": f"b-{i}", "user_id": f"user-{i % 64}"}, t.label))
    return out


async def load(url: str, work: list[tuple[dict, str]], users: int, seconds: float, poll=None) -> dict:
    """Closed loop, bounded in time and count; every answer's side and correctness kept."""
    answers: list[dict] = []
    errors: Counter[str] = Counter()
    deadline = time.perf_counter() + seconds
    began = time.perf_counter()
    sent = 0
    limits = httpx.Limits(max_connections=users, max_keepalive_connections=users)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:

        async def user(k: int) -> None:
            nonlocal sent
            i = k
            while time.perf_counter() < deadline and sent < len(work):
                sent += 1
                body, intent = work[i % len(work)]
                start = time.perf_counter()
                try:
                    r = await client.post("/v1/classify", json=body)
                except httpx.HTTPError as e:
                    errors[type(e).__name__] += 1
                    continue
                finally:
                    i += users
                if r.status_code != 200:
                    errors[str(r.status_code)] += 1
                    continue
                a = r.json()
                answers.append(
                    {
                        "at_s": start - began,
                        "ms": (time.perf_counter() - start) * 1000,
                        "version": a["model_version"],
                        "route": a["route"],
                        "ok": a["label"] == intent,
                    }
                )

        tasks = [user(k) for k in range(users)]
        if poll is not None:
            tasks.append(poll(client, began, deadline))
        await asyncio.gather(*tasks)
    return {"seconds": time.perf_counter() - began, "answers": answers, "errors": dict(errors)}


def arm_args(arm: str, models: dict[str, str], golden_tickets: int) -> dict:
    args = merged(
        shipped_args(),
        {
            "antispam": LOAD_ANTISPAM,
            "model": {"engine": {"model_dir": str(DEFAULT_OUT), "gpu_memory_utilization": BENCH_KV_FRACTION}},
            "admin": {"token": TOKEN},
            "review": {"store_path": str(RESULTS / "rollout-review.sqlite3")},
        },
    )
    rollout: dict[str, Any] = {"state_path": str(RESULTS / f"rollout-{arm}.json"), "golden_tickets": golden_tickets}
    if arm == "shadow":
        rollout |= {"canary_model_dir": models["copy"], "shadow": True, "policy": {"start_percent": 100}}
    elif arm == "split":
        # Held at 50 % for the whole run: promotion would change what is measured.
        rollout |= {"canary_model_dir": models["copy"], "policy": {"start_percent": 50, "hold_s": 3600}}
    elif arm == "bad":
        rollout |= {"canary_model_dir": models["bad"], "policy": {"start_percent": 5}}
    return merged(args, {"rollout": rollout})


def run_arm(serve, arm: str, models: dict[str, str], args) -> dict:
    from deployments.config import AppConfig
    from serve_app import bind_graph

    (RESULTS / f"rollout-{arm}.json").unlink(missing_ok=True)  # each run starts its rollout afresh
    serve.run(
        bind_graph(AppConfig.from_args(arm_args(arm, models, args.golden_tickets))), name=arm, route_prefix=f"/{arm}"
    )
    url = f"http://127.0.0.1:{PORT}/{arm}"
    state = httpx.get(f"{url}/admin/state", headers=AUTH, timeout=30).json()["rollout"]
    work = bodies(200_000)
    rolled_back: dict = {}

    async def poll(client, began, deadline):
        while time.perf_counter() < deadline and not rolled_back:
            r = (await client.get("/admin/state", headers=AUTH)).json()["rollout"]
            if r["status"] == "rolled_back":
                rolled_back.update(
                    at_s=time.perf_counter() - began, reason=r["history"][-1]["reason"], golden=r["golden"]
                )
            await asyncio.sleep(0.5)

    try:
        if arm != "bad":
            asyncio.run(load(url, work[100_000:], args.users, args.warmup_seconds))
        run = asyncio.run(load(url, work, args.users, args.seconds, poll))
    finally:
        serve.delete(arm)
    answers = run["answers"]
    canary = [a for a in answers if a["version"] == state["canary_version"]]
    model = [a for a in answers if a["route"] in ("model", "cache")]
    return {
        "arm": arm,
        "tickets/s": round(len(answers) / run["seconds"], 1),
        "P50 ms": percentile([a["ms"] for a in answers], 50, 1),
        "P99 ms": percentile([a["ms"] for a in answers], 99, 1),
        "errors": sum(run["errors"].values()),
        "canary answers": len(canary),
        "canary wrong": sum(not a["ok"] for a in canary),
        "model-path accuracy": round(sum(a["ok"] for a in model) / max(1, len(model)), 3),
        "rollback at s": round(rolled_back["at_s"], 1) if rolled_back else None,
        "last canary answer at s": round(max((a["at_s"] for a in canary), default=0), 1) if arm == "bad" else None,
        "_detail": {"errors": run["errors"], "rollback": rolled_back, "versions": state},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--users", type=int, default=32, help="concurrent closed-loop clients")
    p.add_argument("--seconds", type=float, default=60, help="measured time per arm")
    p.add_argument("--warmup-seconds", type=float, default=15, help="unmeasured run before it (not the bad arm)")
    p.add_argument("--golden-tickets", type=int, default=0, help="golden tickets per comparison; 0: all 319")
    p.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, of {', '.join(ARMS)}")
    args = p.parse_args()
    arms = [a for a in args.arms.split(",") if a]
    if unknown := sorted(set(arms) - set(ARMS)):
        p.error(f"unknown arms {unknown}; allowed: {', '.join(ARMS)}")

    from ray import serve

    from models.variant import derive

    out = DEFAULT_OUT.parent
    models = {"copy": str(out / "bench-canary-copy"), "bad": str(out / "bench-canary-shuffled")}
    derive(DEFAULT_OUT, out / "bench-canary-copy")
    derive(DEFAULT_OUT, out / "bench-canary-shuffled", shuffle_seed=1)
    start_serve(PORT)
    results = [run_arm(serve, arm, models, args) for arm in arms]
    rows = [{k: v for k, v in r.items() if not k.startswith("_")} for r in results]
    table = print_table(rows)
    write_results("rollout", {"settings": vars(args), "rows": rows, "table": table, "arms": results})


if __name__ == "__main__":
    main()
