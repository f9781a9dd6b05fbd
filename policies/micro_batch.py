"""When a caller hands the model replicas the tickets it holds as one call.

Every call through a Serve handle costs the caller, the router and the replica a fixed
amount of CPU, about one MiniLM pass on two cores; under load, tickets that arrive
together can share it. The window adapts by itself: a ticket goes at once while fewer
than `max_calls_in_flight` calls are out (an idle graph never waits), and waits for one
of them to come back only when all are out, at most `max_wait_ms` and never beyond
`max_batch_tickets`. It is the group commit of databases: the batch is what piled up
while the last calls were in flight.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class MicroBatchConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(False, description="off: one model call per ticket")
    max_calls_in_flight: int = Field(
        4, ge=1, description="calls one caller keeps out before tickets wait to go together"
    )
    max_batch_tickets: int = Field(16, ge=1, description="tickets in one call at most")
    max_wait_ms: float = Field(20.0, ge=0, description="longest a ticket waits for a call to come back")


def send_now(config: MicroBatchConfig, queued: int, oldest_wait_ms: float, calls_in_flight: int) -> bool:
    """Whether the queued tickets go now, as one call."""
    if queued == 0:
        return False
    if calls_in_flight < config.max_calls_in_flight or queued >= config.max_batch_tickets:
        return True
    return oldest_wait_ms >= config.max_wait_ms
