"""I.4.B01 — Logits of a linear classifier for a batch.

Builds the real output layer of a Llama 2 7B-sized model (nn.Linear(4096, 32000, bias=False)),
counts its parameters, runs it on a real (B, T, d) batch, checks the logits against an
einsum, and shows on meta tensors (shapes only) that the weights stay fixed while the
logits grow with the batch.
"""

import math

import torch
import torch.nn as nn

from numbook.check import fact, given, sanity, value

MB = 10**6


def row(label, *cells, w=28, cw=18):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


B = given("B", 4)
T = given("T", 512)
d = fact("llama2_7b_hidden", "d")
V = fact("llama2_7b_vocab", "V")

torch.manual_seed(0)
# the real layer, weight of shape (|V|, d); built on meta, then given storage and an N(0, 0.02^2)
# initialisation, which is cheaper than the default Kaiming-uniform pass over 131 M values
head = nn.Linear(d, V, bias=False, device="meta").to_empty(device="cpu")
nn.init.normal_(head.weight, std=0.02)
h = torch.randn(B, T, d)                           # final hidden states, one d-vector per position

# -- parameters -------------------------------------------------------------------------------
n_params = value("n_params", sum(p.numel() for p in head.parameters()))
value("weight_shape", head.weight.shape)
w_bytes = head.weight.nbytes
value("weight_fp32_mb", w_bytes / MB)
value("weight_bf16_mb", head.weight.to(torch.bfloat16).nbytes / MB)
with_bias = nn.Linear(d, V, bias=True, device="meta")
value("n_params_bias", sum(p.numel() for p in with_bias.parameters()))

print("Output layer nn.Linear(d, |V|, bias=False)")
row("weight shape", str(tuple(head.weight.shape)))
row("parameters", f"{n_params:,}")
row("fp32 MB / bf16 MB", f"{w_bytes / MB:.1f}", f"{w_bytes / 2 / MB:.1f}")
row("with a bias (meta)", f"{value('bias_extra', with_bias.bias.numel()):,} more")
sanity("params_two_routes", n_params == d * V == head.weight.numel(), "parameters = d * |V|", relation="equal")

# -- the forward pass ---------------------------------------------------------------------------
with torch.no_grad():                              # inference: no autograd graph
    logits = head(h)
value("hidden_shape", h.shape)
value("hidden_numel", h.numel())
value("logits_shape", logits.shape)
value("N", B * T)
value("logits_numel", logits.numel())
value("logits_fp32_mb", logits.nbytes / MB)
value("flops_per_mac", 2, fixed="a multiply-add is two floating-point operations, by definition")
value("flops", 2 * B * T * d * V)
print("\nForward pass")
row("hidden h", str(tuple(h.shape)), f"{h.numel():,}")
row("weight W", str(tuple(head.weight.shape)), f"{head.weight.numel():,}")
row("logits = h @ W.T", str(tuple(logits.shape)), f"{logits.numel():,}")
row("multiply-adds x 2 (FLOPs)", f"{2 * B * T * d * V:.3e}")

# independent route: an einsum over the d axis, on a sample of positions
idx = torch.tensor([0, 1, 511, 1000, 2047])
hf = h.reshape(-1, d)[idx]
ein = torch.einsum("nd,vd->nv", hf, head.weight)
diff = value("einsum_maxdiff", (ein - logits.reshape(-1, V)[idx]).abs().max().item())
row("max |logits - einsum|", f"{diff:.2e}")
sanity("matches_einsum", diff < 1e-4, "logits[n, v] = sum_k h[n, k] * W[v, k]",
       operands=(ein.sum().item(), logits.reshape(-1, V)[idx].sum().item()), relation=("largest", "equal"))

# each position's logits depend only on that position: run the first 64 positions of sequence 0 alone
with torch.no_grad():
    alone = head(h[:1, :64])
d_alone = (alone - logits[:1, :64]).abs().max().item()
ALONE = "a row depends only on its own hidden vector, so a sub-batch reproduces it bit for bit: zero at every size"
value("alone_positions", alone.shape[1], fixed="the size of the sub-batch the check runs alone")
value("alone_maxdiff", d_alone, fixed=ALONE)
row("max |head(h[:1, :64]) - logits[:1, :64]|", f"{d_alone:.2e}", w=42, cw=4)
sanity("rows_independent", d_alone < 1e-4, "a sub-batch gives the same logits for its positions",
       operands=(alone.sum().item(), logits[:1, :64].sum().item()), relation="not")
del logits, alone

# -- scaling with the batch (meta tensors: shapes and bytes, no storage) ------------------------
meta_head = nn.Linear(d, V, bias=False, device="meta")
B_MAX = 64                                         # the end of the scan


def counts(b):
    out = meta_head(torch.empty(b, T, d, device="meta"))
    return sum(q.numel() for q in meta_head.parameters()), out.numel()


# the crossover, found on the layer itself: the first B whose logits outnumber the weights
b_cross = value("B_cross", next(b for b in range(1, 10 * B_MAX) if counts(b)[1] > counts(b)[0]))
b_eq = value("B_equal", d / T)                     # the formula: N * |V| = d * |V| at B = d / T
print(f"\nScaling with B at T = {T} (meta tensors)")
row("B", "parameters", "logit elements", "logits / weights")
scan = {}
for b in sorted({1, B, b_cross - 1, b_cross, 16, B_MAX}):
    scan[b] = counts(b)
    p, n = scan[b]
    row(b, f"{p:,}", f"{n:,}", f"{n / p:.4g}")
value("ratio_B4", scan[B][1] / scan[B][0])
value("B_scan_max", B_MAX, fixed="the end of the scan the check chooses")
value("logits_B64", scan[B_MAX][1])
value("ratio_B64", scan[B_MAX][1] / scan[B_MAX][0])
sanity("params_fixed", len({p for p, _ in scan.values()}) == 1, "the parameter count is the same for every B",
       operands=(scan[1][0], scan[B_MAX][0]), relation=("larger", "grows"))
sanity("logits_linear", all(n == b * T * V for b, (_, n) in scan.items()), "logit elements = B * T * |V|",
       operands=(scan[B_MAX][1], B_MAX * T * V))
sanity("crossover", b_cross == math.floor(b_eq) + 1 and (d % T != 0 or scan[b_cross - 1][1] == scan[b_cross - 1][0]),
       "the first B whose logits outnumber the weights, found on the layer, is the first integer past d / T; "
       "where T divides d the counts are equal one sequence before", operands=(b_cross, b_eq),
       relation=("equal", "larger"))

# -- variation: Llama 3 8B head at its full context ----------------------------------------------
V3 = fact("llama3_8b_vocab", "V3")
T3 = fact("llama3_8b_context", "T3")
head3 = nn.Linear(d, V3, bias=False, device="meta")
p3 = value("n_params_v3", sum(q.numel() for q in head3.parameters()))
value("v3_fp32_mb", head3.weight.nbytes / MB)
value("v3_bf16_mb", head3.weight.to(torch.bfloat16).nbytes / MB)
out3 = head3(torch.empty(1, T3, d, device="meta"))
value("v3_logits_numel", out3.numel())
value("v3_ratio", out3.numel() / p3)
value("v3_logits_fp32_mb", out3.nbytes / MB)
print(f"\nVariation: Llama 3 8B output layer, one sequence of {T3:,} tokens (meta)")
row("parameters", f"{p3:,}")
row("weight fp32 MB / bf16 MB", f"{head3.weight.nbytes / MB:.1f}", f"{head3.weight.nbytes / 2 / MB:.1f}")
row(f"logits {tuple(out3.shape)}", f"{out3.numel():,}", f"{out3.nbytes / MB:.1f} MB")
row("logits / weights", f"{out3.numel() / p3:.4g}")
sanity("v3_ratio_is_T_over_d", out3.numel() / p3 == T3 / d, "logits / weights = B*T/d, whatever |V| is",
       operands=(out3.numel() / p3, T3 / d))
