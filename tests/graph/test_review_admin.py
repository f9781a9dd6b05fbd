"""Review queue and admin API on a real graph: low-confidence answers flagged and recorded,
the admin API refusing callers without the token, new labels proposed by reviewers and
decided by the admin, items surviving a restart of the queue."""

from __future__ import annotations

import csv
import io
import time

import pytest
import ray

from deployments.config import EDGE_OFF
from tests.harness import fake_args, running

APP = "reviewed"
TOKEN = "test-admin-token-4f2a"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
REVIEWER = {"Authorization": "Bearer test-reviewer-token-9c1e"}
TICKETS = [
    "I was charged twice and the parcel never came, what now",
    "hello, the thing I bought is kind of not what I wanted maybe",
    "my account and my order both have problems since yesterday",
    "can you help me with my purchase please",
]


@pytest.fixture(scope="module")
def reviewed(ray_serve, default_model_dir, tmp_path_factory):
    store = tmp_path_factory.mktemp("review") / "queue.sqlite3"
    # Nearly every model answer is below 0.999: flagged and recorded.
    args = fake_args(
        default_model_dir,
        topology="fused",
        edge=EDGE_OFF,
        # Every answer not flagged is recorded as an audit item.
        review={"min_confidence": 0.999, "store_path": str(store), "audit_share": 1.0},
        admin={"token": TOKEN, "reviewer_token": REVIEWER["Authorization"].split()[1]},
    )
    with running(ray_serve, APP, args) as client:
        yield client


def test_admin_api_refuses_callers_without_the_token(reviewed):
    client = reviewed
    calls = [
        ("GET", "/admin/state"),
        ("GET", "/admin/review"),
        ("GET", "/admin/review/export"),
        ("POST", "/admin/review/1/resolve"),
        ("POST", "/admin/review/erase"),
        ("POST", "/admin/rollout"),
        ("POST", "/admin/rollout/promote"),
        ("POST", "/admin/rollout/rollback"),
        ("POST", "/admin/cache/flush"),
    ]
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        for method, path in calls:
            r = client.request(method, path, headers=headers, json={"label": "cancel_order"})
            assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized", (method, path, headers)
    # The token is checked before the path and the body: no 422 or 400 tells a stranger
    # which parameters or fields exist.
    for method, path, body in [
        ("POST", "/admin/review/not-a-number/resolve", b'{"label": 1}'),
        ("POST", "/admin/rollout", b'{"percent": "many"'),
        ("GET", "/admin/review?limit=many", None),
    ]:
        r = client.request(method, path, content=body)
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized", (method, path)
    assert client.get("/admin/state", headers=AUTH).status_code == 200
    bad = client.post("/admin/rollout", headers=AUTH, content=b'{"percent": "many"')
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_json", bad.text
    bad = client.post("/admin/review/1/resolve", headers=AUTH, json={"label": "x", "extra": 1})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_request", bad.text


def test_rollout_actions_need_a_canary_but_caches_flush_without_one(reviewed):
    client = reviewed
    assert client.get("/admin/state", headers=AUTH).json()["rollout"]["status"] == "none"
    for path, body in (
        ("/admin/rollout", {"percent": 5}),
        ("/admin/rollout/promote", None),
        ("/admin/rollout/rollback", None),
    ):
        r = client.post(path, headers=AUTH, json=body)
        assert r.status_code == 409 and r.json()["error"]["code"] == "no_canary", path
    first = client.post("/admin/cache/flush", headers=AUTH).json()["epoch"]
    assert client.post("/admin/cache/flush", headers=AUTH).json()["epoch"] == first + 1


def test_low_confidence_answers_are_flagged_recorded_and_resolved(reviewed):
    client = reviewed
    answers = [
        client.post("/v1/classify", json={"text": t, "ticket_id": f"T-{i}"}).json() for i, t in enumerate(TICKETS)
    ]
    flagged = {a["request_id"]: a for a in answers if a["needs_review"]}
    assert flagged and all(a["confidence"] < 0.999 for a in flagged.values())
    assert all(not a["needs_review"] for a in answers if a["confidence"] >= 0.999)

    items = client.get("/admin/review", headers=AUTH, params={"status": "all", "limit": 500}).json()["items"]
    recorded = {i["request_id"]: i for i in items}
    assert set(flagged) <= set(recorded)
    first = recorded[next(iter(flagged))]
    assert first["text"] in TICKETS and first["label"] == flagged[first["request_id"]]["label"]
    assert first["model_version"] and first["ticket_id"].startswith("T-")

    r = client.post(f"/admin/review/{first['id']}/resolve", headers=AUTH, json={"label": "nonsense"})
    assert r.status_code == 422 and "cancel_order" in r.json()["error"]["message"]
    assert client.post("/admin/review/999999/resolve", headers=AUTH, json={"label": "cancel_order"}).status_code == 404
    r = client.post(f"/admin/review/{first['id']}/resolve", headers=AUTH, json={"label": "cancel_order"})
    assert r.status_code == 200 and r.json()["resolved_label"] == "cancel_order"

    export = client.get("/admin/review/export", headers=AUTH)
    rows = list(csv.DictReader(io.StringIO(export.text)))
    assert {"text": first["text"], "label": "cancel_order", "lang": "en"} in rows
    state = client.get("/admin/state", headers=AUTH).json()
    assert state["review"]["resolved"] >= 1 and state["model_version"]


def test_stored_tickets_are_masked_and_erased_per_tenant_or_user(reviewed):
    client = reviewed
    text = "refund my order 100000000 to card 4111 1111 1111 1111, mail me at joe@example.com"
    for tenant, user in (("acme", "u1"), ("acme", "u2"), ("globex", "u1")):
        body = {"text": text, "tenant": tenant, "user_id": user}
        assert client.post("/v1/classify", json=body).json()["needs_review"]

    def stored(tenant: str) -> list[dict]:
        items = client.get("/admin/review", headers=AUTH, params={"status": "all", "limit": 500}).json()["items"]
        return [i for i in items if i["tenant"] == tenant]

    assert [i["text"] for i in stored("acme")] == ["refund my order 100000000 to card [card], mail me at [email]"] * 2
    bad = client.post("/admin/review/erase", headers=AUTH, json={})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_request", bad.text
    assert client.post("/admin/review/erase", headers=AUTH, json={"tenant": "acme", "user_id": "u1"}).json() == {
        "erased": 1
    }
    assert [i["user_id"] for i in stored("acme")] == ["u2"]
    assert client.post("/admin/review/erase", headers=AUTH, json={"tenant": "globex"}).json() == {"erased": 1}
    assert stored("globex") == [] and len(stored("acme")) == 1


def test_the_reviewer_token_lists_and_resolves_items_and_nothing_else(reviewed):
    client = reviewed
    client.post("/v1/classify", json={"text": "my parcel is late and the box was open, what do I do"})
    items = client.get("/admin/review", headers=REVIEWER, params={"status": "open"})
    assert items.status_code == 200 and items.json()["items"], items.text
    item_id = items.json()["items"][0]["id"]
    r = client.post(f"/admin/review/{item_id}/resolve", headers=REVIEWER, json={"label": "order_status"})
    assert r.status_code == 200 and r.json()["resolved_label"] == "order_status"
    for method, path, body in [
        ("GET", "/admin/state", None),
        ("GET", "/admin/review/export", None),
        ("POST", "/admin/review/erase", {"tenant": "acme"}),
        ("POST", "/admin/rollout", {"percent": 5}),
        ("POST", "/admin/rollout/promote", None),
        ("POST", "/admin/rollout/rollback", None),
        ("POST", "/admin/cache/flush", None),
    ]:
        r = client.request(method, path, headers=REVIEWER, json=body)
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden", (method, path, r.text)


def test_a_reviewer_proposes_a_label_and_only_the_admin_decides_it(reviewed):
    client = reviewed
    texts = [f"do you sell gift cards I could send to my sister, number {i}?" for i in range(3)]
    for text in texts:
        client.post("/v1/classify", json={"text": text})
    listed = client.get("/admin/review", headers=REVIEWER, params={"status": "open", "limit": 500}).json()["items"]
    ids = [item["id"] for item in listed if item["text"] in texts]
    assert len(ids) == 3, listed

    body = {"label": "gift_cards", "description": "buying, sending or redeeming gift cards"}
    for bad, why in [({"label": "Gift Cards"}, "lowercase"), ({"label": "order_status"}, "exists")]:
        r = client.post(f"/admin/review/{ids[0]}/propose", headers=REVIEWER, json=bad)
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request", (why, r.text)
    assert client.post("/admin/review/999999/propose", headers=REVIEWER, json=body).status_code == 404
    for item_id in ids:
        r = client.post(f"/admin/review/{item_id}/propose", headers=REVIEWER, json=body)
        assert r.status_code == 200 and r.json()["proposed_label"] == "gift_cards", r.text
    # Filed under the proposal: out of the open queue, and not a label to resolve with yet.
    still_open = client.get("/admin/review", headers=REVIEWER, params={"status": "open", "limit": 500}).json()
    assert not [item for item in still_open["items"] if item["id"] in ids]
    assert still_open["counts"]["proposed"] >= 3
    proposals = client.get("/admin/labels/proposals", headers=REVIEWER).json()["proposals"]
    [gift] = [p for p in proposals if p["name"] == "gift_cards"]
    assert (gift["status"], gift["items"], gift["description"]) == ("open", 3, body["description"])
    assert set(gift["examples"]) == set(texts)

    for verdict in ("accept", "reject"):
        r = client.post(f"/admin/labels/proposals/gift_cards/{verdict}", headers=REVIEWER)
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
    assert client.post("/admin/labels/proposals/no_such_label/accept", headers=AUTH).status_code == 404
    accepted = client.post("/admin/labels/proposals/gift_cards/accept", headers=AUTH)
    assert accepted.status_code == 200 and accepted.json()["status"] == "accepted", accepted.text
    rows = list(csv.DictReader(io.StringIO(client.get("/admin/review/export", headers=AUTH).text)))
    assert sorted(r["text"] for r in rows if r["label"] == "gift_cards") == sorted(texts)
    # An accepted label is one people resolve with, before any model knows it.
    client.post("/v1/classify", json={"text": "can I pay with a gift card from your shop?"})
    open_now = client.get("/admin/review", headers=REVIEWER, params={"status": "open", "limit": 500}).json()["items"]
    [later] = [item for item in open_now if "gift card from your shop" in item["text"]]
    r = client.post(f"/admin/review/{later['id']}/resolve", headers=REVIEWER, json={"label": "gift_cards"})
    assert r.status_code == 200 and r.json()["resolved_label"] == "gift_cards", r.text


def test_a_rejected_proposal_returns_its_items_to_the_queue(reviewed):
    client = reviewed
    text = "is your office dog friendly, can I bring my pet when I pick up"
    client.post("/v1/classify", json={"text": text})
    listed = client.get("/admin/review", headers=AUTH, params={"status": "open", "limit": 500}).json()["items"]
    [item] = [i for i in listed if i["text"] == text]
    r = client.post(f"/admin/review/{item['id']}/propose", headers=AUTH, json={"label": "pets_policy"})
    assert r.status_code == 200
    rejected = client.post("/admin/labels/proposals/pets_policy/reject", headers=AUTH).json()
    assert (rejected["status"], rejected["items"]) == ("rejected", 0)
    listed = client.get("/admin/review", headers=AUTH, params={"status": "open", "limit": 500}).json()["items"]
    assert [i["proposed_label"] for i in listed if i["id"] == item["id"]] == [None]
    r = client.post(f"/admin/review/{item['id']}/resolve", headers=AUTH, json={"label": "pets_policy"})
    assert r.status_code == 422  # a rejected label is no label


def test_unflagged_answers_are_drawn_for_audit_and_estimate_the_silent_error_rate(reviewed):
    client = reviewed
    clear = ["cancel my order", "I forgot my password", "unsubscribe me from the newsletter"]
    answers = {a["request_id"]: a for a in (client.post("/v1/classify", json={"text": t}).json() for t in clear)}
    assert any(not a["needs_review"] for a in answers.values()), answers
    items = client.get("/admin/review", headers=AUTH, params={"status": "all", "limit": 500}).json()["items"]
    kinds = {i["request_id"]: i["kind"] for i in items if i["request_id"] in answers}
    assert kinds == {rid: "review" if a["needs_review"] else "audit" for rid, a in answers.items()}
    audit = client.get("/admin/review", headers=AUTH, params={"kind": "audit", "status": "open"}).json()["items"]
    assert audit and {i["kind"] for i in audit} == {"audit"}
    wrong = next(i for i in audit if i["label"] != "human_agent")
    client.post(f"/admin/review/{wrong['id']}/resolve", headers=AUTH, json={"label": "human_agent"})
    estimate = client.get("/admin/state", headers=AUTH).json()["review"]["audit"]
    assert estimate["checked"] >= 1 and estimate["wrong"] >= 1
    assert 0 < estimate["interval95"][0] <= estimate["wrong_share"] <= estimate["interval95"][1] <= 1


def queue_replicas() -> set[str]:
    return {a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if f"{APP}#ReviewQueue#" in a["name"]}


def test_review_items_survive_a_restart_of_the_queue(reviewed):
    """The queue's one replica lost (a crash, its node gone): Serve starts another process on
    the same SQLite file, and it has every item."""
    client = reviewed
    client.post("/v1/classify", json={"text": "my order and my refund are both a mess"})
    before = client.get("/admin/review", headers=AUTH, params={"status": "all", "limit": 500}).json()["items"]
    assert before
    (old,) = queue_replicas()
    ray.kill(ray.get_actor(old, namespace="serve"), no_restart=True)
    deadline = time.monotonic() + 60
    while True:
        r = client.get("/admin/review", headers=AUTH, params={"status": "all", "limit": 500})
        if r.status_code == 200 and queue_replicas() - {old}:
            break
        assert time.monotonic() < deadline, (r.status_code, queue_replicas())
        time.sleep(0.5)
    assert old not in queue_replicas()
    assert r.json()["items"] == before
