"""What a second encoder per ticket would buy on a ../shared data set, judged offline.

    python -m bench.ensemble --dataset banking77 --epochs 8 --label-smoothing 0.1 \
        --fine-tune e5-small:13 --fine-tune e5-small:14 --fine-tune minilm:13 \
        --frozen e5-small --frozen minilm

Same split as bench.quality (stratified 80/20, seed 0). A fine-tuned system is
`models.build.train` on the rows the build trains on (its calibration hold-out left out),
judged by the pooling path vLLM serves (`models.build.predict_logits`): offline and served
accuracy agreed to the ticket on Banking77 (docs/quality.md). A frozen system is the base
encoder, mean-pooled, + logistic regression on the same rows. Every system alone, then
every pair with their class probabilities averaged: what serving two encoders per ticket
would reach. Prints a table and writes bench/results/ensemble-<data set>.json.
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

from bench.common import print_table, write_results
from bench.quality import DATASETS, embed, frozen_classifier, load_split
from models.build import BASES, TrainSettings, base_model_dir, calibration_split, predict_logits, train
from models.calibration import softmax


def fine_tuned(rows, labels: list[str], test_texts: list[str], settings: TrainSettings) -> np.ndarray:
    model, tokenizer, _ = train(rows, labels, base_model_dir(settings.base), settings)
    return softmax(predict_logits(model, tokenizer, test_texts, settings))


def frozen(rows, labels: list[str], test_texts: list[str], base: str) -> np.ndarray:
    clf = frozen_classifier([t for t, _ in rows], [lab for _, lab in rows], base)
    # predict_proba's columns follow clf.classes_, sorted like `labels`.
    assert list(clf.classes_) == labels
    return clf.predict_proba(embed(test_texts, base))


def base_seed(spec: str) -> tuple[str, int]:
    base, _, seed = spec.partition(":")
    if base not in BASES or not seed.isdigit():
        raise argparse.ArgumentTypeError(f"{spec!r}: expected BASE:SEED with BASE one of {', '.join(BASES)}")
    return base, int(seed)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--dataset", choices=sorted(DATASETS), default="banking77")
    p.add_argument("--epochs", type=int, default=8, help="fine-tuning epochs")
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument(
        "--fine-tune", type=base_seed, action="append", metavar="BASE:SEED", help="default: both bases, seed 13"
    )
    p.add_argument("--frozen", choices=BASES, action="append", help="frozen base + logistic regression (default: both)")
    a = p.parse_args()
    train_rows, test_rows = load_split(a.dataset)
    rows, _ = calibration_split(train_rows)
    labels = sorted({lab for _, lab in train_rows})
    texts = [t for t, _ in test_rows]
    gold = np.array([labels.index(lab) for _, lab in test_rows])
    probs: dict[str, np.ndarray] = {}
    minutes: dict[str, float] = {}
    for base, seed in a.fine_tune or [(b, 13) for b in BASES]:
        name = f"fine-tuned {base}, seed {seed}"
        settings = TrainSettings(base=base, epochs=a.epochs, label_smoothing=a.label_smoothing, seed=seed)
        start = time.perf_counter()
        probs[name] = fine_tuned(rows, labels, texts, settings)
        minutes[name] = round((time.perf_counter() - start) / 60, 1)
    for base in a.frozen or list(BASES):
        name = f"frozen {base} + logistic regression"
        start = time.perf_counter()
        probs[name] = frozen(rows, labels, texts, base)
        minutes[name] = round((time.perf_counter() - start) / 60, 1)
    table = [
        {"system": name, "encoders per ticket": 1, "accuracy": float((p.argmax(1) == gold).mean())}
        for name, p in probs.items()
    ]
    for x, y in itertools.combinations(probs, 2):
        mean = (probs[x] + probs[y]) / 2
        table.append(
            {"system": f"{x} + {y}", "encoders per ticket": 2, "accuracy": float((mean.argmax(1) == gold).mean())}
        )
    write_results(
        f"ensemble-{a.dataset}",
        {
            "train_rows": len(rows),
            "test_rows": len(test_rows),
            "epochs": a.epochs,
            "label_smoothing": a.label_smoothing,
            "minutes": minutes,
            "systems": table,
        },
    )
    print_table([{**r, "accuracy": f"{r['accuracy']:.4f}"} for r in table])


if __name__ == "__main__":
    main()
