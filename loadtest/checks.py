"""Response validation for every load-test request, and the per-ticket record it leaves.

Plain Python so the report, the unit tests and the Locust file share one judgement.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

ROUTES = {"template", "cache", "edge_model", "model", "degraded"}
# Refusals the contract allows (../shared/CONTRACT.md): the ticket is not answered (an
# error for the error rate) but the service kept its word. 500 is never acceptable.
REFUSALS = {
    400: {"invalid_json"},
    413: {"input_too_long", "batch_too_large"},
    422: {"invalid_request", "unsupported_language", "spam_detected"},
    429: {"rate_limited"},
    503: {"overloaded"},
}
NEEDS_RETRY_AFTER = {429, 503}


@dataclass(frozen=True)
class Verdict:
    answered: bool  # a label came back
    valid: bool  # the response keeps the contract (answers and allowed refusals)
    route: str  # template, cache, edge_model, model, degraded; refused; invalid
    reason: str = ""


def judge_ticketserve(status: int, headers: dict[str, str], body: str, labels: set[str]) -> Verdict:
    """A POST /v1/classify answer against ../shared/CONTRACT.md."""
    try:
        data = json.loads(body)
    except (TypeError, ValueError):
        return Verdict(False, False, "invalid", f"{status}: body is not JSON")
    if status == 200:
        return _judge_answer(data, labels)
    return _judge_refusal(status, data, headers)


def judge_ticketserve_batch(status: int, headers: dict[str, str], body: str, labels: set[str], n: int) -> list[Verdict]:
    """A POST /v1/classify/batch answer for `n` tickets: one verdict per ticket. A refused
    batch refuses each of its tickets; in an answered one each result is an answer or its
    own ticket's error (no status of its own: any code the contract names)."""
    try:
        data = json.loads(body)
    except (TypeError, ValueError):
        return [Verdict(False, False, "invalid", f"{status}: body is not JSON")] * n
    if status != 200:
        return [_judge_refusal(status, data, headers)] * n
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list) or len(results) != n:
        return [Verdict(False, False, "invalid", f"200 without {n} results")] * n
    return [_judge_item(item, labels) for item in results]


def _judge_item(item: object, labels: set[str]) -> Verdict:
    error = item.get("error") if isinstance(item, dict) else None
    if error is None:
        return _judge_answer(item, labels)
    code = error.get("code") if isinstance(error, dict) else None
    if not any(code in codes for codes in REFUSALS.values()):
        return Verdict(False, False, "invalid", f"batch item {code}")
    return Verdict(False, True, "refused", f"batch item {code}: {str(error.get('message', ''))[:100]}")


def _judge_answer(data: object, labels: set[str]) -> Verdict:
    if not isinstance(data, dict):
        return Verdict(False, False, "invalid", "answer is not an object")
    problems = []
    if labels and data.get("label") not in labels:
        problems.append(f"unknown label {data.get('label')!r}")
    if not isinstance(data.get("confidence"), (int, float)) or not 0 <= data["confidence"] <= 1:
        problems.append(f"confidence {data.get('confidence')!r}")
    if data.get("route") not in ROUTES:
        problems.append(f"route {data.get('route')!r}")
    if not data.get("model_version") or not data.get("request_id"):
        problems.append("model_version or request_id missing")
    if problems:
        return Verdict(False, False, "invalid", "; ".join(problems))
    return Verdict(True, True, data["route"])


def _judge_refusal(status: int, data: object, headers: dict[str, str]) -> Verdict:
    error = data.get("error") if isinstance(data, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    if code not in REFUSALS.get(status, set()):
        return Verdict(False, False, "invalid", f"{status} {code}")
    retry_after = {k.lower(): v for k, v in headers.items()}.get("retry-after")
    if status in NEEDS_RETRY_AFTER and not retry_after:
        return Verdict(False, False, "invalid", f"{status} {code} without Retry-After")
    # The message names the rule (spam) or the cause (503); it never holds ticket text.
    message = error.get("message", "") if isinstance(error, dict) else ""
    return Verdict(False, True, "refused", f"{status} {code}: {str(message)[:100]}")


def judge_vllm(status: int, body: str, n: int = 1) -> list[Verdict]:
    """vLLM's POST /classify for `n` inputs: {"data": [{"label": ..., "probs": [...]}, ...]},
    one verdict per input."""
    if status != 200:
        return [Verdict(False, status in (429, 503), "refused" if status in (429, 503) else "invalid", str(status))] * n
    try:
        labels = [item["label"] for item in json.loads(body)["data"]]
    except (TypeError, ValueError, KeyError):
        return [Verdict(False, False, "invalid", "200 without data[].label")] * n
    if len(labels) != n:
        return [Verdict(False, False, "invalid", f"200 with {len(labels)} labels for {n} inputs")] * n
    return [
        Verdict(True, True, "model")
        if isinstance(label, str) and label
        else Verdict(False, False, "invalid", f"label {label!r}")
        for label in labels
    ]


def judge_vllm_completion(status: int, body: str, labels: set[str], n: int = 1) -> list[Verdict]:
    """vLLM's POST /v1/completions for `n` prompts constrained to the labels:
    {"choices": [{"index": i, "text": label}, ...]}, one verdict per prompt."""
    if status != 200:
        return [Verdict(False, status in (429, 503), "refused" if status in (429, 503) else "invalid", str(status))] * n
    try:
        choices = sorted(json.loads(body)["choices"], key=lambda c: c["index"])
        texts = [c["text"].strip() for c in choices]
    except (TypeError, ValueError, KeyError, AttributeError):
        return [Verdict(False, False, "invalid", "200 without choices[].text")] * n
    if len(texts) != n:
        return [Verdict(False, False, "invalid", f"200 with {len(texts)} choices for {n} prompts")] * n
    return [
        Verdict(True, True, "model") if text in labels else Verdict(False, False, "invalid", f"label {text!r}")
        for text in texts
    ]
