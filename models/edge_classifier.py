"""The edge pre-classifier: hashed character n-grams and a linear model.

Character n-grams need no tokenizer and work for Chinese and Japanese as well as for
English; one sparse dot product costs microseconds. `models.build` trains it on the same
rows as the served model and stores it beside the weights, tagged with the model
version, so the edge router can refuse to pair it with another model.
"""

from __future__ import annotations

import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from models.ranking import RunnersUp, runners_up

EDGE_FILE = "edge_classifier.npz"
MAX_NGRAM = 4
N_FEATURES = 2**17


def featurize(text: str) -> tuple[np.ndarray, np.ndarray]:
    """(feature indices, L2-normalized counts) of the text's character 1..4-grams.

    N-grams stay inside words for spaced scripts; an unspaced Chinese or Japanese
    sentence is one "word", so its n-grams run across the sentence. crc32 rather than
    hash(): Python salts str hashes per process, and the model must mean the same
    thing in every replica.
    """
    counts: Counter[int] = Counter()
    for word in text.casefold().split():
        padded = f" {word} "
        for n in range(1, MAX_NGRAM + 1):
            for i in range(len(padded) - n + 1):
                counts[zlib.crc32(padded[i : i + n].encode()) % N_FEATURES] += 1
    index = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
    values = np.fromiter(counts.values(), dtype=np.float32, count=len(counts))
    norm = float(np.linalg.norm(values))
    return index, values / norm if norm else values


def _matrix(texts: list[str]):
    from scipy.sparse import csr_matrix

    rows, cols, vals = [], [], []
    for r, text in enumerate(texts):
        index, values = featurize(text)
        rows.extend([r] * len(index))
        cols.extend(index.tolist())
        vals.extend(values.tolist())
    return csr_matrix((vals, (rows, cols)), shape=(len(texts), N_FEATURES), dtype=np.float32)


@dataclass(frozen=True)
class EdgePrediction:
    label: str
    confidence: float
    runners_up: RunnersUp = ()


class EdgeClassifier:
    def __init__(self, labels: list[str], coef: np.ndarray, intercept: np.ndarray, model_version: str):
        self.labels = labels
        self.model_version = model_version
        self._coef_t = np.ascontiguousarray(coef.T, dtype=np.float32)
        self._intercept = intercept.astype(np.float32)

    def predict(self, text: str) -> EdgePrediction:
        index, values = featurize(text)
        logits = values @ self._coef_t[index] + self._intercept
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        best = int(probs.argmax())
        return EdgePrediction(self.labels[best], float(probs[best]), runners_up(self.labels, probs.tolist()))

    def weights_bytes(self) -> bytes:
        """What decides its answers: labels and weights (not the model it is paired with)."""
        return "\n".join(self.labels).encode() + self._coef_t.tobytes() + self._intercept.tobytes()

    def save(self, model_dir: str | Path) -> None:
        np.savez_compressed(
            Path(model_dir, EDGE_FILE),
            labels=np.array(self.labels),
            coef=self._coef_t.T,
            intercept=self._intercept,
            model_version=np.array(self.model_version),
        )

    @classmethod
    def load(cls, model_dir: str | Path) -> EdgeClassifier:
        path = Path(model_dir, EDGE_FILE)
        if not path.exists():
            raise FileNotFoundError(
                f"{path} not found: rebuild the model with `python -m models.build --out {model_dir}`"
            )
        with np.load(path) as f:
            return cls([str(x) for x in f["labels"]], f["coef"], f["intercept"], str(f["model_version"]))


def train_edge_classifier(
    rows: list[tuple[str, str]], labels: list[str], model_version: str, c: float = 100.0
) -> tuple[EdgeClassifier, float]:
    """Returns the classifier and its training accuracy. A weak regularization (large
    `c`) lets confident answers reach the edge threshold on small training sets."""
    from sklearn.linear_model import LogisticRegression

    x = _matrix([t for t, _ in rows])
    index = {label: i for i, label in enumerate(labels)}
    y = np.array([index[lab] for _, lab in rows])
    # Fitted on the columns some training text hashes to (under half of them): an unused
    # column's weight is 0 at the optimum anyway (its gradient is its L2 term alone), and
    # the build's fit took 15 instead of 38 s on the bundled data.
    used = np.unique(x.indices)
    x = x[:, used]
    lr = LogisticRegression(C=c, max_iter=2000)
    lr.fit(x, y)
    # LogisticRegression drops classes it never saw; the bundled and user data carry every label.
    coef = np.zeros((len(labels), N_FEATURES), dtype=np.float32)
    intercept = np.zeros(len(labels), dtype=np.float32)
    coef[np.ix_(lr.classes_, used)] = lr.coef_
    intercept[lr.classes_] = lr.intercept_
    return EdgeClassifier(labels, coef, intercept, model_version), float(lr.score(x, y))
