"""Where the reliability tests leave their figures: bench/results/reliability/<name>.json
(docs/reliability.md quotes them)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from models.build import ROOT

FIGURES = ROOT / "bench" / "results" / "reliability"


def record(name: str, figures: dict) -> Path:
    FIGURES.mkdir(parents=True, exist_ok=True)
    path = FIGURES / f"{name}.json"
    path.write_text(json.dumps({"at_unix_s": round(time.time()), **figures}, indent=2, default=str))
    print(f"{name}: {json.dumps(figures, default=str)[:2000]}")
    return path
