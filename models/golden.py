"""The golden set: self-written tickets with the intent and the route each should get, and
the command that judges a running graph by them.

    python -m models.golden [--url http://127.0.0.1:8000] [--out golden.json]

Every ticket of models/data/golden.csv (English, Chinese, Japanese; every intent of the
bundled model; typical tickets and hard cases: negation, two intents, typos,
code-switching, long tickets) goes to POST /v1/classify; the command prints accuracy per
intent, per language and per case, how often the route was the expected one, and exits
1 if any ticket got no answer.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models.build import ROOT

GOLDEN = ROOT / "models" / "data" / "golden.csv"
ROUTES = ("template", "edge", "model")
CASES = ("typical", "negation", "two_intents", "typo", "code_switch", "long", "boundary")
# Where an answer's route says it came from, in the golden set's terms: a cached answer
# is a model answer served again.
ANSWER_ROUTE = {"template": "template", "edge_model": "edge", "model": "model", "cache": "model"}


@dataclass(frozen=True)
class GoldenItem:
    text: str
    intent: str
    lang: str
    route: str
    case: str


def load(path: Path = GOLDEN) -> list[GoldenItem]:
    with open(path, encoding="utf-8") as f:
        items = [GoldenItem(**row) for row in csv.DictReader(f)]
    for i, item in enumerate(items, start=2):
        if item.route not in ROUTES or item.case not in CASES:
            raise ValueError(
                f"{path}:{i}: route {item.route!r} (allowed {ROUTES}), case {item.case!r} (allowed {CASES})"
            )
    return items


def score(items: list[GoldenItem], answers: Sequence[dict[str, Any] | None]) -> dict[str, Any]:
    """`answers[i]` is the JSON answer to `items[i]` (None or an error body: no answer).
    Accuracy by intent, language and case; route agreement; tickets without an answer."""
    groups: dict[str, dict[str, list[bool]]] = {
        "intent": defaultdict(list),
        "lang": defaultdict(list),
        "case": defaultdict(list),
    }
    routes: dict[str, dict[str, int]] = {r: defaultdict(int) for r in ROUTES}
    unanswered = []
    for item, answer in zip(items, answers, strict=True):
        if not answer or "label" not in answer:
            unanswered.append(item.text)
            continue
        correct = answer["label"] == item.intent
        for key, value in (("intent", item.intent), ("lang", item.lang), ("case", item.case)):
            groups[key][value].append(correct)
        routes[item.route][ANSWER_ROUTE.get(answer.get("route"), answer.get("route", "?"))] += 1
    answered = [ok for values in groups["lang"].values() for ok in values]
    return {
        "tickets": len(items),
        "answered": len(answered),
        "accuracy": _share(answered),
        **{
            f"by_{key}": {k: {"n": len(v), "accuracy": _share(v)} for k, v in sorted(g.items())}
            for key, g in groups.items()
        },
        "routes": {expected: dict(got) for expected, got in routes.items()},
        "route_agreement": round(sum(routes[r][r] for r in ROUTES) / len(answered), 4) if answered else float("nan"),
        "unanswered": unanswered,
    }


def _share(values: list[bool]) -> float:
    return round(sum(values) / len(values), 4) if values else float("nan")


async def ask_all(
    url: str, items: list[GoldenItem], concurrency: int, tenant: str | None
) -> list[dict[str, Any] | None]:
    import httpx

    limit = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:

        async def ask(i: int, item: GoldenItem) -> dict[str, Any] | None:
            body = {"text": item.text, "ticket_id": f"golden-{i}", "user_id": "golden-set", "lang": item.lang}
            if tenant:
                body["tenant"] = tenant
            async with limit:
                try:
                    r = await client.post("/v1/classify", json=body)
                except httpx.HTTPError:
                    return None
            return r.json() if r.headers.get("content-type", "").startswith("application/json") else None

        return await asyncio.gather(*(ask(i, item) for i, item in enumerate(items)))


def evaluate(url: str, path: Path = GOLDEN, concurrency: int = 8, tenant: str | None = None) -> dict[str, Any]:
    items = load(path)
    return score(items, asyncio.run(ask_all(url, items, concurrency, tenant)))


def report(result: dict[str, Any]) -> str:
    lines = [
        f"golden set: {result['answered']}/{result['tickets']} answered, accuracy {result['accuracy']:.3f}, "
        f"route as expected {result['route_agreement']:.3f}"
    ]
    for key in ("lang", "case", "intent"):
        lines += ["", f"| {key} | tickets | accuracy |", "|---|---|---|"]
        lines += [f"| {k} | {v['n']} | {v['accuracy']:.3f} |" for k, v in result[f"by_{key}"].items()]
    lines += ["", "| expected route | answered by |", "|---|---|"]
    lines += [f"| {k} | {', '.join(f'{r} {n}' for r, n in sorted(v.items()))} |" for k, v in result["routes"].items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8000", help="the graph's HTTP address (route prefix included)")
    p.add_argument("--file", type=Path, default=GOLDEN)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--tenant", default=None, help="send every ticket as this tenant (its own cache and prefix)")
    p.add_argument("--out", type=Path, default=None, help="also write the result as JSON here")
    a = p.parse_args(argv)
    result = evaluate(a.url, a.file, a.concurrency, a.tenant)
    print(report(result))
    if a.out:
        a.out.write_text(json.dumps(result, indent=2, ensure_ascii=False))
    sys.exit(1 if result["unanswered"] else 0)


if __name__ == "__main__":
    main()
