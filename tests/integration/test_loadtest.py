"""The Locust suite against a real graph: its own process, a short scaled gradient, every
response validated; the quitting hook's verdict is the exit code."""

import os
import subprocess
import sys

import pytest

from loadtest.report import read_records
from models.build import ROOT
from tests.harness import HTTP_PORT


# 8: batch clients, POST /v1/classify/batch, every ticket of a batch recorded on its own.
@pytest.mark.parametrize("batch_size", [1, 8])
def test_locust_suite_runs_validates_and_records_every_ticket(app, tmp_path, batch_size):
    prefix = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(ROOT / "loadtest" / "locustfile.py"),
        "--headless",
        "--host",
        f"http://127.0.0.1:{HTTP_PORT}/main",
        "--stage-users",
        "100,300",
        "--user-scale",
        "0.02",
        "--stage-seconds",
        "6",
        "--max-requests",
        "2000",
        "--max-p99-ms",
        "30000",
        "--max-error-rate",
        "0.05",
        "--run-time",
        "30s",
        "--csv",
        str(prefix),
        "--html",
        f"{prefix}.html",
        "--only-summary",
        "--batch-size",
        str(batch_size),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    records = read_records(tmp_path / "run_tickets.csv")
    tickets = [r for r in records if r.kind in ("templated", "regular", "complex")]
    assert len(tickets) > 20 and all(r.valid for r in records)
    assert {"template", "model"} <= {r.route for r in tickets}
    spam = [r for r in records if r.kind == "spam"]
    assert spam and not any(r.answered for r in spam)
    assert (tmp_path / "run.html").stat().st_size > 10_000 and (tmp_path / "run_stats.csv").exists()
