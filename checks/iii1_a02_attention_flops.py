"""III.1.A02 — FLOPs of attention against the projections and the MLP, and the crossover length.

Builds one Llama 3 8B layer on the meta device (real nn.Linear modules for Q, K, V, O and the
three-matrix SwiGLU MLP; the two attention products as named parameter-free modules), counts its
FLOPs per module with torch.utils.flop_counter.FlopCounterMode at the model's context and compares
them with the closed forms. Then finds, by bisection over T with the counter, the sequence length
where the attention products reach the projections and where they reach the rest of the layer,
and compares both with the closed forms. The useful FLOPs of causal attention come from
servebench's prefill count; the counter sees the full square whether or not a mask is applied.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from numbook.check import fact, given, sanity, value
from servebench.config import ModelConfig
from servebench.memory import matmul_params
from servebench.roofline import Chunk, step_cost


def row(label, *cells, w=34, cw=16):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


d = fact("llama3_8b_hidden", "d", nudge=32)          # nudged by a head count: the heads must divide it
H = fact("llama3_8b_heads", "H", nudge=32)           # doubled: it must divide d, and H_kv must divide it
Hkv = fact("llama3_8b_kv_heads", "Hkv", nudge=8)     # doubled: it must divide H
d_ff = fact("llama3_8b_intermediate", "d_ff")
T_ctx = fact("llama3_8b_context", "T")
B = given("B", 1)


class Product(nn.Module):
    """A parameter-free module around one matmul, so that the counter names the product."""

    def forward(self, a, b):
        return a @ b


class Layer(nn.Module):
    """One Llama-style decoder layer on the meta device (norms and rotary positions left out: no matmuls)."""

    def __init__(self, d, H, Hkv, d_ff, causal=False):
        super().__init__()
        self.d, self.H, self.Hkv, self.Dh, self.causal = d, H, Hkv, d // H, causal
        lin = lambda i, o: nn.Linear(i, o, bias=False, device="meta")  # noqa: E731
        d_kv = Hkv * self.Dh
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = lin(d, d), lin(d, d_kv), lin(d, d_kv), lin(d, d)
        self.gate_proj, self.up_proj, self.down_proj = lin(d, d_ff), lin(d, d_ff), lin(d_ff, d)
        self.scores, self.values = Product(), Product()

    def forward(self, x):
        B, T, _ = x.shape
        g = self.H // self.Hkv
        q = self.q_proj(x).view(B, T, self.H, self.Dh).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.Hkv, self.Dh).transpose(1, 2).repeat_interleave(g, dim=1)
        v = self.v_proj(x).view(B, T, self.Hkv, self.Dh).transpose(1, 2).repeat_interleave(g, dim=1)
        s = self.scores(q, k.transpose(-2, -1)) / math.sqrt(self.Dh)
        if self.causal:
            s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool, device=x.device).tril(), float("-inf"))
        o = self.values(s.softmax(dim=-1), v)
        h = x + self.o_proj(o.transpose(1, 2).reshape(B, T, self.d))
        return h + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


PROJ = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP = ("gate_proj", "up_proj", "down_proj")


def count(layer, T, batch=B):
    """FLOPs of one forward of the layer over (batch, T, d), per module, from FlopCounterMode."""
    with FlopCounterMode(display=False) as fc:
        layer(torch.empty(batch, T, layer.d, device="meta"))
    per = {k.split(".")[-1]: sum(v.values()) for k, v in fc.get_flop_counts().items()}
    return {"proj": sum(per[m] for m in PROJ), "scores": per["scores"], "values": per["values"],
            "attn": per["scores"] + per["values"], "mlp": sum(per[m] for m in MLP),
            "total": fc.get_total_flops(), "per": per}


def first_T(pred, lo=1, hi=1 << 20):
    """Smallest T in [lo, hi] for which pred(T) holds, by bisection (pred is monotone in T)."""
    assert pred(hi) and not pred(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if pred(mid) else (mid, hi)
    return hi


Dh = value("Dh", d // H)
d_kv = value("d_kv", Hkv * Dh)
layer = Layer(d, H, Hkv, d_ff)

# -- Step 1: the counter at the model's context, against the closed forms ---------------------------
c = count(layer, T_ctx)
closed = {
    "proj": 2 * B * T_ctx * d * (d + 2 * d_kv + d),
    "scores": 2 * B * H * T_ctx**2 * Dh,
    "values": 2 * B * H * T_ctx**2 * Dh,
    "mlp": 2 * B * T_ctx * 3 * d * d_ff,
}
print(f"FLOPs of one layer of Llama 3 8B, B = {B}, T = {T_ctx:,} (FlopCounterMode on meta tensors)")
row("part", "counted", "closed form")
for m in PROJ + ("scores", "values") + MLP:
    row(f"  {m}", f"{c['per'][m]:.4e}", "")
for k in ("proj", "scores", "values", "mlp"):
    row(k, f"{c[k]:.4e}", f"{closed[k]:.4e}")
    value(f"{k}_flops", c[k])
    value(f"{k}_closed", closed[k])
row("whole layer", f"{c['total']:.4e}")
value("attn_flops", c["attn"])
value("layer_flops", c["total"])
sanity("counter_matches_closed_forms", all(c[k] == closed[k] for k in closed),
       "FlopCounterMode's count of every part equals its closed form", operands=(c["attn"], closed["scores"] * 2),
       relation="equal")
sanity("layer_is_sum", c["total"] == c["proj"] + c["attn"] + c["mlp"],
       "the layer's matmuls are the projections, the two attention products and the MLP: nothing else is counted",
       operands=(c["total"], c["proj"] + c["attn"] + c["mlp"]), relation="not")
attn_over_proj = value("attn_over_proj", c["attn"] / c["proj"])
attn_share = value("attn_share", c["attn"] / c["total"])
value("mlp_share", c["mlp"] / c["total"])
value("proj_share", c["proj"] / c["total"])
sanity("mlp_largest", c["mlp"] > c["attn"] > c["proj"],
       "at the context the MLP does the most FLOPs, then attention, then the projections",
       operands=(c["mlp"], c["attn"]))
sanity("ratio_closed_form", math.isclose(attn_over_proj, T_ctx / (d + d_kv)),
       "attention / projections = T / (d + d_kv)", operands=(attn_over_proj, T_ctx / (d + d_kv)), relation="equal")

# -- Step 2: the causal mask ----------------------------------------------------------------------------
c_causal = count(Layer(d, H, Hkv, d_ff, causal=True), T_ctx)
sanity("mask_counts_full_square", c_causal["attn"] == c["attn"],
       "a masked explicit attention still computes, and the counter still counts, the full T x T products",
       operands=(c_causal["attn"], c["attn"]))
# servebench's prefill count: token i attends i positions. Its attention part is what remains after the
# matmuls of a token (2 * matmul_params without the LM head) times T. vocab=1: the head is excluded anyway.
cfg = ModelConfig(layers=1, d_model=d, heads=H, kv_heads=Hkv, vocab=1, max_seq=T_ctx)


def causal_useful(T, batch=B):
    matmuls = 2 * (matmul_params(cfg) - cfg.d_model * cfg.vocab) * T
    return batch * (step_cost(cfg, "bf16", chunks=[Chunk(0, T, last=False)]).flops - matmuls)


useful = value("causal_attn_flops", causal_useful(T_ctx))
sanity("useful_closed_form", useful == 2 * B * d * T_ctx * (T_ctx + 1),
       "servebench's causal attention FLOPs equal 4 d T(T+1)/2 per sequence",
       operands=(useful, 2 * B * d * T_ctx * (T_ctx + 1)), relation="equal")
useful_frac = value("causal_useful_frac", useful / c["attn"])
sanity("useful_about_half", math.isclose(useful_frac, (T_ctx + 1) / (2 * T_ctx)) and useful_frac > 0.5,
       "the useful share of the full square is (T + 1) / 2T, just over half", operands=(useful_frac, 0.5))
value("causal_share", useful / (c["proj"] + useful + c["mlp"]))
value("causal_over_proj", useful / c["proj"])
print(f"\nCausal mask: counted {c_causal['attn']:.4e} (the full square)")
print(f"  useful {useful:.4e} (servebench), {useful_frac:.4%} of it")

# -- Step 3: where attention overtakes, by bisection over T with the counter ----------------------------
T_proj = value("T_cross_proj", first_T(lambda T: (k := count(layer, T))["attn"] >= k["proj"]))
T_layer = value("T_cross_layer", first_T(lambda T: (k := count(layer, T))["attn"] >= k["proj"] + k["mlp"]))
T_causal = value("T_cross_causal", first_T(lambda T: causal_useful(T) >= count(layer, T)["proj"]))
closed_proj = d + d_kv
closed_layer = math.ceil(d + d_kv + 1.5 * d_ff)
closed_causal = 2 * (d + d_kv) - 1
print("\nSmallest T at which the attention products reach ... (bisection with the counter)")
row("", "found", "closed form")
row("the projections", f"{T_proj:,}", f"{closed_proj:,}")
row("projections + MLP", f"{T_layer:,}", f"{closed_layer:,}")
row("the projections, causal (useful)", f"{T_causal:,}", f"{closed_causal:,}")
sanity("cross_proj", T_proj == closed_proj, "the bisection finds T = d + d_kv", operands=(T_proj, closed_proj),
       relation="equal")
sanity("cross_layer", T_layer == closed_layer, "the bisection finds T = d + d_kv + 3 d_ff / 2",
       operands=(T_layer, closed_layer))
sanity("cross_causal", T_causal == closed_causal, "the bisection finds T = 2 (d + d_kv) - 1 for causal attention",
       operands=(T_causal, closed_causal))
sanity("layer_cross_beyond_context", T_layer > T_ctx and T_causal > T_ctx,
       "at the model's context, attention does not reach the rest of the layer, and causal attention "
       "does not reach the projections", operands=(T_layer, T_ctx), relation="not")
sanity("proj_cross_within_context", T_proj <= T_ctx, "full attention passes the projections within the context",
       operands=(T_proj, T_ctx))
value("T_cross_layer_over_ctx", T_layer / T_ctx)

# the scan the bisection replaces: T from a sixteenth of the context to eight times it
print(f"\nScan over T (B = {B})")
row("T", "attn / proj", "attn share", "causal share")
scan_T = [T_ctx * 2**k // 16 for k in range(8)]
shares = []
for T in scan_T:
    k = count(layer, T)
    u = causal_useful(T)
    shares.append(k["attn"] / k["total"])
    row(f"{T:,}", f"{k['attn'] / k['proj']:.3f}", f"{k['attn'] / k['total']:.1%}",
        f"{u / (k['proj'] + u + k['mlp']):.1%}")
sanity("share_rises", all(b > a for a, b in zip(shares, shares[1:], strict=False)),
       "the attention share rises with every doubling of T", operands=(shares[0], shares[-1]),
       relation=("smaller", "grows"))
value("share_at_8x", shares[-1])
value("T_8x", scan_T[-1])

# -- training: forward and backward, counted on meta tensors that require gradients -----------------------
x_req = torch.empty(B, T_ctx, d, device="meta", requires_grad=True)
with FlopCounterMode(display=False) as fc:
    layer(x_req).sum().backward()
train_total = fc.get_total_flops()
qa = torch.empty(B, H, T_ctx, Dh, device="meta", requires_grad=True)
ka = torch.empty(B, H, T_ctx, Dh, device="meta", requires_grad=True)
va = torch.empty(B, H, T_ctx, Dh, device="meta", requires_grad=True)
with FlopCounterMode(display=False) as fc:
    (layer.values(layer.scores(qa, ka.transpose(-2, -1)).softmax(-1), va)).sum().backward()
train_attn = fc.get_total_flops()
BWD = "a matmul's backward does two matmuls of its forward's size, at any size: three in all"
train_over_fwd = value("train_over_fwd", train_total / c["total"], fixed=BWD)
value("train_attn_over_fwd", train_attn / c["attn"], fixed=BWD)
sanity("backward_twice_forward", train_total == 3 * c["total"] and train_attn == 3 * c["attn"],
       "forward and backward count three times the forward, for the layer and for attention alone, "
       "so the ratio of attention to the rest is unchanged", operands=(train_total, 3 * c["total"]))
print(f"\nForward and backward: {train_total:.4e} FLOPs, {train_over_fwd:.2f}x the forward "
      f"(attention alone: {train_attn / c['attn']:.2f}x)")

# -- the second route: scaled_dot_product_attention counted on meta; and what the counter misses on CPU --
q = torch.empty(B, H, T_ctx, Dh, device="meta")
kv = torch.empty(B, Hkv, T_ctx, Dh, device="meta")
with FlopCounterMode(display=False) as fc:
    F.scaled_dot_product_attention(q, kv, kv, is_causal=True, enable_gqa=True)
sdpa_meta = value("sdpa_meta_flops", fc.get_total_flops())
sanity("sdpa_meta_full_square", sdpa_meta == c["attn"],
       "on meta tensors SDPA is counted as the full QK^T and AV products, causal or not",
       operands=(sdpa_meta, c["attn"]), relation=("not", "falls"))
T_small = 64   # a few real rows are enough to see what the counter records
small = [torch.randn(1, H, T_small, Dh), torch.randn(1, Hkv, T_small, Dh)]
with FlopCounterMode(display=False) as fc:
    F.scaled_dot_product_attention(small[0], small[1], small[1], is_causal=True, enable_gqa=True)
sdpa_cpu = fc.get_total_flops()
with FlopCounterMode(display=False) as fc:
    kr = small[1].repeat_interleave(H // Hkv, dim=1)
    (small[0] @ kr.transpose(-2, -1)).softmax(-1) @ kr
explicit_cpu = fc.get_total_flops()
print(f"\nSDPA counted on meta: {sdpa_meta:.4e}")
print(f"  on real CPU tensors (T = {T_small}): {sdpa_cpu} (the explicit products: {explicit_cpu:,})")
sanity("counter_misses_cpu_sdpa", sdpa_cpu == 0 and explicit_cpu > 0,
       "FlopCounterMode has no formula for the fused CPU kernel: it counts nothing", operands=(sdpa_cpu, explicit_cpu),
       relation="not")

# -- Variation: Llama 2 7B (multi-head attention) -----------------------------------------------------
d2 = fact("llama2_7b_hidden", "d2", nudge=32)
H2 = fact("llama2_7b_heads", "H2", nudge=32)
Hkv2 = fact("llama2_7b_kv_heads", "Hkv2", nudge=-16)   # halved: it must divide H2
d_ff2 = fact("llama2_7b_intermediate", "d_ff2")
ctx2 = fact("llama2_7b_max_positions", "T2")
layer2 = Layer(d2, H2, Hkv2, d_ff2)
d_kv2 = Hkv2 * (d2 // H2)
T2_proj = value("T2_cross_proj", first_T(lambda T: (k := count(layer2, T))["attn"] >= k["proj"]))
T2_layer = value("T2_cross_layer", first_T(lambda T: (k := count(layer2, T))["attn"] >= k["proj"] + k["mlp"]))
c2 = count(layer2, ctx2)
value("v2_attn_over_proj", c2["attn"] / c2["proj"])
value("v2_attn_share", c2["attn"] / c2["total"])
value("T2_over_ctx", T2_proj / ctx2)
kv_ratio = value("kv_width_ratio", d_kv2 / d_kv)
sanity("v2_cross", T2_proj == d2 + d_kv2 and T2_layer == math.ceil(d2 + d_kv2 + 1.5 * d_ff2) and T2_proj > ctx2,
       "for Llama 2 7B attention reaches the projections at T = d + d_kv, beyond its context",
       operands=(T2_proj, ctx2), relation="not")
sanity("v2_wider_kv_later", d_kv2 > d_kv and T2_proj - T_proj == (d2 + d_kv2) - (d + d_kv),
       "Llama 2 7B's wider K and V projections move the crossover out by the difference in d + d_kv",
       operands=(T2_proj, T_proj))
print("\nVariation: Llama 2 7B")
row("attention reaches the projections", f"{T2_proj:,}")
row("attention reaches the whole layer", f"{T2_layer:,}")
row(f"attention / projections at {ctx2:,}", f"{c2['attn'] / c2['proj']:.3f}")
