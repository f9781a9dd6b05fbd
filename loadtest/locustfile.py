"""Locust suite for the ticket service (and, with `--api vllm` or `vllm-generate`, for
vLLM's own server).

    locust -f loadtest/locustfile.py --headless --host http://127.0.0.1:8000 \
        --user-scale 0.05 --stage-seconds 30 --csv out/run --html out/run.html

`python -m loadtest.run` wraps this (starts the service, runs the peers, draws the plots).
Users: TicketUser sends the realistic mix (loadkit/mix.py) with its own user_id, no think
time by default (closed loop); SpamUser (one, abuse traffic) sends spam and duplicate
floods. Every response is validated against the contract. GradientShape runs the seeds'
100 / 500 / 1000 / 2000 concurrent users times --user-scale, --stage-seconds each, and
stops early after --max-requests. The quitting hook writes every ticket's record
(`<csv prefix>_tickets.csv`) and sets a failing exit code when P99 or the error rate break
--max-p99-ms / --max-error-rate or any response broke the contract.
"""

from __future__ import annotations

import itertools
import logging
import random
import time
from pathlib import Path

import httpx
from locust import FastHttpUser, LoadTestShape, between, events, task

from deployments.engines import EngineConfig
from loadkit.mix import TicketMix, spam_texts
from loadtest.checks import Verdict, judge_ticketserve, judge_ticketserve_batch, judge_vllm, judge_vllm_completion
from loadtest.options import add_shared, scaled_stage_users
from loadtest.report import TICKET_KINDS, Record, stages, verdict, write_records
from models.artifacts import ModelMetadata
from models.prompt import instruction_text, plain_prompt

logger = logging.getLogger("loadtest")


@events.init_command_line_parser.add_listener
def _options(parser):
    parser.add_argument(
        "--api",
        choices=["ticketserve", "vllm", "vllm-generate"],
        default="ticketserve",
        help="ticketserve: POST /v1/classify; vllm: vLLM's POST /classify; vllm-generate: vLLM's POST "
        "/v1/completions with the model replica's generate-mode prompt and its label choice",
    )
    parser.add_argument("--vllm-model", default="", help="--api vllm*: the served model name (its --model)")
    parser.add_argument(
        "--model-dir", default="", help="--api vllm-generate: the model's directory (its labels and instruction)"
    )
    add_shared(parser)
    parser.add_argument(
        "--think-time-s", type=float, default=0.0, help="pause between a user's tickets (0: closed loop)"
    )
    parser.add_argument(
        "--shared-data", choices=["yes", "no"], default="yes", help="add ../shared/data tickets to the mix when present"
    )
    parser.add_argument("--seed", type=int, default=0, help="ticket draws")


class RunState:
    """One run's shared pieces: the mix, the labels, the start time, every ticket's record."""

    def __init__(self, shared_data: bool, seed: int):
        self.mix = TicketMix.load(shared=shared_data)
        self.labels: set[str] = set()
        self.instruction = ""  # --api vllm-generate: the prompt's instruction and its label choice
        self.choices: list[str] = []
        self.started = time.monotonic()
        self.records: list[Record] = []
        self.tickets = 0  # records of TICKET_KINDS: what --max-requests bounds
        self.user_ids = itertools.count()
        self.seed = seed

    def record(self, kind: str, status: int, latency_ms: float, v: Verdict) -> None:
        self.tickets += kind in TICKET_KINDS
        self.records.append(
            Record(
                round(time.monotonic() - self.started, 3),
                kind,
                status,
                v.route,
                round(latency_ms, 2),
                v.answered,
                v.valid,
                v.reason,
            )
        )


@events.init.add_listener
def _init(environment, **_):
    opts = environment.parsed_options
    environment.run_state = RunState(opts.shared_data == "yes", opts.seed)


@events.test_start.add_listener
def _fetch_labels(environment, **_):
    state = environment.run_state
    state.started = time.monotonic()
    opts = environment.parsed_options
    if opts.api == "ticketserve":
        labels = httpx.get(f"{environment.host}/v1/labels", timeout=30).raise_for_status().json()["labels"]
        state.labels = {item["name"] for item in labels}
    elif opts.api == "vllm-generate":
        meta = ModelMetadata.load(opts.model_dir)
        state.labels, state.choices = set(meta.labels), meta.labels
        state.instruction = instruction_text(meta.instruction, meta.labels)


# The label's decode budget the model replica gives its engine in generate mode.
MAX_LABEL_TOKENS = EngineConfig.model_fields["max_label_tokens"].default


def _vllm_request(state: RunState, opts, texts: list[str]) -> tuple[str, dict]:
    batched = len(texts) > 1
    if opts.api == "vllm":
        return "/classify", {"model": opts.vllm_model, "input": texts if batched else texts[0]}
    prompts = [plain_prompt(state.instruction, t) for t in texts]
    return "/v1/completions", {
        "model": opts.vllm_model,
        "prompt": prompts if batched else prompts[0],
        "max_tokens": MAX_LABEL_TOKENS,
        "temperature": 0.0,
        "structured_outputs": {"choice": state.choices},
    }


@events.quitting.add_listener
def _judge(environment, **_):
    opts, state = environment.parsed_options, environment.run_state
    if opts.csv_prefix:
        write_records(state.records, Path(f"{opts.csv_prefix}_tickets.csv"))
    users = scaled_stage_users(opts)
    rows = stages(state.records, users, opts.stage_seconds)
    invalid = sum(not r.valid for r in state.records)
    result = verdict(rows, invalid, round(opts.judged_users * opts.user_scale), opts.max_p99_ms, opts.max_error_rate)
    for s in rows:
        logger.info(
            "stage %s, %s users: %s tickets/s, P99 %s ms, error rate %s",
            s["stage"],
            s["users"],
            s["answered_per_s"],
            s["p99_ms"],
            s["error_rate"],
        )
    # The criteria decide the exit code, not Locust's default (1 on any failed request:
    # a shed 503 is a failure of that request but within the contract).
    environment.process_exit_code = 0
    if failed := [c for c in result["checks"] if not c["passed"]]:
        logger.error("load test failed: %s", "; ".join(f"{c['check']} {c['value']} > {c['limit']}" for c in failed))
        environment.process_exit_code = 1


def _latency_ms(response, start: float) -> float:
    meta = getattr(response, "request_meta", None) or {}
    return meta.get("response_time") or (time.perf_counter() - start) * 1000


def _retry_after_s(headers) -> float:
    try:
        return max(0.0, float((headers or {}).get("Retry-After") or 0))
    except ValueError:  # an HTTP date: not something this service sends
        return 0.0


class TicketUser(FastHttpUser):
    """A customer (one user_id) sending tickets from the mix."""

    # Locust calls wait_time on the user; its base declares it as a callable attribute.
    def wait_time(self):  # ty: ignore[incompatible-method-override]
        # A client that keeps the contract waits Retry-After before it sends again.
        backoff, self.backoff_s = self.backoff_s, 0.0
        return self.environment.parsed_options.think_time_s + backoff

    def on_start(self):
        state = self.environment.run_state
        self.backoff_s = 0.0
        n = next(state.user_ids)
        self.user_id = f"load-user-{n}"
        self.rng = random.Random(state.seed * 100_003 + n)
        self.tickets = itertools.count()

    @task
    def ticket(self):
        state, opts = self.environment.run_state, self.environment.parsed_options
        drawn = [state.mix.draw(self.rng) for _ in range(opts.batch_size)]
        texts = [t.text for t in drawn]
        bodies = [
            {"text": t, "user_id": self.user_id, "ticket_id": f"{self.user_id}-{next(self.tickets)}"} for t in texts
        ]
        batched = opts.batch_size > 1
        if opts.api != "ticketserve":
            path, body = _vllm_request(state, opts, texts)
        elif batched:
            path, body = "/v1/classify/batch", {"tickets": bodies}
        else:
            path, body = "/v1/classify", bodies[0]
        start = time.perf_counter()
        with self.client.post(path, json=body, name="batch" if batched else drawn[0].kind, catch_response=True) as r:
            headers = dict(r.headers or {})
            if opts.api == "vllm":
                verdicts = judge_vllm(r.status_code, r.text, len(texts))
            elif opts.api == "vllm-generate":
                verdicts = judge_vllm_completion(r.status_code, r.text, state.labels, len(texts))
            elif batched:
                verdicts = judge_ticketserve_batch(r.status_code, headers, r.text, state.labels, len(texts))
            else:
                verdicts = [judge_ticketserve(r.status_code, headers, r.text, state.labels)]
            if all(v.answered for v in verdicts):
                r.success()
            else:
                r.failure(next(v.reason for v in verdicts if not v.answered))
                self.backoff_s = _retry_after_s(r.headers)
            # Every ticket of a batch is recorded, with the batch's latency: rates stay per ticket.
            latency_ms = _latency_ms(r, start)
            for t, v in zip(drawn, verdicts, strict=True):
                state.record(t.kind, r.status_code, latency_ms, v)


class SpamUser(FastHttpUser):
    """Abuse traffic: generated spam, and one ticket re-sent by one user until refused."""

    fixed_count = 1
    wait_time = between(0.5, 1.5)

    def on_start(self):
        self.rng = random.Random(self.environment.run_state.seed + 7)
        self.user_id = "load-spammer"

    def _send(self, kind: str, text: str, refuse: bool) -> None:
        """`refuse`: this one must be refused as spam (a 200 is spam let through)."""
        state = self.environment.run_state
        start = time.perf_counter()
        with self.client.post(
            "/v1/classify", json={"text": text, "user_id": self.user_id}, name=kind, catch_response=True
        ) as r:
            v = judge_ticketserve(r.status_code, dict(r.headers or {}), r.text, state.labels)
            if not v.valid:
                r.failure(v.reason)
            elif refuse and v.answered:
                r.failure("spam let through")
            else:
                r.success()
            state.record(kind, r.status_code, _latency_ms(r, start), v)

    @task(3)
    def spam(self):
        texts = list(spam_texts(self.rng, 1).values())
        self._send("spam", self.rng.choice(texts)[0], refuse=True)

    @task(1)
    def duplicate(self):
        # Copies past duplicates.max_repeats (5) within a minute are refused as spam.
        text = self.environment.run_state.mix.draw(self.rng).text
        for i in range(6):
            self._send("duplicate", text, refuse=i == 5)


class GradientShape(LoadTestShape):
    """The seeds' gradient, scaled; vLLM's server has no abuse handling, so no SpamUser there."""

    def tick(self):
        environment = self.runner.environment if self.runner is not None else None
        opts = environment.parsed_options if environment is not None else None
        if environment is None or opts is None:
            return None
        users = scaled_stage_users(opts)
        stage = int(self.get_run_time() // opts.stage_seconds)
        # The test-start hook's state: Locust's Environment declares no slot for it.
        state: RunState = vars(environment)["run_state"]
        if stage >= len(users) or state.tickets >= opts.max_requests:
            return None
        if opts.api != "ticketserve":
            return users[stage], users[stage], [TicketUser]
        return users[stage] + 1, users[stage] + 1, [TicketUser, SpamUser]
