"""Tag keys for ray.serve.metrics, which annotates them as `Tuple[str]` (one element)
though a metric takes any number: the one place that says so to the type checker."""

from __future__ import annotations

from typing import cast


def tag_keys(*names: str) -> tuple[str]:
    return cast("tuple[str]", names)
