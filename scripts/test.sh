#!/usr/bin/env bash
# Set up, then run the whole test suite (unit, then integration with real Ray + vLLM).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
bash scripts/setup.sh
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
# The reliability suite at CI size (scripts/reliability.sh runs it at full size).
export TICKETSERVE_FUZZ_INPUTS=${TICKETSERVE_FUZZ_INPUTS:-2000}
export TICKETSERVE_OVERLOAD_STEP_S=${TICKETSERVE_OVERLOAD_STEP_S:-6}
export TICKETSERVE_ISOLATION_PHASE_S=${TICKETSERVE_ISOLATION_PHASE_S:-8}
exec .venv/bin/python -m pytest -v -rs "$@"
