"""GPT-2 from Hugging Face transformers, built from its config (no weights downloaded): token ids in, next-token
logits out. Tied embeddings, LayerNorm, attention (PyTorch's SDPA), dropout. ``pip install transformers``.

options (GPT-2's 124M by default): layers, width, heads, vocab, positions, dropout.
"""

from torch import nn


class Logits(nn.Module):
    """A transformers model's forward returns an output object: the loss takes its logits."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, tokens):
        return self.model(input_ids=tokens).logits


def build(params):
    from transformers import GPT2Config, GPT2LMHeadModel

    o = params["options"]
    dropout = o.get("dropout", 0.1)
    config = GPT2Config(
        vocab_size=o.get("vocab", 50257),
        n_positions=o.get("positions", 1024),
        n_embd=o.get("width", 768),
        n_layer=o.get("layers", 12),
        n_head=o.get("heads", 12),
        resid_pdrop=dropout,
        embd_pdrop=dropout,
        attn_pdrop=dropout,
        use_cache=False,
    )
    return Logits(GPT2LMHeadModel(config))


def loss(logits, targets):
    """Cross-entropy of every position's next token (logits: batch x tokens x vocab)."""
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
