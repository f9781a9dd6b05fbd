"""A GPU model replica's costs, for the fake engine: continuous batching of pooling
requests at a GPU's step time, a concurrency ceiling and an engine start, all as waits
(asyncio and a sleeping constructor), so that dozens of GPU-shaped replicas fit on two
CPU cores and a surge on a simulated GPU cluster can be measured here.

Each engine step takes up to `max_num_seqs` waiting requests, in arrival order, within
`max_batched_tokens` prompt tokens (vLLM's scheduler limits of the same names) and lasts
`step_overhead_ms + tokens * per_token_us`: a classifier's request is one prefill step.

GPU_E5_SMALL, and where its figures come from:
- per_token_us 1.25: vLLM's own embedding benchmark (vllm-project/vllm PR #23000, 2025-08)
  served snowflake-arctic-embed-m-v1.5, a BERT-base (hidden 768, 12 layers), at 212k
  prompt tokens/s on one GPU (the PR does not name it) with single-text requests; e5-small has the same 12 layers at
  hidden 384, a quarter of the matrix FLOPs per token: ~800k tokens/s, 1.25 us a token.
- step_overhead_ms 4: an assumption, not a measurement. That benchmark's 10,000 requests
  took 24.1 s at 415 requests/s, about 2.4 ms a request with the server's own work; one
  step's fixed cost (scheduling, kernel launches, the pooler, returning the answers) is
  taken as 4 ms. `GpuProfile.requests_per_s` gives the replica rate it implies.
- max_num_seqs 1024, max_batched_tokens 16384: vLLM 0.32's defaults on an H100 for an
  engine used as a library, as the model replica uses it (`get_batch_defaults` in
  vllm/engine/arg_utils.py). The replica's batch knob (`model.batching`) keeps far fewer
  requests inside the engine.
- start_s 45: a replica's engine start (weights, torch.compile, CUDA graphs), assumed of
  the order of vLLM's CPU engine start measured here, 20-50 s (docs/reliability.md). The
  node's own start (a VM, the image pull) is the cluster autoscaler's delay, not this.

`scaled(time_factor, ceiling_divisor)` keeps the shape (a step batches what waits, its
cost grows with the batch, a ceiling) at a rate two CPU cores can drive to saturation:
steps `time_factor` times slower, ceilings `ceiling_divisor` times smaller. Most of the
cut goes to the ceilings so that answers stay within a GPU's order of magnitude
(bench.surge: 48 and 256, ~15 tickets/s a replica at ~195 ms a step).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuProfile:
    step_overhead_ms: float  # fixed cost of one engine step
    per_token_us: float  # each prompt token of the step's batch
    max_num_seqs: int  # requests in one step: the replica's concurrency ceiling
    max_batched_tokens: int  # prompt tokens in one step
    start_s: float  # engine start: weights, compilation, warm-up

    def step_ms(self, tokens: int) -> float:
        return self.step_overhead_ms + tokens * self.per_token_us / 1000

    def take(self, waiting_tokens: Sequence[int]) -> int:
        """How many of the waiting requests (in arrival order) the next step takes: at
        least one, so a prompt over the token budget still runs, alone."""
        taken = budget = 0
        for tokens in waiting_tokens[: self.max_num_seqs]:
            if taken and budget + tokens > self.max_batched_tokens:
                break
            taken, budget = taken + 1, budget + tokens
        return taken

    def scaled(self, time_factor: float = 1, ceiling_divisor: int = 1, start_s: float | None = None) -> GpuProfile:
        """Steps `time_factor` times slower, ceilings `ceiling_divisor` times smaller;
        `start_s`: the engine start, where a benchmark compresses time (None: unchanged)."""
        return GpuProfile(
            step_overhead_ms=self.step_overhead_ms * time_factor,
            per_token_us=self.per_token_us * time_factor,
            max_num_seqs=max(1, self.max_num_seqs // ceiling_divisor),
            max_batched_tokens=max(1, self.max_batched_tokens // ceiling_divisor),
            start_s=self.start_s if start_s is None else start_s,
        )

    def requests_per_s(self, tokens_per_request: int) -> float:
        """The replica's rate with every step full: what a surge's capacity is made of."""
        batch = self.take([tokens_per_request] * self.max_num_seqs)
        return batch / (self.step_ms(batch * tokens_per_request) / 1000)


GPU_E5_SMALL = GpuProfile(
    step_overhead_ms=4.0, per_token_us=1.25, max_num_seqs=1024, max_batched_tokens=16384, start_s=45.0
)
PROFILES = {"gpu-e5-small": GPU_E5_SMALL}


class StepBatcher:
    """The engine's step loop: callers wait for the step that carries their request."""

    def __init__(self, profile: GpuProfile, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep):
        self._profile = profile
        self._sleep = sleep
        self._waiting: deque[tuple[int, asyncio.Future[None]]] = deque()
        self._loop: asyncio.Task[None] | None = None
        self.steps: deque[int] = deque(maxlen=1024)  # requests per recent step, for stats and tests

    async def run(self, tokens: int) -> None:
        done = asyncio.get_running_loop().create_future()
        self._waiting.append((tokens, done))
        if self._loop is None or self._loop.done():
            self._loop = asyncio.get_running_loop().create_task(self._steps())
        await done

    async def _steps(self) -> None:
        while self._waiting:
            count = self._profile.take([tokens for tokens, _ in self._waiting])
            batch = [self._waiting.popleft() for _ in range(count)]
            await self._sleep(self._profile.step_ms(sum(tokens for tokens, _ in batch)) / 1000)
            self.steps.append(count)
            for _, done in batch:
                if not done.done():
                    done.set_result(None)
