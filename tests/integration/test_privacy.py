"""Ticket text never reaches the logs at the default log level: tickets with a unique
marker go down every path (template, model, cache, spam, too long, bad JSON, batch,
review queue), then every file of the Ray session's log folder is searched for it."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
import ray

from tests.graph.reliability.figures import record

pytestmark = pytest.mark.reliability


def session_logs() -> Path:
    # The driver's node knows its session folder; /tmp/ray/session_latest is the default link.
    node = getattr(ray._private.worker.global_worker, "node", None)
    return Path(node.get_logs_dir_path()) if node else Path("/tmp/ray/session_latest/logs")


def test_ticket_text_never_appears_in_the_logs(app):
    marker = f"qzx{uuid.uuid4().hex[:12]}"
    texts = [
        f"my parcel {marker} arrived broken and the box was crushed",  # model
        f"how do I reset my password {marker}",  # template or edge
        f"{marker} " * 40,  # spam: repeated words
        f"我的包裹 {marker} 还没有到",  # Chinese
        f"{marker} " + "lorem ipsum dolor sit amet " * 500,  # too long
    ]
    statuses = []
    for text in texts:
        for _ in range(2):  # the second one may come from the cache
            statuses.append(app.post("/v1/classify", json={"text": text, "user_id": "privacy"}).status_code)
    statuses.append(app.post("/v1/classify", content=f'{{"text": "{marker}", "oops"'.encode()).status_code)
    statuses.append(app.post("/v1/classify", json={"text": 12, "user_id": marker}).status_code)
    statuses.append(app.post("/v1/classify/batch", json={"tickets": [{"text": t} for t in texts]}).status_code)
    assert 200 in statuses and {413, 422, 400} <= set(statuses), statuses
    time.sleep(3)  # log files are flushed by each process on its own

    folder = session_logs()
    files = [p for p in folder.rglob("*") if p.is_file()]
    leaks = [str(p) for p in files if marker.encode() in p.read_bytes()]
    record(
        "privacy",
        {
            "log_files": len(files),
            "log_bytes": sum(p.stat().st_size for p in files),
            "statuses": statuses,
            "files_with_ticket_text": leaks,
        },
    )
    assert len(files) > 10, f"no Ray logs found in {folder}"
    assert not leaks, json.dumps(leaks)
