"""Fault injection for tests and drills: a model replica told to fail (see FaultConfig)."""

from __future__ import annotations

import asyncio
import random

from deployments.api import ModelOutOfMemory, ModelUnavailable
from deployments.config import FaultConfig


class FaultInjector:
    def __init__(self, config: FaultConfig, seed: int = 0):
        self.config = config
        self._random = random.Random(seed)

    async def maybe_fail(self) -> None:
        f = self.config
        if f.failure == "none" or self._random.random() >= f.rate:
            return
        if f.failure == "slow":
            await asyncio.sleep(f.slow_ms / 1000)
        elif f.failure == "out_of_memory":
            raise ModelOutOfMemory("injected fault")
        else:
            raise ModelUnavailable("injected fault")
