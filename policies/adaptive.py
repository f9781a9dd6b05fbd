"""A threshold that follows the recent distribution of legitimate values, within bounds."""

from __future__ import annotations

from collections import deque
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class AdaptiveThresholdConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    initial: float = Field(description="threshold until enough samples were seen")
    lower_bound: float = Field(description="the threshold never goes below this")
    upper_bound: float = Field(description="the threshold never goes above this")
    quantile: float = Field(0.001, gt=0, lt=1, description="tail share of legitimate values the threshold sits beyond")
    margin: float = Field(0.1, ge=0, description="extra distance from that quantile, in the value's unit")
    window_samples: int = Field(5000, gt=0, description="recent legitimate values remembered")
    min_samples: int = Field(1000, gt=0, description="values needed before the threshold moves")
    recompute_every_samples: int = Field(200, gt=0, description="how often the quantile is recomputed")

    @model_validator(mode="after")
    def _ordered(self) -> AdaptiveThresholdConfig:
        if not self.lower_bound <= self.initial <= self.upper_bound:
            raise ValueError(
                f"need lower_bound <= initial <= upper_bound, got {self.lower_bound}, {self.initial}, {self.upper_bound}"
            )
        return self


class AdaptiveThreshold:
    """`floor`: values below the threshold are suspicious (the threshold sits under the
    low tail of legitimate values); `ceiling`: values above it are.

    Only values that passed every rule are observed, so blocked spam cannot drag the
    threshold towards itself; the bounds cap what passing spam can do.
    """

    def __init__(self, config: AdaptiveThresholdConfig, kind: Literal["floor", "ceiling"]):
        self._config = config
        self._kind = kind
        self._values: deque[float] = deque(maxlen=config.window_samples)
        self._since_recompute = 0
        self.value = config.initial

    def observe(self, value: float) -> None:
        self._values.append(value)
        self._since_recompute += 1
        if (
            len(self._values) >= self._config.min_samples
            and self._since_recompute >= self._config.recompute_every_samples
        ):
            self._recompute()

    def _recompute(self) -> None:
        c = self._config
        ordered = sorted(self._values)
        if self._kind == "floor":
            target = ordered[int(c.quantile * (len(ordered) - 1))] - c.margin
        else:
            target = ordered[int((1 - c.quantile) * (len(ordered) - 1))] + c.margin
        self.value = min(max(target, c.lower_bound), c.upper_bound)
        self._since_recompute = 0
