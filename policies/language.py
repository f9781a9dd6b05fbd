"""Which language a ticket is in, and whether the graph serves it.

A statistical identifier (py3langid, offline) decides when it is confident; short or
ambiguous texts fall back on their script, then on the client's hint. The hint only
settles what the text itself leaves open: it never admits a language the text
clearly is not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, field_validator

# Scripts each language is written in; a configured language missing here may be in any script.
LANGUAGE_SCRIPTS = {
    "en": {"latin"},
    "fr": {"latin"},
    "de": {"latin"},
    "es": {"latin"},
    "it": {"latin"},
    "pt": {"latin"},
    "nl": {"latin"},
    "zh": {"han"},
    "ja": {"han", "kana"},
    "ko": {"hangul"},
    "ru": {"cyrillic"},
    "uk": {"cyrillic"},
    "ar": {"arabic"},
}
_SCRIPT_RANGES = (
    ("kana", 0x3040, 0x30FF),
    ("han", 0x3400, 0x4DBF),
    ("han", 0x4E00, 0x9FFF),
    ("hangul", 0xAC00, 0xD7AF),
    ("cyrillic", 0x0400, 0x04FF),
    ("arabic", 0x0600, 0x06FF),
)

Identify = Callable[[str], tuple[str, float]]


class LanguageConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    supported: list[str] = Field(
        ["en", "zh", "ja"], min_length=1, description="languages served; others get 422 unsupported_language"
    )
    min_confidence: float = Field(
        0.9, gt=0, le=1, description="identifier probability needed to trust its answer over script and hint"
    )

    @field_validator("supported")
    @classmethod
    def _lowercase(cls, v: list[str]) -> list[str]:
        return [primary_subtag(x) for x in v]


@dataclass(frozen=True)
class LanguageDecision:
    language: str
    supported: bool
    source: str  # "identifier", "script", "hint" or "default"


def primary_subtag(tag: str) -> str:
    """'en-US' -> 'en', 'zh_Hans' -> 'zh'."""
    return tag.replace("_", "-").split("-")[0].strip().lower()


def dominant_script(text: str) -> str | None:
    """The script of most letters; kana anywhere makes it Japanese-written ('kana')."""
    counts: dict[str, int] = {}
    for ch in text:
        if not ch.isalpha():
            continue
        cp = ord(ch)
        script = "latin" if cp < 0x0250 else next((s for s, lo, hi in _SCRIPT_RANGES if lo <= cp <= hi), "other")
        counts[script] = counts.get(script, 0) + 1
    if not counts:
        return None
    if "kana" in counts:
        return "kana"
    return max(counts, key=counts.__getitem__)


def _writes(language: str, script: str) -> bool:
    scripts = LANGUAGE_SCRIPTS.get(language)
    return scripts is None or script in scripts


def detect_language(text: str, hint: str | None, config: LanguageConfig, identify: Identify) -> LanguageDecision:
    supported = config.supported
    language, probability = identify(text)
    if probability >= config.min_confidence:
        return LanguageDecision(language, language in supported, "identifier")
    hint = primary_subtag(hint) if hint else None
    script = dominant_script(text)
    if hint in supported and (script is None or _writes(hint, script)):
        return LanguageDecision(hint, True, "hint")
    if script is None:  # digits, emoji, punctuation only: nothing to go on
        return LanguageDecision(supported[0], True, "default")
    candidates = [lang for lang in supported if _writes(lang, script)]
    if candidates:
        return LanguageDecision(candidates[0], True, "script")
    return LanguageDecision(language if _writes(language, script) else script, False, "script")
