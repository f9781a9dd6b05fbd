// The review console: a reviewer labels flagged and audited answers by keyboard and
// proposes a new label where none fits; an admin also decides proposals and watches and
// acts on the rollout. Everything it shows comes from the /admin API and
// is written as text (textContent), never as markup: a ticket is whatever a stranger typed.
"use strict";

const BASE = location.pathname.replace(/\/console\/?$/, "");
const OUT_OF_SCOPE = "out_of_scope";
const PAGE = 100;

const state = {
  token: sessionStorage.getItem("ticketserve.token") || "",
  role: null,
  view: "review",
  items: [],
  cursor: 0,
  labels: [],
  picking: null, // {matches, cursor} while the label picker is open
  proposing: false, // the new-label form is open
  retrainPoll: null,
};

const $ = (id) => document.getElementById(id);

function cell(text, className) {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

function say(message, isError = false) {
  $("status").textContent = message;
  $("status").classList.toggle("error", isError);
}

class ApiFailure extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(method, path, body) {
  const response = await fetch(BASE + path, {
    method,
    headers: { Authorization: `Bearer ${state.token}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = data.error || {};
    throw new ApiFailure(response.status, error.code || "http_error", error.message || response.statusText);
  }
  return data;
}

function age(createdAt) {
  const seconds = Math.max(0, (Date.now() - Date.parse(createdAt)) / 1000);
  if (seconds < 90) return `${Math.round(seconds)} s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
  if (seconds < 172800) return `${Math.round(seconds / 3600)} h`;
  return `${Math.round(seconds / 86400)} d`;
}

function percent(value) {
  return value === null || value === undefined ? "–" : `${(100 * value).toFixed(1)} %`;
}

// --- login -----------------------------------------------------------------------------

async function logIn(token) {
  state.token = token;
  try {
    state.role = (await api("GET", "/admin/whoami")).role;
  } catch (e) {
    state.token = "";
    sessionStorage.removeItem("ticketserve.token");
    say(e.code === "unauthorized" ? "That token is not valid." : `Cannot log in: ${e.message}`, true);
    return;
  }
  sessionStorage.setItem("ticketserve.token", token);
  await loadLabels();
  document.activeElement?.blur(); // the queue's keys go to the page, not the token field
  $("login").hidden = true;
  $("tabs").hidden = false;
  $("logout").hidden = false;
  $("tab-rollout").hidden = state.role !== "admin";
  $("who").textContent = `signed in as ${state.role}`;
  say("");
  await show("review");
}

// The served labels and those people accepted since (the next retrain learns them).
async function loadLabels() {
  const [served, accepted] = await Promise.all([
    api("GET", "/v1/labels"),
    api("GET", "/admin/labels/proposals?status=accepted"),
  ]);
  const known = new Set(served.labels.map((l) => l.name));
  state.labels = [...served.labels, ...accepted.proposals.filter((p) => !known.has(p.name))];
}

function logOut() {
  sessionStorage.removeItem("ticketserve.token");
  location.reload();
}

// --- queue -----------------------------------------------------------------------------

async function show(view) {
  state.view = view;
  for (const tab of document.querySelectorAll("nav button")) tab.classList.toggle("active", tab.dataset.view === view);
  $("queue").hidden = view === "rollout" || view === "labels";
  $("rollout").hidden = view !== "rollout";
  $("labels").hidden = view !== "labels";
  if (view === "rollout") await Promise.all([loadRollout(), loadRetrain()]);
  else if (view === "labels") await loadProposals();
  else await loadItems();
}

async function loadItems() {
  const page = await api("GET", `/admin/review?status=open&kind=${state.view}&limit=${PAGE}`);
  state.items = page.items.map((item) => ({ ...item, done: null }));
  state.cursor = 0;
  showCounts(page.counts);
  renderItems();
}

function showCounts(counts) {
  $("count-review").textContent = counts.open_review;
  $("count-audit").textContent = counts.open_audit;
  $("count-proposed").textContent = counts.proposed;
}

function renderItems() {
  const body = $("items");
  body.replaceChildren();
  state.items.forEach((item, index) => {
    const row = document.createElement("tr");
    row.dataset.id = item.id;
    if (index === state.cursor) row.classList.add("current");
    if (item.done) row.classList.add("done");
    const label = cell(item.done ? `${item.label} → ${item.done}` : item.label);
    label.append(" ");
    label.append(Object.assign(document.createElement("span"), { className: "conf", textContent: item.confidence.toFixed(2) }));
    const next = item.runners_up.map(([name, p], i) => `${i + 1} ${name} ${p.toFixed(2)}`).join("\n");
    row.append(
      cell(item.id),
      cell(item.text, "text"),
      cell(item.lang || "–"),
      label,
      cell(next, "text"),
      cell(item.route),
      cell(age(item.created_at)),
    );
    body.append(row);
  });
  $("empty").hidden = state.items.some((item) => !item.done);
  body.querySelector("tr.current")?.scrollIntoView({ block: "nearest" });
}

function move(step) {
  if (!state.items.length) return;
  state.cursor = Math.min(state.items.length - 1, Math.max(0, state.cursor + step));
  renderItems();
}

async function resolve(label) {
  const item = state.items[state.cursor];
  if (!item || item.done) return;
  try {
    await api("POST", `/admin/review/${item.id}/resolve`, { label });
  } catch (e) {
    say(`Item ${item.id}: ${e.message}`, true);
    return;
  }
  await done(item, label, `Item ${item.id} labelled ${label}.`);
}

async function done(item, shown, message) {
  item.done = shown;
  const counts = (await api("GET", `/admin/review?status=open&kind=${state.view}&limit=1`)).counts;
  showCounts(counts);
  say(message);
  const next = state.items.findIndex((other, i) => i > state.cursor && !other.done);
  if (next >= 0) state.cursor = next;
  renderItems();
}

// --- label picker ------------------------------------------------------------------------

function openPicker() {
  if (!state.items[state.cursor] || state.items[state.cursor].done) return;
  state.picking = { matches: [], cursor: 0 };
  $("picker").hidden = false;
  $("picker-input").value = "";
  filterPicker();
  $("picker-input").focus();
}

function closePicker() {
  state.picking = null;
  $("picker").hidden = true;
}

function filterPicker() {
  const typed = $("picker-input").value.trim().toLowerCase();
  // Labels whose name matches come before those whose description does.
  const byName = state.labels.filter((l) => l.name.includes(typed));
  const byText = state.labels.filter((l) => !byName.includes(l) && (l.description || "").toLowerCase().includes(typed));
  state.picking.matches = [...byName, ...byText];
  state.picking.cursor = 0;
  renderPicker();
}

function renderPicker() {
  const list = $("picker-list");
  list.replaceChildren();
  state.picking.matches.forEach((label, index) => {
    const li = document.createElement("li");
    li.dataset.label = label.name;
    li.textContent = label.name;
    if (label.description) li.append(Object.assign(document.createElement("small"), { textContent: label.description }));
    if (index === state.picking.cursor) li.classList.add("current");
    list.append(li);
  });
  list.querySelector("li.current")?.scrollIntoView({ block: "nearest" });
}

function pickerKey(event) {
  const p = state.picking;
  if (event.key === "Escape") closePicker();
  else if (event.key === "ArrowDown") p.cursor = Math.min(p.matches.length - 1, p.cursor + 1);
  else if (event.key === "ArrowUp") p.cursor = Math.max(0, p.cursor - 1);
  else if (event.key === "Enter") {
    const chosen = p.matches[p.cursor];
    closePicker();
    if (chosen) resolve(chosen.name);
    event.preventDefault();
    return;
  } else return;
  event.preventDefault();
  if (state.picking) renderPicker();
}

// --- new labels -------------------------------------------------------------------------------

function openPropose() {
  if (!state.items[state.cursor] || state.items[state.cursor].done) return;
  state.proposing = true;
  $("propose").hidden = false;
  $("propose").reset();
  $("propose-name").focus();
}

function closePropose() {
  state.proposing = false;
  $("propose").hidden = true;
  document.activeElement?.blur();
}

async function propose(event) {
  event.preventDefault();
  const item = state.items[state.cursor];
  const label = $("propose-name").value.trim();
  const description = $("propose-description").value.trim();
  closePropose();
  try {
    await api("POST", `/admin/review/${item.id}/propose`, { label, description });
  } catch (e) {
    say(`Item ${item.id}: ${e.message}`, true);
    return;
  }
  await done(item, `proposed ${label}`, `Item ${item.id} filed under the proposed label ${label}.`);
}

async function loadProposals() {
  const { proposals } = await api("GET", "/admin/labels/proposals?status=all");
  const body = $("proposals");
  body.replaceChildren();
  for (const p of proposals) {
    const row = document.createElement("tr");
    row.dataset.name = p.name;
    const actions = cell("");
    if (state.role === "admin" && p.status === "open") {
      for (const verdict of ["accept", "reject"]) {
        const button = Object.assign(document.createElement("button"), { type: "button", textContent: verdict });
        button.className = verdict;
        button.addEventListener("click", () => decide(p.name, verdict));
        actions.append(button);
      }
    }
    row.append(cell(p.name), cell(p.status), cell(p.items), cell(p.description), cell(p.examples.join("\n"), "text"), actions);
    body.append(row);
  }
}

async function decide(name, verdict) {
  try {
    const p = await api("POST", `/admin/labels/proposals/${encodeURIComponent(name)}/${verdict}`);
    say(`${name}: ${p.status}`);
  } catch (e) {
    say(`${name}: ${e.message}`, true);
  }
  await Promise.all([loadProposals(), loadLabels()]);
}

// --- rollout (admin) -----------------------------------------------------------------------

function fillTable(body, rows) {
  body.replaceChildren();
  for (const [key, value] of rows) {
    const row = document.createElement("tr");
    row.append(cell(key), cell(typeof value === "object" && value !== null ? JSON.stringify(value) : String(value)));
    body.append(row);
  }
}

async function loadRollout() {
  const s = await api("GET", "/admin/state");
  fillTable($("rollout-state"), [["serving", s.model_version], ...Object.entries(s.rollout || { status: "no controller" })]);
  const audit = (s.review || {}).audit || {};
  fillTable($("audit-state"), [
    ["audited and checked", audit.checked ?? 0],
    ["found wrong", audit.wrong ?? 0],
    ["silent error rate", percent(audit.wrong_share)],
    ["95 % interval", audit.interval95 ? `${percent(audit.interval95[0])} – ${percent(audit.interval95[1])}` : "–"],
  ]);
}

async function loadRetrain() {
  let s;
  try {
    s = await api("GET", "/admin/retrain");
  } catch (e) {
    if (e.status !== 404) throw e;
    fillTable($("retrain-state"), [["status", e.message]]);
    $("retrain").disabled = $("retrain-stop").disabled = true;
    return;
  }
  const run = s.current || {};
  fillTable($("retrain-state"), [
    ["status", s.status],
    ["run", run.run_id ?? "–"],
    ["started", run.started_at ?? "–"],
    ["candidate", run.candidate_version ?? run.candidate_dir ?? "–"],
    ["seconds", run.seconds ?? "–"],
    ["message", run.message || "–"],
  ]);
  $("retrain-log").textContent = s.log_tail.join("\n");
  $("retrain").disabled = s.status === "running";
  $("retrain-stop").disabled = s.status !== "running";
  clearTimeout(state.retrainPoll);
  if (s.status === "running" && state.view === "rollout") state.retrainPoll = setTimeout(() => loadRetrain().catch(() => {}), 3000);
}

async function retrainAction(path) {
  try {
    const run = await api("POST", path);
    say(`retrain ${run.run_id}: ${run.status}`);
  } catch (e) {
    say(`retrain: ${e.message}`, true);
  }
  await loadRetrain();
}

async function rolloutAction(path) {
  try {
    const result = await api("POST", path);
    say(`${path.split("/").pop()}: ${result.status || "done"}`);
  } catch (e) {
    say(`${path.split("/").pop()}: ${e.message}`, true);
  }
  await loadRollout();
}

// --- keys ------------------------------------------------------------------------------------

const QUEUE_KEYS = {
  j: () => move(1),
  ArrowDown: () => move(1),
  k: () => move(-1),
  ArrowUp: () => move(-1),
  a: () => resolve(state.items[state.cursor]?.label),
  Enter: () => resolve(state.items[state.cursor]?.label),
  1: () => resolve(state.items[state.cursor]?.runners_up[0]?.[0]),
  2: () => resolve(state.items[state.cursor]?.runners_up[1]?.[0]),
  o: () => resolve(OUT_OF_SCOPE),
  l: () => openPicker(),
  n: () => openPropose(),
  s: () => move(1),
  r: () => loadItems(),
};

document.addEventListener("keydown", (event) => {
  if (state.picking) return pickerKey(event);
  if (state.proposing) {
    if (event.key === "Escape") closePropose();
    return;
  }
  if (!state.role || !["review", "audit"].includes(state.view) || event.target.tagName === "INPUT") return;
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  const action = QUEUE_KEYS[event.key];
  if (!action) return;
  event.preventDefault();
  Promise.resolve(action()).catch((e) => say(e.message, true));
});

$("picker-input").addEventListener("input", filterPicker);
$("propose").addEventListener("submit", propose);
$("login").addEventListener("submit", (event) => {
  event.preventDefault();
  logIn($("token").value.trim());
});
$("logout").addEventListener("click", logOut);
for (const tab of document.querySelectorAll("nav button")) {
  tab.addEventListener("click", () => show(tab.dataset.view).catch((e) => say(e.message, true)));
}
$("promote").addEventListener("click", () => rolloutAction("/admin/rollout/promote"));
$("rollback").addEventListener("click", () => rolloutAction("/admin/rollout/rollback"));
$("refresh").addEventListener("click", () => Promise.all([loadRollout(), loadRetrain()]));
$("retrain").addEventListener("click", () => retrainAction("/admin/retrain"));
$("retrain-stop").addEventListener("click", () => retrainAction("/admin/retrain/stop"));
if (state.token) logIn(state.token);
