"""I.4.B06 — Soft targets and label smoothing.

Builds the real smoothed target distribution q of shape (N, |V|), computes the loss as the
contraction -sum_v q_v log p_v, and checks F.cross_entropy(label_smoothing=eps) against it, against
F.cross_entropy with probability targets and against the (1-eps)/eps decomposition. Measures the
bytes torch's CPU allocator hands out during each call with torch.profiler (profile_memory=True),
and finds the floor of the smoothed loss, the entropy of q.
"""

import math
import warnings

import torch
import torch.nn.functional as F
from _memory import peak_alloc

from numbook.check import fact, given, sanity, value

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
# the reference: the decomposition in fp64; each fp32 route is compared with it
logp64 = torch.log_softmax(z.double(), dim=-1)
l_ref64 = (1 - eps) * (-logp64.gather(1, y[:, None]).squeeze(1)) + eps * (-logp64.mean(-1))
del logp64
diffs = {
    "contraction vs fp64 reference": (l_contract.double() - l_ref64).abs().max().item(),
    "decomposition vs fp64 reference": (l_decomp.double() - l_ref64).abs().max().item(),
    "label_smoothing= vs fp64 reference": (l_ls.double() - l_ref64).abs().max().item(),
    "probability targets vs fp64 reference": (l_prob.double() - l_ref64).abs().max().item(),
}
value("max_diff_routes", max(diffs.values()))
value("loss_smoothed", l_ls.mean().item())
value("loss_plain", F.cross_entropy(z, y).item())
value("loss_uniform_term", (-logp.mean(-1)).mean().item())
print("\nLoss per position, four routes (max |difference|)")
for k, v in diffs.items():
    row(k, f"{v:.1e}")
row("mean smoothed loss / plain loss", f"{l_ls.mean().item():.4f}", f"{F.cross_entropy(z, y).item():.4f}")
sanity("routes_agree", max(diffs.values()) < 1e-4, "all four forms of the smoothed loss agree",
       operands=(max(diffs.values()), 1e-4), relation="largest")
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
row(f"F.cross_entropy(z, y, label_smoothing={eps:g})", f"{peak_ls / MB:.1f} MB")
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
z_opt = torch.log(q[:8].double())                           # logits equal to log q: p = q (fp64)
at_opt = F.cross_entropy(z_opt, y[:8], label_smoothing=eps).item()
value("loss_at_q", at_opt)

# The smoothed loss of one position as a function of its margin m (target logit m, every other 0),
# in fp64 on torch itself; its derivative comes from autograd.
y1 = y[:1]


def loss_at_margin(m, smoothing=eps):
    z1 = torch.zeros(1, V, dtype=torch.float64)
    z1[0, y1[0]] = m
    return F.cross_entropy(z1, y1, label_smoothing=smoothing).item()


def slope_at_margin(m):
    mt = torch.tensor(float(m), dtype=torch.float64, requires_grad=True)
    z1 = torch.zeros(1, V, dtype=torch.float64)
    z1 = z1.index_put((torch.tensor([0]), y1), mt.reshape(1))
    (gm,) = torch.autograd.grad(F.cross_entropy(z1, y1, label_smoothing=eps), mt)
    return gm.item()


# find the optimum margin by bisection on the sign of the slope: negative below it, positive past it
lo, hi = 0.0, 1.0
while slope_at_margin(hi) < 0:
    hi *= 2
while hi - lo > 1e-10:
    mid = (lo + hi) / 2
    lo, hi = (mid, hi) if slope_at_margin(mid) < 0 else (lo, mid)
m_opt = value("margin_opt", (lo + hi) / 2)
m_closed = value("margin_opt_closed", math.log(q_on / (eps / V)))
loss_opt = value("loss_at_margin_opt", loss_at_margin(m_opt))
sanity("optimum_found", abs(m_opt - m_closed) < 1e-6,
       "bisection on torch's gradient finds the optimum margin at log(q_on / q_off)",
       operands=(m_opt, m_closed))

# probe margins below and past the optimum
m_lo = given("m_lo", 10.0)
m_mid = given("m_mid", 15.0)
m_hi = given("m_hi", 20.0)
conf = {m: value(name, loss_at_margin(m)) for name, m in
        (("loss_m_lo", m_lo), ("loss_m_mid", m_mid), ("loss_m_hi", m_hi))}
plain_hi = value("loss_m_hi_plain", loss_at_margin(m_hi, smoothing=0.0))
# a grid of margins on each side of the optimum, to test the direction of the loss there
below = torch.linspace(0, m_opt, 101, dtype=torch.float64)[:-1].tolist()
past = torch.linspace(m_opt, 3 * m_opt, 101, dtype=torch.float64)[1:].tolist()
l_below = [loss_at_margin(m) for m in below]
l_past = [loss_at_margin(m) for m in past]
print("\nThe floor of the smoothed loss")
row("H(q), closed form", f"{H:.4f}")
row("loss at logits = log q", f"{at_opt:.4f}")
row("optimal margin, bisection on torch's gradient", f"{m_opt:.3f}")
row("optimal margin, log(q_on / q_off)", f"{m_closed:.3f}")
for m, v in conf.items():
    side = "below" if m < m_opt else "past"
    row(f"margin {m:g} ({side} the optimum)", f"{v:.4f}")
row(f"margin {m_hi:g}, no smoothing", f"{plain_hi:.1e}")
row(f"grid below the optimum ({len(below)} margins)", f"{l_below[0]:.4f}", f"{l_below[-1]:.4f}")
row(f"grid past the optimum ({len(past)} margins)", f"{l_past[0]:.4f}", f"{l_past[-1]:.4f}")
sanity("floor_is_entropy", abs(at_opt - H) < 1e-4, "at p = q the smoothed loss equals H(q)",
       operands=(at_opt, H), relation="equal")
sanity("falls_below_opt",
       m_lo < m_opt and conf[m_lo] > loss_opt and all(b < a for a, b in zip(l_below, l_below[1:], strict=False)),
       "below the optimum margin a larger margin gives a smaller smoothed loss",
       operands=(conf[m_lo], loss_opt), relation=("smaller", "falls", "grows", "larger"))
sanity("rises_past_opt",
       m_opt < m_mid < m_hi and conf[m_hi] > conf[m_mid] > loss_opt
       and all(b > a for a, b in zip(l_past, l_past[1:], strict=False)) and plain_hi < 1e-4,
       "past the optimum margin a larger margin gives a larger smoothed loss",
       operands=(conf[m_hi], conf[m_mid]), relation="grows")
lowest = min([*conf.values(), *l_below, *l_past, at_opt])
sanity("floor_holds", lowest >= H - 1e-9, "no probed margin gives a smoothed loss below H(q)",
       operands=(lowest, H), relation="at least")

# KL divergence: cross-entropy minus H(q), per position only with reduction="batchmean"
z_hi = torch.zeros(1, V, dtype=torch.float64)
z_hi[0, y1[0]] = m_hi
q_hi = torch.full((1, V), eps / V, dtype=torch.float64)
q_hi[0, y1[0]] += 1 - eps
logp_hi = torch.log_softmax(z_hi, dim=-1)
kl_hi = value("kl_m_hi", F.kl_div(logp_hi, q_hi, reduction="batchmean").item())
with warnings.catch_warnings():
    warnings.simplefilter("ignore")              # torch warns that "mean" is not the KL per position
    kl_hi_mean = value("kl_m_hi_mean", F.kl_div(logp_hi, q_hi, reduction="mean").item())
kl_opt = value("kl_at_q", F.kl_div(torch.log(q_hi), q_hi, reduction="batchmean").item())
value("ce_minus_entropy_m_hi", conf[m_hi] - H)
row(f"margin {m_hi:g}: kl_div batchmean, CE - H(q)", f"{kl_hi:.4f}", f"{conf[m_hi] - H:.4f}")
row(f"margin {m_hi:g}: kl_div, reduction='mean'", f"{kl_hi_mean:.2e}")
sanity("kl_is_ce_minus_entropy", abs(kl_hi - (conf[m_hi] - H)) < 1e-9 and abs(kl_opt) < 1e-12,
       "kl_div(batchmean) = cross-entropy - H(q), and 0 at p = q", operands=(kl_hi, conf[m_hi] - H), relation="differs")
sanity("kl_mean_divides_by_V", abs(kl_hi_mean * V - kl_hi) < 1e-9,
       "kl_div's default reduction divides by N * |V|", operands=(kl_hi_mean * V, kl_hi), relation="not")

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
V2 = fact("llama3_8b_vocab", "V2")
T2 = given("T2", 2048)
batch_var = given("batch_var", 8)
teacher = torch.empty(1, T2, V2, dtype=torch.bfloat16, device="meta")
student = torch.empty(1, T2, V2, dtype=torch.float32, device="meta")
teacher_mb = value("teacher_bf16_mb", teacher.nbytes / MB)
student_mb = value("student_fp32_mb", student.nbytes / MB)
value("teacher_batch8_gb", torch.empty(batch_var, T2, V2, dtype=torch.bfloat16, device="meta").nbytes / 10**9)
value("teacher_idx_bytes", torch.empty(1, T2, dtype=torch.int64, device="meta").nbytes)
print(f"\nVariation: teacher probabilities for one sequence of {T2:,} tokens, |V| = {V2:,} (meta)")
row("teacher probabilities, bf16", f"{teacher.nbytes / MB:.1f} MB")
row("student logits, fp32", f"{student.nbytes / MB:.1f} MB")
row(f"teacher probabilities, batch of {batch_var}", f"{batch_var * teacher.nbytes / 10**9:.1f} GB")
sanity("teacher_half_of_student", 2 * teacher.nbytes == student.nbytes,
       "bf16 teacher probabilities take half the bytes of fp32 student logits", operands=(2 * teacher_mb, student_mb),
       relation="half")
