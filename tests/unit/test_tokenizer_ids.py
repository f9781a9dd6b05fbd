"""The tokenizer deployment's encoder (the `tokenizers` library alone) gives the ids that
transformers' tokenizer, which vLLM loads, gives: same text, same truncation."""

from __future__ import annotations

import csv

import pytest

from deployments.nodes.tokenizer import load_encoder
from models.build import BUNDLED_DATA, OOS_EVAL


def texts() -> list[str]:
    rows = []
    for path in (BUNDLED_DATA, OOS_EVAL):
        with open(path, encoding="utf-8") as f:
            rows += [row["text"] for row in csv.DictReader(f)]
    # Long enough to be truncated, mixed scripts, full-width digits, odd spacing.
    return rows + [" ".join(rows[:200]), "注文番号１２３４５  の\tcafé\u200b refund?", ""]


@pytest.fixture(scope="module")
def reference(default_model_dir):
    # Imported here, not at the top: transformers' tokenizer classes cost every pytest run's
    # collection seconds, also the runs that deselect this module.
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(default_model_dir)


@pytest.mark.parametrize("max_tokens", [16, 512])
@pytest.mark.parametrize("special", [True, False])
def test_encoder_ids_match_transformers(default_model_dir, reference, max_tokens, special):
    encoder = load_encoder(default_model_dir, max_tokens)
    sample = texts()
    want = reference(sample, add_special_tokens=special, truncation=True, max_length=max_tokens)["input_ids"]
    got = [encoder.encode(t, add_special_tokens=special).ids for t in sample]
    mismatched = [(t[:60], w, g) for t, w, g in zip(sample, want, got) if w != g]
    assert not mismatched, (len(mismatched), mismatched[:3])
    assert max(len(ids) for ids in got) == max_tokens  # the long text was truncated
