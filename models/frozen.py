"""Fine-tuning above frozen bottom layers. The frozen layers' output for a ticket never
changes during training, so it is computed once, before the first epoch, and every step
runs only the layers that train: their forward and backward pass, not all twelve."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def encoder_mask(model, hidden, lengths):
    """The attention mask the encoder's layers take, for `hidden` padded rows of `lengths`."""
    import torch
    from transformers.masking_utils import create_bidirectional_mask

    mask = (torch.arange(hidden.shape[1])[None, :] < lengths[:, None]).long()
    return mask, create_bidirectional_mask(config=model.config, inputs_embeds=hidden, attention_mask=mask)


def bottom_states(model, batches, layers: int) -> list[torch.Tensor]:
    """Each text's hidden states after the embeddings and the bottom `layers` layers (no
    dropout), trimmed to its own tokens; `batches` yields (indices of the texts, their
    tokenizer output) and the list is in index order."""
    import torch

    was_training = model.training
    model.eval()
    states = {}
    with torch.no_grad():
        for indices, enc in batches:
            hidden = model.bert.embeddings(input_ids=enc["input_ids"], token_type_ids=enc.get("token_type_ids"))
            lengths = enc["attention_mask"].sum(1)
            _, mask = encoder_mask(model, hidden, lengths)
            for layer in model.bert.encoder.layer[:layers]:
                hidden = layer(hidden, mask)
            states.update((i, row[:n].clone()) for i, row, n in zip(indices, hidden, lengths.tolist()))
    model.train(was_training)
    return [states[i] for i in range(len(states))]


def top_pooled(model, states: list[torch.Tensor], layers: int, pooling: str):
    """What the classifier reads (as `models.build.pooled_state` computes it from the text)
    for tickets whose bottom `layers` layers' states are `states`."""
    import torch
    from torch.nn.utils.rnn import pad_sequence

    hidden = pad_sequence(states, batch_first=True)
    lengths = torch.tensor([len(s) for s in states])
    mask, ext = encoder_mask(model, hidden, lengths)
    for layer in model.bert.encoder.layer[layers:]:
        hidden = layer(hidden, ext)
    if pooling == "cls":
        return model.bert.pooler(hidden)
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    return model.bert.pooler.activation(model.bert.pooler.dense((hidden * weights).sum(1) / weights.sum(1)))
