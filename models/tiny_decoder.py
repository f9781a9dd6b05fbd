"""Build a random-weight decoder for `generate` mode on a CPU.

    python -m models.tiny_decoder --out artifacts/models/tiny-decoder
    python -m models.tiny_decoder --shape qwen2-0.5b --out artifacts/models/llm-sized

Its answers carry no meaning, but it is a real vLLM decoder with a real byte-level BPE
tokenizer, so constrained decoding, prefix caching and the token-id path are tested for
real. `tiny` (2 layers, hidden 128) builds in seconds for tests; `qwen2-0.5b` has
Qwen2-0.5B's layers, widths and heads (its 151,936-token vocabulary aside: the tokenizer
here has 1,024) so a model call costs what a small instruct LLM's does: the load suite's
LLM-sized regime (`python -m loadtest.run --regime llm`).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

import yaml

from models.artifacts import ModelMetadata, tokenizer_hash
from models.build import (
    BUNDLED_DATA,
    BUNDLED_INTENTS,
    ROOT,
    calibration_split,
    edge_gates,
    held_back_texts,
    read_rows_with_lang,
)
from models.edge_classifier import train_edge_classifier

DEFAULT_OUT = ROOT / "artifacts" / "models" / "tiny-decoder"

# Qwen2-0.5B's config.json: 24 layers, hidden 896, MLP 4864, 14 query and 2 KV heads.
QWEN2_05B: dict[str, Any] = {
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "rope_theta": 1_000_000.0,
    "tie_word_embeddings": True,
}
SHAPES = ("tiny", "qwen2-0.5b")
# The edge's gates need a model accuracy to match on held-out tickets, and random weights
# have none: the regime stands in an instruct LLM as accurate as the shipped classifier
# (golden 0.953, docs/quality.md), so the edge answers as much as it would in front of it.
STAND_IN_MODEL_ACCURACY = 0.95


def build_tiny_decoder(
    out: Path,
    hidden_size: int = 128,
    layers: int = 2,
    seed: int = 0,
    max_positions: int = 1024,
    shape: str = "tiny",
    edge_classifier: bool = False,
) -> ModelMetadata:
    """`shape` tiny: a Llama of `layers` x `hidden_size`; qwen2-0.5b: Qwen2-0.5B's shape
    (`hidden_size` and `layers` unused). `edge_classifier`: train the edge pre-classifier
    on the bundled tickets beside it, as `models.build` does for the default model, so the
    graph's edge tier answers in front of this decoder too."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    if shape not in SHAPES:
        raise ValueError(f"unknown decoder shape {shape!r}; shapes are {', '.join(SHAPES)}")

    intents = yaml.safe_load(BUNDLED_INTENTS.read_text())
    labels = [item["name"] for item in intents]
    rows = read_rows_with_lang(BUNDLED_DATA, "text", "label")
    corpus = [text for text, _, _ in rows] + labels

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(
        corpus,
        trainers.BpeTrainer(
            vocab_size=1024,
            special_tokens=["<s>", "</s>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>")
    tokenizer.add_bos_token = True

    torch.manual_seed(seed)
    common: dict[str, Any] = {
        "vocab_size": len(tokenizer),
        "max_position_embeddings": max_positions,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }
    if shape == "qwen2-0.5b":
        model = Qwen2ForCausalLM(Qwen2Config(**QWEN2_05B, **common))
        version = f"random-qwen2-0.5b-shape-s{seed}"
    else:
        config = LlamaConfig(
            hidden_size=hidden_size,
            intermediate_size=hidden_size * 2,
            num_hidden_layers=layers,
            num_attention_heads=hidden_size // 64,
            num_key_value_heads=hidden_size // 64,
            tie_word_embeddings=False,
            **common,
        )
        model = LlamaForCausalLM(config)
        version = f"tiny-decoder-h{hidden_size}-l{layers}-s{seed}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    meta = ModelMetadata(
        version=version,
        labels=labels,
        tiers={item["name"]: item["tier"] for item in intents},
        tokenizer_hash=tokenizer_hash(out),
        # Untrained: no data mix to drift from, so every label weighs the same.
        label_mix=dict.fromkeys(labels, 1),
    )
    if edge_classifier:
        # Its labels are the intents; the bundled out-of-scope rows have none to learn. Trained
        # and gated on the default model's split of the same rows, as `models.build` does.
        known = set(labels)
        train_rows, val_rows = calibration_split([r for r in rows if r[1] in known], held_back_texts(BUNDLED_DATA))
        edge = train_edge_classifier([(t, lab) for t, lab, _ in train_rows], labels, version)[0]
        edge.save(out)
        simple = {name for name, tier in meta.tiers.items() if tier == "simple"}
        meta.edge_min_confidence = edge_gates(edge, val_rows, simple, [STAND_IN_MODEL_ACCURACY] * len(val_rows))
    meta.save(out)
    return meta


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--hidden-size", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--shape", choices=SHAPES, default="tiny", help="qwen2-0.5b: --hidden-size and --layers unused")
    p.add_argument("--edge-classifier", action="store_true", help="train the edge pre-classifier beside it")
    a = p.parse_args(argv)
    meta = build_tiny_decoder(a.out, a.hidden_size, a.layers, shape=a.shape, edge_classifier=a.edge_classifier)
    print(f"built {meta.version} in {a.out}")


if __name__ == "__main__":
    main()
