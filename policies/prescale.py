"""Replicas ahead of a surge: a floor under the reactive count (policies.autoscale).

Two sources:
- an operator's schedule ("a promotion from 20:00 to 22:00 at 10x", or "... on 6
  replicas"): from `lead_s` before it starts, the replicas it needs plus a warm reserve;
  released when the surge is over, or early when `give_back_after_s` into it the load has
  not come. While it holds replicas it alone sets the floor: its plan covers the growth it
  announced;
- the load's own growth, for surges nobody announced: where it grew by `growth_trigger` or
  more over the last `growth_window_s`, the same growth projected `horizon_s` ahead (the
  time a new node and replica need to serve), plus the reserve.

Plain Python: the caller keeps the load samples and passes `now`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class ScheduledSurge(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    start_unix_s: float = Field(description="when the surge starts (Unix seconds)")
    end_unix_s: float = Field(description="when it ends (Unix seconds)")
    load_multiple: float = Field(gt=1, description="expected load as a multiple of the load before it")
    replicas: int | None = Field(
        None,
        ge=1,
        description="replicas the surge needs, where the operator knows them (a past promotion's count); "
        "otherwise load_multiple x the requests in flight before it, over the target",
    )

    @model_validator(mode="after")
    def _ordered(self) -> ScheduledSurge:
        if self.end_unix_s <= self.start_unix_s:
            raise ValueError(f"end_unix_s={self.end_unix_s} must be after start_unix_s={self.start_unix_s}")
        return self


class PrescaleConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schedule: tuple[ScheduledSurge, ...] = Field((), description="surges an operator expects")
    lead_s: float = Field(
        300.0, ge=0, description="replicas for a scheduled surge are asked for this long before it starts"
    )
    growth_enabled: bool = Field(True, description="raise a floor from the load's growth (without a schedule too)")
    growth_window_s: float = Field(60.0, gt=0, description="the load's growth is read over this window")
    growth_trigger: float = Field(
        1.5, gt=1, description="growth over the window (load now / load then) that counts as a surge starting"
    )
    horizon_s: float = Field(
        120.0, ge=0, description="a growing load is projected this far ahead: a new node's and replica's start"
    )
    reserve_replicas: int = Field(1, ge=0, description="warm replicas beyond the expected need while a surge is on")
    give_back_after_s: float = Field(
        300.0,
        gt=0,
        description="a scheduled surge whose load has not grown sqrt(load_multiple)-fold this long after its "
        "start gives its replicas back",
    )


@dataclass(frozen=True)
class LoadSample:
    at_s: float  # Unix seconds
    ongoing_requests: float


@dataclass(frozen=True)
class Prescale:
    floor: int  # replicas the reactive count may not go under; 0: no floor
    reason: str
    source: Literal["schedule", "growth"] = "schedule"  # what raised the floor, when there is one


def _need(load: float, target_per_replica: float, reserve: int) -> int:
    return math.ceil(load / target_per_replica) + reserve


def _due(config: PrescaleConfig, now_s: float) -> list[ScheduledSurge]:
    """The scheduled surges within their lead time or on at `now_s`."""
    return [s for s in config.schedule if s.start_unix_s - config.lead_s <= now_s < s.end_unix_s]


def surge_due(config: PrescaleConfig, now_s: float) -> bool:
    """A scheduled surge is within its lead time or on: the load before it stays its baseline."""
    return bool(_due(config, now_s))


def scheduled_floor(
    config: PrescaleConfig, now_s: float, load: float, baseline: float, target_per_replica: float
) -> Prescale:
    """`baseline`: the load before the surge's lead time began (the caller holds it)."""
    base = max(baseline, 1.0)
    for surge in _due(config, now_s):
        # Half-way on a log scale: requests in flight grow slower than tickets where calls
        # carry several (micro-batching), and a surge that came can show half its multiple.
        if now_s >= surge.start_unix_s + config.give_back_after_s and load < base * math.sqrt(surge.load_multiple):
            return Prescale(0, f"scheduled surge at {surge.load_multiple:g}x did not come: load {load:.0f}")
        if surge.replicas is not None:  # the baseline's multiple overstates a micro-batched need
            need = surge.replicas + config.reserve_replicas
            return Prescale(need, f"scheduled surge at {surge.load_multiple:g}x: {surge.replicas} replicas planned")
        expected = base * surge.load_multiple
        need = _need(expected, target_per_replica, config.reserve_replicas)
        return Prescale(need, f"scheduled surge at {surge.load_multiple:g}x: load {expected:.0f} expected")
    return Prescale(0, "no scheduled surge")


def growth_floor(
    config: PrescaleConfig, now_s: float, history: Sequence[LoadSample], target_per_replica: float
) -> Prescale:
    """`history`: load samples, oldest first; those older than the window are ignored."""
    if not config.growth_enabled:
        return Prescale(0, "growth floor off")
    recent = [s for s in history if s.at_s >= now_s - config.growth_window_s]
    if len(recent) < 2 or recent[-1].at_s - recent[0].at_s < config.growth_window_s / 2:
        return Prescale(0, "too few samples for a growth rate")
    then, now = max(recent[0].ongoing_requests, 1.0), recent[-1].ongoing_requests
    # 1 -> 2 requests in flight doubles as much as 100 -> 200: a load one replica serves
    # within its target says nothing of a surge.
    if now < target_per_replica:
        return Prescale(0, f"load {now:.0f} under one replica's target {target_per_replica:g}")
    growth = now / then
    if growth < config.growth_trigger:
        return Prescale(0, f"growth {growth:.2f}x over {config.growth_window_s:g} s")
    span_s = recent[-1].at_s - recent[0].at_s
    projected = now * growth ** (config.horizon_s / span_s)
    need = _need(projected, target_per_replica, config.reserve_replicas)
    return Prescale(need, f"growth {growth:.2f}x: load {projected:.0f} in {config.horizon_s:g} s", "growth")


def prescale(
    config: PrescaleConfig,
    now_s: float,
    history: Sequence[LoadSample],
    baseline: float,
    target_per_replica: float,
    max_replicas: int,
) -> Prescale:
    """The scheduled floor while a surge is due and not given back, else the growth floor;
    never above `max_replicas`."""
    load = history[-1].ongoing_requests if history else 0.0
    best = scheduled_floor(config, now_s, load, baseline, target_per_replica)
    if not best.floor:  # on a tie the schedule's reason stays (a surge given back says so)
        best = max(best, growth_floor(config, now_s, history, target_per_replica), key=lambda p: p.floor)
    return Prescale(min(best.floor, max_replicas), best.reason, best.source)
