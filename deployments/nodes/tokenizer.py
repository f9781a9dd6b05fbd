"""Tokenizer deployment: the model's own tokenizer, version-locked to the model replica."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from ray.serve.handle import DeploymentHandle
from ray.serve.metrics import Counter

from deployments.config import TokenizerConfig
from models.artifacts import tokenizer_hash

logger = logging.getLogger("ray.serve")

DEFAULT_OPTIONS = {
    "name": "Tokenizer",
    "max_ongoing_requests": 1024,
    # Past this the caller gets BackPressureError, which the ingress answers as 503
    # overloaded with Retry-After: a bounded queue instead of a growing one.
    "max_queued_requests": 2048,
    "ray_actor_options": {"num_cpus": 0},
    "max_surge_percent": 100,  # an upgrade starts the new replicas before the old ones stop
}


def load_encoder(source: str, max_tokens: int):
    """The `tokenizers` library on the directory's tokenizer.json, truncating like
    transformers' `truncation=True, max_length=max_tokens` (special tokens kept). Importing
    transformers (and torch with it) cost this replica ~10 CPU-s at every start; the ids
    are the same (tests/unit/test_tokenizer_ids.py)."""
    from tokenizers import Tokenizer as Encoder

    path = Path(source, "tokenizer.json")
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: the tokenizer deployment loads a fast tokenizer's tokenizer.json")
    encoder = Encoder.from_file(str(path))
    encoder.enable_truncation(max_length=max_tokens)
    encoder.no_padding()
    return encoder


class Tokenizer:
    """Turns ticket text into the engine's token ids for the edge router to send on.

    Tokenizing here keeps that CPU work off the engine's process; if it takes longer
    than `timeout_ms`, the raw text goes on and the replica tokenizes it itself.
    The model handle is only used to check, at start, that both load the same tokenizer.
    """

    async def __init__(self, config: TokenizerConfig, model: DeploymentHandle, model_dir: str):
        self._timeout_s = config.timeout_ms / 1000
        source = config.tokenizer_dir or model_dir
        own_hash = tokenizer_hash(source)
        info = await model.tokenizer_info.remote()
        if own_hash != info.tokenizer_hash:
            raise RuntimeError(
                f"tokenizer mismatch: {source} hashes to {own_hash}, the model replica's tokenizer "
                f"is {info.tokenizer_hash}; refusing to start"
            )
        self._add_special_tokens = info.add_special_tokens
        self._max_tokens = min(config.max_tokens, info.max_tokens)
        self._encoder = load_encoder(source, self._max_tokens)
        self._counts = {"tokenized": 0, "fallback": 0}
        self._outcomes = Counter(
            "tokenizer_requests_total",
            description="Tickets tokenized here, or passed on as raw text after a timeout (fallback).",
            tag_keys=("outcome",),
        )

    def _encode(self, text: str) -> list[int]:
        return self._encoder.encode(text, add_special_tokens=self._add_special_tokens).ids

    async def tokenize(self, text: str) -> list[int] | str:
        try:
            prompt: list[int] | str = await asyncio.wait_for(asyncio.to_thread(self._encode, text), self._timeout_s)
            outcome = "tokenized"
        except TimeoutError:
            prompt, outcome = text, "fallback"
        self._counts[outcome] += 1
        self._outcomes.inc(tags={"outcome": outcome})
        return prompt

    def stats(self) -> dict[str, int]:
        return {**self._counts, "max_tokens": self._max_tokens}

    async def ping(self) -> str:
        return "ok"
