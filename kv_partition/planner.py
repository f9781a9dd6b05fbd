"""KV-cache memory plan: from a model's shape and a memory budget to vLLM engine arguments.

Sizes follow vLLM's KV cache specs (`vllm/v1/kv_cache_interface.py`): a full-attention
layer stores K and V, `2 * kv_heads * head_dim * dtype_bytes` per token; an MLA layer
(DeepSeek-V2/V3) stores one latent of `kv_lora_rank + qk_rope_head_dim` per token. Layers
are split into named ranges (the seeds' `edge_layers: 0-12`, `center_layers: 13-40`), each
with its own KV dtype, so a plan can keep the layers that matter most in full precision.
vLLM itself takes one `kv_cache_dtype` for all layers: `engine_args` says which one a plan
needs and flags per-range mixes it cannot express.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}
GIB = 1024**3


def dtype_bytes(dtype: str) -> int:
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"KV dtype {dtype!r} unknown; allowed: {', '.join(DTYPE_BYTES)}")
    return DTYPE_BYTES[dtype]


@dataclass(frozen=True)
class ModelShape:
    """What KV size depends on; `from_hf_config` reads it from a config.json dict."""

    layers: int
    kv_heads: int
    head_dim: int
    dtype: str = "bfloat16"
    mla_latent_dim: int | None = None  # kv_lora_rank + qk_rope_head_dim for MLA models

    @classmethod
    def from_hf_config(cls, config: dict[str, Any]) -> ModelShape:
        heads = config["num_attention_heads"]
        dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
        if config.get("kv_lora_rank") is not None:
            latent = config["kv_lora_rank"] + config.get("qk_rope_head_dim", 0)
            return cls(config["num_hidden_layers"], 1, latent, dtype, mla_latent_dim=latent)
        head_dim = config.get("head_dim") or config["hidden_size"] // heads
        return cls(config["num_hidden_layers"], config.get("num_key_value_heads") or heads, head_dim, dtype)

    def bytes_per_token_per_layer(self, kv_dtype: str = "auto") -> int:
        size = dtype_bytes(self.dtype if kv_dtype == "auto" else kv_dtype)
        if self.mla_latent_dim is not None:
            return self.mla_latent_dim * size
        return 2 * self.kv_heads * self.head_dim * size


@dataclass(frozen=True)
class LayerRange:
    name: str
    first: int
    last: int  # inclusive, as the seeds write "13-40"
    kv_dtype: str = "auto"

    @classmethod
    def parse(cls, name: str, span: str, kv_dtype: str = "auto") -> LayerRange:
        try:
            first, last = (int(x) for x in span.split("-"))
        except ValueError:
            raise ValueError(f"layer range {name}={span!r}: expected 'first-last', e.g. '0-12'") from None
        if first < 0 or last < first:
            raise ValueError(f"layer range {name}={span!r}: first must be >= 0 and <= last")
        return cls(name, first, last, kv_dtype)

    @property
    def layers(self) -> int:
        return self.last - self.first + 1


def check_ranges(shape: ModelShape, ranges: list[LayerRange]) -> None:
    """Ranges must cover every layer exactly once."""
    covered = sorted(layer for r in ranges for layer in range(r.first, r.last + 1))
    if covered != list(range(shape.layers)):
        spans = ", ".join(f"{r.name}={r.first}-{r.last}" for r in ranges)
        raise ValueError(f"layer ranges {spans} must cover layers 0-{shape.layers - 1} exactly once")


@dataclass(frozen=True)
class KVPlan:
    bytes_per_token: int  # all layers, with each range's dtype
    per_range_bytes_per_token: dict[str, int]
    budget_bytes: int
    block_size_tokens: int
    num_blocks: int
    max_batch: int  # sequences of `tokens_per_sequence` that fit at once
    kv_cache_dtype: str | None  # one dtype vLLM can take; None if the ranges mix dtypes

    def engine_args(self) -> dict[str, Any]:
        """vLLM AsyncEngineArgs fields for this plan (`kv_cache_memory_bytes` pins the KV
        size instead of a gpu_memory_utilization fraction)."""
        if self.kv_cache_dtype is None:
            raise ValueError(
                f"ranges mix KV dtypes {self.per_range_bytes_per_token}: vLLM takes one kv_cache_dtype "
                "for all layers; plan with one dtype for the engine"
            )
        return {
            "kv_cache_dtype": self.kv_cache_dtype,
            "kv_cache_memory_bytes": self.budget_bytes,
            "block_size": self.block_size_tokens,
            "max_num_seqs": self.max_batch,
        }


def plan(
    shape: ModelShape,
    ranges: list[LayerRange],
    budget_bytes: int,
    tokens_per_sequence: int,
    block_size_tokens: int = 16,
) -> KVPlan:
    """How many blocks and full sequences a KV budget holds with these ranges' dtypes."""
    if budget_bytes <= 0 or tokens_per_sequence <= 0 or block_size_tokens <= 0:
        raise ValueError(
            f"budget_bytes={budget_bytes}, tokens_per_sequence={tokens_per_sequence}, "
            f"block_size_tokens={block_size_tokens}: all must be > 0"
        )
    check_ranges(shape, ranges)
    per_range = {r.name: r.layers * shape.bytes_per_token_per_layer(r.kv_dtype) for r in ranges}
    per_token = sum(per_range.values())
    blocks = budget_bytes // (per_token * block_size_tokens)
    blocks_per_sequence = -(-tokens_per_sequence // block_size_tokens)
    dtypes = {shape.dtype if r.kv_dtype == "auto" else r.kv_dtype for r in ranges}
    kv_dtype = None
    if len(dtypes) == 1:
        only = dtypes.pop()
        kv_dtype = "auto" if only == shape.dtype else only
    return KVPlan(
        per_token, per_range, budget_bytes, block_size_tokens, blocks, blocks // blocks_per_sequence, kv_dtype
    )


def budget_for(
    shape: ModelShape, ranges: list[LayerRange], sequences: int, tokens_per_sequence: int, block_size_tokens: int = 16
) -> int:
    """KV bytes `sequences` full sequences need with these ranges' dtypes (whole blocks)."""
    check_ranges(shape, ranges)
    per_token = sum(r.layers * shape.bytes_per_token_per_layer(r.kv_dtype) for r in ranges)
    blocks_per_sequence = -(-tokens_per_sequence // block_size_tokens)
    return sequences * blocks_per_sequence * block_size_tokens * per_token
