"""The shipped graphs' `args` (serve_config.yaml, serve_config.gpu.yaml), and how tools change a part of them."""

from __future__ import annotations

import yaml

from models.build import ROOT


def shipped_args(config_file: str = "serve_config.yaml") -> dict:
    """The `args` of a shipped config (the CPU default; serve_config.gpu.yaml for GPU
    replicas): tools measure the settings users run."""
    with open(ROOT / config_file, encoding="utf-8") as f:
        return yaml.safe_load(f)["applications"][0]["args"]


def merged(base: dict, override: dict) -> dict:
    out = dict(base)
    for key, value in override.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out
