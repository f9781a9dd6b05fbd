"""How people mistype: deterministic noisy variants of a ticket (case and punctuation
dropped, letters swapped, dropped or doubled, texting forms). The build uses them for the
calibration mix, and for training copies where `TrainSettings.noise_share` asks.

Plain functions of (text, random.Random): the same text and seed give the same variant.
"""

from __future__ import annotations

import hashlib
import random
import re
import string
from typing import Literal

NoiseKind = Literal["flat", "typos", "texting"]
KINDS: tuple[NoiseKind, ...] = ("flat", "typos", "texting")
# Whole words only; the left side is matched case-insensitively.
TEXTING = {
    "you": "u",
    "your": "ur",
    "you're": "ur",
    "please": "pls",
    "thanks": "thx",
    "thank you": "ty",
    "account": "acct",
    "password": "pwd",
    "are": "r",
    "because": "bc",
    "with": "w/",
    "as soon as possible": "asap",
    "right now": "rn",
    "i don't know": "idk",
    "message": "msg",
    "order": "ordr",
}
_TEXTING_RE = re.compile(r"\b(" + "|".join(sorted(map(re.escape, TEXTING), key=len, reverse=True)) + r")\b", re.I)
_PUNCT = str.maketrans("", "", string.punctuation.replace("#", "").replace("@", "") + "。、！？，：；「」（）")


def flat(text: str, rng: random.Random) -> str:
    """Lowercase, punctuation gone (order numbers' # and e-mails' @ stay)."""
    return " ".join(text.lower().translate(_PUNCT).split())


def typos(text: str, rng: random.Random, rate: float = 0.2) -> str:
    """About `rate` of the words of four letters or more get one slip: two neighbours
    swapped, a letter dropped, or one doubled."""
    words = text.split(" ")
    for i, w in enumerate(words):
        if len(w) >= 4 and w.isalpha() and rng.random() < rate:
            j = rng.randrange(1, len(w) - 1)
            slip = rng.randrange(3)
            if slip == 0:
                w = w[: j - 1] + w[j] + w[j - 1] + w[j + 1 :]
            elif slip == 1:
                w = w[:j] + w[j + 1 :]
            else:
                w = w[:j] + w[j] + w[j:]
            words[i] = w
    return " ".join(words)


def texting(text: str, rng: random.Random) -> str:
    """Texting forms for common words, then lowercase without a final full stop."""
    out = _TEXTING_RE.sub(lambda m: TEXTING[m.group(0).lower()], text)
    return out.lower().rstrip(".")


def variant(text: str, kind: NoiseKind, seed: int = 0) -> str:
    rng = random.Random(int(hashlib.sha256(f"{seed}:{kind}:{text}".encode()).hexdigest()[:12], 16))
    if kind == "flat":
        return flat(text, rng)
    if kind == "typos":
        return typos(text, rng)
    return texting(text, rng)


def noisy(text: str, lang: str, seed: int = 0) -> str:
    """One noisy variant, its kind drawn from the text: English gets any kind, other
    languages only the flat one (letters and texting forms are English habits)."""
    if lang != "en":
        return variant(text, "flat", seed)
    pick = int(hashlib.sha256(f"{seed}:{text}".encode()).hexdigest()[:8], 16) % len(KINDS)
    return variant(text, KINDS[pick], seed)
