"""A stand-in for the vLLM engine behind the same `TicketEngine` protocol, for the tests of
the graph around the model (resilience, canary, review, topology, edge, hostile input,
privacy): it starts in about a second instead of 20-50 s and holds no engine processes.

`model.engine.mode: fake` selects it, the way Ray Serve LLM swaps its engine class. It
serves a built model directory's labels, tiers, thresholds and tokenizer lock as the real
engine does, and answers with the model's own char n-gram pre-classifier
(`edge_classifier.npz`): deterministic, plausible labels and confidences. A model derived
by `models.variant` has no pre-classifier of its own; its source's answers go through
the same head permutation the variant applied, so a shuffled canary is as wrong here as
on vLLM. With `fake_gpu_profile` it answers at a GPU replica's cost instead
(deployments/engines/gpu_profile.py): batched steps, a concurrency ceiling and an engine start.
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

from deployments.engines import EngineConfig, Prediction, TicketEngine, TokenizerInfo
from deployments.engines.gpu_profile import PROFILES, StepBatcher
from models.artifacts import ModelMetadata
from models.edge_classifier import EdgeClassifier

# Sequences the stand-in claims to hold at once: what the CPU default's batch cap assumes.
FAKE_BATCH_CAPACITY = 256
# A token-id prompt longer than this is cut, as vLLM's max_model_len would.
FAKE_MAX_TOKENS = 512


class FakeTicketEngine(TicketEngine):
    def __init__(self, config: EngineConfig, model_dir: str):
        # The `tokenizers` library alone: importing transformers (and torch) would cost a
        # stand-in more start-up time than everything else it does.
        from tokenizers import Tokenizer

        self.metadata = ModelMetadata.load_locked(model_dir)
        self._config = config
        # Token ids arrive from the tokenizer deployment; the classifier reads text.
        self._tokenizer = Tokenizer.from_file(str(Path(model_dir, "tokenizer.json")))
        self._classifier, self._head_order = _classifier(Path(model_dir), self.metadata)
        self._random = random.Random(0)
        self._stopped = False
        gpu = PROFILES.get(config.fake_gpu_profile)
        self._gpu = (
            gpu.scaled(config.fake_gpu_time_factor, config.fake_gpu_ceiling_divisor, config.fake_gpu_start_s)
            if gpu
            else None
        )
        self._batcher = StepBatcher(self._gpu) if self._gpu else None
        # Blocks the replica's constructor as vLLM's start does: Serve counts the replica
        # as starting, and routes nothing to it, until it returns.
        time.sleep(self._gpu.start_s if self._gpu else config.fake_start_s)

    def tokenizer_info(self) -> TokenizerInfo:
        return TokenizerInfo(self.metadata.tokenizer_hash, True, FAKE_MAX_TOKENS)

    async def predict(self, prompt: list[int] | str, request_id: str, tenant: str | None = None) -> Prediction:
        if self._stopped:
            raise RuntimeError("engine is shut down")
        if self._batcher is not None:
            tokens = len(prompt) if isinstance(prompt, list) else len(self._tokenizer.encode(prompt).ids)
            await self._batcher.run(tokens)
        elif self._config.fake_latency_ms:
            await asyncio.sleep(self._config.fake_latency_ms / 1000)
        if self._random.random() < self._config.fake_failure_rate:
            raise RuntimeError(f"fake engine failure for {request_id}")
        text = prompt if isinstance(prompt, str) else self._tokenizer.decode(prompt, skip_special_tokens=True)
        guess = self._classifier.predict(text)
        order = self._head_order
        if order is None:
            return Prediction(guess.label, guess.confidence, runners_up=guess.runners_up)

        # The variant's head row i holds the source's row head_order[i].
        def served(label: str) -> str:
            return self.metadata.labels[order.index(self._classifier.labels.index(label))]

        others = tuple((served(label), p) for label, p in guess.runners_up)
        return Prediction(served(guess.label), guess.confidence, runners_up=others)

    def batch_capacity(self) -> int:
        return self._gpu.max_num_seqs if self._gpu else FAKE_BATCH_CAPACITY

    async def check_health(self) -> None:
        if self._stopped:
            raise RuntimeError("engine is shut down")

    def shutdown(self) -> None:
        self._stopped = True


def _classifier(model_dir: Path, meta: ModelMetadata) -> tuple[EdgeClassifier, list[int] | None]:
    if (model_dir / "edge_classifier.npz").exists():
        return EdgeClassifier.load(model_dir), None
    source = meta.extra.get("derived_from")
    if source is None:
        raise FileNotFoundError(f"{model_dir}: no edge_classifier.npz and no source model to answer from")
    return EdgeClassifier.load(source), meta.extra.get("head_order")
