"""HTTP schemas, input hardening and the error type of the outside contract (shared/CONTRACT.md)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from models.ranking import RunnersUp
from policies.deferral import Priority

Route = Literal["template", "cache", "edge_model", "model", "degraded"]

# Raw text longer than this many times the limit is refused before normalizing it,
# so a huge body cannot buy an expensive NFKC pass.
RAW_SLACK_FACTOR = 4
_WHITESPACE = re.compile(r"\s+")


class ApiError(Exception):
    """An answer of the contract's error shape: {"error": {"code", "message"}}."""

    def __init__(self, status: int, code: str, message: str, retry_after_s: int | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retry_after_s = retry_after_s

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message}}

    def headers(self) -> dict[str, str]:
        return {} if self.retry_after_s is None else {"Retry-After": str(self.retry_after_s)}

    def item_body(self) -> dict[str, Any]:
        """The error as a batch item: the body, with the Retry-After a lone ticket's answer
        would carry in its header."""
        if self.retry_after_s is None:
            return self.body()
        return {"error": {"code": self.code, "message": self.message, "retry_after_s": self.retry_after_s}}


class ModelThrottled(Exception):
    """The model replica's queue is full (the retry matrix's 429 row)."""


class ModelUnavailable(Exception):
    """The model replica cannot answer now: engine dead, restarting (the 503 row)."""


class ModelOutOfMemory(Exception):
    """The engine ran out of memory; retrying would hit the same wall."""


FailureKind = Literal["throttled", "unavailable", "out_of_memory"]
MODEL_FAILURES: dict[FailureKind, type[Exception]] = {
    "throttled": ModelThrottled,
    "unavailable": ModelUnavailable,
    "out_of_memory": ModelOutOfMemory,
}


@dataclass(frozen=True)
class ModelFailure:
    """One ticket of a many-ticket model call that got no answer; its neighbours' answers
    stand, and its caller sees the exception a one-ticket call would have raised."""

    kind: FailureKind
    message: str

    @classmethod
    def of(cls, e: BaseException) -> ModelFailure:
        kind: FailureKind = next((k for k, t in MODEL_FAILURES.items() if isinstance(e, t)), "unavailable")
        return cls(kind, str(e) or type(e).__name__)

    def exception(self) -> Exception:
        return MODEL_FAILURES[self.kind](self.message)


@dataclass(frozen=True)
class Ticket:
    """One normalized ticket as it travels the graph (never logged: it holds customer text)."""

    text: str
    request_id: str
    user_id: str | None = None
    tenant: str | None = None
    client: str = "unknown"  # caller's address: the rate-limit key of anonymous requests
    tier_header: str | None = None
    lang_hint: str | None = None
    ticket_id: str | None = None  # the canary split's key (else request_id)
    color: str | None = None  # the colouring header: a model side asked for by name


@dataclass(frozen=True)
class Answer:
    """What a node of the graph answers for a ticket; the ingress adds request id and latency."""

    label: str
    confidence: float
    route: Route
    model_version: str
    language: str | None = None
    answer_id: str | None = None
    degraded: bool = False  # from a fallback (stale cache, pre-classifier) while the model path failed
    review_threshold: float | None = None  # of the model version named above (None: policies/review.py default)
    runners_up: RunnersUp = ()  # the model's or pre-classifier's next labels, for a reviewer


@dataclass(frozen=True)
class ModelAnswer:
    """A model replica's answer to one prompt."""

    label: str
    confidence: float
    model_version: str
    side: Literal["stable", "canary"] = "stable"  # the model side that answered (canary rollouts)
    review_threshold: float | None = None  # calibrated at the model's build; None when it had no validation split
    runners_up: RunnersUp = ()


@dataclass(frozen=True)
class Refusal:
    """A node's refusal, returned rather than raised: exceptions crossing Ray lose their
    fields and get logged with tracebacks, and a refusal is an answer, not a failure."""

    status: int
    code: str
    message: str
    retry_after_s: int | None = None

    def error(self) -> ApiError:
        return ApiError(self.status, self.code, self.message, self.retry_after_s)


class ClassifyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    text: str = Field(description="the ticket text (up to the configured limit, 10,000 characters by default)")
    user_id: str | None = Field(None, max_length=256, description="end user, for rate limits")
    tenant: str | None = Field(None, max_length=256, description="customer tenant, isolates caches")
    ticket_id: str | None = Field(
        None, max_length=256, description="caller's ticket id: the same id always lands on the same model side"
    )
    lang: str | None = Field(None, max_length=16, description="language hint (BCP 47), e.g. en, zh, ja")
    priority: Priority = Field(
        "interactive",
        description="background: a ticket that can wait; refused for capacity, it is held and tried again "
        "(ingress.background) instead of answered 503 at once",
    )


class ClassifyResponse(BaseModel):
    label: str = Field(description="predicted intent")
    confidence: float = Field(description="probability of the label, 0..1")
    route: Route = Field(description="which tier answered")
    model_version: str = Field(description="version of the model that answered")
    request_id: str = Field(description="id of this request, also in the X-Request-ID header")
    latency_ms: float = Field(description="time spent inside the service")
    degraded: bool = Field(False, description="answered by a fallback path")
    language: str | None = Field(None, description="language the ticket was read as (detected, or the hint)")
    answer_id: str | None = Field(None, description="route template: id of the canned answer to send")
    needs_review: bool = Field(
        False, description="confidence below review.min_confidence: recorded in the review queue for a person"
    )


class ResolveRequest(BaseModel):
    """{"label": intent}: the correct intent of a review item."""

    model_config = ConfigDict(extra="forbid", strict=True)

    label: str = Field(description="the correct intent: one of GET /v1/labels")


class ProposeRequest(BaseModel):
    """{"label": name, "description": text}: a new label for a review item that fits none."""

    model_config = ConfigDict(extra="forbid", strict=True)

    label: str = Field(
        pattern=r"^[a-z][a-z0-9_]{2,39}$",
        description="the new label: 3-40 characters, lowercase letters, digits and _, starting with a letter",
    )
    description: str = Field(
        "", max_length=300, description="what the label covers (kept from the first proposal of this name)"
    )


class EraseRequest(BaseModel):
    """{"tenant": id, "user_id": id}: either or both; every review item that matches is deleted."""

    model_config = ConfigDict(extra="forbid", strict=True)

    tenant: str | None = Field(None, max_length=256, description="erase this tenant's items")
    user_id: str | None = Field(None, max_length=256, description="erase this end user's items")


class SplitRequest(BaseModel):
    """{"percent": 0-100, "shadow": bool}: either or both."""

    model_config = ConfigDict(extra="forbid", strict=True)

    percent: float | None = Field(None, ge=0, le=100, description="canary share of tickets, 0-100")
    shadow: bool | None = Field(None, description="the canary answers copies only; stable answers are returned")


class RollbackRequest(BaseModel):
    """{"reason": text}, optional: recorded in the rollout history."""

    model_config = ConfigDict(extra="forbid", strict=True)

    reason: str = Field("operator", max_length=500, description="recorded in the rollout history")


class BatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tickets: list[Any] = Field(description="classify bodies; each is validated on its own and answered in input order")


class ErrorDetail(BaseModel):
    code: str
    message: str
    retry_after_s: int | None = Field(
        None, description="batch items only: seconds before this ticket may be sent again (absent when none)"
    )


class ErrorBody(BaseModel):
    error: ErrorDetail


class BatchResponse(BaseModel):
    results: list[ClassifyResponse | ErrorBody]


def normalize_text(raw: str, max_chars: int) -> str:
    """NFKC, control and format characters removed, whitespace collapsed.

    Raises ApiError 413 input_too_long or 422 invalid_request.
    """
    if len(raw) > max_chars * RAW_SLACK_FACTOR:
        raise ApiError(413, "input_too_long", f"text has {len(raw)} characters; the limit is {max_chars}")
    text = unicodedata.normalize("NFKC", raw)
    # Cc (controls, including newlines) become spaces; Cf (zero-width, bidi marks),
    # Cs (lone surrogates), Co and Cn carry no meaning for a classifier and are dropped.
    text = "".join(
        " " if cat == "Cc" else ch
        for ch, cat in ((ch, unicodedata.category(ch)) for ch in text)
        if cat[0] != "C" or cat == "Cc"
    )
    text = _WHITESPACE.sub(" ", text).strip()
    if not text:
        raise ApiError(422, "invalid_request", "text is empty after removing whitespace and control characters")
    if len(text) > max_chars:
        raise ApiError(413, "input_too_long", f"text has {len(text)} characters; the limit is {max_chars}")
    return text


def describe_validation_errors(errors: Sequence[Mapping[str, Any]]) -> str:
    parts = []
    for err in errors:
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "; ".join(parts)


class NoCanary(Exception):
    """A rollout action without a canary model."""
