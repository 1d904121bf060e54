"""I.4.B06 — Soft targets and label smoothing.

Builds the real smoothed target distribution q of shape (N, |V|), computes the loss as the
contraction -sum_v q_v log p_v, and checks F.cross_entropy(label_smoothing=eps) against it, against
F.cross_entropy with probability targets and against the (1-eps)/eps decomposition. Measures the
bytes torch's CPU allocator hands out during each call with torch.profiler (profile_memory=True),
and finds the floor of the smoothed loss, the entropy of q.
"""

import math

import torch
import torch.nn.functional as F
from _memory import peak_alloc

from numbook.check import given, sanity, value

MB = 10**6


def row(label, *cells, w=44, cw=14):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


B = given("B", 4)
T = given("T", 512)
V = given("V", 32_000)
eps = given("eps", 0.1)
N = value("N", B * T)

g = torch.Generator().manual_seed(0)
z = torch.randn(N, V, generator=g)
y = torch.randint(0, V, (N,), generator=g)

# -- the soft target ------------------------------------------------------------------------------
q = torch.full((N, V), eps / V)
q[torch.arange(N), y] += 1 - eps
value("q_shape", q.shape)
value("q_mb", q.nbytes / MB)
value("q_bf16_mb", q.to(torch.bfloat16).nbytes / MB)
value("y_bytes", y.nbytes)
value("q_on", q[0, y[0]].item())
value("q_off", eps / V)
value("q_on_exact", 1 - eps + eps / V)
print("Soft target q = (1 - eps) onehot(y) + eps/|V|")
row("shape", str(tuple(q.shape)))
row("fp32 MB", f"{q.nbytes / MB:.1f}")
row("indices y, bytes", f"{y.nbytes:,}")
row("q at the target / elsewhere", f"{q[0, y[0]].item():.7f}", f"{eps / V:.4e}")
sanity("q_rows_sum_to_one", (q.sum(-1) - 1).abs().max().item() < 1e-5, "each row of q is a distribution")

# -- the loss four ways ---------------------------------------------------------------------------
logp = torch.log_softmax(z, dim=-1)
l_contract = -(q * logp).sum(-1)                                   # the contraction over |V|
l_decomp = (1 - eps) * (-logp.gather(1, y[:, None]).squeeze(1)) + eps * (-logp.mean(-1))
l_ls = F.cross_entropy(z, y, label_smoothing=eps, reduction="none")
l_prob = F.cross_entropy(z, q, reduction="none")
diffs = {
    "label_smoothing= vs contraction": (l_ls - l_contract).abs().max().item(),
    "probability targets vs contraction": (l_prob - l_contract).abs().max().item(),
    "decomposition vs contraction": (l_decomp - l_contract).abs().max().item(),
}
value("max_diff_routes", max(diffs.values()))
value("loss_smoothed", l_ls.mean().item())
value("loss_plain", F.cross_entropy(z, y).item())
value("loss_uniform_term", (-logp.mean(-1)).mean().item())
print("\nLoss per position, four routes (max |difference|)")
for k, v in diffs.items():
    row(k, f"{v:.1e}")
row("mean smoothed loss / plain loss", f"{l_ls.mean().item():.4f}", f"{F.cross_entropy(z, y).item():.4f}")
sanity("routes_agree", max(diffs.values()) < 1e-4, "all four forms of the smoothed loss agree")
del logp, l_contract, l_decomp, l_prob

# -- memory, measured -------------------------------------------------------------------------------
_, peak_ls = peak_alloc(lambda: F.cross_entropy(z, y, label_smoothing=eps))
_, peak_prob = peak_alloc(lambda: F.cross_entropy(z, q))
_, peak_hand = peak_alloc(lambda: -(q * torch.log_softmax(z, dim=-1)).sum(-1).mean())
value("peak_ls_mb", peak_ls / MB)
value("peak_prob_mb", peak_prob / MB)
value("peak_hand_mb", peak_hand / MB)
value("logits_mb", z.nbytes / MB)
print("\nBytes allocated during the call (torch.profiler, profile_memory=True); q already exists")
row("F.cross_entropy(z, y, label_smoothing=0.1)", f"{peak_ls / MB:.1f} MB")
row("F.cross_entropy(z, q)", f"{peak_prob / MB:.1f} MB")
row("-(q * log_softmax(z)).sum(-1).mean()", f"{peak_hand / MB:.1f} MB")
row("(the logits themselves)", f"{z.nbytes / MB:.1f} MB")
sanity("ls_one_tensor", abs(peak_ls - z.nbytes) < 0.01 * z.nbytes,
       "label_smoothing= allocates about one (N, |V|) tensor: the log-softmax")
sanity("prob_two_tensors",
       abs(peak_prob - 2 * z.nbytes) < 0.01 * z.nbytes and abs(peak_hand - 2 * z.nbytes) < 0.01 * z.nbytes,
       "probability targets allocate two: the log-softmax and the product with q")

# -- the floor: the loss cannot go below H(q) ---------------------------------------------------------
q_on = 1 - eps + eps / V
H = -(q_on * math.log(q_on) + (V - 1) * (eps / V) * math.log(eps / V))
value("entropy_q", H)
z_opt = torch.log(q[:8])                                    # logits equal to log q: p = q
at_opt = F.cross_entropy(z_opt, y[:8], label_smoothing=eps).item()
value("loss_at_q", at_opt)
conf = {}
value("margin_10", 10)
value("margin_20", 20)
for k in (5.0, 10.0, 20.0):
    zc = torch.zeros(8, V)
    zc[torch.arange(8), y[:8]] = k
    conf[k] = F.cross_entropy(zc, y[:8], label_smoothing=eps).item()
    value(f"loss_conf_{int(k)}", conf[k])
    value(f"loss_conf_{int(k)}_plain", F.cross_entropy(zc, y[:8]).item())
value("margin_opt", math.log(q_on / (eps / V)))
print("\nThe floor of the smoothed loss")
row("H(q), closed form", f"{H:.4f}")
row("loss at logits = log q", f"{at_opt:.4f}")
row("optimal margin log(q_on / q_off)", f"{math.log(q_on / (eps / V)):.3f}")
for k, v in conf.items():
    row(f"target logit {k:g} above the rest", f"{v:.4f}")
sanity("floor_is_entropy", abs(at_opt - H) < 1e-4, "at p = q the smoothed loss equals H(q)")
sanity("overconfidence_penalised", conf[20.0] > conf[10.0] > at_opt,
       "a larger margin than log(q_on/q_off) raises the smoothed loss")

# -- with ignore_index: ignored positions drop out of both terms -------------------------------------
yi = y.clone()
yi[: N // 4] = -100
l_ls_i = F.cross_entropy(z, yi, label_smoothing=eps)
valid = yi != -100
logp_v = torch.log_softmax(z[valid], dim=-1)
hand_i = ((1 - eps) * (-logp_v.gather(1, yi[valid][:, None]).squeeze(1)) + eps * (-logp_v.mean(-1))).mean()
value("ignore_diff", abs(l_ls_i - hand_i).item())
sanity("ls_respects_ignore", abs(l_ls_i - hand_i).item() < 1e-4,
       "with ignore_index, label smoothing averages over valid positions only")
del logp_v

# -- variation: distillation targets from a teacher, stored in bf16 -----------------------------------
V2 = value("V2", 128_256)
T2 = value("T2", 2048)
teacher = torch.empty(1, T2, V2, dtype=torch.bfloat16, device="meta")
student = torch.empty(1, T2, V2, dtype=torch.float32, device="meta")
value("teacher_bf16_mb", teacher.nbytes / MB)
value("student_fp32_mb", student.nbytes / MB)
value("batch_var", 8)
value("teacher_batch8_gb", 8 * teacher.nbytes / 10**9)
value("teacher_idx_bytes", torch.empty(1, T2, dtype=torch.int64, device="meta").nbytes)
print(f"\nVariation: teacher probabilities for one sequence of {T2:,} tokens, |V| = {V2:,} (meta)")
row("teacher probabilities, bf16", f"{teacher.nbytes / MB:.1f} MB")
row("student logits, fp32", f"{student.nbytes / MB:.1f} MB")
