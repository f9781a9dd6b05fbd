"""Retraining from reviews on a real graph: an admin starts a retrain, a Ray task of its
own builds a candidate from the resolved items warm-started from the serving model (and
learns the label people proposed and the admin accepted), and keeps a share of them as
its reviewed set; a running retrain can be stopped; a reviewer can do neither."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

import pytest

from deployments.config import EDGE_OFF
from tests.harness import fake_args, running

pytestmark = pytest.mark.rollout

APP = "retrained"
ADMIN = {"Authorization": "Bearer retrain-admin-token-2c7d"}
REVIEWER = {"Authorization": "Bearer retrain-reviewer-token-8a0f"}
# Resolved as people would: each ticket with the label it should have had.
CORRECTIONS = {
    "where do I track my delivery?": "order_status",
    "I want information about changing my purchase": "change_order",
    "i dont want my profile": "delete_account",
    "what can you tell me about downloading some bills?": "invoice_request",
    "can u ask an agent if i can obtain some bills?": "invoice_request",
    "ask an agent where to see the options for delivery": "shipping_options",
}
# Tickets no served label fits: a reviewer proposes one, the admin accepts it.
NEW_LABEL = "gift_cards"
PROPOSED = ["do you sell gift cards for birthdays?", "how do I redeem the gift card my aunt sent me?"]


@pytest.fixture(scope="module")
def graph(ray_serve, default_model_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("retrain")
    args = fake_args(
        default_model_dir,
        topology="fused",
        edge=EDGE_OFF,
        review={"min_confidence": 0.999, "store_path": str(tmp / "queue.sqlite3"), "audit_share": 0.0},
        # A replay sample keeps the build to seconds; the shipped default replays every row.
        retrain={
            "candidates_dir": str(tmp / "candidates"),
            "state_path": str(tmp / "retrain.json"),
            "replay_rows": 120,
            "reviewed_share": 0.3,
        },
        admin={"token": ADMIN["Authorization"].split()[1], "reviewer_token": REVIEWER["Authorization"].split()[1]},
    )
    with running(ray_serve, APP, args) as client:
        for round_ in range(4):
            for text in CORRECTIONS:
                assert client.post("/v1/classify", json={"text": f"{text} (ticket {round_})"}).json()["needs_review"]
            for text in PROPOSED:
                assert client.post("/v1/classify", json={"text": f"{text} (ticket {round_})"}).json()["needs_review"]
        items = client.get("/admin/review?limit=500", headers=ADMIN).json()["items"]
        for item in items:
            text = item["text"].rsplit(" (", 1)[0]
            if text in PROPOSED:
                proposal = {"label": NEW_LABEL, "description": "buying, sending or redeeming gift cards"}
                assert client.post(f"/admin/review/{item['id']}/propose", json=proposal, headers=REVIEWER).is_success
            else:
                resolution = {"label": CORRECTIONS[text]}
                assert client.post(f"/admin/review/{item['id']}/resolve", json=resolution, headers=ADMIN).is_success
        assert client.post(f"/admin/labels/proposals/{NEW_LABEL}/accept", headers=ADMIN).is_success
        yield client


def _wait(client, deadline_s: float = 300) -> dict:
    deadline = time.monotonic() + deadline_s
    while (state := client.get("/admin/retrain", headers=ADMIN).json())["status"] == "running":
        assert time.monotonic() < deadline, state
        time.sleep(2)
    return state


def test_a_retrain_builds_a_candidate_from_the_resolved_items(graph, default_model_dir):
    assert graph.get("/admin/retrain", headers=ADMIN).json()["status"] == "idle"
    started = graph.post("/admin/retrain", headers=ADMIN)
    assert started.status_code == 202 and started.json()["status"] == "running", started.text
    again = graph.post("/admin/retrain", headers=ADMIN)
    assert again.status_code == 409 and again.json()["error"]["code"] == "retrain_running"

    state = _wait(graph)
    run = state["current"]
    assert state["status"] == "succeeded", state
    assert any("candidate" in line for line in state["log_tail"]), state["log_tail"]
    candidate = Path(run["candidate_dir"])
    meta = json.loads((candidate / "ticketserve.json").read_text())
    stable = graph.get("/v1/labels").json()["model_version"]
    assert meta["version"] == run["candidate_version"] != stable
    served = [label["name"] for label in graph.get("/v1/labels").json()["labels"]]
    # The accepted label is learnt: the head grows by it, the taxonomy describes it.
    assert meta["labels"] == sorted([*served, NEW_LABEL])
    assert meta["taxonomy"]["labels"][NEW_LABEL]["description"] == "buying, sending or redeeming gift cards"
    retrain = meta["extra"]["retrain"]
    assert retrain["from_version"] == stable and retrain["new_labels"] == [NEW_LABEL]
    source = json.loads((Path(default_model_dir) / "ticketserve.json").read_text())
    assert meta["tiers"] == {**source["tiers"], NEW_LABEL: "regular"}
    # The rows it replayed are its source's, and so are the rows its own retrains will replay.
    replayed = (Path(default_model_dir) / "training_data.csv").read_text(encoding="utf-8")
    assert (candidate / "training_data.csv").read_text(encoding="utf-8") == replayed
    # 32 distinct resolved texts: some held out as the reviewed set, never trained on.
    with open(candidate / "reviewed_set.csv", encoding="utf-8") as f:
        reviewed = list(csv.DictReader(f))
    assert len(reviewed) == retrain["reviewed_set"] > 0 and retrain["reviews_learnt"] + len(reviewed) == 32
    truth = {**CORRECTIONS, **dict.fromkeys(PROPOSED, NEW_LABEL)}
    assert all(row["label"] == truth[row["text"].rsplit(" (", 1)[0]] for row in reviewed)


def test_a_running_retrain_stops_and_the_record_says_so(graph):
    _wait(graph)
    assert graph.post("/admin/retrain", headers=ADMIN).status_code == 202
    stopped = graph.post("/admin/retrain/stop", headers=ADMIN)
    assert stopped.status_code == 200 and stopped.json()["status"] == "stopped", stopped.text
    state = graph.get("/admin/retrain", headers=ADMIN).json()
    assert state["status"] == "stopped" and [r["status"] for r in state["runs"]][:2] == ["stopped", "succeeded"]
    nothing = graph.post("/admin/retrain/stop", headers=ADMIN)
    assert nothing.status_code == 409 and nothing.json()["error"]["code"] == "no_retrain"


def test_a_reviewer_can_neither_start_nor_read_retrains(graph):
    for method, path in (("POST", "/admin/retrain"), ("GET", "/admin/retrain"), ("POST", "/admin/retrain/stop")):
        r = graph.request(method, path, headers=REVIEWER)
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden", (method, path)
