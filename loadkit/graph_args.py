"""The shipped graph's `args` (serve_config.yaml), and how tools change a part of them."""

from __future__ import annotations

import yaml

from models.build import ROOT


def shipped_args() -> dict:
    """The `args` of serve_config.yaml: tools measure the settings users run."""
    with open(ROOT / "serve_config.yaml", encoding="utf-8") as f:
        return yaml.safe_load(f)["applications"][0]["args"]


def merged(base: dict, override: dict) -> dict:
    out = dict(base)
    for key, value in override.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out
