"""The ticket mix the load tests send: what a support inbox looks like, not one text repeated.

Plain Python (csv, yaml, random): the Locust file imports it beside gevent, and the
benchmarks import it too. Tickets come from the bundled, self-written data set and, when
present, from `../shared/data/bitext_cs_8k` (its intents mapped onto the bundled ones).
"""

from __future__ import annotations

import csv
import random
import string
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import yaml

from loadkit.bitext import BITEXT, BITEXT_LABELS

ROOT = Path(__file__).resolve().parent.parent
BUNDLED_DATA = ROOT / "models" / "data" / "tickets.csv"
BUNDLED_INTENTS = ROOT / "models" / "data" / "intents.yaml"
# Bitext intents with a counterpart among the bundled labels; the rest are left out.
BITEXT_TO_BUNDLED = {intent: labels[0] for intent, labels in BITEXT_LABELS.items()}
# Share of tickets by the tier of their intent: simple ones are what templates and the
# pre-classifier answer ("templated"), complex ones need the model.
MIX = {"simple": 0.38, "regular": 0.45, "complex": 0.17}
KINDS = {"simple": "templated", "regular": "regular", "complex": "complex"}


def read_csv(path: Path) -> list[dict]:
    with open(path, encoding="utf-8-sig", newline="") as f:
        return list(csv.DictReader(f))


@dataclass(frozen=True)
class Ticket:
    kind: str  # templated, regular, complex
    text: str
    label: str  # the intent the text was written for (the second one's is dropped)
    lang: str


class TicketMix:
    """Draws tickets: tier by MIX, then a random row of that tier. Regular and complex
    tickets carry an order reference half of the time, as real ones do (so the result
    cache sees mostly new texts); a third of complex tickets hold a second request."""

    def __init__(self, rows: list[tuple[str, str, str]], tiers: dict[str, str], unique_share: float = 0.5):
        self._by_tier: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
        for text, label, lang in rows:
            self._by_tier[tiers.get(label, "regular")].append((text, label, lang))
        self._tiers = [t for t in MIX if self._by_tier[t]]
        self._weights = [MIX[t] for t in self._tiers]
        self._unique_share = unique_share

    @classmethod
    def load(cls, shared: bool = True, unique_share: float = 0.5) -> TicketMix:
        tiers = {item["name"]: item["tier"] for item in yaml.safe_load(BUNDLED_INTENTS.read_text())}
        rows = [(r["text"], r["label"], r["lang"]) for r in read_csv(BUNDLED_DATA)]
        if shared and BITEXT.exists():
            rows += [
                (r["utterance"], BITEXT_TO_BUNDLED[r["intent"]], "en")
                for r in read_csv(BITEXT)
                if r["intent"] in BITEXT_TO_BUNDLED
            ]
        return cls(rows, tiers, unique_share)

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_tier.values())

    def draw(self, rng: random.Random) -> Ticket:
        tier = rng.choices(self._tiers, self._weights)[0]
        text, label, lang = rng.choice(self._by_tier[tier])
        if tier == "complex" and rng.random() < 1 / 3:
            other = rng.choice(self._by_tier["regular"] or self._by_tier[tier])[0]
            text = f"{text} {other}"
        if tier != "simple" and rng.random() < self._unique_share:
            text = f"{text} #{rng.choice(string.ascii_uppercase)}{rng.randint(10000, 99999)}"
        return Ticket(KINDS[tier], text, label, lang)


def spam_texts(rng: random.Random, n: int) -> dict[str, list[str]]:
    """Generated spam by kind: what the anti-spam content rules must refuse."""
    words = ["buy", "cheap", "now", "free", "click", "win", "deal", "help", "pls"]
    alnum = string.ascii_lowercase + string.digits
    return {
        "repeated characters": [rng.choice("a!?.zx😀好") * rng.randint(8, 400) for _ in range(n)],
        "repeated words": [
            " ".join([" ".join(rng.sample(words, rng.randint(1, 3)))] * rng.randint(6, 40)) for _ in range(n)
        ],
        "random letters": [
            "".join(rng.choice(string.ascii_letters) for _ in range(rng.randint(10, 200))) for _ in range(n)
        ],
        "random letters+digits": ["".join(rng.choice(alnum) for _ in range(rng.randint(10, 200))) for _ in range(n)],
        "random 'words'": [
            " ".join(
                "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 9)))
                for _ in range(rng.randint(3, 15))
            )
            for _ in range(n)
        ],
    }
