"""Options shared by the Locust file and `python -m loadtest.run` (which forwards them)."""

from __future__ import annotations

from loadtest.report import stage_users

# (flag, type, default, help)
SHARED = [
    ("--stage-users", str, "100,500,1000,2000", "the seeds' gradient of concurrent users"),
    ("--user-scale", float, 0.05, "multiplies --stage-users to fit the machine (2 cores here)"),
    ("--stage-seconds", float, 30.0, "time per stage"),
    ("--max-requests", int, 100_000, "stop after this many tickets"),
    ("--max-p99-ms", float, 2000.0, "criterion and SLO: P99 of answered tickets"),
    ("--max-error-rate", float, 0.005, "criterion: unanswered share of tickets"),
    (
        "--batch-size",
        int,
        1,
        "tickets per request: above 1, POST /v1/classify/batch (vLLM: /classify with a list input); "
        "every ticket is recorded on its own, with its batch's latency",
    ),
    ("--judged-users", int, 1000, "criteria hold for stages up to this many (unscaled) users; the seeds judge at 1000"),
]


def add_shared(parser) -> None:
    for flag, kind, default, text in SHARED:
        parser.add_argument(flag, type=kind, default=default, help=text)


def scaled_stage_users(args) -> list[int]:
    """--stage-users times --user-scale, as the shape runs them."""
    return stage_users([int(u) for u in args.stage_users.split(",")], args.user_scale)


def forward(args) -> list[str]:
    """The shared options of parsed `args` as command-line words."""
    words = []
    for flag, *_ in SHARED:
        words += [flag, str(getattr(args, flag[2:].replace("-", "_")))]
    return words
