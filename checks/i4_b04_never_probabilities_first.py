"""I.4.B04 — Never form probabilities first.

Real torch tensors in fp32, fp16 and bf16: the overflow thresholds from torch.finfo, a naive
softmax (exp, sum, divide, log) that returns inf or nan past them, and the log-sum-exp form
that stays finite, compared with torch.logsumexp, F.cross_entropy and an fp64 reference.
"""

import math

import torch
import torch.nn.functional as F

from numbook.check import given, sanity, value

V = given("V", 32_000)
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
C = 7          # index of the target class in every row (any index would do)
RIVAL = 3      # index of the wrong class that row B makes confident


def row(label, *cells, w=12, cw=14):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


def fmt(x):
    x = float(x)
    if not math.isfinite(x):
        return str(x)
    return f"{x:.4g}" if abs(x) < 1e5 else f"{x:.3e}"


def row_a(s, dt):
    """Confident and right: target logit s, the other |V|-1 logits 0."""
    z = torch.zeros(V, dtype=dt)
    z[C] = s
    return z


def row_b(s, dt):
    """Confident and wrong: target logit 0, one rival at s, the rest 0."""
    z = torch.zeros(V, dtype=dt)
    z[RIVAL] = s
    return z


def naive_loss(z):
    """Probabilities first: exp, sum, divide, then -log p_c. Everything in z's dtype."""
    e = torch.exp(z)
    denom = e.sum()
    p = e / denom
    return denom, p, -torch.log(p[C])


def shifted_softmax_then_log(z):
    """torch.softmax subtracts the max internally; taking the log afterwards still fails."""
    p = torch.softmax(z, dim=-1)
    return p[C], -torch.log(p[C])


def stable_loss(z):
    """Log-sum-exp: m + log(sum(exp(z - m))) - z_c, never forming a probability."""
    m = z.max()
    lse = m + torch.log(torch.exp(z - m).sum())
    return lse - z[C]


def reference(z):
    return F.cross_entropy(z.double()[None], torch.tensor([C])).item()


def ce(z):
    return F.cross_entropy(z[None], torch.tensor([C])).item()


# -- Step 1: where exp overflows and where it underflows -----------------------------------
print("Step 1: the range of each dtype (torch.finfo; smallest subnormal by torch.nextafter)")
row("dtype", "max", "ln(max)", "tiny normal", "-ln(tiny)", "subnormal", "-ln(subn)")
lim = {}
for name, dt in DTYPES.items():
    fi = torch.finfo(dt)
    zero = torch.zeros((), dtype=dt)
    subn = torch.nextafter(zero, torch.ones((), dtype=dt)).item()
    lim[name] = dict(max=fi.max, ln_max=math.log(fi.max), tiny=fi.tiny, ln_tiny=-math.log(fi.tiny),
                     subn=subn, ln_subn=-math.log(subn))
    value(f"max_{name}", fi.max)
    value(f"ln_max_{name}", math.log(fi.max))
    value(f"ln_tiny_{name}", -math.log(fi.tiny))
    value(f"subnormal_{name}", subn)
    value(f"ln_subnormal_{name}", -math.log(subn))
    row(name, fmt(fi.max), f"{math.log(fi.max):.4f}", fmt(fi.tiny), f"{-math.log(fi.tiny):.2f}",
        fmt(subn), f"{-math.log(subn):.2f}")

# exp just below and just above ln(max), at values every dtype represents exactly
probes = {"fp32": (88.5, 89.0), "fp16": (11.0, 11.125), "bf16": (88.5, 89.0)}
print("\n  exp() at two representable values either side of ln(max)")
row("dtype", "x below", "exp(x)", "x above", "exp(x)")
for name, (lo, hi) in probes.items():
    dt = DTYPES[name]
    e_lo = torch.exp(torch.tensor(lo, dtype=dt)).item()
    e_hi = torch.exp(torch.tensor(hi, dtype=dt)).item()
    value(f"exp_below_x_{name}", lo)
    value(f"exp_above_x_{name}", hi)
    value(f"exp_below_{name}", e_lo)
    row(name, lo, fmt(e_lo), hi, fmt(e_hi))
    sanity(f"exp_brackets_{name}", math.isfinite(e_lo) and e_hi == math.inf and lo < lim[name]["ln_max"] < hi,
           f"exp({lo}) is finite and exp({hi}) is inf in {name}, either side of ln(max)")

# -- Step 2: row A, confident and right: the denominator overflows ----------------------------
others = V - 1
value("others", others)
pred_fp16 = value("pred_sum_overflow_fp16", math.log(lim["fp16"]["max"] - others))
value("room_fp16", lim["fp16"]["max"] - others)
print(f"\nStep 2: row A (target logit s, the other {others:,} logits 0)")
room = lim["fp16"]["max"] - others
print(f"  fp16 denominator = {others:,} + e^s passes {lim['fp16']['max']:,.0f}"
      f" at s = ln({room:,.0f}) = {pred_fp16:.4f}")
row("dtype", "s", "exp(s)", "denominator", "sum of p", "naive loss", "stable", "cross_ent", "fp64 ref", w=6)
cases_a = [("fp32", 88.5), ("fp32", 89.0), ("fp16", 10.375), ("fp16", 10.5), ("fp16", 11.125),
           ("bf16", 88.5), ("bf16", 89.0)]
res_a = {}
for name, s in cases_a:
    dt = DTYPES[name]
    z = row_a(s, dt)
    denom, p, nl = naive_loss(z)
    st, ref = stable_loss(z).item(), reference(z)
    res_a[(name, s)] = dict(exp=torch.exp(z[C]).item(), denom=denom.item(), psum=p.sum().item(),
                            naive=nl.item(), stable=st, ce=ce(z), ref=ref)
    r = res_a[(name, s)]
    row(name, s, fmt(r["exp"]), fmt(r["denom"]), fmt(r["psum"]), fmt(r["naive"]), fmt(st), fmt(r["ce"]),
        f"{ref:.4g}", w=6)

value("sA_fp32", 89.0)
value("sA_fp16_ok", 10.375)
value("sA_fp16", 10.5)
value("sA_fp16_both", 11.125)
r = res_a[("fp16", 10.5)]
value("exp_sA_fp16", r["exp"])
value("naive_sA_fp16", r["naive"])
value("psum_sA_fp16", r["psum"])
value("stable_sA_fp16", r["stable"])
value("ce_sA_fp16", r["ce"])
value("ref_sA_fp16", r["ref"])
value("ref_sA_fp16_ok", res_a[("fp16", 10.375)]["ref"])
value("naive_sA_fp16_ok", res_a[("fp16", 10.375)]["naive"])
value("stable_sA_fp16_ok", res_a[("fp16", 10.375)]["stable"])
value("ce_sA_fp16_ok", res_a[("fp16", 10.375)]["ce"])
sanity("fp16_sum_first", math.isfinite(r["exp"]) and r["denom"] == math.inf and r["naive"] == math.inf
       and r["psum"] == 0.0, "at s = 10.5 in fp16 exp(s) is finite, the sum is inf, every p is 0, the loss inf")
sanity("fp16_pred_brackets", 10.375 < pred_fp16 < 10.5, "ln(65504 - 31999) lies between the two probes")
for name, s in [("fp32", 89.0), ("bf16", 89.0), ("fp16", 11.125)]:
    sanity(f"naive_nan_{name}", math.isnan(res_a[(name, s)]["naive"]) and math.isnan(res_a[(name, s)]["psum"]),
           f"naive softmax in {name} at s = {s} gives inf/inf = nan")

# -- Step 3: row B, confident and wrong: the probability underflows ------------------------
print("\nStep 3: row B (target logit 0, one rival logit s, the rest 0): torch.softmax, then log")
row("dtype", "s", "p_c", "-log p_c", "stable", "cross_ent", "log_softmax", "fp64 ref", w=6)
cases_b = [("fp32", 100.0), ("fp32", 110.0), ("fp16", 16.0), ("fp16", 18.0), ("bf16", 92.0), ("bf16", 94.0)]
res_b = {}
for name, s in cases_b:
    dt = DTYPES[name]
    z = row_b(s, dt)
    pc, nl = shifted_softmax_then_log(z)
    lsm = -torch.log_softmax(z, dim=-1)[C].item()
    res_b[(name, s)] = dict(pc=pc.item(), naive=nl.item(), stable=stable_loss(z).item(), ce=ce(z), lsm=lsm,
                            ref=reference(z))
    r = res_b[(name, s)]
    row(name, s, fmt(r["pc"]), fmt(r["naive"]), fmt(r["stable"]), fmt(r["ce"]), fmt(lsm), f"{r['ref']:.4f}", w=6)

value("sB_fp32_sub", 100.0)
value("sB_fp32", 110.0)
value("sB_fp16_sub", 16.0)
value("sB_fp16", 18.0)
value("sB_bf16", 94.0)
value("naive_sB_fp32_sub", res_b[("fp32", 100.0)]["naive"])
value("err_sB_fp32_sub", abs(res_b[("fp32", 100.0)]["naive"] - res_b[("fp32", 100.0)]["ref"]))
value("naive_sB_fp16_sub", res_b[("fp16", 16.0)]["naive"])
value("err_sB_fp16_sub", abs(res_b[("fp16", 16.0)]["naive"] - res_b[("fp16", 16.0)]["ref"]))
value("ref_sB_fp32", res_b[("fp32", 110.0)]["ref"])
value("stable_sB_fp32", res_b[("fp32", 110.0)]["stable"])
value("ref_sB_fp32_sub", res_b[("fp32", 100.0)]["ref"])
value("ref_sB_fp16", res_b[("fp16", 18.0)]["ref"])
value("ref_sB_bf16", res_b[("bf16", 94.0)]["ref"])
for name, s in [("fp32", 110.0), ("fp16", 18.0), ("bf16", 94.0)]:
    value(f"naive_sB_{name}_pc", res_b[(name, s)]["pc"])
for name, s in [("fp32", 110.0), ("fp16", 18.0), ("bf16", 94.0)]:
    r = res_b[(name, s)]
    sanity(f"underflow_{name}", r["pc"] == 0.0 and r["naive"] == math.inf and s > lim[name]["ln_subn"],
           f"p_c underflows to 0 in {name} at s = {s}, past -ln(smallest subnormal), so -log p_c = inf")

# -- Step 4: the stable form agrees with torch everywhere -----------------------------------
worst = 0.0
for (name, s), r in list(res_a.items()) + list(res_b.items()):
    tol = 4 * torch.finfo(DTYPES[name]).eps * max(1.0, abs(r["ref"]) + s)
    for k in ("stable", "ce"):
        worst = max(worst, abs(r[k] - r["ref"]) / tol)
    sanity(f"stable_{name}_{str(s).replace('.', '_')}",
           math.isfinite(r["stable"]) and abs(r["stable"] - r["ref"]) <= tol and abs(r["ce"] - r["ref"]) <= tol,
           f"{name}, s = {s}: the log-sum-exp loss and F.cross_entropy are finite and match fp64")
value("worst_err_in_tolerances", worst)
n_cases = value("n_cases", len(res_a) + len(res_b))
n_naive_bad = value("n_naive_bad", sum(not math.isfinite(r["naive"]) for r in [*res_a.values(), *res_b.values()]))
n_stable_bad = value("n_stable_bad", sum(not math.isfinite(r["stable"]) for r in [*res_a.values(), *res_b.values()]))

# the hand-written log-sum-exp against torch.logsumexp, on a realistic fp32 batch of rows
g = torch.Generator().manual_seed(0)
zb = torch.randn(64, V, generator=g) * 4
zb[:, C] += 100.0  # push the target logits past ln(max) of fp32: a naive exp does not survive this
m = zb.max(dim=-1, keepdim=True).values
lse_hand = (m + torch.log(torch.exp(zb - m).sum(dim=-1, keepdim=True))).squeeze(1)
lse_torch = torch.logsumexp(zb, dim=-1)
value("batch_rows", zb.shape[0])
value("batch_max_logit", zb.max().item())
d_lse = value("lse_hand_vs_torch", (lse_hand - lse_torch).abs().max().item())
ce_hand = (lse_hand - zb[:, C]).mean()
ce_torch = F.cross_entropy(zb, torch.full((zb.shape[0],), C))
value("ce_hand_vs_torch", abs(ce_hand - ce_torch).item())
naive_rows = [naive_loss(r)[2].item() for r in zb]
n_naive_rows_bad = value("naive_batch_rows_nonfinite", sum(not math.isfinite(x) for x in naive_rows))
value("batch_shift", 100.0)
value("batch_min_target_logit", zb[:, C].min().item())
print(f"\nStep 4: 64 fp32 rows, logits N(0, 16) with the target pushed up by 100 (max {zb.max().item():.1f})")
row("max |hand lse - torch.logsumexp|", f"{d_lse:.2e}", w=44)
row("|hand CE - F.cross_entropy|", f"{abs(ce_hand - ce_torch).item():.2e}", w=44)
row("smallest target logit", f"{zb[:, C].min().item():.1f}", w=44)
row("rows where the naive loss is not finite", n_naive_rows_bad, w=44)
sanity("naive_batch_fails", n_naive_rows_bad == zb.shape[0] and zb[:, C].min().item() > lim["fp32"]["ln_max"],
       "every target logit exceeds ln(max) of fp32 and the naive loss fails on every row")
sanity("lse_matches_torch", d_lse < 1e-4 and abs(ce_hand - ce_torch).item() < 1e-5,
       "hand-written log-sum-exp equals torch.logsumexp and F.cross_entropy")

# -- Variation: Qwen2's vocabulary in fp16, an all-zero row ----------------------------------
V2 = value("V2", 151_936)
z0 = torch.zeros(1, V2, dtype=torch.float16)
v_naive = z0.exp().sum().item()
v_lse = torch.logsumexp(z0, dim=-1).item()
v_ce = F.cross_entropy(z0, torch.tensor([0])).item()
v_sm = torch.softmax(z0, dim=-1)[0, 0].item()
v_fp32 = F.cross_entropy(z0.float(), torch.tensor([0])).item()
value("v_ln_V2", math.log(V2))
value("v_fp32", v_fp32)
value("v_softmax_p", v_sm)
value("v_one_over_V2", 1 / V2)


def first_nonfinite(f, lo=1_000, hi=300_000):
    """Smallest n for which f(n) is not finite (f finite at lo, not at hi)."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if math.isfinite(f(mid)) else (lo, mid)
    return hi


n_ce = value("first_bad_V_ce_fp16",
             first_nonfinite(lambda n: F.cross_entropy(torch.zeros(1, n, dtype=torch.float16),
                                                       torch.tensor([0])).item()))
n_lse = value("first_bad_V_lse_fp16",
              first_nonfinite(lambda n: torch.logsumexp(torch.zeros(n, dtype=torch.float16), 0).item()))
print(f"\nVariation: |V| = {V2:,}, all-zero logits, fp16 (CPU kernels)")
row("naive sum of exp", fmt(v_naive), w=44)
row("torch.logsumexp (fp16)", fmt(v_lse), w=44)
row("F.cross_entropy (fp16)", fmt(v_ce), w=44)
row("torch.softmax p_0 (fp16)", f"{v_sm:.4e}", w=44)
row("1 / |V|", f"{1 / V2:.4e}", w=44)
row("F.cross_entropy (upcast to fp32)", f"{v_fp32:.4f}", w=44)
row("ln |V|", f"{math.log(V2):.4f}", w=44)
row("first |V| where fp16 cross_entropy is inf", f"{n_ce:,}", w=44)
row("first |V| where fp16 logsumexp is inf", f"{n_lse:,}", w=44)
sanity("variation_fp16_fails", v_naive == math.inf and v_lse == math.inf and v_ce == math.inf,
       "with |V| = 151,936 in fp16 the sum, logsumexp and cross_entropy are all inf")
sanity("variation_fp32_ok", abs(v_fp32 - math.log(V2)) < 1e-4, "in fp32 the loss is ln|V|")
sanity("variation_threshold_near_max", abs(n_ce - 65_504) <= 32 and abs(n_lse - 65_504) <= 32,
       "the measured first failing |V| lies within the fp16 rounding step of finfo.max = 65,504")
