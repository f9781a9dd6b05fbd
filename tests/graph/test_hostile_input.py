"""Hostile input against a real graph: schema-driven cases from our OpenAPI spec
(schemathesis, valid and invalid) and hand-made hostile bodies (hypothesis): invalid
UTF-8, NUL bytes, deep JSON, huge bodies, wrong types, RTL and zero-width characters,
texts just over the limit. No answer may be a 5xx other than 503 overloaded, and every
error must carry a contract code.

TICKETSERVE_FUZZ_INPUTS sets how many hand-made hostile requests are sent (default
10,000); the schema-driven cases come on top (schemathesis stops early on operations
with few possible inputs).
"""

from __future__ import annotations

import json
import os
from collections import Counter

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from loadtest.checks import judge_ticketserve
from tests.graph.reliability.figures import record
from tests.harness import ADMIN_TOKEN

pytestmark = pytest.mark.reliability

INPUTS = int(os.environ.get("TICKETSERVE_FUZZ_INPUTS", "10000"))
# Every error status the service may answer, with its codes (../shared/CONTRACT.md, docs/api.md).
ERROR_CODES = {
    400: {"invalid_json"},
    401: {"unauthorized"},
    404: {"not_found"},
    405: {"method_not_allowed"},
    409: {"no_canary"},
    413: {"input_too_long", "batch_too_large"},
    422: {"invalid_request", "unsupported_language", "spam_detected"},
    429: {"rate_limited"},
    503: {"overloaded"},
}
FUZZ = settings(
    deadline=None, database=None, phases=[Phase.generate], derandomize=True, suppress_health_check=list(HealthCheck)
)


class Tally:
    def __init__(self) -> None:
        self.statuses: Counter[int] = Counter()
        self.problems: list[str] = []

    @property
    def sent(self) -> int:
        return sum(self.statuses.values())

    def check(self, kind: str, status: int, headers, body: bytes, classify: bool) -> None:
        self.statuses[status] += 1
        problem = self._problem(status, headers, body, classify)
        if problem and len(self.problems) < 50:
            self.problems.append(f"{kind}: {status} {problem}: {body[:200]!r}")

    def _problem(self, status: int, headers, body: bytes, classify: bool) -> str | None:
        if classify:
            verdict = judge_ticketserve(status, dict(headers), body.decode("utf-8", "replace"), set())
            return None if verdict.valid else verdict.reason
        if status < 400:
            return None
        try:
            error = json.loads(body)["error"]
        except (ValueError, KeyError, TypeError):
            return "error body is not {'error': {...}}"
        if error.get("code") not in ERROR_CODES.get(status, ()) or not isinstance(error.get("message"), str):
            return f"code {error.get('code')!r} not allowed for {status}"
        if status in (429, 503) and "retry-after" not in {k.lower() for k in headers}:
            return "no Retry-After"
        return None


def test_schema_driven_cases_get_contract_answers(app):
    tally = Tally()
    schema = schemathesis.openapi.from_dict(app.get("/openapi.json").json())
    base_url = str(app.base_url).rstrip("/")
    session = requests.Session()
    per_mode = max(1, INPUTS // 5 // len(list(schema.get_all_operations())))
    for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):
        for result in schema.get_all_operations():
            operation = result.ok()

            @settings(FUZZ, max_examples=per_mode)
            @given(case=operation.as_strategy(generation_mode=mode), admin=st.booleans())
            def run(case, admin):
                headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"} if admin else {}
                try:
                    r = case.call(base_url=base_url, session=session, headers=headers, timeout=60)
                except requests.exceptions.InvalidHeader:
                    return  # the client refuses to send it; nothing reached the service
                # run() is called within this iteration: `mode` is the current one.
                tally.check(
                    f"{mode.value} {case.method} {case.path}",  # noqa: B023
                    r.status_code,
                    r.headers,
                    r.content,
                    classify=case.path == "/v1/classify" and case.method == "POST",
                )

            try:
                run()
            except Unsatisfiable:
                pass  # nothing invalid to make of an operation without inputs (GET /healthz)
    record("fuzz_schema", {"requests": tally.sent, "statuses": dict(tally.statuses), "problems": tally.problems})
    assert not tally.problems, tally.problems
    assert tally.statuses and all(s < 500 or s == 503 for s in tally.statuses)


# Characters that hide, reorder or end text.
TRICKY = [
    "\u202e",
    "\u202d",
    "\u200b",
    "\u200c",
    "\u200d",
    "\u200f",
    "\u2066",
    "\ufeff",
    "\x00",
    "\u0000",
    "\ud800",
    "\uffff",
    "\U0010ffff",
    "\u0301" * 20,
    "\r\n",
    "\t",
    "\u3000",
    "\u00a0",
]
hostile_text = st.lists(st.one_of(st.characters(), st.sampled_from(TRICKY)), max_size=300).map("".join)
any_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=50),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=20,
)
field = st.one_of(any_json, hostile_text, st.text(min_size=250, max_size=300))
classify_body = st.fixed_dictionaries(
    {"text": st.one_of(hostile_text, any_json)},
    optional={"user_id": field, "tenant": field, "ticket_id": field, "lang": field, "extra": field},
)


def _deep(depth: int, kind: str) -> bytes:
    if kind == "list":
        return b"[" * depth + b"]" * depth
    if kind == "object":
        return b'{"a":' * depth + b"1" + b"}" * depth
    return b'{"text":' + b"[" * depth + b"]" * depth + b"}"


raw_body = st.one_of(
    st.binary(max_size=2000),  # invalid UTF-8, NUL bytes
    st.builds(_deep, st.integers(10, 200_000), st.sampled_from(["list", "object", "text"])),
    classify_body.map(lambda b: json.dumps(b, ensure_ascii=False, allow_nan=True).encode("utf-8", "surrogatepass")),
    classify_body.map(lambda b: json.dumps(b).encode()),  # lone surrogates as \\u escapes
    st.integers(9_990, 10_010).map(lambda n: json.dumps({"text": "a b c d " * (n // 8) + "x" * (n % 8)}).encode()),
    st.integers(100, 2000).map(lambda kb: json.dumps({"text": "ab " * ((kb << 10) // 3)}).encode()),  # huge
    st.lists(classify_body, max_size=70).map(lambda t: json.dumps({"tickets": t}).encode()),
)
headers = st.fixed_dictionaries(
    {},
    optional={
        "x-request-id": st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=300),
        "x-traffic-color": st.sampled_from(["canary", "stable", "purple", "", "CANARY "]),
        "accept-language": st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=100).map(str.strip),
        "content-type": st.sampled_from(
            ["text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin-1"]
        ),
        "x-user-tier": st.sampled_from(["trusted", "anonymous", "root", ""]),
    },
)


def test_hostile_bodies_and_headers_get_contract_answers(app):
    tally = Tally()
    count = INPUTS

    @settings(FUZZ, max_examples=count)
    @given(body=raw_body, head=headers, batch=st.booleans())
    def run(body, head, batch):
        path = "/v1/classify/batch" if batch else "/v1/classify"
        try:
            r = app.post(path, content=body, headers=head)
        except httpx.LocalProtocolError:
            return  # a header value the client will not send
        tally.check(f"raw {path}", r.status_code, r.headers, r.content, classify=not batch)

    run()
    record("fuzz_raw", {"requests": tally.sent, "statuses": dict(tally.statuses), "problems": tally.problems})
    assert not tally.problems, tally.problems
    # Hypothesis drops some drawn examples (too large for its buffer), the client refuses a few headers.
    assert tally.sent >= count * 0.9
