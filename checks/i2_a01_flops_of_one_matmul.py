"""I.2.A01 — FLOPs of one matrix product.

Counts, with torch.utils.flop_counter.FlopCounterMode, the FLOPs of Llama 3 8B's q_proj and
k_proj on a batch of tokens (meta tensors: shapes only, no storage), compares them with the
closed form 2 m k n, shows that the count ignores the bias add, counts a batched product (the
attention scores, with `@` on four-axis tensors and with torch.bmm), and checks on small real
tensors that the meta count is the count of a real run.
"""

import torch
import torch.nn as nn
from torch.utils.flop_counter import FlopCounterMode

from numbook.check import fact, given, sanity, value


def row(label, *cells, w=34, cw=16):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


def count(fn):
    """Run fn under FlopCounterMode; return (result, total FLOPs, {op name: FLOPs})."""
    with FlopCounterMode(display=False) as fc:
        out = fn()
    ops = {str(op).split(".")[-1]: n for op, n in fc.get_flop_counts()["Global"].items()}
    return out, fc.get_total_flops(), ops


d = fact("llama3_8b_hidden", "d")
heads = fact("llama3_8b_heads", "heads")
kv_heads = fact("llama3_8b_kv_heads", "kv_heads")
B = given("B", 4)
T = given("T", 512)
BF16 = torch.bfloat16

# -- the layer and the batch ---------------------------------------------------------------------
head_dim = value("head_dim", d // heads)           # as Hugging Face's LlamaConfig derives it
n_q = value("n_q", heads * head_dim)
n_kv = value("n_kv", kv_heads * head_dim)
m = value("m", B * T)                              # tokens: every token is one row of the product
q_proj = nn.Linear(d, n_q, bias=False, device="meta", dtype=BF16)
k_proj = nn.Linear(d, n_kv, bias=False, device="meta", dtype=BF16)
x = torch.empty(B, T, d, device="meta", dtype=BF16)

q, q_flops, q_ops = count(lambda: q_proj(x))
k, k_flops, _ = count(lambda: k_proj(x))
value("x_shape", x.shape)
value("wq_shape", q_proj.weight.shape)
value("wk_shape", k_proj.weight.shape)
value("q_shape", q.shape)
value("k_shape", k.shape)
value("q_flops", q_flops)
value("k_flops", k_flops)
value("q_gflops", q_flops / 1e9)
value("k_gflops", k_flops / 1e9)
q_macs = value("q_macs", m * d * n_q)              # multiply-adds: one per (row, inner, column)
value("q_gmacs", q_macs / 1e9)
closed_q = 2 * m * d * n_q
value("q_closed", closed_q)
value("qk_ratio", q_flops / k_flops)
value("q_params", q_proj.weight.numel())
value("q_flops_per_token", q_flops / m)
value("flops_per_mac", q_flops / q_macs,
      fixed="FlopCounterMode counts a multiply-add as two FLOPs, at every shape: a convention of the counter")

print(f"Llama 3 8B projections on B x T = {B} x {T} tokens (meta tensors, bf16)")
row("layer", "weight (out, in)", "output", "FLOPs", "closed form", w=8, cw=18)
row("q_proj", str(tuple(q_proj.weight.shape)), str(tuple(q.shape)), f"{q_flops:,}", f"{closed_q:,}", w=8, cw=18)
row("k_proj", str(tuple(k_proj.weight.shape)), str(tuple(k.shape)), f"{k_flops:,}", f"{2 * m * d * n_kv:,}",
    w=8, cw=18)
row("q_proj ops the counter saw", ", ".join(f"{op}: {n:,}" for op, n in q_ops.items()), cw=0)
row("q_proj FLOPs / multiply-adds", f"{q_flops / q_macs:g}")
row("q_proj FLOPs per token / weights", f"{q_flops / m / q_proj.weight.numel():g}")

sanity("q_closed_form", q_flops == closed_q, "FlopCounterMode's count of q_proj equals 2 m k n",
       operands=(q_flops, closed_q), relation="equal")
sanity("k_closed_form", k_flops == 2 * m * d * n_kv, "FlopCounterMode's count of k_proj equals 2 m k n",
       operands=(k_flops, 2 * m * d * n_kv), relation=("differs", "equal"))
sanity("shape_rule", tuple(q.shape) == (B, T, n_q) and tuple(k.shape) == (B, T, n_kv),
       "(m, k) @ (k, n) -> (m, n): the inner axis d is summed away, the outer axes survive",
       operands=(tuple(q.shape), (B, T, n_q)))
sanity("qk_ratio_is_heads", q_flops * kv_heads == k_flops * heads,
       "q_proj costs heads / kv_heads times k_proj: n is the only axis that differs",
       operands=(q_flops / k_flops, heads / kv_heads), relation="smaller")
sanity("two_flops_per_weight", q_flops == 2 * m * q_proj.weight.numel(),
       "per token, a linear layer costs two FLOPs per weight", operands=(q_flops / m, 2 * q_proj.weight.numel()))
sanity("two_per_mac", q_flops == 2 * q_macs and q_ops == {"mm": q_flops},
       "the counter counts one mm and two FLOPs per multiply-add", operands=(q_flops, q_macs))

# -- the bias is not counted ---------------------------------------------------------------------
q_bias = nn.Linear(d, n_q, bias=True, device="meta", dtype=BF16)
_, qb_flops, qb_ops = count(lambda: q_bias(x))
bias_adds = value("bias_adds", m * n_q)            # one add per output element
value("qb_flops", qb_flops)
value("bias_share", bias_adds / qb_flops)
value("one_over_2d", 1 / (2 * d))
row("q_proj with bias=True", ", ".join(f"{op}: {n:,}" for op, n in qb_ops.items()), cw=0)
row("bias adds it leaves out", f"{bias_adds:,}", f"{bias_adds / qb_flops:.4%}")
sanity("bias_not_counted", qb_flops == q_flops and set(qb_ops) == {"addmm"},
       "with a bias the op is addmm, and its count is the same 2 m k n", operands=(qb_flops, q_flops), relation="not")
sanity("bias_share_closed", bias_adds * 2 * d == qb_flops,
       "the bias adds are m n, a share 1 / (2 d) of 2 m d n", operands=(bias_adds / qb_flops, 1 / (2 * d)),
       relation="not")

# -- a batched product: the attention scores -----------------------------------------------------
qh = torch.empty(B, heads, T, head_dim, device="meta", dtype=BF16)
kh = torch.empty(B, heads, T, head_dim, device="meta", dtype=BF16)   # K after repeat_kv: one per query head
s, s_flops, s_ops = count(lambda: qh @ kh.transpose(-2, -1))
s2, s2_flops, s2_ops = count(lambda: torch.bmm(qh.reshape(B * heads, T, head_dim),
                                               kh.reshape(B * heads, T, head_dim).transpose(1, 2)))
closed_s = 2 * B * heads * T * T * head_dim
value("qh_shape", qh.shape)
value("scores_shape", s.shape)
value("bmm_shape", s2.shape)
value("scores_flops", s_flops)
value("scores_gflops", s_flops / 1e9)
value("n_products", B * heads)
value("scores_vs_q", s_flops / q_flops)
print("\nAttention scores Q K^T, one (T, T) product per sequence and head")
row("route", "output", "FLOPs", "op", w=24, cw=20)
row("Q @ K.transpose(-2, -1)", str(tuple(s.shape)), f"{s_flops:,}", ",".join(s_ops), w=24, cw=20)
row("torch.bmm", str(tuple(s2.shape)), f"{s2_flops:,}", ",".join(s2_ops), w=24, cw=20)
row("closed form", "", f"{closed_s:,}", w=24, cw=20)
sanity("batched_closed_form", s_flops == s2_flops == closed_s and set(s_ops) == set(s2_ops) == {"bmm"},
       "`@` with leading axes and torch.bmm both count 2 * (B heads) * T * head_dim * T",
       operands=(s_flops, closed_s), relation="equal")
sanity("scores_vs_q_closed", s_flops * d == q_flops * T,
       "the scores cost T / d times q_proj: 2 m T d against 2 m d d", operands=(s_flops / q_flops, T / d),
       relation="grows")

# -- meta tensors count what a real run counts ----------------------------------------------------
m_small = given("m_small", 16)
real = nn.Linear(d, n_q, bias=False)
with torch.no_grad():
    _, real_flops, _ = count(lambda: real(torch.randn(m_small, d)))
_, meta_flops, _ = count(lambda: q_proj(torch.empty(m_small, d, device="meta", dtype=BF16)))
value("real_small_flops", real_flops)
print(f"\nq_proj on {m_small} tokens")
row("real fp32 tensors", f"{real_flops:,}")
row("meta bf16 tensors", f"{meta_flops:,}")
sanity("meta_equals_real", real_flops == meta_flops == 2 * m_small * d * n_q,
       "the count depends on the shapes only: a real fp32 run and a meta bf16 run agree",
       operands=(real_flops, meta_flops))

# -- variation: Llama 3 70B ---------------------------------------------------------------------
d70 = fact("llama3_70b_hidden", "d70")
h70 = fact("llama3_70b_heads", "heads70")
kv70 = fact("llama3_70b_kv_heads", "kv_heads70")
hd70 = d70 // h70
x70 = torch.empty(B, T, d70, device="meta", dtype=BF16)
_, q70, _ = count(lambda: nn.Linear(d70, h70 * hd70, bias=False, device="meta", dtype=BF16)(x70))
_, k70, _ = count(lambda: nn.Linear(d70, kv70 * hd70, bias=False, device="meta", dtype=BF16)(x70))
value("q70_gflops", q70 / 1e9)
value("k70_gflops", k70 / 1e9)
value("q70_over_q8", q70 / q_flops)
value("qk70_ratio", q70 / k70)
print(f"\nVariation: Llama 3 70B, d = {d70:,}, {h70} heads, {kv70} KV heads")
row("q_proj GFLOPs", f"{q70 / 1e9:,.2f}", f"{q70 / q_flops:.1f}x 8B")
row("k_proj GFLOPs", f"{k70 / 1e9:,.2f}", f"q/k {q70 / k70:g}")
sanity("q70_grows_as_d_squared", q70 * d * n_q == q_flops * d70 * h70 * hd70,
       "at a fixed batch the q_proj count scales with d * n_q", operands=(q70 / q_flops, d70 * h70 * hd70 / (d * n_q)))
