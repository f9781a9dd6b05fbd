"""The written taxonomy: what each bundled label covers, what it does not, and the rules at
the boundaries between labels (models/data/intents.yaml and boundaries.yaml).

    python -m models.taxonomy --write    # regenerate docs/labels.md
    python -m models.taxonomy --check    # exit 1 if docs/labels.md is stale

The build copies it into the model's metadata, so `GET /v1/labels` serves the same text
for the model it answers with.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
INTENTS = ROOT / "models" / "data" / "intents.yaml"
BOUNDARIES = ROOT / "models" / "data" / "boundaries.yaml"
DOC = ROOT / "docs" / "labels.md"


@dataclass(frozen=True)
class Exclusion:
    when: str
    label: str


@dataclass(frozen=True)
class LabelDoc:
    name: str
    tier: str
    description: str
    covers: tuple[str, ...]
    not_: tuple[Exclusion, ...]
    examples: tuple[str, ...]


@dataclass(frozen=True)
class Example:
    text: str
    label: str
    lang: str


@dataclass(frozen=True)
class Boundary:
    id: str
    labels: tuple[str, ...]
    rule: str
    why: str
    examples: tuple[Example, ...]


@dataclass(frozen=True)
class Taxonomy:
    labels: tuple[LabelDoc, ...]
    boundaries: tuple[Boundary, ...]

    def as_metadata(self) -> dict[str, Any]:
        """JSON-ready, as the model's metadata and /v1/labels carry it."""
        return {
            "labels": {
                d.name: {
                    "description": d.description,
                    "covers": list(d.covers),
                    "not": [asdict(e) for e in d.not_],
                    "examples": list(d.examples),
                }
                for d in self.labels
            },
            "boundaries": [asdict(b) for b in self.boundaries],
        }


def load(intents: Path = INTENTS, boundaries: Path = BOUNDARIES) -> Taxonomy:
    labels = tuple(
        LabelDoc(
            name=item["name"],
            tier=item["tier"],
            description=item["description"],
            covers=tuple(item.get("covers", ())),
            not_=tuple(Exclusion(**e) for e in item.get("not", ())),
            examples=tuple(item.get("examples", ())),
        )
        for item in yaml.safe_load(intents.read_text())
    )
    rules = tuple(
        Boundary(
            id=b["id"],
            labels=tuple(b["labels"]),
            rule=b["rule"],
            why=b["why"],
            examples=tuple(Example(**e) for e in b["examples"]),
        )
        for b in yaml.safe_load(boundaries.read_text())
    )
    names = {d.name for d in labels}
    for b in rules:
        for e in b.examples:
            if e.label not in names:
                raise ValueError(f"boundary {b.id!r}: example label {e.label!r} is not one of {sorted(names)}")
    return Taxonomy(labels, rules)


def render_markdown(tax: Taxonomy) -> str:
    lines = [
        "# Labels",
        "",
        "What each label of the bundled model covers, what it does not, and the rules at the",
        "boundaries between labels. Generated from `models/data/intents.yaml` and",
        "`models/data/boundaries.yaml` by `python -m models.taxonomy --write`; `GET /v1/labels`",
        "serves the same text (field `taxonomy`) for the model it answers with. Every boundary",
        "example is a golden ticket (case `boundary`).",
        "",
        "`out_of_scope` (reserved) is the answer for a ticket that fits none of these labels:",
        "anything that is not about shopping with us (weather, trivia, banking, travel...).",
        "",
        "## Boundary rules",
        "",
    ]
    for b in tax.boundaries:
        lines += [
            f"### {b.id}",
            "",
            f"Labels: {', '.join(f'`{x}`' for x in b.labels)}.",
            "",
            b.rule,
            "",
            f"Why: {b.why}",
            "",
        ]
        lines += [f'- "{e.text}" ({e.lang}) → `{e.label}`' for e in b.examples] + [""]
    lines += ["## Labels", ""]
    for d in tax.labels:
        lines += [f"### `{d.name}`", "", f"{d.description}. Tier: {d.tier}.", "", "Covers:"]
        lines += [f"- {c}" for c in d.covers]
        if d.not_:
            lines += ["", "Not:"] + [f"- {e.when} → `{e.label}`" for e in d.not_]
        lines += ["", "Examples: " + "; ".join(f'"{x}"' for x in d.examples), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help=f"write {DOC.relative_to(ROOT)}")
    mode.add_argument("--check", action="store_true", help=f"exit 1 if {DOC.relative_to(ROOT)} is stale")
    a = p.parse_args(argv)
    text = render_markdown(load())
    if a.write:
        DOC.write_text(text)
    elif not DOC.exists() or DOC.read_text() != text:
        sys.exit(f"{DOC} is stale: run python -m models.taxonomy --write")


if __name__ == "__main__":
    main()
