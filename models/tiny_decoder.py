"""Build a tiny random-weight Llama decoder for exercising `generate` mode on a CPU.

    python -m models.tiny_decoder --out artifacts/models/tiny-decoder

Its answers carry no meaning, but it is a real vLLM decoder with a real byte-level BPE
tokenizer, so constrained decoding, prefix caching and the token-id path are tested for
real. Build time is a few seconds.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import yaml

from models.artifacts import ModelMetadata, tokenizer_hash
from models.build import BUNDLED_DATA, BUNDLED_INTENTS, ROOT, read_rows

DEFAULT_OUT = ROOT / "artifacts" / "models" / "tiny-decoder"


def build_tiny_decoder(
    out: Path, hidden_size: int = 128, layers: int = 2, seed: int = 0, max_positions: int = 1024
) -> ModelMetadata:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    intents = yaml.safe_load(BUNDLED_INTENTS.read_text())
    labels = [item["name"] for item in intents]
    corpus = [text for text, _ in read_rows(BUNDLED_DATA, "text", "label")] + labels

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
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=hidden_size // 64,
        num_key_value_heads=hidden_size // 64,
        max_position_embeddings=max_positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    meta = ModelMetadata(
        version=f"tiny-decoder-h{hidden_size}-l{layers}-s{seed}",
        labels=labels,
        tiers={item["name"]: item["tier"] for item in intents},
        tokenizer_hash=tokenizer_hash(out),
        # Untrained: no data mix to drift from, so every label weighs the same.
        label_mix=dict.fromkeys(labels, 1),
    )
    meta.save(out)
    return meta


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--hidden-size", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    a = p.parse_args(argv)
    meta = build_tiny_decoder(a.out, a.hidden_size, a.layers)
    print(f"built {meta.version} in {a.out}")


if __name__ == "__main__":
    main()
