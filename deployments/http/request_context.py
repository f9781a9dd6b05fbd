"""What the graph needs from an HTTP request besides its body."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from fastapi import Request

from deployments.config import IngressConfig


@dataclass(frozen=True)
class RequestContext:
    request_id: str
    client: str
    tier_header: str | None
    color: str | None
    # First tag of "ja-JP,ja;q=0.9,en;q=0.8"; only a hint for language detection.
    accept_language: str | None

    @classmethod
    def of(cls, request: Request, config: IngressConfig) -> RequestContext:
        accept = request.headers.get("accept-language")
        color = request.headers.get(config.color_header)
        return cls(
            # Serve's own id (the client's X-Request-ID, or one its proxy made), so logs correlate.
            request_id=request.headers.get("x-request-id") or uuid.uuid4().hex,
            client=request.client.host if request.client else "unknown",
            tier_header=request.headers.get(config.tier_header),
            color=color.strip().lower() if color else None,
            accept_language=accept.split(",")[0].split(";")[0].strip() or None if accept else None,
        )
