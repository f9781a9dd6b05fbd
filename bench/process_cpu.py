"""Where the CPU goes at a given load: each process's share of a core on this machine.

    bash scripts/serve.sh &                                    # the graph on :8000
    python -m bench.process_cpu --rates 0,2,40                 # tickets/s, 10 s each

Sends new tickets (no cache hits) at each rate and prints the busiest processes. It found
vLLM's worker spinning a whole core at 2 tickets/s (`model.engine.ipc_busy_wait_ms`).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time

from bench.common import (
    bundled_bodies,
    cpu_seconds,
    percentile,
    print_table,
    write_results,
)
from bench.overload import open_loop


def measure(url: str, rate: float, seconds: float, top: int) -> list[dict]:
    rng = random.Random(rate)
    bodies = [
        {**b, "text": f"{b['text']} (ref {rng.getrandbits(32):08x})", "user_id": f"cpu-{i}"}
        for i, b in enumerate(bundled_bodies())
    ]
    before, start = cpu_seconds(), time.monotonic()
    if rate:
        outcomes = asyncio.run(open_loop(url, bodies, [rate], seconds, timeout_s=35))
    else:
        time.sleep(seconds)
        outcomes = []
    elapsed, after = time.monotonic() - start, cpu_seconds()
    ms = [o.latency_ms for _, o in outcomes if o.kind in ("model", "degraded")]
    shares = sorted(((after[pid][1] - t) / elapsed, after[pid][0]) for pid, (_, t) in before.items() if pid in after)
    load = {
        "answered": len(ms),
        "p50_ms": round(percentile(ms, 50), 1) if ms else None,
        "p99_ms": round(percentile(ms, 99), 1) if ms else None,
    }
    return [
        {"rate_per_s": rate, "process": name, "core_percent": round(100 * share, 1), **load}
        for share, name in reversed(shares[-top:])
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000/v1/classify")
    parser.add_argument("--rates", default="0,2,40", help="tickets per second, comma-separated")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--top", type=int, default=6, help="processes shown per rate")
    args = parser.parse_args()
    rows = [row for rate in args.rates.split(",") for row in measure(args.url, float(rate), args.seconds, args.top)]
    table = print_table(rows)
    write_results("process_cpu", {"rows": rows, "table": table, "seconds": args.seconds})


if __name__ == "__main__":
    main()
