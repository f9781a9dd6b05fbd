"""What a served model directory holds besides the weights, and the tokenizer fingerprint."""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

METADATA_FILE = "ticketserve.json"
# Resolved review items a retrained candidate never trained on (models.retrain).
REVIEWED_SET_FILE = "reviewed_set.csv"
# The rows a model was built from (text, label, lang, style): what its retrains replay
# beside the reviews, so a model of any taxonomy retrains on its own data. A candidate
# keeps its source's rows; reviews stay in the review store, where erasure reaches them.
TRAINING_DATA_FILE = "training_data.csv"
LABELLED_COLUMNS = ("text", "label", "lang", "style")
# The label of a ticket that fits none of the model's intents; always flagged for review.
OUT_OF_SCOPE = "out_of_scope"
RESERVED_TIER = "reserved"

# Files that decide how text becomes token ids; config and weights are not part of it.
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "special_tokens_map.json",
    "merges.txt",
    "vocab.json",
    "tokenizer.model",
)


def read_labelled_rows(path: str | Path) -> list[tuple[str, str, str]]:
    """(text, label, lang) of a CSV with those columns (lang optional): the review export,
    a candidate's reviewed set, a benchmark's stream or test set."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        return [(r["text"], r["label"], r.get("lang") or "") for r in csv.DictReader(f)]


def write_labelled_rows(path: str | Path, rows: list[dict[str, str]]) -> None:
    """`rows` as a CSV of LABELLED_COLUMNS (what `models.build --data` reads)."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=LABELLED_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def tokenizer_hash(model_dir: str | Path) -> str:
    """sha256 over the tokenizer files present in `model_dir`, short form."""
    model_dir = Path(model_dir)
    h = hashlib.sha256()
    found = False
    for name in TOKENIZER_FILES:
        path = model_dir / name
        if path.exists():
            found = True
            h.update(name.encode())
            h.update(path.read_bytes())
    if not found:
        raise FileNotFoundError(f"no tokenizer files ({', '.join(TOKENIZER_FILES)}) in {model_dir}")
    return h.hexdigest()[:16]


def answer_digest(model_dir: str | Path, settings: dict[str, Any], edge_weights: bytes = b"") -> str:
    """sha256 over what decides a served model's answers: its weights, tokenizer files,
    the edge pre-classifier's weights and `settings` (labels, pooling, thresholds)."""
    h = hashlib.sha256()
    with open(Path(model_dir, "model.safetensors"), "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    h.update(tokenizer_hash(model_dir).encode())
    h.update(edge_weights)
    h.update(json.dumps(settings, sort_keys=True).encode())
    return h.hexdigest()


def metadata_mtime_ns(model_dir: str | Path) -> int | None:
    """When the directory's metadata last changed (None: no metadata): a cheap check for a
    directory rebuilt in place, without reading it."""
    try:
        return Path(model_dir, METADATA_FILE).stat().st_mtime_ns
    except FileNotFoundError:
        return None


@dataclass
class ModelMetadata:
    version: str
    labels: list[str]
    tiers: dict[str, str]
    tokenizer_hash: str
    fingerprint: str = ""
    trained_rows: int = 0
    train_accuracy: float = 0.0
    data_file: str = ""
    # Training rows per label: the reference the served label mix drifts from.
    label_mix: dict[str, int] = field(default_factory=dict)
    # generate mode: the shared instruction placed before every ticket.
    instruction: str = ""
    # Read off the validation split at build time (models.calibration): answers below this
    # calibrated confidence are flagged; None for models built elsewhere.
    review_threshold: float | None = None
    # Pre-classifier probability needed to answer at the edge, per language ("*": any).
    edge_min_confidence: dict[str, float] = field(default_factory=dict)
    # What each label covers and the rules between them (models.taxonomy); {} where the
    # build had none (a model trained on other data).
    taxonomy: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def save(self, model_dir: str | Path) -> None:
        Path(model_dir, METADATA_FILE).write_text(json.dumps(asdict(self), indent=2, ensure_ascii=False))

    @classmethod
    def load(cls, model_dir: str | Path) -> ModelMetadata:
        path = Path(model_dir, METADATA_FILE)
        if not path.exists():
            raise FileNotFoundError(f"{path} not found: build a model with `python -m models.build --out {model_dir}`")
        return cls(**json.loads(path.read_text()))

    def label_tiers(self) -> dict[str, str]:
        """Every label's tier; a label the build declared none for needs the model."""
        return {label: self.tiers.get(label, "regular") for label in self.labels}

    @classmethod
    def load_locked(cls, model_dir: str | Path) -> ModelMetadata:
        """The metadata, once the tokenizer files beside the weights are the ones the model
        was built with (an engine fed other token ids would answer nonsense, silently)."""
        meta = cls.load(model_dir)
        actual = tokenizer_hash(model_dir)
        if actual != meta.tokenizer_hash:
            raise RuntimeError(
                f"{model_dir}: tokenizer files hash to {actual}, but the model was built with "
                f"{meta.tokenizer_hash}; rebuild the model"
            )
        return meta
