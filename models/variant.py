"""A model derived from a built one, for rollout drills: a copy under a new version, or a
deliberately worse one whose classifier head answers with shuffled labels.

    python -m models.variant --out artifacts/models/canary-bad --shuffle-labels
    python -m models.variant --out artifacts/models/canary-copy

Permuting the rows of the classification head is what training on consistently
shuffled labels converges to, in seconds instead of minutes: the encoder is unchanged,
every intent comes out as another one. The copy answers exactly like its source.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
from pathlib import Path

from models.artifacts import ModelMetadata
from models.build import DEFAULT_OUT
from models.edge_classifier import EdgeClassifier

HEAD = ("classifier.weight", "classifier.bias")
# The pre-classifier is tied to its source's version: a copy gets it re-tagged with its own
# (it answers as the source does), a shuffled variant is served without one.
EDGE_FILE = "edge_classifier.npz"


def derive(source: Path, out: Path, shuffle_seed: int | None = None) -> ModelMetadata:
    from safetensors.torch import load_file, save_file

    meta = ModelMetadata.load(source)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(source, tmp, ignore=lambda _, names: [n for n in names if n == EDGE_FILE])
    kind = "copy"
    order = list(range(len(meta.labels)))
    if shuffle_seed is not None:
        weights = load_file(tmp / "model.safetensors")
        rng = random.Random(shuffle_seed)
        while any(i == j for i, j in enumerate(order)):  # no intent keeps its own row
            rng.shuffle(order)
        for name in HEAD:
            weights[name] = weights[name][order].contiguous()
        save_file(weights, tmp / "model.safetensors", metadata={"format": "pt"})
        kind = f"shuffled{shuffle_seed}"
    meta.version = f"{out.name}-{kind}-of-{meta.version}"
    if shuffle_seed is None and (source / EDGE_FILE).exists():
        edge = EdgeClassifier.load(source)
        edge.model_version = meta.version
        edge.save(tmp)
    # head_order: row i of the new head is row head_order[i] of the source's (the fake
    # engine answers a derived model through it).
    meta.extra = {**meta.extra, "derived_from": str(source), "derivation": kind, "head_order": order}
    meta.save(tmp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    print(f"built {meta.version} in {out}", file=sys.stderr)
    return meta


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--source", type=Path, default=DEFAULT_OUT, help="a built model directory")
    p.add_argument("--out", type=Path, required=True, help="output model directory")
    p.add_argument("--shuffle-labels", action="store_true", help="permute the classification head (a worse model)")
    p.add_argument("--seed", type=int, default=1, help="seed of the permutation")
    a = p.parse_args(argv)
    derive(a.source, a.out, a.seed if a.shuffle_labels else None)


if __name__ == "__main__":
    main()
