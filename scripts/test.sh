#!/usr/bin/env bash
# Set up, then run the tests. No option: the suite (unit, the graph on the fake engine
# and, beside it, the real-vLLM tier) without the drills; the README's command and CI's.
#   --fast    unit + fake-engine graph tier, without the reliability suite's tests (marker
#             `reliability`: tests/graph/reliability, hostile input, a refused start) and the
#             rollout tests (a canary judged, a retrain built); no vLLM engine starts
#   --drills  the drills alone (pytest marker `drill`: overload, replica, node and KV-cache
#             replica loss, isolation, an upgrade under load, the LLM regime beside vLLM's
#             own server): minutes of load each, ~16 min in all on 2 cores. Run them when a change
#             touches the request path; scripts/reliability.sh runs them at full size on vLLM
# Other arguments go to pytest.
set -euo pipefail
unset PYTHONDONTWRITEBYTECODE  # bytecode written once, read at every start: scripts/setup.sh
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
bash scripts/setup.sh --no-build
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
# The default model builds (or is found built) beside the lint, the type check and the unit
# tests that need no model: its first minute runs on one core, its training on ~1.75. The
# lint and the type check yield to it (niceness 19); the unit tests do not, since several
# time real sleeps and, starved at niceness 19, failed (the front door's rate windows).
build_log=$(mktemp)
.venv/bin/python -m models.build >"$build_log" 2>&1 &
build=$!
trap 'kill "$build" 2>/dev/null || true' EXIT  # a failed check stops the build too
model_built() {
  if ! wait "$build"; then
    cat "$build_log"
    echo "the default model's build failed" >&2
    exit 1
  fi
  tail -n 1 "$build_log"
}
# The drills and the reliability suite at CI size (scripts/reliability.sh runs them at full size).
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
nice -n 19 .venv/bin/ruff check .
nice -n 19 .venv/bin/ruff format --check .
# Types: every room, tests/ included (its one relaxed rule: pyproject.toml), clean.
nice -n 19 .venv/bin/ty check
mode=${1:-}
case "$mode" in --fast | --drills) shift ;; esac
# With pytest arguments of the caller's own, one run after the build selects by them alone.
later=
if [ "$mode" != --drills ] && [ $# -eq 0 ]; then
  .venv/bin/python -m pytest -v -rs --durations=10 tests/unit -m model_free
  later=" and not model_free"
fi
model_built
case "$mode" in
  --fast)
    exec .venv/bin/python -m pytest -v -rs --durations=25 tests/unit tests/graph --ignore=tests/graph/reliability -m "not rollout and not reliability$later" "$@"
    ;;
  --drills)
    exec .venv/bin/python -m pytest -v -rs --durations=25 -m drill "$@"
    ;;
esac
[ $# -eq 0 ] || exec .venv/bin/python -m pytest -v -rs --durations=40 -m "not drill$later" "$@"
# The real-vLLM tier and the reliability suite's checks run beside the graph tier, on a Ray
# cluster, ports and temporary folder of their own: the graph tier waits on health checks,
# holds and polls (~40 % of its minutes idle on 2 cores) where the vLLM tier is CPU work;
# side by side 9 min here instead of 12.
side_log=$(mktemp)
TICKETSERVE_TEST_PORT=18100 TICKETSERVE_TEST_METRICS_PORT=18180 .venv/bin/python -m pytest -p no:cacheprovider \
  --basetemp="$(mktemp -d)" -v -rs --durations=25 -m "not drill$later" tests/integration tests/graph/reliability \
  >"$side_log" 2>&1 &
side=$!
trap 'kill "$side" 2>/dev/null || true' EXIT
status=0
.venv/bin/python -m pytest -v -rs --durations=25 -m "not drill and not serial$later" tests/unit tests/graph \
  --ignore=tests/graph/reliability || status=$?
side_status=0
wait "$side" || side_status=$?
echo "=== beside it: tests/integration and tests/graph/reliability ==="
cat "$side_log"
# Tests that bound a latency (marker `serial`) run alone, once both are done.
.venv/bin/python -m pytest -v -rs -m "serial and not drill$later" tests/unit tests/graph || status=$((status ? status : $?))
exit $((status ? status : side_status))
