"""Background tickets wait for capacity instead of being refused.

A caller marks a ticket that can wait with `"priority": "background"` (a backlog import,
a re-labelling run, the batch endpoint's items). When the ingress would refuse it for
capacity (its admission limit reached, a queue on the ticket's path full), the ticket is
held and tried again until `max_wait_s` after its arrival; then it is refused like any
other, with Retry-After. A held ticket is tried only while the tickets in flight stay
under `admit_below_share` of the admission limit: the headroom above it is the
interactive tickets', whose P99 the waiting must not cost. At most `max_trying` held
tickets of an ingress replica try at once: a try refused deep in the path (a full queue)
costs work on every stage before it, and hundreds of held tickets each trying every
interval kept a surge's cores busy with refusals. An ingress replica holds at most
`max_held` at once; past that a background ticket is refused at once.

Plain Python: the caller passes how long the ticket has waited and the load now.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Priority = Literal["interactive", "background"]
HoldStep = Literal["try", "wait", "refuse"]


class DeferralConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="hold background tickets refused for capacity (off: refuse them at once)")
    max_wait_s: float = Field(
        20.0, gt=0, description="a background ticket is held at most this long after its arrival, then refused"
    )
    retry_interval_ms: float = Field(200.0, gt=0, description="a held ticket looks for capacity this often")
    admit_below_share: float = Field(
        0.75,
        gt=0,
        le=1,
        description="a held ticket is tried only while tickets in flight are under this share of the admission limit",
    )
    max_held: int = Field(1000, ge=0, description="background tickets held at once per ingress replica")
    max_trying: int = Field(4, ge=1, description="held tickets of one ingress replica that try at once; the rest wait")


def hold_step(
    config: DeferralConfig, waited_s: float, in_flight: int, limit: int, held: int, trying: int = 0
) -> HoldStep:
    """What a held background ticket does after each `retry_interval_ms`: try again, wait
    another interval, or give up. `waited_s`: since its arrival; `held`: tickets held now,
    itself included; `trying`: held tickets trying now; `in_flight` and `limit`: the
    ingress's tickets in flight and its admission limit."""
    if not config.enabled or held > config.max_held or waited_s + config.retry_interval_ms / 1000 > config.max_wait_s:
        return "refuse"
    if in_flight < config.admit_below_share * limit and trying < config.max_trying:
        return "try"
    return "wait"
