"""Serve's HAProxy mode, the served default, answers every route and every error with the
contract's JSON (haproxy_drill.py, in its own process and its own Ray head)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from models.build import ROOT
from tests.graph.reliability.figures import record

pytestmark = pytest.mark.reliability

# Whether the drill times `serve delete` (its ~30 s drain: a figure of docs/benchmarks.md),
# as scripts/reliability.sh does; the CI tier (scripts/test.sh) skips it.
TIME_DELETE = os.environ.get("TICKETSERVE_HAPROXY_TIME_DELETE", "1") == "1"

EXPECTED = {
    "classify": (200, None),
    "batch": (200, None),
    "labels": (200, None),
    "healthz": (200, None),
    "unknown_path": (404, "not_found"),
    "wrong_method": (405, "method_not_allowed"),
    "invalid_json": (400, "invalid_json"),
    "invalid_field": (422, "invalid_request"),
    "too_long": (413, "input_too_long"),
    "admin_without_token": (401, "unauthorized"),
}


def test_the_haproxy_path_answers_every_route_and_error_as_json(default_model_dir, tmp_path):
    out = tmp_path / "haproxy.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.graph.reliability.haproxy_drill",
            "--out",
            str(out),
            *([] if TIME_DELETE else ["--no-delete-timing"]),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    result = json.loads(out.read_text())
    record("haproxy_mode", result)
    cases = result["cases"]
    assert set(cases) == set(EXPECTED)
    for name, (status, code) in EXPECTED.items():
        case = cases[name]
        assert (case["status"], case["code"]) == (status, code), (name, case)
        assert case["json"] and case["content_type"].startswith("application/json"), (name, case)
