"""Adaptive batch size: the seeds' rules for the model replica's batch knob.

The knob is how many requests the replica lets into its engine at once (vLLM batches
whatever is inside). A bigger batch raises throughput until the device is saturated and
then only adds latency; memory pressure makes every extra sequence risky.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, model_validator


class BatchSizeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="adapt the batch knob at run time; off: it stays at start_size")
    start_size: int = Field(8, ge=1, description="batch knob when the replica starts")
    min_size: int = Field(1, ge=1, description="the knob never goes below this")
    cap_size: int | None = Field(
        None, ge=1, description="the knob never goes above this; default derived from the device (see batch_cap)"
    )
    large_device_gib: float = Field(80.0, gt=0, description="accelerators with this much memory get large_device_cap")
    large_device_cap: int = Field(32, ge=1, description="cap on accelerators of large_device_gib or more")
    small_device_cap: int = Field(16, ge=1, description="cap on smaller accelerators")
    halve_above_pressure: float = Field(
        0.9, gt=0, le=1, description="memory pressure (0..1) above which the knob halves"
    )
    shrink_above_p95_ms: float = Field(1000.0, gt=0, description="replica p95 latency above which the knob shrinks")
    shrink_step: int = Field(2, ge=1, description="how much the knob shrinks on high latency")
    grow_above_qps: float = Field(1000.0, ge=0, description="completions per second above which the knob may grow")
    grow_below_pressure: float = Field(0.7, gt=0, le=1, description="growth only while memory pressure is below this")
    grow_factor: float = Field(1.1, gt=1, description="growth multiplier (at least +1)")
    max_step: int = Field(4, ge=1, description="largest change of the knob in one decision")
    cooldown_s: float = Field(30.0, ge=0, description="least time between two changes")
    interval_s: float = Field(1.0, gt=0, description="how often the replica samples its signals and asks the policy")
    window_s: float = Field(10.0, gt=0, description="p95 latency and QPS are measured over this recent span")

    @model_validator(mode="after")
    def _ordered(self) -> BatchSizeConfig:
        if self.cap_size is not None and not self.min_size <= self.start_size <= self.cap_size:
            raise ValueError(
                f"need min_size <= start_size <= cap_size, got {self.min_size}, {self.start_size}, {self.cap_size}"
            )
        if self.start_size < self.min_size:
            raise ValueError(f"start_size {self.start_size} is below min_size {self.min_size}")
        return self


def batch_cap(config: BatchSizeConfig, accelerator_gib: float | None, kv_capacity_seqs: int) -> int:
    """Largest batch: the configured cap; else 32/16 by accelerator memory (the seeds'
    rule); on CPU (no accelerator) as many full-length sequences as the KV budget holds."""
    if config.cap_size is not None:
        cap = config.cap_size
    elif accelerator_gib is not None:
        cap = config.large_device_cap if accelerator_gib >= config.large_device_gib else config.small_device_cap
    else:
        cap = kv_capacity_seqs
    return max(config.min_size, cap)


@dataclass(frozen=True)
class BatchSignals:
    """What the replica measured over the last interval."""

    memory_pressure: float  # 0..1: KV blocks in use, else device/host memory in use
    p95_ms: float | None  # None: no request finished
    qps: float


@dataclass(frozen=True)
class BatchDecision:
    size: int
    reason: str  # hold, cooldown, memory_pressure, latency, throughput, forced, override


class AdaptiveBatchSize:
    def __init__(self, config: BatchSizeConfig, cap: int, now: float):
        self._config = config
        self.cap = cap
        self.start = self.size = min(max(config.start_size, config.min_size), cap)
        self._changed_at = now

    def decide(self, signals: BatchSignals, now: float) -> BatchDecision:
        c = self._config
        if not c.enabled:
            return BatchDecision(self.size, "hold")
        if now - self._changed_at < c.cooldown_s:
            return BatchDecision(self.size, "cooldown")
        if signals.memory_pressure > c.halve_above_pressure:
            target, reason = self.size // 2, "memory_pressure"
        elif signals.p95_ms is not None and signals.p95_ms > c.shrink_above_p95_ms:
            target, reason = self.size - c.shrink_step, "latency"
        elif signals.qps > c.grow_above_qps and signals.memory_pressure < c.grow_below_pressure:
            target, reason = max(self.size + 1, math.floor(self.size * c.grow_factor)), "throughput"
        else:
            return BatchDecision(self.size, "hold")
        return self._move(target, reason, now)

    def force(self, target: int, now: float) -> BatchDecision:
        """A reclaim action shrinks the batch outside the rules (still within bounds)."""
        return self._move(target, "forced", now)

    def override(self, size: int, now: float) -> BatchDecision:
        """An operator sets the knob directly (bench.batch_knob); only the cap still holds."""
        self.size, self._changed_at = max(1, min(self.cap, size)), now
        return BatchDecision(self.size, "override")

    def _move(self, target: int, reason: str, now: float) -> BatchDecision:
        c = self._config
        step = max(-c.max_step, min(c.max_step, target - self.size))
        size = max(c.min_size, min(self.cap, self.size + step))
        if size == self.size:
            return BatchDecision(self.size, "hold")
        self.size, self._changed_at = size, now
        return BatchDecision(size, reason)
