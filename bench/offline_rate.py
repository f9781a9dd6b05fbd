"""The engine's offline batch rate: the same model and ticket texts as the load test, one
`LLM.classify` call over all of them, no Serve, no HTTP. The ceiling the served model path
is measured against.

    python -m bench.offline_rate [--tickets 2000] [--model-dir artifacts/models/default]

Prints tickets/s and writes bench/results/offline_rate.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from loadkit.mix import TicketMix
from models.build import DEFAULT_OUT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tickets", type=int, default=2000, help="texts classified in the timed call")
    parser.add_argument("--model-dir", default=str(DEFAULT_OUT))
    parser.add_argument("--kv-fraction", type=float, default=0.1, help="vLLM gpu_memory_utilization (CPU: of RAM)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/offline_rate.json"))
    args = parser.parse_args()

    from vllm import LLM

    rng = random.Random(0)
    mix = TicketMix.load()
    texts = [mix.draw(rng).text for _ in range(args.tickets)]
    llm = LLM(
        model=args.model_dir,
        runner="pooling",
        dtype="float32",
        enforce_eager=True,
        gpu_memory_utilization=args.kv_fraction,
    )
    llm.classify(texts[:64], use_tqdm=False)  # warm-up: first-call allocations
    start = time.perf_counter()
    outputs = llm.classify(texts, use_tqdm=False)
    seconds = time.perf_counter() - start
    assert len(outputs) == len(texts)
    result = {"tickets": len(texts), "seconds": round(seconds, 2), "tickets_per_s": round(len(texts) / seconds, 1)}
    print(f"offline batch rate: {result['tickets_per_s']} tickets/s ({len(texts)} tickets in {seconds:.1f} s)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":  # vLLM starts worker processes that re-import this module
    main()
