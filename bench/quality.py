"""Answer quality through the served graph: golden set, out-of-scope, calibration, CPU cost.

    python -m bench.quality                                    # the default model
    python -m bench.quality --model default=artifacts/models/default \
        --model previous=artifacts/models/prev-minilm          # side by side
    python -m bench.quality --dataset banking77 --dataset bitext --epochs 3

Per served model (serve_config.yaml's graph with the edge tier on, over HTTP):
- the golden set (models/data/golden.csv): accuracy overall, per language and per case;
  the share of right answers flagged (`needs_review` or `out_of_scope`);
- out-of-scope recall: CLINC150 validation's `oos` rows and its near-domain intents
  (CLINC_NEAR_DOMAIN: banking, travel bookings, dates; ../shared/data, English) and the
  bundled held-out set (models/data/oos_eval.csv: en, zh, ja), as the share answered
  `out_of_scope` and the share flagged at all;
- expected calibration error of the served confidence over those answers;
- English tickets written by others: Bitext's customer-service set (../shared/data,
  intents mapped by loadkit.bitext, documented in docs/quality.md), as accuracy, the share
  of right answers flagged and the share of answers wrong and unflagged, overall, per route
  (template, edge, model) and per Bitext style tag; the trade-off of the review threshold
  on these answers (PNG beside the results, the model's threshold marked);
- served CPU-ms per model-path ticket: every process's CPU over fresh tickets sent with
  the edge tier off, divided by the tickets answered.

With --dataset: for each ../shared/data set, a stratified 80/20 split (seed 0); each base
is fine-tuned by `models.build` on the 80 % and serves the 20 % over HTTP; the baseline
is the same frozen base encoder, mean-pooled, + logistic regression on the same split.
Prints markdown tables and writes bench/results/quality*.json.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import os
import random
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.common import cpu_seconds, graph_config, print_table, start_serve, write_results
from loadkit.bitext import BITEXT, SHARED_DATA, ExternalTicket, load_bitext
from models import calibration, golden
from models.artifacts import OUT_OF_SCOPE, ModelMetadata
from models.build import (
    BUNDLED_DATA,
    DEFAULT_OUT,
    OOS_EVAL,
    ROOT,
    TrainSettings,
    base_model_dir,
    build,
    draw_tradeoff,
    held_back_texts,
)
from models.calibration import answer_calibration_error

DATASETS = {
    "bitext": (BITEXT, "utterance", "intent"),
    "banking77": (SHARED_DATA / "banking77" / "train.csv", "text", "category"),
}
CLINC_VAL = SHARED_DATA / "clinc150" / "val.csv"
# CLINC150 intents that sit next to a shop's tickets without being one (docs/labels.md:
# banking is out of scope): money at a bank, card issuer, employer or tax office; a flight,
# a booking or a car rental tracked or cancelled; dates, sums and translations. Left out, as
# too close to a shop's own labels: card_declined, report_fraud, account_blocked, order,
# order_status, cancel, transactions, spending_history, the card's loss, damage, renewal
# and expiry, and user names.
CLINC_NEAR_DOMAIN = frozenset(
    {
        *("apr", "balance", "bill_balance", "bill_due", "pay_bill", "credit_limit", "credit_limit_change"),
        *("credit_score", "improve_credit_score", "direct_deposit", "exchange_rate", "freeze_account"),
        *("income", "insurance", "insurance_change", "interest_rate", "min_payment", "pin_change", "payday"),
        *("redeem_rewards", "rewards_balance", "rollover_401k", "routing", "taxes", "transfer", "w2"),
        *("flight_status", "lost_luggage", "cancel_reservation", "confirm_reservation", "car_rental"),
        *("date", "time", "translate", "calculator", "smart_home", "next_holiday"),
    }
)
PORT = 18100
CPU_TICKETS = 400
RETRIES = 5  # tries per ticket while the graph answers 429 or 503


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


def out_of_scope_sets() -> dict[str, list[tuple[str, str]]]:
    """(text, lang) per set; CLINC150's rows only where ../shared is present."""
    sets: dict[str, list[tuple[str, str]]] = defaultdict(list)
    with open(OOS_EVAL, encoding="utf-8") as f:
        for row in csv.DictReader(f):
            sets[f"bundled held-out {row['lang']}"].append((row["text"], row["lang"]))
    if CLINC_VAL.exists():
        with open(CLINC_VAL, encoding="utf-8") as f:
            clinc = list(csv.DictReader(f))
        sets["CLINC150 val oos (en)"] = [(r["text"], "en") for r in clinc if r["intent"] == "oos"]
        sets["CLINC150 val near-domain (en)"] = [(r["text"], "en") for r in clinc if r["intent"] in CLINC_NEAR_DOMAIN]
    return dict(sets)


async def ask(
    url: str, bodies: list[dict], concurrency: int = 8, errors: dict[str, int] | None = None
) -> list[dict | None]:
    """Answers in order; None where none came. A 429 or 503 is retried after its Retry-After
    as the contract asks a client to, so a refusal under load is not scored as a wrong
    label; `errors` counts why the unanswered ones failed (status and error code)."""
    limit = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:

        async def one(body: dict) -> dict | None:
            async with limit:
                for _ in range(RETRIES):
                    try:
                        r = await client.post("/v1/classify", json=body)
                    except httpx.HTTPError as e:
                        reason = type(e).__name__
                        break
                    if r.status_code == 200:
                        return r.json()
                    reason = f"{r.status_code} {_error_code(r)}"
                    if r.status_code not in (429, 503):
                        break
                    await asyncio.sleep(float(r.headers.get("retry-after", 1)))
            if errors is not None:
                errors[reason] = errors.get(reason, 0) + 1
            return None

        return await asyncio.gather(*(one(b) for b in bodies))


def _error_code(response: httpx.Response) -> str:
    try:
        return response.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return "not the contract's JSON"


def flagged(answer: dict) -> bool:
    return answer["label"] == OUT_OF_SCOPE or bool(answer.get("needs_review"))


def judge(url: str) -> dict:
    """Golden set, out-of-scope sets, calibration and (where ../shared is present) Bitext's
    tickets of one served graph at `url`."""
    items = golden.load()
    answers = asyncio.run(
        ask(
            url,
            [{"text": i.text, "lang": i.lang, "user_id": "quality", "ticket_id": f"g{n}"} for n, i in enumerate(items)],
        )
    )
    oos = {
        name: (len(rows), asyncio.run(ask(url, [{"text": t, "lang": lang, "user_id": "quality"} for t, lang in rows])))
        for name, rows in out_of_scope_sets().items()
    }
    result = score(items, answers, oos)
    if BITEXT.exists():
        tickets = load_bitext()
        errors: dict[str, int] = {}
        bodies = [{"text": t.text, "user_id": "quality"} for t in tickets]
        result["bitext"] = score_external(tickets, asyncio.run(ask(url, bodies, concurrency=16, errors=errors)))
        result["bitext"]["error_reasons"] = errors
    return result


def score_external(tickets: list[ExternalTicket], answers: Sequence[dict | None]) -> dict:
    """Other people's tickets: over the mapped ones, accuracy (unanswered count as wrong),
    the share of right answers flagged, and the share of answers wrong and not flagged,
    overall, per route and per style tag; where the unmapped intents went; the review
    trade-off as (threshold, right flagged, wrong unflagged) over the answers' confidences."""
    mapped = [(t, a) for t, a in zip(tickets, answers) if t.accepted]

    def figures(pairs: list) -> dict:
        got = [(t, a) for t, a in pairs if a]
        right = [a for t, a in got if a["label"] in t.accepted]
        return {
            "n": len(pairs),
            "answered": len(got),
            "accuracy": _share([bool(a) and a["label"] in t.accepted for t, a in pairs]),
            "right_flagged": _share([flagged(a) for a in right]),
            "wrong_unflagged": _share([a["label"] not in t.accepted and not flagged(a) for t, a in got]),
        }

    by_route: dict[str, list] = defaultdict(list)
    by_flag: dict[str, list] = defaultdict(list)
    by_intent: dict[str, list] = defaultdict(list)
    for t, a in mapped:
        if a:
            by_route[a["route"]].append((t, a))
        for flag in t.flags:
            by_flag[flag].append((t, a))
        by_intent[t.intent].append((t, a))
    unmapped: dict[str, list] = defaultdict(list)
    for t, a in zip(tickets, answers):
        if not t.accepted and a:
            unmapped[t.intent].append(a)
    return {
        "all": figures(mapped),
        "by_route": {route: figures(pairs) for route, pairs in sorted(by_route.items())},
        "by_style_flag": {flag: figures(pairs) for flag, pairs in sorted(by_flag.items())},
        "by_intent": {intent: figures(pairs) for intent, pairs in sorted(by_intent.items())},
        "unmapped": {
            intent: {
                "answered": len(got),
                "flagged": _share([flagged(a) for a in got]),
                "labels": dict(sorted(_count(a["label"] for a in got).items(), key=lambda kv: -kv[1])[:3]),
            }
            for intent, got in sorted(unmapped.items())
        },
        "tradeoff": review_tradeoff([(t.accepted, a) for t, a in mapped if a]),
    }


def review_tradeoff(answers: list[tuple[tuple[str, ...], dict]]) -> list[tuple[float, float, float]]:
    """The review threshold's trade-off over served answers ((accepted labels, answer))."""
    return calibration.review_tradeoff(
        np.array([a["confidence"] for _, a in answers]),
        np.array([a["label"] in ok for ok, a in answers]),
        np.array([a["label"] == OUT_OF_SCOPE for _, a in answers]),
        np.array([a["route"] == "template" for _, a in answers]),
    )


def score(items: list, answers: Sequence[dict | None], oos: Mapping[str, tuple[int, Sequence[dict | None]]]) -> dict:
    """The figures of one system from its answers (None: not answered) to the golden items
    and to each out-of-scope set (set name -> (rows sent, answers)). Template answers
    (confidence 1 by rule) stay out of the calibration error."""
    result = golden.score(items, answers)
    right = [a for i, a in zip(items, answers) if a and a["label"] == i.intent]
    conf, ok = [], []
    for item, answer in zip(items, answers):
        if answer and answer["route"] != "template":
            conf.append(answer["confidence"])
            ok.append(answer["label"] == item.intent)
    out = {}
    for name, (sent, answered) in oos.items():
        got = [a for a in answered if a]
        out[name] = {
            "n": sent,
            "answered": len(got),
            "labelled_out_of_scope": _share([a["label"] == OUT_OF_SCOPE for a in got]),
            "flagged": _share([flagged(a) for a in got]),
            "routes": dict(sorted(_count(a["route"] for a in got).items())),
        }
        for a in got:
            if a["route"] != "template":
                conf.append(a["confidence"])
                ok.append(a["label"] == OUT_OF_SCOPE)
    per_lang = {
        lang: {
            "right_flagged": _share([flagged(a) for i, a in pairs if a["label"] == i.intent]),
            "wrong_unflagged": _share([a["label"] != i.intent and not flagged(a) for i, a in pairs]),
        }
        for lang in sorted({i.lang for i in items})
        for pairs in [[(i, a) for i, a in zip(items, answers) if a and i.lang == lang]]
    }
    return {
        "golden": {k: result[k] for k in ("tickets", "answered", "accuracy", "by_lang", "by_case", "route_agreement")},
        "golden_right_flagged": _share([flagged(a) for a in right]),
        "golden_flags_by_lang": per_lang,
        "out_of_scope": out,
        "served_ece": round(answer_calibration_error(np.array(conf), np.array(ok)), 4),
        "served_answers_judged": len(conf),
    }


def served_cpu_ms(url: str, tickets: int = CPU_TICKETS) -> dict:
    """CPU of every process on the machine (this one's own excepted) per fresh model-path ticket."""
    with open(BUNDLED_DATA, encoding="utf-8") as f:
        texts = [r["text"] for r in csv.DictReader(f) if r["label"] != OUT_OF_SCOPE]
    rng = random.Random(1)
    rng.shuffle(texts)
    asyncio.run(ask(url, [{"text": t} for t in texts[:40]]))  # warm-up
    before, start = cpu_seconds(), time.perf_counter()
    answers = asyncio.run(ask(url, [{"text": t} for t in texts[40 : 40 + tickets]], concurrency=16))
    after, wall = cpu_seconds(), time.perf_counter() - start
    me = os.getpid()
    total = sum(after[p][1] - before[p][1] for p in after if p in before and p != me)
    done = sum(a is not None for a in answers)
    return {
        "tickets": done,
        "cpu_ms_per_ticket": round(1000 * total / max(1, done), 2),
        "tickets_per_s": round(done / wall, 1),
    }


def judge_model(name: str, model_dir: Path) -> dict:
    from ray import serve

    from serve_app import bind_graph

    meta = ModelMetadata.load(model_dir)
    serve.run(bind_graph(graph_config(model_dir, edge=True)), name=f"q-{name}", route_prefix=f"/q-{name}")
    out = {
        "model_version": meta.version,
        "review_threshold": meta.review_threshold,
        **judge(f"http://127.0.0.1:{PORT}/q-{name}"),
    }
    serve.delete(f"q-{name}")
    serve.run(bind_graph(graph_config(model_dir, edge=False)), name=f"c-{name}", route_prefix=f"/c-{name}")
    out["served_cpu"] = served_cpu_ms(f"http://127.0.0.1:{PORT}/c-{name}")
    serve.delete(f"c-{name}")
    return out


def frozen_baseline(base: str = "e5-small") -> dict:
    """The frozen base encoder, mean-pooled, + logistic regression on the bundled training
    split, judged offline on the same golden and out-of-scope sets (no graph: no
    templates, no edge). Its review threshold is read off the validation split by the
    build's own rule."""
    from models.build import calibration_split, read_rows_with_lang
    from models.calibration import review_threshold

    rows = read_rows_with_lang(BUNDLED_DATA, "text", "label")
    train, val = calibration_split(rows, held_back_texts(BUNDLED_DATA))
    clf = frozen_classifier([t for t, _, _ in train], [lab for _, lab, _ in train], base)

    def answer(texts: list[str]) -> list[dict]:
        probs = clf.predict_proba(embed(texts, base))
        return [{"label": clf.classes_[p.argmax()], "confidence": float(p.max()), "route": "model"} for p in probs]

    val_answers = answer([t for t, _, _ in val])
    threshold = review_threshold(
        np.array([a["confidence"] for a, (_, lab, _) in zip(val_answers, val) if a["label"] == lab != OUT_OF_SCOPE])
    )

    def reviewed(texts: list[str]) -> list[dict]:
        return [{**a, "needs_review": a["confidence"] < threshold} for a in answer(texts)]

    items = golden.load()
    oos = {name: (len(rows), reviewed([t for t, _ in rows])) for name, rows in out_of_scope_sets().items()}
    return {
        "model_version": f"frozen {base} + logistic regression, offline",
        **score(items, reviewed([i.text for i in items]), oos),
        "served_cpu": {"cpu_ms_per_ticket": float("nan")},
    }


def offline_answerer(model_dir: Path) -> Callable[[list[str]], list[dict]]:
    """A built model's own forward pass (the served probabilities, tests/integration checks
    they agree) as answers: the model route alone, no graph, templates or edge tier; flags
    by its review threshold."""
    from transformers import AutoTokenizer, BertForSequenceClassification

    from models.build import predict_logits
    from policies.review import needs_review

    meta = ModelMetadata.load(model_dir)
    model = BertForSequenceClassification.from_pretrained(model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    settings = TrainSettings(pooling="mean" if (model_dir / "modules.json").exists() else "cls")

    def answer(texts: list[str]) -> list[dict]:
        probs = calibration.softmax(predict_logits(model, tokenizer, texts, settings))
        return [
            {
                "label": meta.labels[int(p.argmax())],
                "confidence": float(p.max()),
                "route": "model",
                "model_version": meta.version,
                "needs_review": needs_review(
                    meta.labels[int(p.argmax())], float(p.max()), "model", None, meta.review_threshold
                ),
            }
            for p in probs
        ]

    return answer


def offline(model_dir: Path) -> dict:
    """`offline_answerer` on the golden and out-of-scope sets and Bitext's tickets. Minutes
    where the served judge takes a quarter of an hour: for comparing builds."""
    meta = ModelMetadata.load(model_dir)
    answer = offline_answerer(model_dir)
    items = golden.load()
    oos = {name: (len(rows), answer([t for t, _ in rows])) for name, rows in out_of_scope_sets().items()}
    result = {
        "model_version": f"{meta.version}, offline",
        "review_threshold": meta.review_threshold,
        **score(items, answer([i.text for i in items]), oos),
        "served_cpu": {"cpu_ms_per_ticket": float("nan")},
    }
    if BITEXT.exists():
        tickets = load_bitext()
        result["bitext"] = score_external(tickets, answer([t.text for t in tickets]))
    return result


def model_rows(results: dict[str, dict]) -> list[dict]:
    rows = []
    for name, r in results.items():
        g = r["golden"]
        row = {
            "model": f"{name} ({r['model_version']})",
            "golden": f"{g['accuracy']:.3f}",
            **{f"golden {lang}": f"{v['accuracy']:.3f}" for lang, v in g["by_lang"].items()},
            "negation": f"{g['by_case']['negation']['accuracy']:.3f}",
            "right flagged": f"{r['golden_right_flagged']:.3f}",
        }
        for set_name, o in r["out_of_scope"].items():
            row[f"oos {set_name}: labelled / flagged"] = f"{o['labelled_out_of_scope']:.2f} / {o['flagged']:.2f}"
        if "bitext" in r:
            b = r["bitext"]["all"]
            row["bitext: accuracy / right flagged / wrong unflagged"] = (
                f"{b['accuracy']:.3f} / {b['right_flagged']:.3f} / {b['wrong_unflagged']:.3f}"
            )
        row["served ECE"] = f"{r['served_ece']:.3f}"
        row["CPU-ms / model ticket"] = f"{r['served_cpu']['cpu_ms_per_ticket']:.1f}"
        rows.append(row)
    return rows


# --- the ../shared data sets: fine-tuned and served vs frozen encoder + logistic regression ---


def embed(texts: list[str], base: str) -> np.ndarray:
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base_model_dir(base))
    if tok is None:
        raise SystemExit(f"{base_model_dir(base)} has no tokenizer")
    model = AutoModel.from_pretrained(base_model_dir(base)).eval()
    prefix = "query: " if base == "e5-small" else ""
    out = []
    with torch.no_grad():
        for i in range(0, len(texts), 128):
            enc = tok(
                [prefix + t for t in texts[i : i + 128]],
                padding=True,
                truncation=True,
                max_length=128,
                return_tensors="pt",
            )
            hidden = model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).float()
            pooled = (hidden * mask).sum(1) / mask.sum(1)
            out.append(torch.nn.functional.normalize(pooled, dim=-1).numpy())
    return np.concatenate(out)


def frozen_classifier(texts: list[str], labels: list[str], base: str):
    """Logistic regression on the frozen base encoder's mean-pooled features of `texts`:
    every frozen baseline of the benchmarks."""
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=10.0, max_iter=2000).fit(embed(texts, base), labels)


def baseline(train, test, base: str) -> dict:
    clf = frozen_classifier([t for t, _ in train], [lab for _, lab in train], base)
    pred = clf.predict(embed([t for t, _ in test], base))
    return {"accuracy": float(np.mean([p == lab for p, (_, lab) in zip(pred, test)]))}


def served(name: str, train, test, settings: TrainSettings) -> dict:
    from ray import serve

    from serve_app import bind_graph

    out = ROOT / "artifacts" / "models" / f"bench-{name}-{settings.base}"
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "train.csv"
        with open(data, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows([("text", "label"), *train])
        start = time.perf_counter()
        meta = build(data, "text", "label", out, None, settings)
        train_s = time.perf_counter() - start
    app = f"d-{name}-{settings.base}"
    serve.run(bind_graph(graph_config(out)), name=app, route_prefix=f"/{app}")
    errors: dict[str, int] = {}
    answers = asyncio.run(
        ask(f"http://127.0.0.1:{PORT}/{app}", [{"text": t} for t, _ in test], concurrency=16, errors=errors)
    )
    serve.delete(app)
    return {
        "model_version": meta.version,
        "accuracy": float(np.mean([a is not None and a["label"] == lab for a, (_, lab) in zip(answers, test)])),
        "errors": sum(a is None for a in answers),
        "error_reasons": errors,
        "train_seconds": round(train_s, 1),
        "validation": meta.extra.get("validation", {}),
    }


def _share(values: list[bool]) -> float:
    return round(sum(values) / len(values), 4) if values else float("nan")


def _count(values) -> dict:
    out: dict = defaultdict(int)
    for v in values:
        out[v] += 1
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--model",
        action="append",
        default=None,
        metavar="NAME=DIR",
        help=f"a built model to judge (repeatable); default: default={DEFAULT_OUT}",
    )
    p.add_argument(
        "--dataset",
        action="append",
        choices=sorted(DATASETS),
        default=None,
        help="instead: fine-tune and serve on this ../shared data set (repeatable)",
    )
    p.add_argument("--base", action="append", default=None, help="with --dataset: bases to compare (default both)")
    p.add_argument("--epochs", type=int, default=3, help="with --dataset: fine-tuning epochs")
    p.add_argument("--label-smoothing", type=float, default=0.0, help="with --dataset: cross-entropy label smoothing")
    p.add_argument(
        "--offline",
        action="store_true",
        help="judge the --model directories by their own forward pass (model route only, no graph)",
    )
    p.add_argument(
        "--frozen-baseline",
        action="store_true",
        help="also judge frozen e5-small + logistic regression (offline) on the same sets",
    )
    a = p.parse_args()
    if not a.offline:
        start_serve(PORT)
    if a.dataset:
        rows = []
        for name in a.dataset:
            train, test = load_split(name)
            result: dict[str, Any] = {"train_rows": len(train), "test_rows": len(test)}
            for base in a.base or ["e5-small", "minilm"]:
                result[f"baseline-{base}"] = baseline(train, test, base)
                settings = TrainSettings(base=base, epochs=a.epochs, label_smoothing=a.label_smoothing)
                result[f"served-{base}"] = served(name, train, test, settings)
                rows += [
                    {
                        "data set": f"{name} ({len(train)}/{len(test)})",
                        "system": f"frozen {base} + logistic regression",
                        "accuracy": f"{result[f'baseline-{base}']['accuracy']:.4f}",
                    },
                    {
                        "data set": f"{name} ({len(train)}/{len(test)})",
                        "system": f"fine-tuned {base} ({a.epochs} epochs, label smoothing {a.label_smoothing}), served (vLLM)",
                        "accuracy": f"{result[f'served-{base}']['accuracy']:.4f}",
                    },
                ]
            write_results(f"quality-{name}", result)
        print_table(rows)
        return
    models = dict(m.split("=", 1) for m in a.model) if a.model else {"default": str(DEFAULT_OUT)}
    if a.offline:
        results = {name: offline(Path(d)) for name, d in models.items()}
    else:
        results = {name: judge_model(name, Path(d)) for name, d in models.items()}
    if a.frozen_baseline:
        results["frozen baseline"] = frozen_baseline()
    path = write_results("quality-offline" if a.offline else "quality", results)
    curves = {name: r["bitext"]["tradeoff"] for name, r in results.items() if "bitext" in r}
    if curves:
        chosen = {name: r["review_threshold"] for name, r in results.items() if r.get("review_threshold") is not None}
        draw_tradeoff(
            curves,
            chosen,
            path.with_name(f"{path.stem}-review-tradeoff.png"),
            "Bitext (English, written by others), served",
        )
    print_table(model_rows(results))


if __name__ == "__main__":
    main()
