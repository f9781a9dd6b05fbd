"""The edge tier measured: false blocks on real tickets, spam caught, and what the edge
router answers on a realistic mix, through HTTP on 127.0.0.1.

    python -m bench.edge [--tickets 1000] [--users 16] [--epochs 3]

1. Anti-spam false blocks (policies only, no server): every row of bitext_cs_8k (by
   style flag) and banking77/train.csv through the content rules, language detection
   and per-user limits at a human pace.
2. Generated spam (repeats, random strings, floods from one user) through the same code.
3. A mix of 38 % simple / 45 % regular / 17 % complex tickets (by the tier of their
   intent) plus 5 % spam, from held-out rows of bitext (its intents mapped onto the
   bundled ones) and of the bundled data, sent through the full graph serving a model
   built by `models.build` on the other rows. Reports routes, interception, latency per
   route, and the accuracy of edge answers next to the model's on the same tickets.
Writes bench/results/edge.json.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import random
import time
from collections import Counter, defaultdict
from pathlib import Path

import httpx

from bench.common import (
    print_table,
    start_serve,
    write_results,
)
from deployments.api import ApiError, normalize_text
from loadkit.bitext import BITEXT, SHARED_DATA
from loadkit.mix import (
    BITEXT_TO_BUNDLED,
    MIX,
    read_csv,
    spam_texts,
)
from loadkit.stats import percentile
from models.build import (
    BUNDLED_DATA,
    BUNDLED_INTENTS,
    ROOT,
    TrainSettings,
    build,
    read_tiers,
)

PORT = 18500
BANKING77 = SHARED_DATA / "banking77" / "train.csv"
BITEXT_FLAGS = {
    "B": "basic",
    "C": "colloquial",
    "E": "expanded",
    "I": "interrogative",
    "K": "keyword",
    "L": "colloquial (L)",
    "M": "morphological",
    "P": "polite",
    "Q": "offensive",
    "W": "offensive (W)",
    "Z": "typos",
    "V": "voice",
}
SPAM_SHARE = 0.05
EDGE_ROUTES = ("template", "cache", "edge_model")


# ---- 1 + 2: the anti-spam policies offline -------------------------------------------


class Screen:
    """The anti-spam filter and the edge router's language check, as the graph runs them."""

    def __init__(self):
        from deployments.config import AntiSpamConfig, EdgeConfig
        from deployments.nodes.antispam import load_letter_pairs
        from deployments.nodes.edge_router import py3langid_identifier
        from policies.rate_limit import UserLimits
        from policies.spam import SpamRules

        self.antispam = AntiSpamConfig()
        self.language = EdgeConfig().language
        self.rules = SpamRules(self.antispam.rules, load_letter_pairs(self.antispam.reference_texts_file))
        self.limits = UserLimits(self.antispam.rate_limit, self.antispam.duplicates)
        self.identify = py3langid_identifier()

    def verdict(self, raw: str, user: str | None, now: float, client: str = "10.0.0.1") -> str | None:
        """None when the ticket passes, else the reason it is refused."""
        from policies.language import detect_language
        from policies.rate_limit import text_digest, user_key
        from policies.screening import screen_locally

        try:
            text = normalize_text(raw, 10_000)
        except ApiError as e:
            return e.code
        tier = self.antispam.rate_limit.tier_of(user, None)
        key, digest = user_key(user, None, client), text_digest(text)
        admission, rule = screen_locally(self.limits, self.rules, text, key, tier, digest, now)
        if admission.rule or rule:
            return admission.rule or rule
        if not detect_language(text, None, self.language, self.identify).supported:
            return "unsupported_language"
        return None


def false_blocks() -> list[dict]:
    """Real tickets from 200 users, each sending one every 2 s on average."""
    datasets = {
        "bitext_cs_8k": [(r["utterance"], r["flags"]) for r in read_csv(BITEXT)],
        "banking77/train": [(r["text"], "") for r in read_csv(BANKING77)],
    }
    rows = []
    for name, tickets in datasets.items():
        screen = Screen()
        blocked: Counter[str] = Counter()
        by_flag: dict[str, Counter] = defaultdict(Counter)
        for i, (text, flags) in enumerate(tickets):
            reason = screen.verdict(text, f"user{i % 200}", now=i / 100)
            blocked[reason or "passed"] += 1
            for flag in flags:
                by_flag[flag]["n"] += 1
                by_flag[flag]["blocked"] += reason is not None
        n = len(tickets)
        rows.append(_block_row(name, n, n - blocked["passed"], blocked))
        for flag, c in sorted(by_flag.items()):
            if flag != "B":
                rows.append(
                    _block_row(f"  {name} flag {flag} {BITEXT_FLAGS.get(flag, '')}", c["n"], c["blocked"], Counter())
                )
    return rows


def _block_row(name: str, n: int, blocked: int, reasons: Counter, allowance: float | None = None) -> dict:
    """`allowance`: requests the sender's tier admits in the time taken (floods only)."""
    excess = "-" if allowance is None else round(100 * min(1.0, blocked / max(1.0, n - allowance)), 2)
    return {
        "texts": name,
        "n": n,
        "blocked": blocked,
        "blocked_pct": round(100 * blocked / n, 3),
        "beyond_allowance_blocked_pct": excess,
        "reasons": ", ".join(f"{k} {v}" for k, v in reasons.most_common() if k != "passed") or "-",
    }


def spam_caught(n: int, flood_seconds: float) -> list[dict]:
    rng = random.Random(7)
    rows = []
    for kind, texts in spam_texts(rng, n).items():
        screen = Screen()
        caught = Counter(screen.verdict(t, f"spammer{i}", now=i) or "passed" for i, t in enumerate(texts))
        rows.append(_block_row(kind, n, n - caught["passed"], caught))
    legit = [r["utterance"] for r in read_csv(BITEXT)]
    floods = {
        # A crawler replaying a handful of tickets, as fast as it can (1,000/s).
        "flood: 20 texts, 1 user, 1000/s": (lambda i: legit[i % 20], "crawler", 1000),
        "flood: distinct texts, 1 user, 1000/s": (lambda i: legit[i % len(legit)], "crawler", 1000),
        "flood: distinct texts, no user_id, 100/s": (lambda i: legit[i % len(legit)], None, 100),
    }
    for kind, (text_of, user, rate) in floods.items():
        screen = Screen()
        total = int(flood_seconds * rate)
        caught = Counter(screen.verdict(text_of(i), user, now=i / rate) or "passed" for i in range(total))
        tier = screen.antispam.rate_limit.tiers[screen.antispam.rate_limit.tier_of(user, None)]
        allowance = tier.capacity + tier.requests_per_s * flood_seconds
        rows.append(_block_row(f"{kind} for {flood_seconds:.0f} s", total, total - caught["passed"], caught, allowance))
    return rows


# ---- 3: the realistic mix through HTTP ------------------------------------------------


def split_rows(seed: int = 0) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """(train, test) of (text, label, lang): mapped bitext + bundled, 80/20 per label."""
    rows = [
        (r["utterance"], BITEXT_TO_BUNDLED[r["intent"]], "en")
        for r in read_csv(BITEXT)
        if r["intent"] in BITEXT_TO_BUNDLED
    ]
    rows += [(r["text"], r["label"], r["lang"]) for r in read_csv(BUNDLED_DATA)]
    by_label: dict[str, list] = defaultdict(list)
    for row in rows:
        by_label[row[1]].append(row)
    rng = random.Random(seed)
    train, test = [], []
    for label_rows in by_label.values():
        rng.shuffle(label_rows)
        cut = int(len(label_rows) * 0.8)
        train += label_rows[:cut]
        test += label_rows[cut:]
    return train, test


def build_model(train: list[tuple[str, str, str]], epochs: int) -> Path:
    work = ROOT / "artifacts" / "bench"
    work.mkdir(parents=True, exist_ok=True)
    data = work / "edge-train.csv"
    with open(data, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        w.writerows((t, lab) for t, lab, _ in train)
    out = ROOT / "artifacts" / "models" / "bench-edge"
    build(data, "text", "label", out, BUNDLED_INTENTS, TrainSettings(epochs=epochs))
    return out


def make_mix(test, tickets: int, repeat_share: float, seed: int = 1) -> list[dict]:
    """Tickets drawn without replacement per tier; spam mixed in; tenants and users
    assigned; then `repeat_share` of the legitimate tickets replaced by the text of an
    earlier one of the same tenant, sent by another user (the same question asked twice)."""
    tiers = read_tiers(BUNDLED_INTENTS, sorted({lab for _, lab, _ in test}))
    rng = random.Random(seed)
    pools = defaultdict(list)
    for text, label, lang in test:
        pools[tiers[label]].append({"text": text, "truth": label, "lang": lang, "tier": tiers[label]})
    legit = tickets - int(tickets * SPAM_SHARE)
    mix = []
    for tier, share in MIX.items():
        pool = pools[tier]
        rng.shuffle(pool)
        want = round(legit * share)
        if want > len(pool):
            raise SystemExit(f"only {len(pool)} held-out {tier} tickets; ask for fewer than {tickets}")
        mix += pool[:want]
    spam = [t for texts in spam_texts(rng, tickets).values() for t in texts]
    mix += [{"text": t, "truth": None, "lang": "spam", "tier": "spam"} for t in rng.sample(spam, tickets - legit)]
    rng.shuffle(mix)
    for item in mix:
        item["tenant"] = f"tenant{rng.randrange(4)}"
        item["user_id"] = f"user{rng.randrange(300)}"
    seen: list[dict] = []
    for i, item in enumerate(mix):
        if item["tier"] == "spam":
            continue
        if seen and rng.random() < repeat_share:
            mix[i] = {**rng.choice(seen), "user_id": f"user{rng.randrange(300)}", "repeat": True}
        else:
            seen.append(item)
    return mix


async def send_all(url: str, mix: list[dict], users: int, tenant_prefix: str) -> list[dict]:
    queue: asyncio.Queue = asyncio.Queue()
    for item in mix:
        queue.put_nowait({**item, "tenant": tenant_prefix + item["tenant"]})
    records = []
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=users)) as client:

        async def user() -> None:
            while not queue.empty():
                item = queue.get_nowait()
                body = {k: item[k] for k in ("text", "tenant", "user_id")}
                start = time.perf_counter()
                r = await client.post(url, json=body)
                latency_ms = (time.perf_counter() - start) * 1000
                answer = r.json()
                records.append(
                    {
                        **item,
                        "status": r.status_code,
                        "client_ms": latency_ms,
                        **(
                            {"route": answer["route"], "label": answer["label"], "server_ms": answer["latency_ms"]}
                            if r.status_code == 200
                            else {"route": answer["error"]["code"], "label": None}
                        ),
                    }
                )

        await asyncio.gather(*(user() for _ in range(users)))
    return records


def model_reference(app: str, texts: list[str]) -> dict[str, str]:
    """The model's own answer for each text, asked of the replica directly (no edge tier)."""
    from ray import serve

    model = serve.get_deployment_handle("ModelReplica", app)
    responses = {t: model.predict.remote(t, f"reference-{i}") for i, t in enumerate(texts)}
    return {t: r.result().label for t, r in responses.items()}


def mix_report(records: list[dict], reference: dict[str, str], seconds: float) -> tuple[list[dict], list[dict], dict]:
    legit = [r for r in records if r["tier"] != "spam"]
    spam = [r for r in records if r["tier"] == "spam"]
    route_rows = []
    for route in ("template", "cache", "edge_model", "model"):
        rs = [r for r in legit if r["route"] == route]
        if not rs:
            continue
        lat = [r["client_ms"] for r in rs]
        route_rows.append(
            {
                "route": route,
                "tickets": len(rs),
                "share_pct": round(100 * len(rs) / len(legit), 1),
                "accuracy": round(sum(r["label"] == r["truth"] for r in rs) / len(rs), 4),
                "p50_ms": percentile(lat, 50, 1),
                "p95_ms": percentile(lat, 95, 1),
                "p99_ms": percentile(lat, 99, 1),
            }
        )
    refused = Counter(r["route"] for r in legit if r["status"] != 200)
    edge = [r for r in legit if r["route"] in EDGE_ROUTES]
    edge_acc = sum(r["label"] == r["truth"] for r in edge) / max(1, len(edge))
    model_same = sum(reference[normalize_text(r["text"], 10_000)] == r["truth"] for r in edge) / max(1, len(edge))
    agreement = sum(reference[normalize_text(r["text"], 10_000)] == r["label"] for r in edge) / max(1, len(edge))
    tier_rows = []
    for tier in (*MIX, "spam"):
        rs = [r for r in records if r["tier"] == tier]
        routes = Counter(r["route"] for r in rs)
        tier_rows.append(
            {"tier": tier, "tickets": len(rs), "routes": ", ".join(f"{k} {v}" for k, v in routes.most_common())}
        )
    summary = {
        "tickets": len(records),
        "seconds": round(seconds, 1),
        "req_per_s": round(len(records) / seconds, 1),
        "interception_pct": round(100 * len(edge) / len(legit), 1),
        "edge_answers": len(edge),
        "edge_accuracy": round(edge_acc, 4),
        "model_accuracy_on_same_tickets": round(model_same, 4),
        "edge_model_agreement": round(agreement, 4),
        "legit_refused": dict(refused),
        "spam_refused_pct": round(100 * sum(r["status"] != 200 for r in spam) / max(1, len(spam)), 1),
        "all_p50_ms": percentile([r["client_ms"] for r in legit if r["status"] == 200], 50, 1),
        "all_p99_ms": percentile([r["client_ms"] for r in legit if r["status"] == 200], 99, 1),
    }
    return route_rows, tier_rows, summary


def run_mix(tickets: int, users: list[int], epochs: int, repeat_share: float) -> dict:
    from ray import serve

    from bench.common import BENCH_KV_FRACTION
    from deployments.config import EDGE_OFF, AppConfig
    from serve_app import bind_graph

    train, test = split_rows()
    model_dir = build_model(train, epochs)
    mix = make_mix(test, tickets, repeat_share)
    start_serve(PORT)

    def deploy(edge: dict) -> None:
        # One client address sends for 300 users: the anonymous tier is not involved.
        engine = {"model_dir": str(model_dir), "gpu_memory_utilization": BENCH_KV_FRACTION}
        serve.run(
            bind_graph(AppConfig.from_args({"edge": edge, "model": {"engine": engine}})), name="edge", route_prefix="/"
        )

    deploy({})
    url = f"http://127.0.0.1:{PORT}/v1/classify"
    # Warm-up under a tenant of its own: the engine's first batches are slow.
    asyncio.run(send_all(url, mix[:100], 4, "warmup-"))
    passes = {}
    for k, n in enumerate(users):
        # Each pass under its own tenants, so it starts with a cold cache.
        start = time.perf_counter()
        records = asyncio.run(send_all(url, mix, n, f"pass{k}-"))
        seconds = time.perf_counter() - start
        texts = sorted({normalize_text(r["text"], 10_000) for r in records if r["route"] in EDGE_ROUTES})
        routes, tiers, summary = mix_report(records, model_reference("edge", texts), seconds)
        passes[f"{n} users"] = {"routes": routes, "tiers": tiers, "summary": summary}
    # The same mix with every edge answer off (only the EdgeRouter is redeployed): does
    # the edge tier pay for its hops on this machine?
    deploy(EDGE_OFF)
    start = time.perf_counter()
    records = asyncio.run(send_all(url, mix, max(users), "edge-off-"))
    routes, tiers, summary = mix_report(records, {}, time.perf_counter() - start)
    passes[f"{max(users)} users, edge answers off"] = {"routes": routes, "tiers": tiers, "summary": summary}
    serve.delete("edge")
    return {"passes": passes, "model_dir": str(model_dir), "train_rows": len(train), "repeat_share": repeat_share}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tickets", type=int, default=1000, help="size of the HTTP mix (spam included)")
    p.add_argument("--users", default="2,16", help="concurrent HTTP clients, one pass of the mix per value")
    p.add_argument(
        "--repeat-share",
        type=float,
        default=0.1,
        help="share of legitimate tickets that repeat an earlier ticket's text (same tenant)",
    )
    p.add_argument("--epochs", type=int, default=3, help="fine-tuning epochs of the benchmark model")
    p.add_argument("--spam-per-kind", type=int, default=2000)
    p.add_argument("--flood-seconds", type=float, default=30)
    p.add_argument("--skip-http", action="store_true", help="only the offline anti-spam measurements")
    a = p.parse_args()

    print("\n## Anti-spam false blocks on legitimate tickets")
    blocks = false_blocks()
    print_table(blocks)
    print("\n## Generated spam")
    spam = spam_caught(a.spam_per_kind, a.flood_seconds)
    print_table(spam)
    totals = {}
    for name, rows in (
        ("content spam", [r for r in spam if not r["texts"].startswith("flood")]),
        ("all generated spam", spam),
    ):
        n, blocked = sum(r["n"] for r in rows), sum(r["blocked"] for r in rows)
        totals[name] = round(100 * blocked / n, 2)
        print(f"{name}: {blocked}/{n} refused ({totals[name]} %)")
    results = {"false_blocks": blocks, "spam": spam, "spam_totals_pct": totals}
    if not a.skip_http:
        print("\n## Realistic mix through HTTP")
        mix = run_mix(a.tickets, [int(u) for u in a.users.split(",")], a.epochs, a.repeat_share)
        for name, result in mix["passes"].items():
            print(f"\n### {name}, {a.repeat_share:.0%} repeated tickets")
            print_table(result["routes"])
            print_table(result["tiers"])
            print(result["summary"])
        results["mix"] = mix
    write_results("edge", results)


if __name__ == "__main__":
    main()
