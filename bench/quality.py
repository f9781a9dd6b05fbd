"""Quality benchmark: the served fine-tuned model vs frozen MiniLM + logistic regression.

    python -m bench.quality --epochs 6                        # banking77 and bitext
    python -m bench.quality --dataset bundled --epochs 8      # the default model's recipe

For each data set in ../shared/data (or the bundled one): a stratified 80/20 split
(seed 0); the model build command fine-tunes on the 80 %; the held-out 20 % goes through
the running service over HTTP (16 concurrent clients); the baseline is all-MiniLM-L6-v2
mean-pooled embeddings (frozen) + logistic regression, trained and scored on the same split.
Prints a table and writes bench/results/quality-<data set>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import random
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import httpx
import numpy as np

from bench.common import (
    graph_config,
    percentile,
    print_table,
    start_serve,
    write_results,
)
from loadtest.mix import BITEXT, SHARED_DATA
from models.build import BUNDLED_DATA, ROOT, TrainSettings, base_model_dir, build

DATASETS = {
    "bundled": (BUNDLED_DATA, "text", "label"),
    "bitext": (BITEXT, "utterance", "intent"),
    "banking77": (SHARED_DATA / "banking77" / "train.csv", "text", "category"),
}
PORT = 18100


def load_split(name: str, seed: int = 0) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    path, text_col, label_col = DATASETS[name]
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = [(r[text_col].strip(), r[label_col].strip()) for r in csv.DictReader(f)]
    by_label = defaultdict(list)
    for row in rows:
        by_label[row[1]].append(row)
    rng = random.Random(seed)
    train, test = [], []
    for label in sorted(by_label):
        items = by_label[label]
        rng.shuffle(items)
        cut = max(1, int(len(items) * 0.2))
        test += items[:cut]
        train += items[cut:]
    return train, test


def embed(texts: list[str], tok, model) -> np.ndarray:
    import torch

    out = []
    with torch.no_grad():
        for i in range(0, len(texts), 128):
            enc = tok(texts[i : i + 128], padding=True, truncation=True, max_length=128, return_tensors="pt")
            hidden = model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).float()
            pooled = (hidden * mask).sum(1) / mask.sum(1)
            out.append(torch.nn.functional.normalize(pooled, dim=-1).numpy())
    return np.concatenate(out)


def baseline(train, test) -> dict:
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score, f1_score
    from transformers import AutoModel, AutoTokenizer

    start = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(base_model_dir())
    model = AutoModel.from_pretrained(base_model_dir()).eval()
    clf = LogisticRegression(C=10.0, max_iter=2000)
    clf.fit(embed([t for t, _ in train], tok, model), [lab for _, lab in train])
    pred = clf.predict(embed([t for t, _ in test], tok, model))
    gold = [lab for _, lab in test]
    return {
        "accuracy": accuracy_score(gold, pred),
        "macro_f1": f1_score(gold, pred, average="macro"),
        "seconds": time.perf_counter() - start,
    }


async def classify_all(test, port: int, users: int = 16) -> tuple[list[str | None], list[float]]:
    preds: list[str | None] = [None] * len(test)
    latencies: list[float] = []
    queue = list(range(len(test)))
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:

        async def user():
            while queue:
                i = queue.pop()
                start = time.perf_counter()
                r = await client.post("/v1/classify", json={"text": test[i][0]})
                latencies.append((time.perf_counter() - start) * 1000)
                if r.status_code == 200:
                    preds[i] = r.json()["label"]

        await asyncio.gather(*(user() for _ in range(users)))
    return preds, latencies


def served(name: str, train, test, epochs: int) -> dict:
    from ray import serve
    from sklearn.metrics import accuracy_score, f1_score

    from serve_app import bind_graph

    out = ROOT / "artifacts" / "models" / f"bench-{name}"
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "train.csv"
        with open(data, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows([("text", "label"), *train])
        start = time.perf_counter()
        meta = build(data, "text", "label", out, None, TrainSettings(epochs=epochs))
        train_s = time.perf_counter() - start
    serve.run(bind_graph(graph_config(out)), name=name, route_prefix="/")
    preds, latencies = asyncio.run(classify_all(test, PORT))
    serve.delete(name)
    gold = [lab for _, lab in test]
    answered = [p if p is not None else "<error>" for p in preds]
    return {
        "model_version": meta.version,
        "accuracy": accuracy_score(gold, answered),
        "macro_f1": f1_score(gold, answered, average="macro", labels=sorted(set(gold))),
        "errors": sum(p is None for p in preds),
        "train_seconds": train_s,
        "p50_ms": percentile(latencies, 50),
        "p95_ms": percentile(latencies, 95),
        "p99_ms": percentile(latencies, 99),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--dataset", action="append", choices=sorted(DATASETS),
                   help="default: the two ../shared/data sets")
    p.add_argument("--epochs", type=int, default=3, help="fine-tuning epochs (the data sets are 6-8x the bundled one)")
    a = p.parse_args()
    names = a.dataset or ["banking77", "bitext"]
    start_serve(PORT)
    rows = []
    for name in names:
        train, test = load_split(name)
        base = baseline(train, test)
        ours = served(name, train, test, a.epochs)
        result = {"epochs": a.epochs, "train_rows": len(train), "test_rows": len(test), "baseline": base, "served": ours}
        write_results(f"quality-{name}", result)
        for system, r in (("frozen MiniLM + logistic regression", base), ("served fine-tuned MiniLM (vLLM)", ours)):
            rows.append(
                {
                    "data set": f"{name} ({len(train)}/{len(test)})",
                    "system": system,
                    "accuracy": f"{r['accuracy']:.4f}",
                    "macro-F1": f"{r['macro_f1']:.4f}",
                    "p50 ms": f"{r['p50_ms']:.1f}" if "p50_ms" in r else "-",
                    "p99 ms": f"{r['p99_ms']:.1f}" if "p99_ms" in r else "-",
                }
            )
    print_table(rows)


if __name__ == "__main__":
    main()
