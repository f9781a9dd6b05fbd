"""The review loop measured end to end through the running graph, with a simulated
reviewer (docs/loop.md).

    bash scripts/loop_serve.sh        # the graph with the loop's settings (model aliases, ...)
    python -m bench.loop --bitext --rounds 3 --reviews-per-round 300 --audit-per-round 100 \\
        --tickets-per-round 1400 --poison-round 4 --out bench/results/loop.json
    python -m bench.loop --stream S.csv --test T.csv ...   # columns text,label[,lang]

Round 0 measures the test set on the starting model. Each round then sends
`--tickets-per-round` stream tickets (with ticket ids it remembers), resolves up to
`--reviews-per-round` flagged and `--audit-per-round` audit items of them with the
stream's true labels through the admin API the console uses (shuffled among the labels in
the `--poison-round`), starts a retrain, waits for the candidate's verdict (shadow judge,
then live steps; test tickets keep the live checks fed) and measures the test set through
the graph with the model then stable. `--bitext` splits ../shared/data/bitext_cs_8k (mapped
onto shipped labels by loadkit.bitext) into stream and test by a hash of the text.

A new taxonomy from little data (Banking77: 77 banking intents the bundled model lacks):

    bash scripts/loop_serve.sh --banking77 --review-min-confidence 0.8   # seed model, served
    python -m bench.loop --banking77 --rounds 3 --reviews-per-round 500 --audit-per-round 0 \
        --fill-with-audits --tickets-per-round 2300 --out bench/results/loop_banking77_uncertain.json
    python -m bench.loop --banking77 --random-arm bench/results/loop_banking77_uncertain.json  # graph not needed

`--banking77` takes bench.quality's Banking77 split: its test part is the test set; of the
rest, 10 rows per intent build the seed model, 120 are the canary's golden set
(var/banking77/golden.csv) and the others stream; the templates (written for the bundled
labels) are off. `--random-arm` then trains the same retrains from the seed on as many
randomly chosen stream rows per round as people resolved, and scores both arms' models
offline (the model's own forward pass) on the test set. Flagged items are resolved least
confident first; `--review-min-confidence` (with `--write-config`, which loop_serve.sh
passes its arguments to) flags about as many as people resolve a round.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import copy
import csv
import json
import os
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx
import yaml

from bench.quality import ask, flagged, load_split, offline_answerer
from bench.stamp import stamped
from loadkit.bitext import load_bitext
from models.artifacts import read_labelled_rows, write_labelled_rows
from models.build import hashed_point

ROOT = Path(__file__).resolve().parent.parent
# What the loop needs of the graph beyond serve_config.yaml: model aliases, a retrain that
# publishes its candidate, a shadow rollout that goes live and promotes by itself, audit
# items enough to draw from, and holds short enough for a benchmark.
LOOP_OVERRIDES = {
    "model": {"engine": {"model_dir": "artifacts/models/stable"}},
    "review": {"audit_share": 0.15},
    "retrain": {"publish_to_canary": True},
    "rollout": {
        "canary_model_dir": "artifacts/models/candidate",
        "shadow": True,
        "promote_to_stable": True,
        "judge_interval_s": 2,
        "golden_tickets": 120,
        "policy": {
            "shadow_goes_live": True,
            "start_percent": 50,
            "step_percent": 50,
            "hold_s": 10,
            "min_compared": 50,
            "min_canary_answers": 20,
            # A candidate no better on its reviewed set gets a verdict, not an endless hold.
            "max_unproven_s": 180,
        },
    },
}


@dataclass(frozen=True)
class Row:
    text: str
    accepted: tuple[str, ...]  # labels that count as right; the first is the reviewer's
    lang: str = ""


@dataclass
class RoundResult:
    round: int
    model_version: str
    test_accuracy: float
    test_flagged_right_share: float
    test_wrong_unflagged_share: float
    stream_flagged_share: float | None = None
    reviewed: int = 0
    audited: int = 0
    retrain_s: float | None = None
    verdict: str | None = None
    reason: str | None = None
    candidate_dir: str | None = None


def read_rows(path: Path) -> list[Row]:
    return [Row(text, (label,), lang) for text, label, lang in read_labelled_rows(path)]


def bitext_split(test_share: float = 0.25) -> tuple[list[Row], list[Row]]:
    """Mapped Bitext tickets, split by a hash of the text: (stream, test)."""
    rows = [Row(t.text, t.accepted, "en") for t in load_bitext() if t.accepted]
    held = [hashed_point(r.text) < test_share for r in rows]
    return [r for r, h in zip(rows, held) if not h], [r for r, h in zip(rows, held) if h]


BANKING77_DIR = ROOT / "var" / "banking77"
BANKING77_SEED = ROOT / "artifacts" / "models" / "banking77-seed"
SEED_ROWS_PER_LABEL = 10
GOLDEN_ROWS = 120


@dataclass(frozen=True)
class Split:
    seed: list[Row]
    golden: list[Row]
    stream: list[Row]
    test: list[Row]


def banking77_split() -> Split:
    """bench.quality's Banking77 split: its test part tests; of the rest, SEED_ROWS_PER_LABEL
    rows per intent seed the starting model, GOLDEN_ROWS are the golden set, the rest stream."""
    train, test = load_split("banking77")
    rng = random.Random(0)
    by_label = collections.defaultdict(list)
    for text, label in train:
        by_label[label].append(text)
    seed = [
        Row(t, (label,), "en") for label in sorted(by_label) for t in rng.sample(by_label[label], SEED_ROWS_PER_LABEL)
    ]
    taken = {r.text for r in seed}
    rest = [Row(t, (label,), "en") for t, label in train if t not in taken]
    rng.shuffle(rest)
    return Split(seed, rest[:GOLDEN_ROWS], rest[GOLDEN_ROWS:], [Row(t, (label,), "en") for t, label in test])


def prepare_banking77() -> dict:
    """Builds the seed model (reused while its rows are the same), writes the golden file
    and points the stable and candidate aliases at the seed; the config overrides it needs."""
    from models import registry
    from models.build import TrainSettings, build

    split = banking77_split()
    BANKING77_DIR.mkdir(parents=True, exist_ok=True)
    data = BANKING77_DIR / "seed.csv"
    write_labelled_rows(data, [{"text": r.text, "label": r.accepted[0], "lang": r.lang} for r in split.seed])
    build(data, "text", "label", BANKING77_SEED, None, TrainSettings())
    golden_file = BANKING77_DIR / "golden.csv"
    with open(golden_file, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "intent", "lang", "route", "case"])
        writer.writerows([r.text, r.accepted[0], r.lang, "model", "typical"] for r in split.golden)
    for alias in ("stable", "candidate"):
        registry.point(registry.MODELS_DIR / alias, BANKING77_SEED)
    return {
        "edge": {"templates_enabled": False},
        "rollout": {"golden_file": str(golden_file.relative_to(ROOT)), "golden_tickets": 0},
    }


# Ray CPUs per model side: with both sides on one node, the retrain task (retrain.num_cpus,
# 1) needs one left of the node's (2 on the CPU default's machine) to be scheduled at all.
SIDE_CPUS = 0.5


def write_config(path: Path, base: Path = ROOT / "serve_config.yaml", extra: dict | None = None) -> None:
    from loadkit.graph_args import merged

    config = yaml.safe_load(base.read_text())
    app = config["applications"][0]
    app["args"] = merged(merged(app.get("args", {}), LOOP_OVERRIDES), extra or {})
    sides = [d for d in app["deployments"] if d["name"] == "ModelReplica"]
    for side in sides:
        side["ray_actor_options"] = {**side.get("ray_actor_options", {}), "num_cpus": SIDE_CPUS}
    app["deployments"].append({**copy.deepcopy(sides[0]), "name": "CanaryModelReplica", "max_surge_percent": 0})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def score(rows: list[Row], answers: Sequence[dict | None]) -> dict:
    pairs = [(r, a) for r, a in zip(rows, answers) if a is not None]
    right = [a["label"] in r.accepted for r, a in pairs]
    versions = collections.Counter(a["model_version"] for _, a in pairs)
    n = len(pairs) or 1
    return {
        "model_version": versions.most_common(1)[0][0] if versions else "",
        "versions": dict(versions),
        "accuracy": round(sum(right) / n, 4),
        "flagged_right_share": round(
            sum(ok and flagged(a) for ok, (_, a) in zip(right, pairs)) / max(1, sum(right)), 4
        ),
        "wrong_unflagged_share": round(sum(not ok and not flagged(a) for ok, (_, a) in zip(right, pairs)) / n, 4),
        "unanswered": len(rows) - len(pairs),
    }


class Loop:
    def __init__(self, url: str, token: str, labels: list[str], seed: int = 0):
        self.url = url
        self.client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120)
        self.labels = labels
        self.random = random.Random(seed)

    def answers(self, bodies: list[dict]) -> list[dict | None]:
        return asyncio.run(ask(self.url, bodies, concurrency=16))

    def measure(self, rows: list[Row]) -> dict:
        return score(rows, self.answers([{"text": r.text} for r in rows]))

    def send(self, rows: list[Row], tag: str) -> tuple[dict[str, Row], float]:
        """The stream's tickets with ids; the share flagged."""
        truth = {f"{tag}-{i}": r for i, r in enumerate(rows)}
        answers = self.answers([{"text": r.text, "ticket_id": t} for t, r in truth.items()])
        got = [a for a in answers if a is not None]
        return truth, round(sum(map(flagged, got)) / max(1, len(got)), 4)

    def resolve(self, kind: str, truth: dict[str, Row], limit: int, poison: bool) -> int:
        """Up to `limit` open items of `kind` from this round's tickets, resolved with
        their true label (a random other label when poisoned); flagged items least
        confident first, audit items as drawn (a uniform sample)."""
        items, offset = [], 0
        while len(items) < limit:
            page = self.client.get("/admin/review", params={"kind": kind, "limit": 500, "offset": offset}).json()
            items += [i for i in page["items"] if i.get("ticket_id") in truth]
            if len(page["items"]) < 500:
                break
            offset += 500
        if kind == "review":
            items.sort(key=lambda i: i["confidence"])
        done = 0
        for item in items[:limit]:
            label = truth[item["ticket_id"]].accepted[0]
            if poison:
                label = self.random.choice([x for x in self.labels if x != label])
            done += self.client.post(f"/admin/review/{item['id']}/resolve", json={"label": label}).is_success
        return done

    def retrain(self, timeout_s: float) -> dict:
        started = self.client.post("/admin/retrain")
        if started.status_code != 202:
            raise RuntimeError(f"retrain refused: {started.text}")
        deadline = time.monotonic() + timeout_s
        while (state := self.client.get("/admin/retrain").json())["status"] == "running":
            if time.monotonic() > deadline:
                self.client.post("/admin/retrain/stop")
                raise RuntimeError(f"retrain still running after {timeout_s:.0f} s")
            time.sleep(5)
        if state["status"] != "succeeded":
            raise RuntimeError(f"retrain {state['status']}: {state['current']['message']}")
        return state["current"]

    def verdict(self, candidate: str, drive: list[Row], timeout_s: float) -> tuple[str, str, int]:
        """Until the candidate is stable (promoted) or rolled back; test tickets keep the
        live checks fed. Also the answers of the candidate customers got meanwhile."""
        deadline, live = time.monotonic() + timeout_s, 0
        while time.monotonic() < deadline:
            rollout = self.client.get("/admin/state").json()["rollout"]
            mine = [h for h in rollout["history"] if h["canary_version"] == candidate]
            if mine and mine[-1]["action"] == "rollback":
                return "rolled_back", mine[-1]["reason"], live
            if rollout["stable_version"] == candidate and rollout["status"] == "none":
                return "promoted", mine[-1]["reason"] if mine else "", live
            batch = self.random.sample(drive, min(20, len(drive)))
            live += sum(
                a is not None and a["model_version"] == candidate
                for a in self.answers([{"text": r.text} for r in batch])
            )
            time.sleep(1)
        return "timeout", f"no verdict within {timeout_s:.0f} s", live


def run_round(loop: Loop, n: int, stream: list[Row], test: list[Row], a: argparse.Namespace, poison: bool):
    tickets = round_tickets(stream, n, a.tickets_per_round)
    truth, stream_flagged = loop.send(tickets, f"loop{os.getpid()}-{n}")
    reviewed = loop.resolve("review", truth, a.reviews_per_round, poison)
    audit_limit = max(a.audit_per_round, a.reviews_per_round - reviewed) if a.fill_with_audits else a.audit_per_round
    audited = loop.resolve("audit", truth, audit_limit, poison)
    started = time.monotonic()
    run = loop.retrain(a.retrain_timeout_s)
    retrain_s = round(time.monotonic() - started, 1)
    verdict, reason, live = loop.verdict(run["candidate_version"], test, a.verdict_timeout_s)
    measured = loop.measure(test)
    result = RoundResult(
        n,
        measured["model_version"],
        measured["accuracy"],
        measured["flagged_right_share"],
        measured["wrong_unflagged_share"],
        stream_flagged,
        reviewed,
        audited,
        retrain_s,
        verdict,
        reason,
        run["candidate_dir"],
    )
    return result, live + sum(v for k, v in measured["versions"].items() if k == run["candidate_version"])


def round_tickets(stream: list[Row], n: int, per_round: int) -> list[Row]:
    return stream[(n - 1) * per_round : n * per_round]


def random_arm(result: dict, stream: list[Row], test: list[Row], per_round: int) -> dict:
    """The same retrains from the seed, each round on as many stream rows as people
    resolved in that round, drawn at random from the tickets the round sent; both arms'
    models (the loop's: the stable one after each round) scored offline on `test`."""
    from models.retrain import retrain

    rng, learnt = random.Random(2), []
    source = loop_model = BANKING77_SEED
    arms: dict[str, list[dict]] = {"loop": [], "random": []}
    for r in result["rounds"]:
        n = r["round"]
        if r["verdict"] == "promoted":
            loop_model = Path(r["candidate_dir"])
        if n:
            resolved = r["reviewed"] + r["audited"]
            learnt += rng.sample(round_tickets(stream, n, per_round), resolved)
            out = BANKING77_DIR / "random" / f"round-{n}"
            retrain([(row.text, row.accepted[0], row.lang) for row in learnt], source, out)
            source = out
        for arm, model_dir in (("loop", loop_model), ("random", source)):
            measured = score(test, offline_answerer(model_dir)([row.text for row in test]))
            arms[arm].append({"round": n, "rows_learnt": len(learnt), "model": str(model_dir), **measured})
            print(f"round {n} {arm}: {measured['accuracy']:.3f} ({model_dir.name})", file=sys.stderr)
    return arms


def plot(result: dict, path: Path) -> None:
    """The learning curve of a run's JSON: test error, right answers flagged and wrong
    answers unflagged per round."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rounds = result["rounds"]
    x = [r["round"] for r in rounds]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for key, name in (
        ("test_error", "test error (% of tickets)"),
        ("test_flagged_right_share", "right answers flagged (% of right ones)"),
        ("test_wrong_unflagged_share", "wrong and unflagged (% of tickets)"),
    ):
        values = [1 - r["test_accuracy"] if key == "test_error" else r[key] for r in rounds]
        ax.plot(x, [100 * v for v in values], marker="o", label=name)
    for arm, name in (
        ("loop", "test error, offline: the loop's model"),
        ("random", "test error, offline: random rows"),
    ):
        if offline := result.get("offline", {}).get(arm):
            ax.plot(x, [100 * (1 - r["accuracy"]) for r in offline], marker="x", linestyle="--", label=name)
    ax.set_xticks(x)
    ax.set_xlabel("round (0: the starting model)")
    ax.set_ylabel("%")
    ax.set_title(f"{result['test_tickets']} test tickets through the graph after each round", fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--stream", type=Path)
    p.add_argument("--test", type=Path)
    p.add_argument("--bitext", action="store_true", help="stream and test from ../shared/data/bitext_cs_8k")
    p.add_argument(
        "--banking77", action="store_true", help="stream and test from ../shared/data/banking77, a seed model"
    )
    p.add_argument(
        "--random-arm", type=Path, help="with --banking77: this run's JSON gains the random-rows arm, offline; exit"
    )
    p.add_argument("--test-size", type=int, default=800, help="test tickets (a seeded sample of the test split)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reviews-per-round", type=int, default=300)
    p.add_argument("--audit-per-round", type=int, default=100)
    p.add_argument("--tickets-per-round", type=int, default=1000)
    p.add_argument(
        "--fill-with-audits",
        action="store_true",
        help="where fewer flagged items than --reviews-per-round are open, resolve audit items up to it",
    )
    p.add_argument("--poison-round", type=int, default=None, help="that round's reviews are shuffled (N + 1: one more)")
    p.add_argument("--retrain-timeout-s", type=float, default=1200)
    p.add_argument("--verdict-timeout-s", type=float, default=900)
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--token-env", default="TICKETSERVE_ADMIN_TOKEN")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "loop.json")
    p.add_argument("--write-config", type=Path, help="write the loop's serve config here and exit")
    p.add_argument(
        "--review-min-confidence",
        type=float,
        help="with --write-config: review.min_confidence (flag answers below it), instead of the model's threshold",
    )
    p.add_argument("--plot", type=Path, help="the learning curve of this results JSON (next to it, .png), and exit")
    a = p.parse_args(argv)
    if a.write_config:
        extra = prepare_banking77() if a.banking77 else {}
        if a.review_min_confidence is not None:
            extra["review"] = {"min_confidence": a.review_min_confidence}
        write_config(a.write_config, extra=extra)
        return
    if a.plot:
        plot(json.loads(a.plot.read_text()), a.plot.with_suffix(".png"))
        return
    if a.bitext:
        stream, test = bitext_split()
    elif a.banking77:
        split = banking77_split()
        stream, test = split.stream, split.test
    elif a.stream and a.test:
        stream, test = read_rows(a.stream), read_rows(a.test)
    else:
        p.error("give --bitext, or --stream and --test")
    test = random.Random(0).sample(test, min(a.test_size, len(test)))
    random.Random(1).shuffle(stream)
    if a.random_arm:
        result = json.loads(a.random_arm.read_text())
        # Stamped apart: the loop's own stamp stays the loop run's.
        result["offline"] = stamped(random_arm(result, stream, test, result["tickets_per_round"]))
        a.random_arm.write_text(json.dumps(result, indent=2))
        plot(result, a.random_arm.with_suffix(".png"))
        return
    labels = [x["name"] for x in httpx.get(f"{a.url}/v1/labels", timeout=30).json()["labels"]]
    loop = Loop(a.url, os.environ.get(a.token_env, ""), labels)
    start = loop.measure(test)
    rounds = [
        RoundResult(
            0, start["model_version"], start["accuracy"], start["flagged_right_share"], start["wrong_unflagged_share"]
        )
    ]
    poisoned = None
    for n in range(1, a.rounds + 2):
        if n > a.rounds and a.poison_round != n:
            break
        result, live = run_round(loop, n, stream, test, a, poison=n == a.poison_round)
        print(json.dumps(asdict(result)), file=sys.stderr)
        if n == a.poison_round:
            poisoned = {"round": n, "verdict": result.verdict, "live_answers": live}
        if n <= a.rounds:
            rounds.append(result)
    out = {
        "rounds": [asdict(r) for r in rounds],
        "poisoned": poisoned,
        "test_tickets": len(test),
        "tickets_per_round": a.tickets_per_round,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(stamped(out), indent=2))
    plot(out, a.out.with_suffix(".png"))
    print(
        f"{'round':>5} {'model':<34} {'acc':>6} {'right flagged':>13} {'wrong unflagged':>15} {'reviewed':>8} {'audited':>7} {'retrain s':>9}  verdict"
    )
    for r in rounds:
        print(
            f"{r.round:>5} {r.model_version:<34} {r.test_accuracy:>6.3f} {r.test_flagged_right_share:>13.3f} "
            f"{r.test_wrong_unflagged_share:>15.3f} {r.reviewed:>8} {r.audited:>7} {r.retrain_s or 0:>9.0f}  {r.verdict or ''}"
        )
    if poisoned:
        print(f"poisoned round {poisoned['round']}: {poisoned['verdict']}, {poisoned['live_answers']} live answers")


if __name__ == "__main__":
    main()
