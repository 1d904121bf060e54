"""III.1.A01 — Shapes through grouped-query attention, for Llama 3 8B.

Builds the four attention projections of one Llama 3 8B layer as real nn.Linear modules of the
real widths (fp32, no bias), runs a small batch through them and traces every shape: the split
into heads, the expand of the key/value heads for grouped-query attention (a stride-0 view, then
a copy), the (B, H, T, T) scores, the weights, the merge of the heads and o_proj. The explicit
softmax(Q K^T / sqrt(Dh)) V is compared with F.scaled_dot_product_attention, once with
enable_gqa=True on the unexpanded keys and values and once on the expanded ones.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from numbook.check import fact, given, sanity, value

torch.manual_seed(0)


def row(label, *cells, w=30, cw=22):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


d = fact("llama3_8b_hidden", "d", nudge=32)          # nudged by a head count: the heads must divide it
H = fact("llama3_8b_heads", "H", nudge=32)           # doubled: it must divide d, and H_kv must divide it
Hkv = fact("llama3_8b_kv_heads", "Hkv", nudge=8)     # doubled: it must divide H
B = given("B", 2)
T = given("T", 16)

Dh = value("Dh", d // H)
g = value("group", H // Hkv)
d_kv = value("d_kv", Hkv * Dh)
sanity("widths_divide", Dh * H == d and g * Hkv == H, "the heads divide d and the KV heads divide the heads",
       operands=(Dh * H, d))
sanity("kv_fewer", Hkv < H and g * Hkv == H, "g times fewer key/value heads than query heads", operands=(Hkv, H),
       relation="smaller")

# -- the projections: real modules of the real widths ----------------------------------------------
q_proj = nn.Linear(d, d, bias=False)
k_proj = nn.Linear(d, d_kv, bias=False)
v_proj = nn.Linear(d, d_kv, bias=False)
o_proj = nn.Linear(d, d, bias=False)
mods = {"q_proj": q_proj, "k_proj": k_proj, "v_proj": v_proj, "o_proj": o_proj}
print("The projections of one layer (nn.Linear stores its weight as (out, in))")
row("module", "weight shape", "parameters")
for name, m in mods.items():
    row(name, str(tuple(m.weight.shape)), f"{m.weight.numel():,}")
    value(f"{name}_shape", m.weight.shape)
attn_params = value("attn_params", sum(m.weight.numel() for m in mods.values()))
row("all four", "", f"{attn_params:,}")
sanity("params_closed_form", attn_params == 2 * d * d + 2 * d * d_kv,
       "the four weights hold 2 d^2 + 2 d d_kv parameters", operands=(attn_params, 2 * d * d + 2 * d * d_kv))
value("kv_over_q_params", k_proj.weight.numel() / q_proj.weight.numel())

# -- the forward pass, shape by shape ---------------------------------------------------------------
trace = []


def note(stage, op, t):
    trace.append((stage, op, tuple(t.shape), t.is_contiguous()))
    return t


with torch.no_grad():
    x = note("x", "input", torch.randn(B, T, d))
    q_lin = note("q_proj(x)", "x W_q^T", q_proj(x))
    k_lin = note("k_proj(x)", "x W_k^T", k_proj(x))
    v_lin = v_proj(x)
    q_split = note("split Q into heads", "view", q_lin.view(B, T, H, Dh))
    q = note("Q", "transpose(1, 2)", q_split.transpose(1, 2))
    k = note("K", "view, transpose", k_lin.view(B, T, Hkv, Dh).transpose(1, 2))
    v = note("V", "view, transpose", v_lin.view(B, T, Hkv, Dh).transpose(1, 2))
    k_exp = note("K expanded", "unsqueeze, expand", k[:, :, None].expand(B, Hkv, g, T, Dh))
    k_rep = note("K repeated", "reshape (copies)", k_exp.reshape(B, H, T, Dh))
    v_rep = v[:, :, None].expand(B, Hkv, g, T, Dh).reshape(B, H, T, Dh)
    scores = note("scores", "Q K^T / sqrt(Dh)", q @ k_rep.transpose(-2, -1) / math.sqrt(Dh))
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    weights = note("weights", "mask, softmax(-1)", scores.masked_fill(~causal, float("-inf")).softmax(dim=-1))
    out_h = note("per-head output", "weights V", weights @ v_rep)
    merged_t = note("heads to the back", "transpose(1, 2)", out_h.transpose(1, 2))
    merged = note("merged", "reshape (copies)", merged_t.reshape(B, T, d))
    y = note("o_proj(merged)", "merged W_o^T", o_proj(merged))

    print(f"\nShape trace (B = {B}, T = {T}, d = {d}, H = {H}, H_kv = {Hkv}, D_h = {Dh})")
    print(f"  {'stage':<20}{'operation':<20}{'shape':>22}{'contiguous':>12}")
    for stage, op, shape, contig in trace:
        print(f"  {stage:<20}{op:<20}{str(shape):>22}{str(contig):>12}")

    for name, t in (("x", x), ("q_lin", q_lin), ("k_lin", k_lin), ("q_split", q_split), ("q", q), ("k", k),
                    ("k_exp", k_exp), ("k_rep", k_rep), ("scores", scores), ("weights", weights),
                    ("out_h", out_h), ("merged_t", merged_t), ("merged", merged), ("y", y)):
        value(f"{name}_shape", t.shape)
    value("k_exp_stride", k_exp.stride())
    value("k_stride", k.stride())

    # views share storage; the two reshapes of non-contiguous tensors allocate new storage
    sanity("splits_are_views", q_split.data_ptr() == q.data_ptr() == q_lin.data_ptr()
           and k.data_ptr() == k_exp.data_ptr() == k_lin.data_ptr() and merged_t.data_ptr() == out_h.data_ptr(),
           "the head split, the transposes and the expand are views: they share their input's storage", relation="not")
    sanity("expand_stride_zero", k_exp.stride()[2] == 0 and k_exp.stride()[1] == k.stride()[1],
           "the expanded group axis has stride 0: every query head of a group reads the same key head",
           operands=(k_exp.stride()[2], 0))
    sanity("reshapes_copy", k_rep.data_ptr() != k_lin.data_ptr() and merged.data_ptr() != out_h.data_ptr()
           and k_rep.is_contiguous() and merged.is_contiguous(),
           "reshaping the expanded K and the transposed output copies them", relation="not")
    kv_elems = value("k_elems", k.numel())
    rep_elems = value("k_rep_elems", k_rep.numel())
    sanity("repeat_is_group_times", rep_elems == g * kv_elems, "the repeated K holds g times the elements of K",
           operands=(rep_elems, g * kv_elems))
    value("k_rep_over_k", rep_elems / kv_elems)

    # query head h reads key head h // g: the expand equals repeat_interleave, not repeat
    sanity("expand_is_repeat_interleave", torch.equal(k_rep, k.repeat_interleave(g, dim=1))
           and all(torch.equal(k_rep[:, h], k[:, h // g]) for h in range(H)),
           "query head h uses key head h // g", relation="equal")
    # a head is a slice of rows of the weight: head h of Q is x W_q[h Dh:(h+1) Dh]^T
    h_last = H - 1
    q_head = x @ q_proj.weight[h_last * Dh:(h_last + 1) * Dh].T
    sanity("head_is_weight_slice", torch.allclose(q[:, h_last], q_head, atol=1e-5),
           "head h of Q is x times rows h*Dh .. (h+1)*Dh of W_q", relation="equal")

    # softmax rows sum to one; masked entries are exactly zero
    row_sums = weights.sum(-1)
    sanity("rows_sum_to_one", torch.allclose(row_sums, torch.ones_like(row_sums), atol=1e-6)
           and bool((weights[..., ~causal] == 0).all()),
           "each row of weights sums to one and the causal mask zeroes the future", relation=("larger", "grows"))
    value("masked_frac", (~causal).sum().item() / causal.numel())

    # -- the second route: PyTorch's fused attention ------------------------------------------------
    sdpa_gqa = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    sdpa_rep = F.scaled_dot_product_attention(q, k_rep, v_rep, is_causal=True)
    ROUNDING = "a rounding difference between two fp32 kernels: fp32's precision sets its size, not the inputs"
    diff_gqa = value("diff_gqa", (sdpa_gqa - out_h).abs().max(), fixed=ROUNDING)
    diff_rep = value("diff_rep", (sdpa_rep - out_h).abs().max(), fixed=ROUNDING)
    value("sdpa_shape", sdpa_gqa.shape)
    sanity("sdpa_matches_explicit", diff_gqa < 1e-5 and diff_rep < 1e-5 and sdpa_gqa.shape == out_h.shape,
           "SDPA with enable_gqa and with expanded K/V both equal the explicit softmax(QK^T/sqrt(Dh))V",
           operands=(float(diff_gqa), 1e-5), relation=("largest", "differs", "equal"))
    # the wrong grouping: tile the KV heads (head h -> h % Hkv) instead of interleaving them
    k_tile, v_tile = k.repeat(1, g, 1, 1), v.repeat(1, g, 1, 1)
    wrong = F.scaled_dot_product_attention(q, k_tile, v_tile, is_causal=True)
    diff_wrong = value("diff_wrong", (wrong - out_h).abs().max())
    sanity("tiling_is_wrong", diff_wrong > 1000 * max(diff_gqa, diff_rep),
           "tiling the KV heads instead of interleaving them gives a different output",
           operands=(float(diff_wrong), float(max(diff_gqa, diff_rep))), relation=("differs", "not", "larger"))
    y_sdpa = o_proj(sdpa_gqa.transpose(1, 2).reshape(B, T, d))
    value("diff_y", (y_sdpa - y).abs().max(), fixed=ROUNDING)

print("\nSecond route: F.scaled_dot_product_attention(is_causal=True), max |difference| from explicit")
row("enable_gqa=True, K/V unexpanded", f"{diff_gqa:.1e}")
row("K/V expanded", f"{diff_rep:.1e}")
row("KV heads tiled (wrong grouping)", f"{diff_wrong:.1e}")
print(f"\nK stride {k.stride()}")
print(f"expanded view stride {k_exp.stride()}: stride 0 on the group axis")
print(f"K holds {kv_elems:,} elements; the repeated copy {rep_elems:,} ({rep_elems // kv_elems}x)")

# nn.MultiheadAttention's default layout is sequence-first, (T, B, d)
mha_default = value("mha_batch_first_default", nn.MultiheadAttention(8, 2).batch_first,
                    fixed="a default of the library")
sanity("mha_seq_first", mha_default is False, "nn.MultiheadAttention defaults to batch_first=False")

# -- Variation: Llama 2 7B, multi-head attention (H_kv = H), on the meta device --------------------
d2 = fact("llama2_7b_hidden", "d2", nudge=32)
H2 = fact("llama2_7b_heads", "H2", nudge=32)
Hkv2 = fact("llama2_7b_kv_heads", "Hkv2", nudge=-16)   # halved: it must divide H2
Dh2, g2 = d2 // H2, H2 // Hkv2
value("mha_group", g2)
mods2 = [nn.Linear(d2, o, bias=False, device="meta") for o in (d2, Hkv2 * Dh2, Hkv2 * Dh2, d2)]
x2 = torch.empty(B, T, d2, device="meta")
k2 = mods2[1](x2).view(B, T, Hkv2, Dh2).transpose(1, 2)
q2 = mods2[0](x2).view(B, T, H2, Dh2).transpose(1, 2)
value("mha_k_shape", k2.shape)
value("mha_q_shape", q2.shape)
value("mha_k_proj_shape", mods2[1].weight.shape)
p2 = value("mha_params", sum(m.weight.numel() for m in mods2))
ratio2 = value("mha_over_gqa_params", p2 / attn_params)
sanity("mha_params", p2 == 2 * d2 * d2 + 2 * d2 * Hkv2 * Dh2 and ratio2 > 1,
       "the multi-head layer's projections hold more parameters than the grouped one's",
       operands=(p2, attn_params), relation="smaller")
print(f"\nVariation: Llama 2 7B (meta): Q {tuple(q2.shape)}, K {tuple(k2.shape)}, group {g2}")
print(f"  {p2:,} projection parameters, {ratio2:.2f}x Llama 3 8B's")
