#!/usr/bin/env bash
# Set up, then run the tests. No option: the whole suite (unit, the graph on the fake
# engine, then the real-vLLM tier); the README's command and CI's.
#   --fast   unit + fake-engine graph tier, without the reliability drills (overload,
#            replica and node loss, isolation: minutes of load each) and the rollout tests
#            (a canary judged, a retrain built); no vLLM engine starts
# Other arguments go to pytest.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
bash scripts/setup.sh
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
# The reliability suite at CI size (scripts/reliability.sh runs it at full size).
export TICKETSERVE_FUZZ_INPUTS=${TICKETSERVE_FUZZ_INPUTS:-1000}
export TICKETSERVE_OVERLOAD_STEP_S=${TICKETSERVE_OVERLOAD_STEP_S:-6}
export TICKETSERVE_ISOLATION_PHASE_S=${TICKETSERVE_ISOLATION_PHASE_S:-4}
export TICKETSERVE_ISOLATION_ROUNDS=${TICKETSERVE_ISOLATION_ROUNDS:-1}
export TICKETSERVE_REPLICA_LOSS_RUN_S=${TICKETSERVE_REPLICA_LOSS_RUN_S:-14}
export TICKETSERVE_NODE_LOSS_RUN_S=${TICKETSERVE_NODE_LOSS_RUN_S:-25}
export TICKETSERVE_HAPROXY_TIME_DELETE=${TICKETSERVE_HAPROXY_TIME_DELETE:-0}
export TICKETSERVE_UPGRADE_TAIL_S=${TICKETSERVE_UPGRADE_TAIL_S:-5}
# One model replica, as shipped: with the surge its old and new generations answer side by side.
export TICKETSERVE_UPGRADE_MODEL_REPLICAS=${TICKETSERVE_UPGRADE_MODEL_REPLICAS:-1}
# Lint and types first: seconds, and a slip should not wait for the slow tiers.
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# Types: every room, tests/ included (its one relaxed rule: pyproject.toml), clean.
.venv/bin/ty check
if [ "${1:-}" = "--fast" ]; then
  shift
  exec .venv/bin/python -m pytest -v -rs --durations=25 tests/unit tests/graph --ignore=tests/graph/reliability -m "not rollout" "$@"
fi
exec .venv/bin/python -m pytest -v -rs --durations=40 "$@"
