"""I.2.A03 — The 6N rule against a real count.

Builds a GPT-2-shaped transformer (the GPT-2 124M configuration: learned positions, pre-norm
blocks, attention written as explicit matrix products, GELU MLP, output head tied to the token
embedding) on meta tensors, counts the FLOPs of a forward and backward pass per token with
FlopCounterMode, and splits the count into 6 N_w (the blocks' weight matrices), the attention
products 12 L T d and the output head 6 d |V|. It then finds, by probing the count over T, the
context length past which 6N understates the transformer body by more than a tolerance, and
repeats one count on real tensors. The variation is GPT-2 XL.
"""

import itertools
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from numbook.check import fact, given, sanity, value


def row(label, *cells, w=36, cw=16):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


class Block(nn.Module):
    """A GPT-2 block: pre-norm attention (explicit Q K^T and P V products), pre-norm GELU MLP."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        x = x + self.c_proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, context, d, layers, heads):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.h = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, idx, targets=None):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        if targets is None:                        # the body alone: a scalar that adds no counted FLOPs
            return x.sum()
        logits = x @ self.wte.weight.T             # the output head, tied to the token embedding
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def build(device, **cfg):
    with torch.device(device):
        return GPT(**cfg)


def train_flops(model, T, head=True):
    """FLOPs of one forward and backward pass on one sequence of T tokens, per token."""
    dev = model.wte.weight.device
    idx = torch.randint(0, model.wte.num_embeddings, (1, T), device=dev)
    with FlopCounterMode(display=False) as fc:
        model(idx, idx if head else None).backward()
    return fc.get_total_flops() / T


def non_embedding(model):
    """Kaplan et al.'s N: every parameter except the token and position embeddings."""
    return sum(p.numel() for n, p in model.named_parameters() if not n.startswith(("wte", "wpe")))


def matrix_weights(model):
    """Weights of the blocks' linear layers: the parameters that enter a matrix product."""
    return sum(mod.weight.numel() for mod in model.h.modules() if isinstance(mod, nn.Linear))


d = fact("gpt2_hidden", "d", nudge=12)            # a width nudge must keep d divisible by the heads
L = fact("gpt2_layers", "L")
heads = fact("gpt2_heads", "heads", nudge=4)    # 16 heads still divide d
V = fact("gpt2_vocab", "V")
C = fact("gpt2_context", "T")
tol = given("tol", 0.05)

# -- the model and its parameters ---------------------------------------------------------------
model = build("meta", vocab=V, context=C, d=d, layers=L, heads=heads)
n_all = value("n_all", sum(p.numel() for p in model.parameters()))
N = value("N", non_embedding(model))
N_w = value("N_w", matrix_weights(model))
value("n_all_m", n_all / 1e6)
value("N_m", N / 1e6)
value("N_w_m", N_w / 1e6)
value("emb_m", (n_all - N) / 1e6)
value("bias_norm_share", 1 - N_w / N)
value("head_dim", d // heads)
value("mlp_width", model.h[0].c_fc.out_features)
value("block_d2", N_w / (L * d * d),
      fixed="a GPT-2 block holds 3d^2 (Q, K, V) + d^2 (output) + 4d^2 + 4d^2 (MLP) weights at any width")
print(f"GPT-2 shape: d = {d}, L = {L}, heads = {heads}, |V| = {V:,}, context {C:,} (meta tensors)")
row("parameters, all", f"{n_all:,}")
row("N: without the embeddings", f"{N:,}")
row("N_w: the blocks' weight matrices", f"{N_w:,}", "closed form", f"{12 * L * d * d:,}")
sanity("n_w_closed", N_w == 12 * L * d * d, "per block 3d^2 + d^2 (attention) + 8d^2 (MLP) = 12 d^2",
       operands=(N_w, 12 * L * d * d), relation="not")

# -- the count at the full context, split into its terms -------------------------------------------
total = value("total", train_flops(model, C))
body = value("body", train_flops(model, C, head=False))
six_n = value("six_n", 6 * N)
attn = value("attn", 12 * L * C * d)
head_ = value("head", total - body)
value("total_m", total / 1e6)
value("body_m", body / 1e6)
value("six_n_m", six_n / 1e6)
value("attn_m", attn / 1e6)
value("head_m", head_ / 1e6)
value("six_nw_m", 6 * N_w / 1e6)
err_body = value("err_body", body / six_n - 1)
err_total = value("err_total", total / six_n - 1)
value("attn_share", attn / six_n)
value("head_share", head_ / six_n)
value("t_over_6d", C / (6 * d))
print(f"\nForward + backward FLOPs per token at T = {C:,} (FlopCounterMode)")
row("term", "FLOPs/token", "share of 6N")
row("6N (the rule)", f"{six_n:,}", f"{1:.1%}")
row("counted, blocks and final norm", f"{body:,.0f}", f"{body / six_n:.1%}")
row("  6 N_w: the weight matrices", f"{6 * N_w:,}", f"{6 * N_w / six_n:.1%}")
row("  12 L T d: Q K^T and P V", f"{attn:,}", f"{attn / six_n:.1%}")
row("counted, output head", f"{head_:,.0f}", f"{head_ / six_n:.1%}")
row("counted, total", f"{total:,.0f}", f"{total / six_n:.1%}")
sanity("body_split", body == 6 * N_w + attn,
       "the body's count is exactly 6 N_w (weight products) + 12 L T d (attention products)",
       operands=(body, 6 * N_w + attn), relation=("not", "equal"))
sanity("head_closed", head_ == 6 * d * V, "the tied output head adds 6 d |V| per token", operands=(head_, 6 * d * V))
sanity("rule_understates", body > six_n and err_body > tol,
       "at GPT-2's own context 6N understates the body by more than the tolerance", operands=(body, six_n),
       relation=("falls", "larger", "smaller"))
sanity("rule_short_of_total", total > six_n and math.isclose(err_total, (6 * N_w + attn + 6 * d * V) / (6 * N) - 1),
       "against the whole count 6N falls short by (6 N_w + 12 L T d + 6 d |V|) / 6N - 1",
       operands=(err_total, (6 * N_w + attn + 6 * d * V) / (6 * N) - 1), relation="falls")
sanity("attn_share_closed", math.isclose(attn / six_n, 12 * L * C * d / (6 * N)) and attn / six_n < C / (6 * d),
       "12 L T d / 6N is a little under T / (6 d), because N is a little over 12 L d^2",
       operands=(attn / six_n, C / (6 * d)), relation=("grows", "falls"))
sanity("head_over_attention", head_ > attn,
       "for GPT-2 small the output head costs more per token than the attention products at T = context",
       operands=(head_, attn), relation="larger")

# -- where 6N stops being good: probe the counted body over T -----------------------------------
# The body's count is L times one block's (embeddings, the final norm and the sum count nothing), so
# the probe counts one block, forward and backward, with an input that needs a gradient.
def block_flops(block, T):
    """FLOPs of one block's forward and backward pass on one sequence of T tokens, per token."""
    x = torch.empty(1, T, block.c_attn.in_features, device="meta", requires_grad=True)
    with FlopCounterMode(display=False) as fc:
        block(x).sum().backward()
    return fc.get_total_flops() / T


sanity("body_is_L_blocks", L * block_flops(model.h[0], C) == body,
       "the whole body counts L times one block", operands=(L * block_flops(model.h[0], C), body))
# per token, one block costs a + b T: a = 6 N_w / L from the weights, b = 12 d from the attention
one_head = Block(d, 1).to(device="meta")
sanity("heads_do_not_count", block_flops(one_head, C) == block_flops(model.h[0], C),
       "splitting d into heads changes no count: one head of width d counts the same",
       operands=(block_flops(one_head, C), block_flops(model.h[0], C)), relation=("not", "smaller"))
T1, T2 = C // 4, C // 2
f1, f2 = block_flops(model.h[0], T1), block_flops(model.h[0], T2)
slope = (f2 - f1) / (T2 - T1)
ARCH = "a property of the architecture and of training (forward + dX + dW), not of the sizes"
value("attn_coeff", slope / d, fixed=ARCH)
value("per_weight", (f1 - slope * T1) / (N_w / L), unit="FLOP", fixed=ARCH)
cache = {}


def err_at(T):
    if T not in cache:
        cache[T] = L * block_flops(model.h[0], T) / six_n - 1
    return cache[T]


lo, hi = 1, C                                      # err_at(1) <= tol < err_at(C): bisect on real counts
while hi - lo > 1:
    mid = (lo + hi) // 2
    lo, hi = (mid, hi) if err_at(mid) <= tol else (lo, mid)
T_star = value("T_star", hi)
value("T_below", hi - 1)
value("err_at_T_star", err_at(hi))
value("err_below", err_at(hi - 1))
value("err_at_1", err_at(1))
closed = math.floor(((1 + tol) * 6 * N - 6 * N_w) / (12 * L * d)) + 1
print(f"\nError of 6N against the counted body, by context length (tolerance {tol:.0%})")
row("T", "error", w=12)
for T in sorted(cache):
    row(f"{T:,}", f"{cache[T]:+.2%}", w=12)
row("first T over the tolerance", f"{T_star:,}", "closed form", f"{closed:,}")
sanity("threshold_probe_closed", T_star == closed and err_at(hi - 1) <= tol < err_at(hi),
       "the probe on real counts agrees with T* = floor(((1 + tol) 6N - 6 N_w) / (12 L d)) + 1",
       operands=(T_star, closed), relation=("larger", "equal", "grows"))
sanity("error_grows_with_T", all(cache[a] < cache[b] for a, b in itertools.pairwise(sorted(cache))),
       "the error grows with T at every probed length", operands=(err_at(1), err_at(C)), relation="grows")

# -- the same count on real tensors -------------------------------------------------------------------
L_s = given("L_small", 2)
d_s = given("d_small", 96, nudge=12)
T_s = given("T_small", 64)
torch.manual_seed(0)
real = build("cpu", vocab=V, context=C, d=d_s, layers=L_s, heads=heads)
twin = build("meta", vocab=V, context=C, d=d_s, layers=L_s, heads=heads)
real_total = value("real_total", train_flops(real, T_s), unit="FLOP")
meta_total = train_flops(twin, T_s)
value("real_head_share", 6 * d_s * V / real_total)
print(f"\nOn real tensors: L = {L_s}, d = {d_s}, T = {T_s}")
row("per token, real", f"{real_total:,.0f}")
row("per token, meta", f"{meta_total:,.0f}")
row("6 N_w + 12 L T d + 6 d |V|", f"{6 * matrix_weights(real) + 12 * L_s * T_s * d_s + 6 * d_s * V:,}")
sanity("real_equals_meta", real_total == meta_total == 6 * matrix_weights(real) + 12 * L_s * T_s * d_s + 6 * d_s * V,
       "real and meta runs count the same, and the split holds at this size too",
       operands=(real_total, meta_total), relation="equal")

# -- variation: GPT-2 XL ----------------------------------------------------------------------------
d_xl = fact("gpt2_xl_hidden", "d_xl", nudge=25)
L_xl = fact("gpt2_xl_layers", "L_xl")
h_xl = fact("gpt2_xl_heads", "heads_xl", nudge=7)   # 32 heads still divide d_xl
xl = build("meta", vocab=V, context=C, d=d_xl, layers=L_xl, heads=h_xl)
N_xl = value("N_xl", non_embedding(xl))
Nw_xl = matrix_weights(xl)
total_xl = train_flops(xl, C)
body_xl = L_xl * block_flops(xl.h[0], C)
value("N_xl_m", N_xl / 1e6)
value("head_dim_xl", d_xl // h_xl)
value("err_body_xl", body_xl / (6 * N_xl) - 1)
value("err_total_xl", total_xl / (6 * N_xl) - 1)
T_xl = value("T_star_xl", math.floor(((1 + tol) * 6 * N_xl - 6 * Nw_xl) / (12 * L_xl * d_xl)) + 1)
print(f"\nVariation: GPT-2 XL, d = {d_xl}, L = {L_xl}")
row("N", f"{N_xl:,}")
row("error of 6N, body / total", f"{body_xl / (6 * N_xl) - 1:+.2%}", f"{total_xl / (6 * N_xl) - 1:+.2%}")
row("first T over the tolerance", f"{T_xl:,}")
sanity("xl_body_split", body_xl == 6 * Nw_xl + 12 * L_xl * C * d_xl,
       "the split holds for GPT-2 XL", operands=(body_xl, 6 * Nw_xl + 12 * L_xl * C * d_xl),
       relation=("larger", "falls"))
sanity("xl_threshold_later", T_xl > T_star and err_at(C) > body_xl / (6 * N_xl) - 1,
       "the wider model tolerates a longer context: T* grows with d", operands=(T_xl, T_star), relation="larger")
