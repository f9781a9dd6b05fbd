"""The review console in a real browser (Debian's chromium through chromium-driver) on a
real graph: a reviewer logs in, labels items by keyboard (and proposes a new label) and
the API shows them resolved; a ticket carrying markup is shown as text and runs nothing;
a reviewer cannot act on the rollout or decide a proposal, an admin can."""

from __future__ import annotations

import os
import shutil

import httpx
import pytest

from deployments.config import EDGE_OFF
from tests.harness import fake_args, running

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.common.exceptions import NoAlertPresentException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

APP = "console"
ADMIN = "console-admin-token-71b3"
REVIEWER = "console-reviewer-token-0d5e"
HOSTILE = [
    "refund please <img src=x onerror=alert(1)> my order never came",
    "<script>window.pwned = 1</script> cancel my order",
    'my parcel <img src=x onerror="window.pwned = 2"> arrived broken',
]
TICKETS = [
    "I was charged twice and the parcel never came, what now",
    "hello, the thing I bought is kind of not what I wanted maybe",
    "my account and my order both have problems since yesterday",
    "can you help me with my purchase please",
    *HOSTILE,
]
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")


@pytest.fixture(scope="module")
def graph(ray_serve, default_model_dir, tmp_path_factory):
    store = tmp_path_factory.mktemp("review") / "queue.sqlite3"
    args = fake_args(
        default_model_dir,
        topology="fused",
        edge=EDGE_OFF,
        # Nearly every answer is below 0.999: flagged and recorded, in the order sent.
        review={"min_confidence": 0.999, "store_path": str(store), "audit_share": 0.0},
        retrain={"candidates_dir": str(store.parent / "candidates"), "state_path": str(store.parent / "retrain.json")},
        admin={"token": ADMIN, "reviewer_token": REVIEWER},
    )
    with running(ray_serve, APP, args) as client:
        for text in TICKETS:
            assert client.post("/v1/classify", json={"text": text}).json()["needs_review"], text
        yield client


@pytest.fixture(scope="module")
def browser():
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("Debian's chromium and chromium-driver are not installed (.ci/run installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # No network beyond loopback here: without these Chromium keeps trying Google's hosts.
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1400,900",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    yield driver
    driver.quit()


def _log_in(driver, base_url: str, token: str, role: str) -> None:
    driver.get(f"{base_url}/console")
    driver.execute_script("sessionStorage.clear()")
    driver.get(f"{base_url}/console")
    driver.find_element(By.ID, "token").send_keys(token + "\n")
    WebDriverWait(driver, 15).until(lambda d: d.find_element(By.ID, "who").text == f"signed in as {role}")


def _press(driver, keys: str, done: int) -> None:
    """Sends `keys` to the page and waits until `done` rows show a label chosen."""
    driver.find_element(By.TAG_NAME, "body").send_keys(keys)
    WebDriverWait(driver, 15).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#items tr.done")) == done)


def _admin_items(client: httpx.Client) -> dict[int, dict]:
    r = client.get("/admin/review?status=all&limit=500", headers={"Authorization": f"Bearer {ADMIN}"})
    return {item["id"]: item for item in r.json()["items"]}


def test_a_reviewer_labels_by_keyboard_and_markup_stays_text(graph, browser):
    base = str(graph.base_url).rstrip("/")
    _log_in(browser, base, REVIEWER, "reviewer")
    rows = browser.find_elements(By.CSS_SELECTOR, "#items tr")
    assert len(rows) == len(TICKETS)
    assert not browser.find_element(By.ID, "tab-rollout").is_displayed()
    assert not browser.find_element(By.ID, "login").is_displayed()
    assert browser.find_element(By.ID, "count-review").text == str(len(TICKETS))

    # Markup in a ticket is shown as the characters typed; nothing of it runs or loads.
    shown = [row.find_element(By.CSS_SELECTOR, "td.text").text for row in rows]
    for text in HOSTILE:
        assert text in shown
    assert browser.find_elements(By.CSS_SELECTOR, "#items img, #items script") == []
    assert browser.execute_script("return window.pwned") is None
    with pytest.raises(NoAlertPresentException):
        _ = browser.switch_to.alert.text

    before = _admin_items(graph)
    ids = sorted(before)
    _press(browser, "a", 1)  # the model's label
    _press(browser, "2", 2)  # its second runner-up
    _press(browser, "o", 3)  # out of scope
    browser.find_element(By.TAG_NAME, "body").send_keys("s")  # skipped: stays open
    _press(browser, "lcancel_ord\n", 4)  # picked by name
    _press(browser, "ngift_cards\tbuying, sending or redeeming gift cards\n", 5)  # no label fits: a new one
    if path := os.environ.get("TICKETSERVE_CONSOLE_SCREENSHOT"):
        browser.save_screenshot(path)

    after = _admin_items(graph)
    expected = {
        ids[0]: before[ids[0]]["label"],
        ids[1]: before[ids[1]]["runners_up"][1][0],
        ids[2]: "out_of_scope",
        ids[3]: None,
        ids[4]: "cancel_order",
        ids[5]: None,
    }
    assert {i: after[i]["resolved_label"] for i in expected} == expected
    assert after[ids[5]]["proposed_label"] == "gift_cards"
    assert browser.find_element(By.ID, "count-review").text == str(len(TICKETS) - 5)
    assert browser.find_element(By.ID, "count-proposed").text == "1"

    browser.find_element(By.ID, "tab-labels").click()
    row = WebDriverWait(browser, 15).until(
        lambda d: d.find_element(By.CSS_SELECTOR, "#proposals tr[data-name=gift_cards]")
    )
    assert row.find_elements(By.TAG_NAME, "button") == []  # deciding is the admin's
    assert browser.find_elements(By.CSS_SELECTOR, "#proposals script") == []

    # The page holds no power of its own: the reviewer's token is refused the rollout.
    status = browser.execute_async_script(
        "const done = arguments[0];"
        "const base = location.pathname.replace(/\\/console$/, '');"
        "fetch(base + '/admin/rollout/promote', {method: 'POST',"
        f" headers: {{Authorization: 'Bearer {REVIEWER}'}}}}).then(r => done(r.status));"
    )
    assert status == 403


def test_an_admin_sees_the_rollout_and_its_actions_reach_the_controller(graph, browser):
    _log_in(browser, str(graph.base_url).rstrip("/"), ADMIN, "admin")
    tab = browser.find_element(By.ID, "tab-rollout")
    assert tab.is_displayed()
    tab.click()
    WebDriverWait(browser, 15).until(lambda d: "serving" in d.find_element(By.ID, "rollout-state").text)
    assert "status none" in browser.find_element(By.ID, "rollout-state").text
    # No canary is running: the controller's refusal is what the page shows.
    browser.find_element(By.ID, "promote").click()
    WebDriverWait(browser, 15).until(lambda d: "canary" in d.find_element(By.ID, "status").text)
    assert "error" in browser.find_element(By.ID, "status").get_attribute("class")
    # A retrain starts from the page and stops from it (tests/graph/test_retrain.py runs one through).
    browser.find_element(By.ID, "retrain").click()
    WebDriverWait(browser, 15).until(lambda d: "status running" in d.find_element(By.ID, "retrain-state").text)
    browser.find_element(By.ID, "retrain-stop").click()
    WebDriverWait(browser, 45).until(lambda d: "status stopped" in d.find_element(By.ID, "retrain-state").text)
    runs = graph.get("/admin/retrain", headers={"Authorization": f"Bearer {ADMIN}"}).json()["runs"]
    assert [r["status"] for r in runs] == ["stopped"]

    # The reviewer's proposal, with its ticket, is the admin's to accept.
    browser.find_element(By.ID, "tab-labels").click()
    row = WebDriverWait(browser, 15).until(
        lambda d: d.find_element(By.CSS_SELECTOR, "#proposals tr[data-name=gift_cards]")
    )
    assert "open" in row.text and HOSTILE[1] in row.text
    row.find_element(By.CSS_SELECTOR, "button.accept").click()
    WebDriverWait(browser, 15).until(lambda d: "gift_cards: accepted" in d.find_element(By.ID, "status").text)
    assert [i["resolved_label"] for i in _admin_items(graph).values() if i["text"] == HOSTILE[1]] == ["gift_cards"]


def test_the_page_forbids_inline_script_and_other_origins(graph):
    r = graph.get("/console")
    assert r.status_code == 200 and "text/html" in r.headers["content-type"]
    policy = r.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy
    assert graph.get("/console/console.js").headers["content-type"].startswith("text/javascript")
