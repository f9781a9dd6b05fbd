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
    print_table,
    write_results,
)
from loadkit.generators import open_loop
from loadkit.stats import percentile


def measure(url: str, rate: float, seconds: float, top: int) -> list[dict]:
    rng = random.Random(rate)
    bodies = [
        {**b, "text": f"{b['text']} (ref {rng.getrandbits(32):08x})", "user_id": f"cpu-{i}"}
        for i, b in enumerate(bundled_bodies())
    ]
    before, start = cpu_seconds(), time.monotonic()
    ms: list[float] = []
    if rate:
        out, _ = asyncio.run(open_loop(url, bodies, [(rate, seconds)], timeout_s=35, max_in_flight=4000))
        ms = out.ok_ms
    else:
        time.sleep(seconds)
    elapsed, after = time.monotonic() - start, cpu_seconds()
    shares = sorted(((after[pid][1] - t) / elapsed, after[pid][0]) for pid, (_, t) in before.items() if pid in after)
    load = {
        "answered": len(ms),
        "p50_ms": percentile(ms, 50, 1),
        "p99_ms": percentile(ms, 99, 1),
    }
    return [
        {"rate_per_s": rate, "process": name, "core_percent": round(100 * share, 1), **load}
        for share, name in reversed(shares[-top:])
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000/", help="the graph's base URL (route prefix)")
    parser.add_argument("--rates", default="0,2,40", help="tickets per second, comma-separated")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--top", type=int, default=6, help="processes shown per rate")
    args = parser.parse_args()
    rows = [row for rate in args.rates.split(",") for row in measure(args.url, float(rate), args.seconds, args.top)]
    table = print_table(rows)
    write_results("process_cpu", {"rows": rows, "table": table, "seconds": args.seconds})


if __name__ == "__main__":
    main()
