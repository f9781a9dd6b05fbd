"""Ticket text never reaches the logs at the default log level: tickets with a unique
marker go down every path (template, model, cache, spam, too long, bad JSON, batch,
review queue), then every file of the Ray session's log folder is searched for it. The
review store keeps ticket text, but never the personal data in it."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from deployments.ray_env import session_logs
from tests.graph.reliability.figures import record
from tests.harness import ADMIN_TOKEN, REVIEW_DIR

pytestmark = pytest.mark.reliability


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


# Personal data in every language the graph serves, written as customers write it; each
# must be masked before the review store writes the ticket.
PERSONAL_DATA = [
    "joe.bloggs+shop@example.co.uk",
    "+44 20 7946 0958",
    "4111 1111 1111 1111",
    "DE89 3704 0044 0532 0130 00",
    "wang_li@qq.com",
    "13812345678",
    "０９０－１２３４－５６７８",
    "５５５５５５５５５５５５４４４４",
]
ORDER_NUMBER = "100000000"


def test_personal_data_never_reaches_the_review_store_or_its_export(app):
    """Out-of-scope tickets (flagged: recorded for review) carry personal data; what the
    store's file holds, what the admin API lists and what the export gives are masked,
    the order number stays, and the tickets' user is erased on request."""
    marker = f"qzx{uuid.uuid4().hex[:12]}"
    user = f"privacy-{marker}"
    texts = [
        f"{marker} what is the weather tomorrow in Paris? write to {PERSONAL_DATA[0]} or call {PERSONAL_DATA[1]}",
        f"{marker} tell me a joke about penguins, card {PERSONAL_DATA[2]}, IBAN {PERSONAL_DATA[3]}, "
        f"order {ORDER_NUMBER}",
        f"{marker} 明天北京的天气怎么样？邮箱{PERSONAL_DATA[4]}，电话{PERSONAL_DATA[5]}",
        f"{marker} 明日の東京の天気を教えて。電話は{PERSONAL_DATA[6]}、カードは{PERSONAL_DATA[7]}です",
    ]
    answers = [app.post("/v1/classify", json={"text": t, "user_id": user}).json() for t in texts]
    flagged = sum(a["needs_review"] for a in answers)
    assert flagged >= 3, answers  # out-of-scope text is flagged >= 0.95 in each language

    auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}

    def newest(status: str) -> list[dict]:
        """Ours among the newest items (the graph's store outlives a test session)."""
        c = app.get("/admin/review", params={"limit": 1}, headers=auth).json()["counts"]
        total = {"open": c["open"], "all": c["open"] + c["resolved"] + c["proposed"]}[status]
        offset = max(0, total - 500)
        page = app.get("/admin/review", params={"status": status, "limit": 500, "offset": offset}, headers=auth)
        return [item for item in page.json()["items"] if marker in item["text"]]

    ours: list[dict] = []
    for _ in range(20):  # recording runs beside the answer
        if len(ours := newest("open")) >= flagged:
            break
        time.sleep(0.5)
    assert len(ours) >= flagged, ours
    for item in ours:
        assert app.post(f"/admin/review/{item['id']}/resolve", json={"label": "out_of_scope"}, headers=auth).is_success
    export = app.get("/admin/review/export", headers=auth).text
    store = b"".join(p.read_bytes() for p in REVIEW_DIR.glob("main.sqlite3*"))

    shown = " ".join(item["text"] for item in ours)
    exported = "\n".join(line for line in export.splitlines() if marker in line)
    assert marker.encode() in store and exported, "the tickets never reached the store"
    leaks = [p for p in PERSONAL_DATA if p in shown or p in exported or p.encode() in store]
    assert not leaks, leaks
    assert "[email]" in shown and ("[card]" in shown or "[phone]" in shown), shown
    penguins = [item["text"] for item in ours if "penguins" in item["text"]]
    assert all(ORDER_NUMBER in text for text in penguins), penguins

    assert app.post("/admin/review/erase", json={"user_id": user}, headers=auth).json()["erased"] >= len(ours)
    assert newest("all") == []
