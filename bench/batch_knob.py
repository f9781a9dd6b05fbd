"""What the model replica's batch knob does: throughput and latency per setting.

    python -m bench.batch_knob [--limits 1,2,4,8,16,32,64,128] [--users 50] [--seconds 15]
                               [--trace-seconds 180 --trace-interval-s 10]

The knob is `ModelReplica.set_max_inflight`: how many requests may be inside the vLLM
engine at once (vLLM batches whatever is inside). One graph, edge answers and control
policies off (the knob stays where it is set), turned at run time between closed-loop
runs on 127.0.0.1. Prints a table and writes
bench/results/batch_knob.json: the evidence an adaptive batching policy has to respect.
With --trace-seconds, then the graph of serve_config.yaml (adaptive batching on) under
the same load: where the policy moves the knob, and throughput and latency meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio

from ray import serve

from bench.common import (
    add_load_args,
    bundled_bodies,
    closed_loop,
    graph_config,
    print_table,
    start_serve,
    warm_then_measure,
    write_results,
)
from serve_app import bind_graph

PORT = 18700


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--limits", default="1,2,4,8,16,32,64,128")
    p.add_argument("--trace-seconds", type=float, default=0, help="then trace the adaptive policy this long")
    p.add_argument("--trace-interval-s", type=float, default=10, help="one trace row per this many seconds")
    add_load_args(p, seconds=15, warmup_seconds=3)
    a = p.parse_args()
    bodies = bundled_bodies()

    start_serve(PORT)
    serve.run(bind_graph(graph_config(policies=False)), name="knob", route_prefix="/")
    knob = serve.get_deployment_handle("ModelReplica", "knob")
    url = f"http://127.0.0.1:{PORT}/v1/classify"
    rows = []
    for limit in (int(x) for x in a.limits.split(",")):
        knob.set_max_inflight.remote(limit).result()
        result = warm_then_measure(f"limit {limit}", url, bodies, a.users, a.seconds, a.warmup_seconds)
        rows.append({"max_inflight": limit, **result.row(), "errors_by_status": result.errors})
    serve.delete("knob")
    table = print_table([{k: v for k, v in r.items() if k not in ("target", "errors_by_status")} for r in rows])
    trace, trace_table = [], ""
    if a.trace_seconds > 0:
        serve.run(bind_graph(graph_config()), name="knob", route_prefix="/")
        knob = serve.get_deployment_handle("ModelReplica", "knob")
        for i in range(int(a.trace_seconds // a.trace_interval_s)):
            result = asyncio.run(closed_loop("adaptive", url, bodies, a.users, a.trace_interval_s))
            stats = knob.stats.remote().result()
            row = result.row()
            trace.append(
                {
                    "t_s": round((i + 1) * a.trace_interval_s),
                    "knob": stats["limit"],
                    **{k: row[k] for k in ("req_per_s", "p50_ms", "p99_ms", "errors")},
                }
            )
        serve.delete("knob")
        trace_table = print_table(trace)
    write_results("batch_knob", {"rows": rows, "table": table, "trace": trace, "trace_table": trace_table})


if __name__ == "__main__":
    main()
