"""Retrain from reviews: a candidate model from the rows the serving model was built from
plus every item people resolved in the review queue, warm-started from that model.

    curl -H "Authorization: Bearer $TICKETSERVE_ADMIN_TOKEN" http://127.0.0.1:8000/admin/review/export > reviews.csv
    python -m models.retrain --reviews reviews.csv --from artifacts/models/default \
        --out artifacts/models/candidates/manual
    python -m models.retrain --url http://127.0.0.1:8000 --wait   # the graph's retrain (a Ray task)

A hashed `--reviewed-share` of the resolved items (by text, so an item keeps its side as
the queue grows) is never trained on: it is the candidate's **reviewed set**
(`reviewed_set.csv` in its directory), on which the canary controller compares candidate
and stable. The rest train beside a replay of the serving model's own rows
(`training_data.csv` in its directory, whatever its taxonomy; all of them by default,
`--replay-rows N` samples N): without them a warm start drifts toward the few labels
people corrected. Each reviewed row counts `--review-weight` times. The candidate is a
whole model directory as `models.build` writes it (calibrated again, its own version),
with `retrain` in its metadata: the model it started from, the rows it learnt. It keeps
the serving model's label tiers and taxonomy.
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import random
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from models.artifacts import (
    REVIEWED_SET_FILE,
    TRAINING_DATA_FILE,
    ModelMetadata,
    read_labelled_rows,
    write_labelled_rows,
)
from models.build import TrainSettings, build, hashed_point

Row = tuple[str, str, str]  # text, label, lang


@dataclass(frozen=True)
class RetrainSettings:
    epochs: int = 1
    reviewed_share: float = 0.2
    replay_rows: int = 0  # the source model's rows trained again; 0: all
    review_weight: int = 2
    seed: int = 13


def is_reviewed_set(text: str, share: float) -> bool:
    """The reviewed-set side of a resolved item, by its text alone (salted apart from the
    build's validation split, so the two are independent)."""
    return hashed_point(text, b"reviewed-set\0") < share


def split_reviews(rows: list[Row], share: float) -> tuple[list[Row], list[Row]]:
    """(rows to train on, the reviewed set); a text resolved twice keeps its last label."""
    latest = {text: (text, label, lang) for text, label, lang in rows}
    train: list[Row] = []
    held: list[Row] = []
    for row in latest.values():
        (held if is_reviewed_set(row[0], share) else train).append(row)
    return train, held


def training_rows(built: list[dict[str, str]], reviews: list[Row], settings: RetrainSettings) -> list[dict[str, str]]:
    """The source model's rows to replay (all, or a seeded sample) and each review row
    `review_weight` times, as `models.build` reads them (text, label, lang, style)."""
    replay = built
    if settings.replay_rows and settings.replay_rows < len(built):
        replay = random.Random(settings.seed).sample(built, settings.replay_rows)
    rows = [
        {"text": r["text"], "label": r["label"], "lang": r.get("lang", ""), "style": r.get("style", "")} for r in replay
    ]
    learn = [{"text": t, "label": lab, "lang": lang, "style": "review"} for t, lab, lang in reviews]
    return rows + learn * settings.review_weight


def read_training_data(model_dir: Path) -> list[dict[str, str]]:
    """The rows `model_dir` was built from (models.build writes them beside the weights)."""
    path = model_dir / TRAINING_DATA_FILE
    if not path.exists():
        raise SystemExit(f"{model_dir} has no {TRAINING_DATA_FILE} to replay; build it again with models.build")
    with open(path, encoding="utf-8-sig", newline="") as f:
        return list(csv.DictReader(f))


def retrain(
    reviews: list[Row],
    source: Path,
    out: Path,
    settings: RetrainSettings = RetrainSettings(),
    train: TrainSettings = TrainSettings(),
    new_labels: dict[str, str] | None = None,
) -> ModelMetadata:
    """Builds the candidate in `out` from `reviews` (resolved items: text, label, lang).
    `new_labels`: labels people accepted that `source` lacks, with their descriptions; the
    candidate learns them from their reviewed tickets."""
    started = time.monotonic()
    stable = ModelMetadata.load(source)
    new_labels = new_labels or {}
    unknown = sorted({label for _, label, _ in reviews} - set(stable.labels) - set(new_labels))
    if unknown:
        raise SystemExit(
            f"reviews use labels {unknown} that {stable.version} lacks; accept them as new labels first "
            "(POST /admin/labels/proposals/NAME/accept, or --new-label NAME=DESCRIPTION)"
        )
    learn, reviewed_set = split_reviews(reviews, settings.reviewed_share)
    built = read_training_data(source)
    out.parent.mkdir(parents=True, exist_ok=True)
    print(
        f"retraining {stable.version}: {len(learn)} reviewed rows to learn, {len(reviewed_set)} kept as the "
        f"reviewed set, {settings.epochs} epoch(s)",
        file=sys.stderr,
    )
    warm = replace(train, epochs=settings.epochs, seed=settings.seed)
    with tempfile.TemporaryDirectory(dir=out.parent) as scratch:
        data, tiers = Path(scratch, "data.csv"), Path(scratch, "tiers.yaml")
        write_labelled_rows(data, training_rows(built, learn, settings))
        # The source's tiers; a label it lacks (an accepted new one) is "regular" (read_tiers).
        tiers.write_text(yaml.safe_dump([{"name": n, "tier": t} for n, t in stable.tiers.items()]))
        meta = build(data, "text", "label", out, tiers, warm, force=True, warm_start=source)
    # What the candidate replays in its own retrains: its source's rows, not the reviews.
    write_labelled_rows(out / TRAINING_DATA_FILE, built)
    write_labelled_rows(
        out / REVIEWED_SET_FILE,
        [{"text": t, "label": lab, "lang": lang, "style": "review"} for t, lab, lang in reviewed_set],
    )
    meta.taxonomy = copy.deepcopy(stable.taxonomy)
    learnt = {label for _, label, _ in learn}
    for name, description in new_labels.items():
        if name in learnt:
            examples = [t for t, label, _ in learn if label == name][:3]
            doc = {"description": description, "covers": [], "not": [], "examples": examples}
            meta.taxonomy.setdefault("labels", {})[name] = doc
    meta.extra["retrain"] = {
        "from_version": stable.version,
        "new_labels": sorted(learnt & set(new_labels)),
        "reviews_learnt": len(learn),
        "reviewed_set": len(reviewed_set),
        "epochs": settings.epochs,
        "replay_rows": settings.replay_rows,
        "seconds": round(time.monotonic() - started, 1),
    }
    meta.save(out)
    print(f"candidate {meta.version} in {out} ({meta.extra['retrain']['seconds']} s)", file=sys.stderr)
    return meta


def _remote(url: str, token: str, wait: bool) -> None:
    import httpx

    headers = {"Authorization": f"Bearer {token}"}
    started = httpx.post(f"{url}/admin/retrain", headers=headers, timeout=30)
    print(json.dumps(started.json(), indent=2))
    if started.status_code >= 400:
        raise SystemExit(1)
    while wait:
        time.sleep(5)
        state = httpx.get(f"{url}/admin/retrain", headers=headers, timeout=30).json()
        print(f"{state['status']}: {state.get('message') or ''}", file=sys.stderr)
        if state["status"] not in ("running",):
            print(json.dumps(state, indent=2))
            raise SystemExit(0 if state["status"] == "succeeded" else 1)


def main(argv: list[str] | None = None) -> None:
    import os

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--reviews", type=Path, help="resolved items to learn: CSV of GET /admin/review/export")
    p.add_argument("--from", dest="source", type=Path, help="the serving model directory to start from")
    p.add_argument("--out", type=Path, help="candidate model directory")
    p.add_argument("--epochs", type=int, default=RetrainSettings.epochs)
    p.add_argument("--reviewed-share", type=float, default=RetrainSettings.reviewed_share)
    p.add_argument("--replay-rows", type=int, default=RetrainSettings.replay_rows)
    p.add_argument("--review-weight", type=int, default=RetrainSettings.review_weight)
    p.add_argument(
        "--new-label",
        action="append",
        default=[],
        metavar="NAME=DESCRIPTION",
        help="a label the reviews use that the model lacks (repeatable)",
    )
    p.add_argument("--url", help="start the running graph's retrain instead (POST /admin/retrain)")
    p.add_argument("--token-env", default="TICKETSERVE_ADMIN_TOKEN", help="with --url: the admin token's variable")
    p.add_argument("--wait", action="store_true", help="with --url: until the retrain ends")
    a = p.parse_args(argv)
    if a.url:
        _remote(a.url.rstrip("/"), os.environ.get(a.token_env, ""), a.wait)
        return
    if not (a.reviews and a.source and a.out):
        p.error("give --reviews, --from and --out (or --url)")
    settings = RetrainSettings(a.epochs, a.reviewed_share, a.replay_rows, a.review_weight)
    new_labels = dict(item.partition("=")[::2] for item in a.new_label)
    retrain(read_labelled_rows(a.reviews), a.source, a.out, settings, new_labels=new_labels)


if __name__ == "__main__":
    main()
