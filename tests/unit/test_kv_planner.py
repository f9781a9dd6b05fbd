"""KV memory plan: sizes as vLLM computes them, layer ranges, dtypes, the seeds' figures."""

import pytest

from kv_partition.planner import GIB, LayerRange, ModelShape, budget_for, plan

# The seeds' ranges (edge 0-12, center 13-40) imply 41 layers; per layer the shape of
# DeepSeek-LLM-7B (32 KV heads of 128, bfloat16, no GQA).
DEEPSEEK_LIKE = ModelShape(layers=41, kv_heads=32, head_dim=128, dtype="bfloat16")
SEQ_TOKENS = 4096


def ranges(center_dtype: str = "auto", edge_dtype: str = "auto"):
    return [
        LayerRange.parse("edge_layers", "0-12", edge_dtype),
        LayerRange.parse("center_layers", "13-40", center_dtype),
    ]


def test_bytes_per_token_match_vllm_specs():
    assert DEEPSEEK_LIKE.bytes_per_token_per_layer() == 2 * 32 * 128 * 2
    assert DEEPSEEK_LIKE.bytes_per_token_per_layer("fp8") == 2 * 32 * 128
    llama = ModelShape.from_hf_config(
        {
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "hidden_size": 4096,
            "torch_dtype": "bfloat16",
        }
    )
    assert (llama.kv_heads, llama.head_dim, llama.bytes_per_token_per_layer()) == (8, 128, 4096)
    mla = ModelShape.from_hf_config(
        {
            "num_hidden_layers": 27,
            "num_attention_heads": 16,
            "hidden_size": 2048,
            "kv_lora_rank": 512,
            "qk_rope_head_dim": 64,
            "torch_dtype": "bfloat16",
        }
    )
    assert mla.bytes_per_token_per_layer() == (512 + 64) * 2  # one latent, no separate V


def test_fp8_center_layers_reproduce_the_seeds_batch_16_to_24():
    full = budget_for(DEEPSEEK_LIKE, ranges(), sequences=16, tokens_per_sequence=SEQ_TOKENS)
    mixed = plan(DEEPSEEK_LIKE, ranges(center_dtype="fp8"), full, SEQ_TOKENS)
    assert plan(DEEPSEEK_LIKE, ranges(), full, SEQ_TOKENS).max_batch == 16
    assert mixed.max_batch == 24
    # Memory for the same batch of 16: 65.9 % of full, not the seeds' 29/48 = 60.4 %.
    ratio = budget_for(DEEPSEEK_LIKE, ranges(center_dtype="fp8"), 16, SEQ_TOKENS) / full
    assert ratio == pytest.approx((13 * 2 + 28 * 1) / (41 * 2))
    assert all_fp8_ratio() == 0.5


def all_fp8_ratio() -> float:
    full = budget_for(DEEPSEEK_LIKE, ranges(), 16, SEQ_TOKENS)
    return budget_for(DEEPSEEK_LIKE, ranges("fp8", "fp8"), 16, SEQ_TOKENS) / full


def test_engine_args_only_for_one_dtype():
    uniform = plan(DEEPSEEK_LIKE, ranges("fp8", "fp8"), 20 * GIB, SEQ_TOKENS, block_size_tokens=16)
    args = uniform.engine_args()
    assert args["kv_cache_dtype"] == "fp8" and args["kv_cache_memory_bytes"] == 20 * GIB
    assert args["max_num_seqs"] == uniform.max_batch and args["block_size"] == 16
    assert plan(DEEPSEEK_LIKE, ranges(), GIB, 512).engine_args()["kv_cache_dtype"] == "auto"
    with pytest.raises(ValueError, match="one kv_cache_dtype"):
        plan(DEEPSEEK_LIKE, ranges("fp8"), 20 * GIB, SEQ_TOKENS).engine_args()


def test_blocks_never_exceed_the_budget():
    for budget in (GIB, 3 * GIB + 12345, 48 * GIB):
        p = plan(DEEPSEEK_LIKE, ranges("fp8"), budget, SEQ_TOKENS)
        assert p.num_blocks * p.block_size_tokens * p.bytes_per_token <= budget
        assert (p.num_blocks + 1) * p.block_size_tokens * p.bytes_per_token > budget


@pytest.mark.parametrize(
    "spans, message",
    [(("0-12", "12-40"), "exactly once"), (("0-12", "14-40"), "exactly once"), (("0-12", "13-41"), "exactly once")],
)
def test_ranges_must_cover_every_layer_once(spans, message):
    bad = [LayerRange.parse("edge_layers", spans[0]), LayerRange.parse("center_layers", spans[1])]
    with pytest.raises(ValueError, match=message):
        plan(DEEPSEEK_LIKE, bad, GIB, 128)


def test_bad_inputs_name_the_value():
    with pytest.raises(ValueError, match="'12-0'"):
        LayerRange.parse("edge_layers", "12-0")
    with pytest.raises(ValueError, match="'a-b'"):
        LayerRange.parse("edge_layers", "a-b")
    with pytest.raises(ValueError, match="'int4'.*allowed"):
        DEEPSEEK_LIKE.bytes_per_token_per_layer("int4")
