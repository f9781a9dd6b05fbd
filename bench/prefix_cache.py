"""What a prefix-cache hit saves on this machine: one vLLM engine, a decoder the benchmark
builds, tenant instruction prefixes of ~1,000 tokens, one short ticket after each.

    python -m bench.prefix_cache [--prefix-tokens 1000] [--hidden-size 512] [--layers 8]

1. Time to first token (a 1-token generation, one request at a time): a prefix the
   engine has never seen (miss) vs one it computed before (hit).
2. Throughput of a multi-tenant mix (8 tenants, Zipf shares), all requests at once,
   with vLLM's prefix caching on and off.
The affinity router (issue 6) can only win what (1) and (2) show. Prints a table and
writes bench/results/prefix_cache.json.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from bench.common import print_table, write_results
from loadkit.mix import TicketMix
from models.build import ROOT

MODEL_DIR = ROOT / "artifacts" / "models" / "prefix-bench-decoder"


def tenant_prefixes(tokenizer, tenants: int, tokens: int) -> list[list[int]]:
    """Distinct instruction-like prefixes of `tokens` token ids, one per tenant."""
    rng = random.Random(1)
    mix = TicketMix.load(shared=False)
    out = []
    for t in range(tenants):
        ids = tokenizer(f"Tenant {t} support policy.", add_special_tokens=True)["input_ids"]
        while len(ids) < tokens:
            ids += tokenizer(" " + mix.draw(rng).text, add_special_tokens=False)["input_ids"]
        out.append(ids[:tokens])
    return out


def zipf_tenants(rng: random.Random, tenants: int, n: int, s: float = 1.1) -> list[int]:
    weights = [1 / (k + 1) ** s for k in range(tenants)]
    return rng.choices(range(tenants), weights, k=n)


def run(args) -> dict:
    from transformers import AutoTokenizer
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    from models.tiny_decoder import build_tiny_decoder

    if not (MODEL_DIR / "config.json").exists():
        build_tiny_decoder(MODEL_DIR, args.hidden_size, args.layers, max_positions=args.prefix_tokens + 512)
    tokenizer = AutoTokenizer.from_pretrained(MODEL_DIR)
    if tokenizer is None:
        raise SystemExit(f"{MODEL_DIR} has no tokenizer")
    prefixes = tenant_prefixes(tokenizer, args.tenants + args.ttft_requests, args.prefix_tokens)
    rng = random.Random(0)
    mix = TicketMix.load(shared=False)

    def prompt(prefix: list[int]) -> TokensPrompt:
        ticket = tokenizer(" Ticket: " + mix.draw(rng).text, add_special_tokens=False)["input_ids"][:48]
        return TokensPrompt(prompt_token_ids=prefix + ticket)

    one_token = SamplingParams(max_tokens=1, temperature=0)
    rows, result = [], {}
    for caching in (True, False):
        llm = LLM(
            model=str(MODEL_DIR),
            dtype="float32",
            enforce_eager=True,
            enable_prefix_caching=caching,
            gpu_memory_utilization=args.kv_fraction,
            max_model_len=args.prefix_tokens + 512,
        )
        llm.generate([prompt(prefixes[0])], one_token, use_tqdm=False)  # warm-up, and tenant 0's prefix cached
        timings = {"miss": [], "hit": []}
        for i in range(args.ttft_requests):
            for kind, prefix in (("miss", prefixes[args.tenants + i]), ("hit", prefixes[0])):
                start = time.perf_counter()
                llm.generate([prompt(prefix)], one_token, use_tqdm=False)
                timings[kind].append((time.perf_counter() - start) * 1000)
        batch = [prompt(prefixes[t]) for t in zipf_tenants(rng, args.tenants, args.mix_requests)]
        start = time.perf_counter()
        llm.generate(batch, one_token, use_tqdm=False)
        rate = len(batch) / (time.perf_counter() - start)
        label = "on" if caching else "off"
        rows.append(
            {
                "prefix caching": label,
                "TTFT new prefix ms (median)": round(statistics.median(timings["miss"]), 1),
                "TTFT seen prefix ms (median)": round(statistics.median(timings["hit"]), 1),
                f"{args.tenants}-tenant Zipf mix req/s": round(rate, 1),
            }
        )
        result[label] = {"ttft_ms": timings, "mix_req_per_s": rate}
        del llm
    print_table(rows)
    return {"settings": vars(args), "rows": rows, "raw": result}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prefix-tokens", type=int, default=1000)
    p.add_argument("--hidden-size", type=int, default=512, help="of the decoder built on first use")
    p.add_argument("--layers", type=int, default=8, help="of the decoder built on first use")
    p.add_argument("--tenants", type=int, default=8)
    p.add_argument("--ttft-requests", type=int, default=10, help="one-at-a-time requests per kind")
    p.add_argument("--mix-requests", type=int, default=64)
    p.add_argument("--kv-fraction", type=float, default=0.1)
    args = p.parse_args()
    write_results("prefix_cache", run(args))


if __name__ == "__main__":  # vLLM's engine processes re-import this module
    main()
