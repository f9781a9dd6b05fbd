"""The load suite's own logic: response validation, the ticket mix, stage statistics,
criteria, cost, and the shape's schedule."""

import json
import random
from collections import Counter

import pytest

from loadkit.mix import MIX, TicketMix
from loadtest.checks import judge_ticketserve, judge_ticketserve_batch, judge_vllm, judge_vllm_completion
from loadtest.report import (
    Record,
    abuse,
    cost_per_million,
    percentile,
    read_records,
    stage_users,
    stages,
    suite_verdict,
    summarize,
    sustained,
    verdict,
    write_records,
)
from loadtest.run import _comparison

LABELS = {"password_reset", "order_status"}
ANSWER = {"label": "password_reset", "confidence": 0.9, "route": "template", "model_version": "v1", "request_id": "r"}


def error(code: str) -> str:
    return json.dumps({"error": {"code": code, "message": "m"}})


def test_a_contract_answer_is_answered_and_valid():
    v = judge_ticketserve(200, {}, json.dumps(ANSWER), LABELS)
    assert (v.answered, v.valid, v.route) == (True, True, "template")


@pytest.mark.parametrize(
    "change, problem",
    [
        ({"label": "nope"}, "unknown label"),
        ({"confidence": 1.5}, "confidence"),
        ({"route": "x"}, "route"),
        ({"model_version": ""}, "model_version"),
    ],
)
def test_a_broken_answer_is_invalid(change, problem):
    v = judge_ticketserve(200, {}, json.dumps({**ANSWER, **change}), LABELS)
    assert not v.valid and problem in v.reason


def test_refusals_need_their_code_and_retry_after():
    assert judge_ticketserve(503, {"Retry-After": "1"}, error("overloaded"), LABELS).valid
    assert not judge_ticketserve(503, {}, error("overloaded"), LABELS).valid
    assert not judge_ticketserve(503, {"retry-after": "1"}, error("rate_limited"), LABELS).valid
    assert judge_ticketserve(422, {}, error("spam_detected"), LABELS).valid
    assert not judge_ticketserve(500, {}, error("internal_error"), LABELS).valid
    assert not judge_ticketserve(503, {"Retry-After": "1"}, "Service Unavailable", LABELS).valid


def test_vllm_answers():
    body = json.dumps({"data": [{"index": 0, "label": "order_status", "probs": [0.1, 0.9]}]})
    assert judge_vllm(200, body)[0].answered
    assert not judge_vllm(200, json.dumps({"data": []}))[0].valid
    assert judge_vllm(503, "busy")[0].valid and not judge_vllm(500, "boom")[0].valid


def test_batch_answers_are_judged_per_ticket():
    spam = json.loads(error("spam_detected"))
    body = json.dumps({"results": [ANSWER, spam, {**ANSWER, "label": "nope"}]})
    verdicts = judge_ticketserve_batch(200, {}, body, LABELS, 3)
    assert [(v.answered, v.valid) for v in verdicts] == [(True, True), (False, True), (False, False)]
    assert not judge_ticketserve_batch(200, {}, json.dumps({"results": [ANSWER]}), LABELS, 2)[0].valid
    refused = judge_ticketserve_batch(503, {"Retry-After": "1"}, error("overloaded"), LABELS, 4)
    assert len(refused) == 4 and all(v.valid and not v.answered for v in refused)
    assert not judge_ticketserve_batch(200, {}, json.dumps({"results": [{"error": {"code": "boom"}}]}), LABELS, 1)[
        0
    ].valid


def test_vllm_list_answers_need_one_label_per_input():
    body = json.dumps({"data": [{"label": "order_status"}, {"label": "password_reset"}]})
    assert all(v.answered for v in judge_vllm(200, body, 2))
    assert not any(v.valid for v in judge_vllm(200, body, 3))


def test_vllm_completions_are_answers_only_when_the_text_is_a_label():
    labels = {"order_status", "password_reset"}
    body = json.dumps({"choices": [{"index": 1, "text": " password_reset"}, {"index": 0, "text": "order_status"}]})
    assert all(v.answered for v in judge_vllm_completion(200, body, labels, 2))
    assert not judge_vllm_completion(200, body, labels, 1)[0].valid
    wrong = json.dumps({"choices": [{"index": 0, "text": "the weather is nice"}]})
    assert not judge_vllm_completion(200, wrong, labels)[0].valid
    assert not judge_vllm_completion(200, "<html>", labels)[0].valid
    assert judge_vllm_completion(503, "busy", labels)[0].valid and not judge_vllm_completion(500, "", labels)[0].valid


def test_llm_regime_judges_the_graph_against_both_peers_at_one_and_a_half():
    def target(rate, p99):
        return {"sustained_at_slo": {"answered_per_s": rate, "p99_ms": p99, "model_path_p99_ms": p99}}

    t = {"vllm": target(4.0, 9000), "edge_off": target(4.0, 9500), "graph": target(6.4, 8000)}
    goals = _comparison(t, None, 1, llm=True)
    assert goals["c_over_a_throughput"] == {"value": 1.6, "goal": ">= 1.5", "met": True}
    assert goals["c_over_b_throughput"]["goal"] == ">= 1.5" and goals["c_over_b_throughput"]["met"]
    assert goals["c_p99_over_a_p99"]["met"] and "c_over_b_model_path_p99" not in goals
    assert _comparison(t, None, 1)["c_over_b_throughput"]["met"] is False  # the CPU regime wants 3x


def test_mix_follows_the_tier_shares_and_makes_texts_unique():
    rows = [(f"simple {i}", "s", "en") for i in range(50)] + [(f"regular {i}", "r", "en") for i in range(50)]
    rows += [(f"complex {i}", "c", "en") for i in range(50)]
    mix = TicketMix(rows, {"s": "simple", "r": "regular", "c": "complex"}, unique_share=1.0)
    rng = random.Random(1)
    drawn = [mix.draw(rng) for _ in range(5000)]
    kinds = Counter(t.kind for t in drawn)
    assert abs(kinds["templated"] / 5000 - MIX["simple"]) < 0.03
    assert abs(kinds["complex"] / 5000 - MIX["complex"]) < 0.03
    assert all("#" in t.text for t in drawn if t.kind != "templated")
    assert not any("#" in t.text for t in drawn if t.kind == "templated")


def test_bundled_mix_is_multilingual():
    mix = TicketMix.load(shared=False)
    rng = random.Random(0)
    assert {mix.draw(rng).lang for _ in range(2000)} >= {"en", "zh", "ja"}


def test_percentile_is_nearest_rank():
    values = list(range(1, 101))
    assert percentile(values, 50) == 50 and percentile(values, 99) == 99 and percentile(values, 100) == 100
    assert percentile([], 99) is None


def _records() -> list[Record]:
    """Stage 1 (0-10 s): fast, all answered; stage 2 (10-20 s): slow, 10 % shed."""
    out = []
    for i in range(100):
        route = "template" if i % 2 else "model"
        out.append(Record(i / 10, "regular", 200, route, 50.0 + i % 10, True, True))
    for i in range(100):
        shed = i % 10 == 0
        out.append(
            Record(10 + i / 10, "regular", 503 if shed else 200, "refused" if shed else "model", 3000.0, not shed, True)
        )
    out.append(Record(5, "spam", 422, "refused", 5.0, False, True))
    return out


def test_stages_use_the_settled_part_and_split_routes():
    rows = stages(_records(), [1, 5], 10)
    assert [r["users"] for r in rows] == [1, 5]
    first, second = rows
    assert first["tickets"] == 75 and first["error_rate"] == 0 and first["p99_ms"] <= 59
    assert 0.4 < first["interception"] < 0.6 and first["model_path_p99_ms"] <= 59
    assert second["error_rate"] == pytest.approx(0.1, abs=0.02) and second["p99_ms"] == 3000.0


def test_sustained_throughput_takes_the_best_stage_within_the_slo():
    rows = stages(_records(), [1, 5], 10)
    assert sustained(rows, 2000)["users"] == 1
    assert sustained(rows, 5000)["answered_per_s"] == max(r["answered_per_s"] for r in rows)
    assert sustained(rows, 10)["answered_per_s"] == 0.0


def test_degraded_answers_count_as_answers_but_not_as_full_ones():
    records = [
        Record(3.0 + i * 0.01, "regular", 200, "degraded" if i % 4 else "model", 50, True, True) for i in range(80)
    ]
    (row,) = stages(records, [5], 4)
    assert row["degraded_share"] == 0.75 and row["full_answers_per_s"] == pytest.approx(row["answered_per_s"] / 4, 0.05)
    assert sustained([row], 2000)["full_answers_per_s"] == row["full_answers_per_s"]


def test_verdict_judges_stages_up_to_the_seeds_concurrency():
    rows = stages(_records(), [1, 5], 10)
    assert verdict(rows, 0, judged_users=1, max_p99_ms=2000, max_error_rate=0.005)["passed"]
    failed = verdict(rows, 0, judged_users=5, max_p99_ms=2000, max_error_rate=0.005)
    assert not failed["passed"]
    assert {c["check"] for c in failed["checks"] if not c["passed"]} == {"p99_ms", "error_rate"}
    assert not verdict(rows, 1, judged_users=1, max_p99_ms=2000, max_error_rate=0.005)["passed"]


def test_a_stage_with_no_answers_fails_the_verdict():
    # Only the first stage's tickets: the second stage (5 users) answered nothing at all.
    rows = stages([r for r in _records() if r.t_s < 10], [1, 5], 10)
    assert rows[1]["tickets"] == 0
    assert verdict(rows, 0, judged_users=1, max_p99_ms=2000, max_error_rate=0.005)["passed"]
    failed = verdict(rows, 0, judged_users=5, max_p99_ms=2000, max_error_rate=0.005)
    assert [c["check"] for c in failed["checks"] if not c["passed"]] == ["answers"]


def test_the_suite_fails_on_a_target_without_records_or_a_failed_load_generator():
    ok = {"passed": True}
    assert suite_verdict(
        ["graph", "graph_edge_off"], {"graph": ok, "graph_edge_off": ok}, {"graph": 0, "graph_edge_off": 0}
    )["passed"]
    missing = suite_verdict(["graph", "graph_edge_off"], {"graph": ok}, {"graph": 0, "graph_edge_off": 0})
    assert [c["check"] for c in missing["checks"] if not c["passed"]] == ["graph_edge_off records"]
    crashed = suite_verdict(["graph"], {"graph": ok}, {"graph": 1})
    assert [c["check"] for c in crashed["checks"] if not c["passed"]] == ["graph load generator exit code"]
    assert not suite_verdict(["graph"], {"graph": {"passed": False}}, {"graph": 0})["passed"]


def test_abuse_and_summary_keep_spam_apart():
    records = _records()
    assert summarize(records, 20)["tickets"] == 200
    assert abuse(records) == {
        "spam_sent": 1,
        "spam_let_through": 0,
        "duplicates_sent": 0,
        "duplicates_refused": 0,
        "invalid": 0,
    }


def test_records_round_trip(tmp_path):
    records = _records()
    write_records(records, tmp_path / "t.csv")
    assert read_records(tmp_path / "t.csv") == records


def test_cost_per_million():
    assert cost_per_million(100, 0.36) == 1.0  # 360,000 tickets per hour for $0.36
    assert cost_per_million(0, 0.36) is None


def test_stage_users_scale_the_seeds_gradient():
    assert stage_users([100, 500, 1000, 2000], 0.05) == [5, 25, 50, 100]
    assert stage_users([100], 0.001) == [1]


def test_metrics_sampler_summarizes_gauges_under_load_and_the_prefix_hit_rate():
    from loadtest.run import MetricsSampler

    sampler = MetricsSampler(port=1)
    sampler.samples = [
        {
            "inflight": 0,
            "batch_efficiency": 0.0,
            "ray_vllm_prefix_cache_hits_total": 10,
            "ray_vllm_prefix_cache_queries_total": 100,
        },
        {"inflight": 30, "batch_efficiency": 0.6, "memory_pressure": 0.5},
        {
            "inflight": 40,
            "batch_efficiency": 0.8,
            "memory_pressure": 0.7,
            "ray_vllm_prefix_cache_hits_total": 190,
            "ray_vllm_prefix_cache_queries_total": 300,
        },
    ]
    summary = sampler.stop()
    assert summary["batch_efficiency"] == 0.7 and summary["memory_pressure"] == 0.7
    assert summary["prefix_cache_hit_rate"] == 0.9 and summary["samples_under_load"] == 2
