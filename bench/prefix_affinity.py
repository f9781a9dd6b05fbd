"""Prefix-affinity routing vs Serve's default router: two generate-mode model replicas, a
multi-tenant mix whose tenants each have their own ~1,000-token instruction prefix, and a
KV cache per replica smaller than all tenants' prefixes together.

    python -m bench.prefix_affinity [--tenants 8] [--prefix-tokens 1000] [--kv-tokens 6144]
                                    [--users 8] [--seconds 60]

The model is the random 512-wide 8-layer Llama bench.prefix_cache builds (its answers mean
nothing; its prefill costs what a small real decoder's does). Each KV cache is sized with
kv_partition.planner to `--kv-tokens` tokens. Both arms run the KV-cache manager (it counts
vLLM's cached tokens and time to first token per request); only the request router
differs. Each arm starts from cold caches and is measured from its first request: an
8-user closed loop through HTTP on 127.0.0.1, tenants Zipf-distributed (s = 1.1), with
the control policies off (breaker, retries, adaptive batch knob and queue bounds).
Prints a table and writes bench/results/prefix_affinity.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time

from bench.common import (
    LOAD_ANTISPAM,
    closed_loop,
    print_table,
    start_serve,
    write_results,
)
from bench.prefix_cache import MODEL_DIR, zipf_tenants
from loadkit.graph_args import merged
from loadkit.mix import TicketMix

APP = "affinity"
PORT = 8000


def tenant_texts(tokenizer, tenants: int, tokens: int) -> dict[str, str]:
    """Distinct instruction-like texts of at least `tokens` tokens, one per tenant."""
    rng = random.Random(1)
    mix = TicketMix.load(shared=False)
    out = {}
    for t in range(tenants):
        text = f"Tenant {t} support policy and examples."
        while len(tokenizer(text)["input_ids"]) < tokens:
            text += " " + mix.draw(rng).text
        out[f"tenant-{t}"] = text
    return out


def kv_cache_bytes(kv_tokens: int, block_tokens: int = 128) -> int:
    """The planner's KV budget for `kv_tokens` tokens of the bench decoder (vLLM's CPU block size)."""
    from kv_partition.planner import LayerRange, ModelShape, budget_for

    shape = ModelShape.from_hf_config(json.loads((MODEL_DIR / "config.json").read_text()))
    ranges = [LayerRange.parse("all", f"0-{shape.layers - 1}")]
    return budget_for(shape, ranges, 1, kv_tokens, block_tokens)


def bodies(tenants: int, n: int) -> list[dict]:
    rng = random.Random(0)
    mix = TicketMix.load(shared=False)
    return [
        {"text": f"{mix.draw(rng).text} (ref {i})", "tenant": f"tenant-{t}", "user_id": f"user-{i % 64}"}
        for i, t in enumerate(zipf_tenants(rng, tenants, n))
    ]


def run_arm(serve, affinity: bool, tenants_file: str, args) -> dict:
    from deployments.config import EDGE_OFF, POLICIES_OFF, AppConfig
    from serve_app import bind_graph

    # Control policies off: a CPU decoder's seconds-long calls would trip the breaker's
    # slow-call rule and the queue bounds, and their 503s, not routing, would be measured.
    config = AppConfig.from_args(
        merged(
            POLICIES_OFF,
            {
                "topology": "fused",
                "antispam": LOAD_ANTISPAM,
                "edge": EDGE_OFF,
                "model": {
                    "engine": {
                        "mode": "generate",
                        "model_dir": str(MODEL_DIR),
                        "max_model_len_tokens": args.prefix_tokens + 512,
                        "kv_cache_memory_bytes": kv_cache_bytes(args.kv_tokens),
                        "tenant_instructions_file": tenants_file,
                    }
                },
                "kv_cache": {"enabled": True, "affinity_routing": affinity},
            },
        )
    )
    serve.run(bind_graph(config, {"ModelReplica": {"num_replicas": 2}}), name=APP, route_prefix=f"/{APP}")
    manager = serve.get_deployment_handle("KVCacheManager", APP)
    try:
        load = asyncio.run(
            closed_loop(
                "affinity" if affinity else "default",
                f"http://127.0.0.1:{PORT}/{APP}/v1/classify",
                bodies(args.tenants, 20_000),
                args.users,
                args.seconds,
            )
        )
        time.sleep(1.5)  # the replicas' last reports
        snap = manager.snapshot.remote().result()
    finally:
        serve.delete(APP)
    totals = snap["totals"]
    return {
        "load": load.row(),
        "errors": load.errors,
        "totals": totals,
        "ttft_ms": snap["ttft_ms"],
        "tenants_per_replica": {r: sorted(keys) for r, keys in snap["served"].items()},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tenants", type=int, default=8)
    p.add_argument("--prefix-tokens", type=int, default=1000)
    p.add_argument("--kv-tokens", type=int, default=6144, help="KV cache per replica, in tokens")
    p.add_argument("--users", type=int, default=8, help="concurrent closed-loop clients")
    p.add_argument("--seconds", type=float, default=60, help="measured time per arm")
    args = p.parse_args()

    from transformers import AutoTokenizer

    from models.tiny_decoder import build_tiny_decoder

    if not (MODEL_DIR / "config.json").exists():
        build_tiny_decoder(MODEL_DIR, 512, 8, max_positions=args.prefix_tokens + 512)
    texts = tenant_texts(AutoTokenizer.from_pretrained(MODEL_DIR), args.tenants, args.prefix_tokens)
    import yaml

    from bench.common import RESULTS

    tenants_file = RESULTS / "prefix_affinity_tenants.yaml"
    RESULTS.mkdir(parents=True, exist_ok=True)
    tenants_file.write_text(yaml.safe_dump(texts, allow_unicode=True))

    from ray import serve

    start_serve(PORT)
    arms = {name: run_arm(serve, name == "affinity", str(tenants_file), args) for name in ("default", "affinity")}
    rows = []
    for name, arm in arms.items():
        t, ttft = arm["totals"], arm["ttft_ms"]
        rows.append(
            {
                "router": name,
                "tickets/s": arm["load"]["req_per_s"],
                "P50 ms": arm["load"]["p50_ms"],
                "P99 ms": arm["load"]["p99_ms"],
                "errors": arm["load"]["errors"],
                "prefix hit rate": round(t["hits"] / max(1, t["uses"]), 3),
                "cached tokens": round(t["cached_tokens"] / max(1, t["prompt_tokens"]), 3),
                "TTFT P50 ms": ttft["all"].get("p50"),
                "TTFT P99 ms": ttft["all"].get("p99"),
                "TTFT hit / miss P50 ms": f"{ttft['hit'].get('p50')} / {ttft['miss'].get('p50')}",
                "tenants per replica": "/".join(str(len(k)) for k in arm["tenants_per_replica"].values()),
            }
        )
    table = print_table(rows)
    write_results("prefix_affinity", {"settings": vars(args), "rows": rows, "table": table, "arms": arms})


if __name__ == "__main__":  # vLLM's engine processes re-import this module
    main()
