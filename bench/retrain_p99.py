"""Does a retrain starve the graph? Live tickets at a fixed rate, P99 while the graph is
idle of retrains, then while one runs (docs/loop.md).

    bash scripts/loop_serve.sh     # or any graph with the retrainer and resolved items
    python -m bench.retrain_p99 --rate 4 --idle-s 60 --out bench/results/retrain_p99.json

Tickets are the golden set's texts, each with a fresh reference so that no answer comes
from the result cache, from distinct users, sent open-loop (one every 1/rate s whatever
the answers do).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path

import httpx

from bench.stamp import stamped
from models.golden import load
from policies.window import nearest_rank

ROOT = Path(__file__).resolve().parent.parent


async def load_phase(url: str, rate: float, until, texts: list[str], tag: str) -> dict:
    """Sends one ticket every 1/rate s while `until()` is false; latency of each answer."""
    latencies, failed, sent = [], 0, 0
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:

        async def one(i: int) -> None:
            nonlocal failed
            body = {"text": f"{texts[i % len(texts)]} (ref {tag}-{i})", "user_id": f"p99-{tag}-{i % 500}"}
            start = time.perf_counter()
            r = await client.post("/v1/classify", json=body)
            if r.status_code == 200:
                latencies.append((time.perf_counter() - start) * 1000)
            else:
                failed += 1

        tasks, next_at = [], time.monotonic()
        while not until():
            tasks.append(asyncio.create_task(one(sent)))
            sent += 1
            next_at += 1 / rate
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        await asyncio.gather(*tasks)
    latencies.sort()
    return {
        "sent": sent,
        "answered": len(latencies),
        "failed": failed,
        "p50_ms": round(nearest_rank(latencies, 0.5), 1) if latencies else None,
        "p99_ms": round(nearest_rank(latencies, 0.99), 1) if latencies else None,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--token-env", default="TICKETSERVE_ADMIN_TOKEN")
    p.add_argument("--rate", type=float, default=4.0, help="tickets per second")
    p.add_argument("--idle-s", type=float, default=60.0)
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "retrain_p99.json")
    a = p.parse_args(argv)
    admin = httpx.Client(
        base_url=a.url, headers={"Authorization": f"Bearer {os.environ.get(a.token_env, '')}"}, timeout=60
    )
    texts = [item.text for item in load()]
    end = time.monotonic() + a.idle_s
    idle = asyncio.run(load_phase(a.url, a.rate, lambda: time.monotonic() > end, texts, "idle"))
    started = admin.post("/admin/retrain")
    if started.status_code != 202:
        raise SystemExit(f"retrain refused: {started.text}")
    checked = {"at": 0.0, "running": True}

    def retrain_over() -> bool:
        if time.monotonic() - checked["at"] > 5:
            checked["at"] = time.monotonic()
            checked["running"] = admin.get("/admin/retrain").json()["status"] == "running"
        return not checked["running"]

    t0 = time.monotonic()
    during = asyncio.run(load_phase(a.url, a.rate, retrain_over, texts, "retrain"))
    run = admin.get("/admin/retrain").json()["current"]
    result = {
        "rate_per_s": a.rate,
        "idle": idle,
        "during_retrain": {**during, "seconds": round(time.monotonic() - t0, 1)},
        "retrain": {k: run[k] for k in ("status", "candidate_version", "seconds")},
        "p99_ratio": round(during["p99_ms"] / idle["p99_ms"], 2) if idle["p99_ms"] and during["p99_ms"] else None,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(stamped(result), indent=2))
    print(f"{'phase':<16} {'sent':>6} {'answered':>8} {'failed':>6} {'P50 ms':>8} {'P99 ms':>8}")
    for name, phase in (("idle", idle), ("during retrain", during)):
        print(
            f"{name:<16} {phase['sent']:>6} {phase['answered']:>8} {phase['failed']:>6} "
            f"{phase['p50_ms']:>8} {phase['p99_ms']:>8}"
        )
    print(f"P99 during / idle: {result['p99_ratio']}; retrain {run['status']} in {run['seconds']} s")


if __name__ == "__main__":
    main()
