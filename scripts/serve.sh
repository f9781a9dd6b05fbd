#!/usr/bin/env bash
# Set up, start a local Ray head (dashboard on 127.0.0.1:8265, Prometheus metrics on
# :8080) and serve serve_config.yaml on http://127.0.0.1:8000 until Ctrl-C.
set -euo pipefail
unset PYTHONDONTWRITEBYTECODE  # bytecode written once, read at every start: scripts/setup.sh
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
bash scripts/setup.sh
CONFIG=${1:-serve_config.yaml}
export PATH="$ROOT/.venv/bin:$PATH"
# Replicas import the project's modules: they must be on PYTHONPATH when Ray starts.
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
# Serve's throughput mode (gRPC between deployments) and its HAProxy mode (HAProxy in place
# of the Python proxy, straight to the ingress replicas); see deployments/ray_env.py.
# Read when Ray starts: restart a running Ray (`ray stop`) to change them.
export RAY_SERVE_THROUGHPUT_OPTIMIZED="${RAY_SERVE_THROUGHPUT_OPTIMIZED:-1}"
export RAY_SERVE_ENABLE_HA_PROXY="${RAY_SERVE_ENABLE_HA_PROXY:-1}"
export RAY_SERVE_ENABLE_DIRECT_INGRESS="${RAY_SERVE_ENABLE_DIRECT_INGRESS:-1}"
if ! ray status >/dev/null 2>&1; then
  ray start --head --dashboard-host 127.0.0.1 --include-dashboard true \
    --metrics-export-port "${METRICS_PORT:-8080}" --disable-usage-stats
fi
exec serve run "$CONFIG"
