"""Content rules of the anti-spam filter: repeated characters or words, low entropy,
random strings.

Texts arrive normalized (NFKC, whitespace collapsed). Each rule applies only to texts
long enough for its statistic to mean something; short texts are left to the rate
limiter and the duplicate detector.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from policies.adaptive import AdaptiveThreshold, AdaptiveThresholdConfig

_WORD = re.compile(r"\w+")
# Letters beside digits are an id ("Q12345", "A1B2C3"), not a word: the letter-pair model
# reads words only, and ids are the random_share rule's to judge.
_LATIN_WORD = re.compile(r"(?<![a-z0-9])[a-z]+(?![a-z0-9])")
_LATIN_TOKEN = re.compile(r"[a-z0-9]+")
_VOWELS = frozenset("aeiouy")
_CONSONANT_RUN = re.compile(r"[b-df-hj-np-tv-xz]{5,}")
_LETTER_DIGIT_SWITCHES = re.compile(r"(?:[a-z][0-9]|[0-9][a-z])")
# A token at least this share digits is an id or a number, not keyboard mash.
ID_DIGIT_SHARE = 0.75


class SpamRulesConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    repeat_ratio: AdaptiveThresholdConfig = Field(
        AdaptiveThresholdConfig(initial=0.5, lower_bound=0.4, upper_bound=0.6, margin=0.1),
        description="ceiling on the share of characters equal to the one before them (spaces ignored)",
    )
    repeat_min_chars: int = Field(8, gt=0, description="repeated_chars applies from this many non-space characters")
    entropy_bits: AdaptiveThresholdConfig = Field(
        AdaptiveThresholdConfig(initial=3.0, lower_bound=2.5, upper_bound=3.3, margin=0.2),
        description="floor on the Shannon entropy of the text's characters, in bits",
    )
    entropy_min_chars: int = Field(
        20, gt=0, description="low_entropy applies from this many characters (short texts have little entropy)"
    )
    entropy_adaptive_min_chars: int = Field(
        60,
        gt=0,
        description="texts this long set and meet the adapted entropy floor; shorter ones meet its lower bound "
        "(a real 26-character sentence has ~3.1 bits, under a floor adapted on longer tickets)",
    )
    random_max_share: float = Field(
        0.5, gt=0, le=1, description="most of the Latin letters/digits that may sit in unpronounceable tokens"
    )
    random_min_chars: int = Field(8, gt=0, description="random_string applies from this many Latin letters/digits")
    letter_log_prob_floor: float = Field(
        -3.6,
        lt=0,
        description="random_string also fires when the mean log-probability of the letter pairs "
        "(under the reference texts' letter-pair model) is below this",
    )
    letter_min_pairs: int = Field(10, gt=0, description="the letter-pair test applies from this many letter pairs")
    min_distinct_trigram_share: float = Field(
        0.4,
        gt=0,
        le=1,
        description="repeated_words fires when fewer of the word trigrams than this are distinct "
        "(real tickets: > 0.85 short, ~0.65 for 10,000 characters of joined banking77 questions)",
    )
    repeated_words_min_words: int = Field(6, gt=0, description="repeated_words applies from this many words")


@dataclass(frozen=True)
class TextFeatures:
    chars: int
    nonspace_chars: int
    repeat_ratio: float
    words: int
    distinct_trigram_share: float
    entropy_bits: float
    latin_chars: int
    random_share: float
    other_alnum_chars: int  # letters and digits outside ASCII: CJK, accented, full-width


class LetterPairs:
    """A letter-bigram model of real tickets (Latin letters, word boundaries included).

    Random letters, even split into word-like chunks, use pairs real text rarely does:
    on bitext and banking77 the mean log-probability of every ticket is above -3.1,
    on generated random "words" below -3.3 (99 % below -3.9).
    """

    _ALPHABET = " abcdefghijklmnopqrstuvwxyz"

    def __init__(self, texts: list[str]):
        counts = {a: dict.fromkeys(self._ALPHABET, 0.5) for a in self._ALPHABET}  # add-half smoothing
        for text in texts:
            for a, b in self._pairs(text):
                counts[a][b] += 1
        self._log_prob = {a + b: math.log(n / sum(row.values())) for a, row in counts.items() for b, n in row.items()}

    @staticmethod
    def _pairs(text: str):
        for word in _LATIN_WORD.findall(text.casefold()):
            padded = f" {word} "
            yield from zip(padded, padded[1:])

    def mean_log_prob(self, text: str) -> tuple[int, float]:
        """(letter pairs, their mean log-probability)."""
        values = [self._log_prob[a + b] for a, b in self._pairs(text)]
        return len(values), (sum(values) / len(values) if values else 0.0)


def repeat_ratio(text: str) -> tuple[int, float]:
    """(non-space characters, share of them equal to the previous non-space character)."""
    chars = [c for c in text.casefold() if not c.isspace()]
    if len(chars) < 2:
        return len(chars), 0.0
    repeats = sum(1 for a, b in zip(chars, chars[1:]) if a == b)
    return len(chars), repeats / (len(chars) - 1)


def entropy_bits(text: str) -> float:
    counts = Counter(text.casefold())
    n = sum(counts.values())
    return -sum(c / n * math.log2(c / n) for c in counts.values()) if n else 0.0


def _unpronounceable(token: str) -> bool:
    """Keyboard mash and generated ids: long consonant runs, no vowels, or letters and
    digits interleaved. Numbers with a few letters (order ids, amounts, tracking numbers
    like 1Z999AA10123456784) are not suspicious."""
    if len(token) < 6 or sum(c.isdigit() for c in token) >= ID_DIGIT_SHARE * len(token):
        return False
    if _CONSONANT_RUN.search(token) or len(_LETTER_DIGIT_SWITCHES.findall(token)) >= 2:
        return True
    letters = [c for c in token if c.isalpha()]
    return len(letters) >= 6 and sum(c in _VOWELS for c in letters) / len(letters) < 0.15


def random_share(text: str) -> tuple[int, float]:
    """(Latin letters/digits, share of all the text's letters and digits inside
    unpronounceable Latin tokens). All, not only Latin: in a Chinese or Japanese ticket
    the Latin tokens are a phone number, an order id or a brand ("ChatGPT"), and the
    words around them are what is read."""
    tokens = _LATIN_TOKEN.findall(text.casefold())
    latin = sum(len(t) for t in tokens)
    if not latin:
        return 0, 0.0
    other = sum(1 for ch in text if ch.isalnum() and not ch.isascii())
    return latin, sum(len(t) for t in tokens if _unpronounceable(t)) / (latin + other)


def distinct_trigram_share(text: str) -> tuple[int, float]:
    """(words, share of distinct word trigrams). Unlike distinct words, which fall
    naturally as a text grows, repeated trigrams stay rare in long real text."""
    words = _WORD.findall(text.casefold())
    trigrams = list(zip(words, words[1:], words[2:]))
    return len(words), (len(set(trigrams)) / len(trigrams) if trigrams else 1.0)


def features(text: str) -> TextFeatures:
    nonspace, ratio = repeat_ratio(text)
    words, distinct = distinct_trigram_share(text)
    latin, share = random_share(text)
    other = sum(1 for ch in text if ch.isalnum() and not ch.isascii())
    return TextFeatures(len(text), nonspace, ratio, words, distinct, entropy_bits(text), latin, share, other)


class SpamRules:
    """Holds the adaptive thresholds of one filter instance; `check` says which rule fired."""

    def __init__(self, config: SpamRulesConfig, letters: LetterPairs):
        self._config = config
        self._letters = letters
        self._repeat = AdaptiveThreshold(config.repeat_ratio, "ceiling")
        self._entropy = AdaptiveThreshold(config.entropy_bits, "floor")

    def check(self, text: str) -> str | None:
        c = self._config
        f = features(text)
        repeat_applies = f.nonspace_chars >= c.repeat_min_chars
        if repeat_applies and f.repeat_ratio > self._repeat.value:
            return "repeated_chars"
        if f.words >= c.repeated_words_min_words and f.distinct_trigram_share < c.min_distinct_trigram_share:
            return "repeated_words"
        entropy_adapts = f.chars >= c.entropy_adaptive_min_chars
        floor = self._entropy.value if entropy_adapts else c.entropy_bits.lower_bound
        if f.chars >= c.entropy_min_chars and f.entropy_bits < floor:
            return "low_entropy"
        if f.latin_chars >= c.random_min_chars and f.random_share > c.random_max_share:
            return "random_string"
        # Latin letters in a mostly Chinese or Japanese ticket are ids and brands
        # ("ABC-200", "#P31413"), not words the letter-pair model knows.
        if f.latin_chars >= f.other_alnum_chars:
            pairs, log_prob = self._letters.mean_log_prob(text)
            if pairs >= c.letter_min_pairs and log_prob < c.letter_log_prob_floor:
                return "random_string"
        if repeat_applies:
            self._repeat.observe(f.repeat_ratio)
        if entropy_adapts:
            self._entropy.observe(f.entropy_bits)
        return None

    def thresholds(self) -> dict[str, float]:
        return {"repeat_ratio": self._repeat.value, "entropy_bits": self._entropy.value}
