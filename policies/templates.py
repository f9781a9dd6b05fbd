"""Template rules of the edge router: per-language regular expressions mapped to an intent."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError


class _TemplateSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    intent: str
    answer_id: str
    patterns: dict[str, list[str]] = Field(min_length=1)


class _TemplateFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_chars: int = Field(120, gt=0)
    exclude: dict[str, list[str]] = Field(default_factory=dict)
    templates: list[_TemplateSpec]


@dataclass(frozen=True)
class Template:
    id: str
    intent: str
    answer_id: str


class TemplateSet:
    def __init__(self, spec: _TemplateFile, source: str = "<memory>"):
        self.max_chars = spec.max_chars
        self._exclude = {lang: [_compile(p, source) for p in pats] for lang, pats in spec.exclude.items()}
        self._rules: dict[str, list[tuple[re.Pattern[str], Template]]] = {}
        for t in spec.templates:
            template = Template(t.id, t.intent, t.answer_id)
            for lang, patterns in t.patterns.items():
                self._rules.setdefault(lang, []).extend((_compile(p, source), template) for p in patterns)
        self.intents = {t.intent for t in spec.templates}

    @classmethod
    def from_yaml(cls, path: str | Path) -> TemplateSet:
        try:
            return cls(_TemplateFile.model_validate(yaml.safe_load(Path(path).read_text())), str(path))
        except ValidationError as e:
            raise ValueError(f"{path}: {e}") from None

    def match(self, text: str, language: str) -> Template | None:
        if len(text) > self.max_chars:
            return None
        if any(p.search(text) for p in self._exclude.get(language, ())):
            return None
        return next((template for pattern, template in self._rules.get(language, ()) if pattern.search(text)), None)


def _compile(pattern: str, source: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error as e:
        raise ValueError(f"{source}: bad pattern {pattern!r}: {e}") from None
