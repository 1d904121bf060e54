"""A small Llama-style model and a FLOP count of its forward and backward passes (II.2.A01, II.2.A02).

The model: RMSNorm, SwiGLU, no biases, an untied output head, attention through
F.scaled_dot_product_attention with is_causal=True; every block optionally wrapped in
torch.utils.checkpoint (use_reentrant=False).
"""

import contextlib

import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.checkpoint import checkpoint
from torch.utils.flop_counter import FlopCounterMode


class Block(nn.Module):
    """One Llama layer: two RMSNorms, q/k/v/o without biases, SwiGLU MLP."""

    def __init__(self, d, H, f):
        super().__init__()
        self.H, self.Dh = H, d // H
        self.input_layernorm, self.post_attention_layernorm = nn.RMSNorm(d), nn.RMSNorm(d)
        self.q_proj, self.k_proj = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.v_proj, self.o_proj = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.gate_proj, self.up_proj = nn.Linear(d, f, bias=False), nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x):
        B, T, _ = x.shape
        h = self.input_layernorm(x)
        q, k, v = (p(h).view(B, T, self.H, self.Dh).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o_proj(a.transpose(1, 2).reshape(B, T, -1))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Checkpointed(nn.Module):
    """A block whose activations are not kept: the backward pass runs its forward again."""

    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False)


class Llama(nn.Module):
    def __init__(self, V, d, L, H, f, ckpt=False):
        super().__init__()
        self.embed_tokens = nn.Embedding(V, d)
        self.layers = nn.ModuleList(Checkpointed(Block(d, H, f)) if ckpt else Block(d, H, f) for _ in range(L))
        self.norm = nn.RMSNorm(d)
        self.lm_head = nn.Linear(d, V, bias=False)

    def forward(self, tokens):
        x = self.embed_tokens(tokens)
        for layer in self.layers:
            x = layer(x)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.flatten(0, 1), tokens.roll(-1, dims=1).flatten())


def count(model, tokens, math=False):
    """FLOPs of one forward pass and of its backward pass, separately; and the ops counted."""
    ctx = sdpa_kernel(SDPBackend.MATH) if math else contextlib.nullcontext()
    with ctx:
        with FlopCounterMode(display=False) as fc:
            loss = model(tokens)
        fwd, ops_f = fc.get_total_flops(), set(fc.get_flop_counts()["Global"])
        with FlopCounterMode(display=False) as fc:
            loss.backward()
        bwd, ops_b = fc.get_total_flops(), set(fc.get_flop_counts()["Global"])
    return fwd, bwd, {str(o) for o in ops_f | ops_b}


def matrix_weights(model):
    """Weights that enter a matrix product: every Linear's weight (q, k, v, o, the MLP, the head)."""
    return sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))


def block_weights(model):
    return sum(m.weight.numel() for m in model.layers.modules() if isinstance(m, nn.Linear))
