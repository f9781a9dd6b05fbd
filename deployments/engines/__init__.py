"""The engine interface behind the model replica (the vLLM engines are
deployments/engines/vllm.py, the fake one deployments/engines/fake.py), its settings and
the choice between them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from models.artifacts import ModelMetadata
from models.ranking import RunnersUp


class EngineConfig(BaseModel):
    """How the model replica starts its vLLM engine."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["classify", "generate", "fake"] = Field(
        "classify",
        description="classify: pooling runner; generate: instruct LLM choosing a label; fake: a stand-in answering "
        "from the model's pre-classifier, no vLLM (tests of the graph around the model)",
    )
    model_dir: str = Field(
        "artifacts/models/default",
        description="model directory (relative paths are under the project root)",
    )
    dtype: Literal["auto", "half", "float16", "bfloat16", "float", "float32"] = Field(
        "float32", description="vLLM dtype; float32 on CPU, auto/bfloat16 on GPU"
    )
    gpu_memory_utilization: float = Field(
        0.2, gt=0, le=1, description="fraction of device memory (on CPU: of RAM) vLLM may use"
    )
    max_model_len_tokens: int | None = Field(None, gt=0, description="context limit; default: the model's own")
    max_num_seqs: int = Field(256, gt=0, description="vLLM scheduler's cap on sequences per step")
    enforce_eager: bool = Field(True, description="skip CUDA graph / torch.compile capture")
    enable_prefix_caching: bool = Field(True, description="reuse KV blocks of shared prompt prefixes (generate mode)")
    kv_cache_memory_bytes: int | None = Field(
        None,
        gt=0,
        description="KV cache size in bytes (kv_partition.planner computes one); default: from gpu_memory_utilization",
    )
    tenant_instructions_file: str | None = Field(
        None,
        description="generate mode: YAML mapping tenant -> text added to the instruction for that tenant's "
        "tickets (its taxonomy, rules, examples): one shared prompt prefix per tenant",
    )
    engine_metrics: bool = Field(
        True, description="export vLLM's own stats (queue, KV use, prefix-cache hits) through Ray's Prometheus export"
    )
    max_label_tokens: int = Field(16, gt=0, description="generate mode: decode budget for a label")
    cpu_worker_in_engine_process: bool = Field(
        True,
        description="CPU hosts: run vLLM's model worker inside its engine-core process "
        "(VLLM_ENABLE_V1_MULTIPROCESSING=0) instead of a third process fed through shared memory: "
        "1.6x the encode rate and 15-20 s less to start on 2 cores (docs/benchmarks.md); false: vLLM's layout",
    )
    ipc_busy_wait_ms: float | None = Field(
        2.0,
        ge=0,
        description="CPU hosts with the worker in a process of its own: how long it spins for the next engine "
        "step before it sleeps; vLLM's own 1000 ms keeps a core busy at any traffic above 1 ticket/s "
        "(deployments/engines/vllm_cpu_worker.py); null: vLLM's",
    )
    fake_latency_ms: float = Field(5.0, ge=0, description="fake mode: time each answer takes")
    fake_failure_rate: float = Field(0.0, ge=0, le=1, description="fake mode: share of calls that fail")
    fake_start_s: float = Field(
        0.0, ge=0, description="fake mode: time the engine takes to start (vLLM's: 20-50 s), for upgrade drills"
    )
    fake_gpu_profile: Literal["none", "gpu-e5-small"] = Field(
        "none",
        description="fake mode: answer at a GPU replica's cost (deployments/engines/gpu_profile.py: batched steps, its "
        "concurrency ceiling and engine start, all waits) instead of fake_latency_ms and fake_start_s; none: off",
    )
    fake_gpu_time_factor: float = Field(
        1.0,
        ge=1,
        description="fake GPU profile: its steps this many times slower (GpuProfile.scaled); 1: as documented",
    )
    fake_gpu_ceiling_divisor: int = Field(
        1,
        ge=1,
        description="fake GPU profile: its max_num_seqs and token budget this many times smaller, so two CPU cores "
        "can saturate GPU-shaped replicas; 1: as documented",
    )
    fake_gpu_start_s: float | None = Field(
        None, ge=0, description="fake GPU profile: engine start in seconds; null: the profile's (45 s)"
    )
    cpu_threads: int | None = Field(
        None,
        gt=0,
        description="CPU hosts: threads of the engine's model worker; null: the replica's num_cpus (Ray's "
        "OMP_NUM_THREADS). A cheap classifier served faster on one core of two (the HTTP path needs the other), "
        "a 0.5B decoder 25-50 % faster on both (docs/benchmarks.md#engine-threads)",
    )
    extra_niceness: int = Field(
        0,
        ge=0,
        le=19,
        description="CPU hosts: added to the niceness of the engine's processes, so the HTTP front "
        "door keeps the CPU it needs to answer (and refuse) quickly when the model saturates the cores",
    )


@dataclass(frozen=True)
class Prediction:
    label: str
    confidence: float
    # Generate mode: what the KV-cache manager learns from each request.
    prefix_key: str | None = None  # tenant whose instruction prefix the prompt started with
    prompt_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens vLLM's prefix cache served
    ttft_ms: float = 0.0
    runners_up: RunnersUp = ()  # pooling mode: the next labels by probability


@dataclass(frozen=True)
class TokenizerInfo:
    """What the tokenizer deployment must match to feed this engine token ids."""

    tokenizer_hash: str
    add_special_tokens: bool
    max_tokens: int


class TicketEngine(Protocol):
    """What the model replica needs of an engine. Engines subclass it for the defaults of
    an engine that keeps no KV cache between requests."""

    metadata: ModelMetadata

    def tokenizer_info(self) -> TokenizerInfo: ...

    async def predict(self, prompt: list[int] | str, request_id: str, tenant: str | None = None) -> Prediction:
        """`prompt` is the ticket's token ids, or its raw text when the tokenizer gave up."""
        ...

    def prefixes(self) -> dict[str, list[int]]:
        """Prefix key -> token ids of the prompt prefix it stands for (tenants with their own
        instruction); empty when the engine keeps no KV between requests."""
        return {}

    async def warm(self, prefix_ids: list[int], request_id: str) -> None:
        """Computes a prefix so later prompts starting with it hit the prefix cache."""
        return None

    async def warm_up(self, request_id: str) -> bool:
        """Pays the engine's one-time cost of a first request before the replica takes
        traffic; False where there is none to pay."""
        return False

    def batch_capacity(self) -> int:
        """Most sequences the engine can hold at once."""
        ...

    def kv_cache(self) -> tuple[int, int]:
        """(KV blocks, tokens per block) of the engine's cache; (0, 0): none kept between requests."""
        return 0, 0

    async def free_caches(self) -> None:
        return None

    async def check_health(self) -> None: ...

    def shutdown(self) -> None: ...


def start_engine(config: EngineConfig, model_dir: str) -> TicketEngine:
    """The engine class by `config.mode`, the way Ray Serve LLM picks its engine class."""
    if config.mode == "fake":
        from deployments.engines.fake import FakeTicketEngine

        return FakeTicketEngine(config, model_dir)
    from deployments.engines.vllm import VLLMClassifyEngine, VLLMGenerateEngine

    cls = VLLMClassifyEngine if config.mode == "classify" else VLLMGenerateEngine
    return cls(config, model_dir)
