"""docs/results.md is generated from docs/results/*.json (bench/results_page.py): the page
is what the published results give, and a result is published only with the stamp of the
run that produced it."""

from __future__ import annotations

import json

import pytest

from bench.results_page import PAGE, publish, read_all, render
from bench.stamp import RunStamp


def loop_result(**extra) -> dict:
    rounds = [
        {"round": n, "model_version": f"m{n}", "test_accuracy": acc, "test_flagged_right_share": 0.01,
         "test_wrong_unflagged_share": 0.02, "stream_flagged_share": None if n == 0 else 0.05, "reviewed": 30 * n,
         "audited": 10 * n, "retrain_s": None if n == 0 else 61.4, "verdict": None if n == 0 else "promoted"}
        for n, acc in ((0, 0.8), (1, 0.9123))
    ]  # fmt: skip
    return {"rounds": rounds, "poisoned": None, "test_tickets": 800, **extra}


def test_the_page_is_what_the_published_results_give():
    assert PAGE.read_text() == render(read_all()), "run: python -m bench.results_page"


def test_a_result_without_a_stamp_is_refused(tmp_path):
    source = tmp_path / "loop.json"
    source.write_text(json.dumps(loop_result()))
    with pytest.raises(SystemExit, match="no `run` stamp"):
        publish(source, "loop", "loop", "The loop", None, folder=tmp_path / "published")
    assert not (tmp_path / "published").exists()


def test_a_published_result_renders_with_its_own_stamp(tmp_path):
    stamp = RunStamp("python -m bench.loop --rounds 1", "2026-12-06T10:00:00Z", "abc1234", "2 cores")
    source = tmp_path / "loop.json"
    source.write_text(json.dumps(loop_result(run={**stamp.__dict__})))
    given = RunStamp("python -m other", "2026-01-01T00:00:00Z", "fffffff", "elsewhere")
    publish(source, "loop-x", "loop", "The loop", given, folder=tmp_path / "published")
    page = render(read_all(tmp_path / "published"))
    assert "`python -m bench.loop --rounds 1` · 2026-12-06 · commit abc1234 · 2 cores" in page
    assert "fffffff" not in page  # the file's own stamp wins over one given by hand
    assert "| 1 | m1 | 0.912 | 0.010 | 0.020 | 0.050 | 30 + 10 | 61 s | promoted |" in page
