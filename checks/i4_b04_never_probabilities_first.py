"""I.4.B04 — Never form probabilities first.

Real torch tensors in fp32, fp16 and bf16: the limits from torch.finfo, the lines where exp,
the naive denominator and the probability of torch.softmax fail, each found by bisection on
torch itself and compared with its formula; a naive softmax (exp, sum, divide, log) that returns
inf or nan past them, and the log-sum-exp form that stays finite, compared with torch.logsumexp,
F.cross_entropy and an fp64 reference.
"""

import math

import torch
import torch.nn.functional as F

from numbook.check import fact, given, sanity, value

V = given("V", 32_000)
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
C = 7          # index of the target class in every row (any index would do)
RIVAL = 3      # index of the wrong class that row B makes confident
PROBE = ("a probe point the check chooses, stored exactly in the format; "
         "the sanities test which side of the line it lies")
DTYPE = "a property of the format, read from torch.finfo / torch.nextafter"
COUNT = "a count over the check's fixed probe list in fixed formats"
ATPROBE = ("the result at a fixed probe, rounded to the format: "
           "one token more in |V| moves it less than the format's spacing")
LINE = "found by bisection; a property of the format (|V| enters as (|V|-1)e^{-s}, below what the bisection resolves)"
SAME = "two computations of the same sums in the same order: equal at every size"


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


def bisect_stored(ok, lo, hi, dt):
    """Bisect over the values format dt stores: (largest stored x with ok(x), smallest without)."""
    st = lambda s: torch.tensor(s, dtype=dt)  # noqa: E731
    assert ok(st(lo)) and not ok(st(hi))
    while torch.nextafter(st(lo), st(hi)).item() != st(hi).item():
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if ok(st(mid)) else (lo, mid)
    return st(lo).item(), st(hi).item()


def row_b_gap(s, dt):
    """Row B with a gap s between rival and target finer than the format stores at s: the rival at
    floor(s), the target at -(s - floor(s)), where the format's spacing is small. softmax only sees
    the gap (it subtracts the max)."""
    r = math.floor(s)
    z = torch.zeros(V, dtype=dt)
    z[RIVAL] = r
    z[C] = -(s - r)
    return z, (z[RIVAL].double() - z[C].double()).item()


def bisect_gap(ok, lo, hi, dt, tol=1e-6):
    """Bisect the row-B gap: (largest stored gap where ok, smallest stored gap where not)."""
    g_lo, g_hi = row_b_gap(lo, dt)[1], row_b_gap(hi, dt)[1]
    while hi - lo > tol:
        mid = (lo + hi) / 2
        z, g = row_b_gap(mid, dt)
        if ok(z):
            lo, g_lo = mid, g
        else:
            hi, g_hi = mid, g
    return g_lo, g_hi


# -- Step 1: the range of each format, and where exp overflows ----------------------------------
print("Step 1: the range of each dtype (torch.finfo; smallest subnormal by torch.nextafter)")
row("dtype", "max", "ln(max)", "tiny normal", "-ln(tiny)", "subnormal", "-ln(subn)", "-ln(subn/2)")
lim = {}
for name, dt in DTYPES.items():
    fi = torch.finfo(dt)
    zero = torch.zeros((), dtype=dt)
    subn = torch.nextafter(zero, torch.ones((), dtype=dt)).item()
    lim[name] = dict(max=fi.max, ln_max=math.log(fi.max), tiny=fi.tiny, ln_tiny=-math.log(fi.tiny),
                     subn=subn, ln_subn=-math.log(subn), ln_half_subn=-math.log(subn / 2))
    value(f"max_{name}", fi.max, fixed=DTYPE)
    value(f"ln_max_{name}", math.log(fi.max), fixed=DTYPE)
    value(f"ln_tiny_{name}", -math.log(fi.tiny), fixed=DTYPE)
    value(f"subnormal_{name}", subn, fixed=DTYPE)
    value(f"ln_subnormal_{name}", -math.log(subn), fixed=DTYPE)
    value(f"ln_half_subnormal_{name}", -math.log(subn / 2), fixed=DTYPE)
    row(name, fmt(fi.max), f"{math.log(fi.max):.4f}", fmt(fi.tiny), f"{-math.log(fi.tiny):.2f}",
        fmt(subn), f"{-math.log(subn):.2f}", f"{-math.log(subn / 2):.2f}")

print("\n  exp(): bisection over the values each format stores")
row("dtype", "last finite", "exp of it", "first inf", "ln(max)")
for name, dt in DTYPES.items():
    x_ok, x_inf = bisect_stored(lambda x: math.isfinite(torch.exp(x).item()), 0.0, 200.0, dt)
    e_ok = torch.exp(torch.tensor(x_ok, dtype=dt)).item()
    value(f"exp_last_finite_{name}", x_ok, fixed=DTYPE)       # a stored value of the format: exact
    value(f"exp_first_inf_{name}", x_inf, fixed=DTYPE)
    value(f"exp_last_finite_val_{name}", torch.tensor(e_ok, dtype=dt), fixed=DTYPE)
    row(name, f"{x_ok:.8g}", fmt(e_ok), f"{x_inf:.8g}", f"{lim[name]['ln_max']:.4f}")
    sanity(f"exp_line_{name}", x_ok <= lim[name]["ln_max"] < x_inf,
           f"ln(max) of {name} lies between the last stored x with a finite exp and the first with inf",
           operands=(x_ok, lim[name]["ln_max"]), relation="smaller" if name == "fp32" else None)

# -- Step 2: row A, confident and right: the denominator overflows ----------------------------
others = value("others", V - 1)
room = value("room_fp16", lim["fp16"]["max"] - others)
pred_fp16 = value("pred_sum_overflow_fp16", math.log(room))
print(f"\nStep 2: row A (target logit s, the other {others:,} logits 0)")
print(f"  fp16 denominator = {others:,} + e^s passes {lim['fp16']['max']:,.0f}"
      f" at s = ln({room:,.0f}) = {pred_fp16:.4f}")


def naive_a_finite(x, dt=torch.float16):
    z = torch.zeros(V, dtype=dt)
    z[C] = x
    return math.isfinite(naive_loss(z)[2].item())


sA_ok, sA_bad = bisect_stored(naive_a_finite, 0.0, 20.0, torch.float16)
value("sA_line_ok_fp16", sA_ok, fixed=LINE)                   # stored fp16 values: exact
value("sA_line_fp16", sA_bad, fixed=LINE)
print(f"  bisection on the naive fp16 loss: finite at s = {sA_ok}, not finite from s = {sA_bad}")
sanity("fp16_pred_brackets", sA_ok < pred_fp16 <= sA_bad,
       "ln(65504 - (|V|-1)) lies between the last stored s with a finite naive loss and the first without",
       operands=(sA_bad, pred_fp16), relation="not")

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

value("sA_fp32", 89.0, fixed=PROBE)
value("sA_fp16_ok", 10.375, fixed=PROBE)
value("sA_fp16", 10.5, fixed=PROBE)
value("sA_fp16_both", 11.125, fixed=PROBE)
r = res_a[("fp16", 10.5)]
value("exp_sA_fp16", torch.tensor(r["exp"], dtype=torch.float16),
      fixed="exp(10.5) in fp16: the probe and the format fix it")
value("psum_sA_fp16", r["psum"], fixed=ATPROBE)
value("ref_sA_fp16", r["ref"])
value("ref_sA_fp16_ok", res_a[("fp16", 10.375)]["ref"])
value("naive_sA_fp16_ok", torch.tensor(res_a[("fp16", 10.375)]["naive"], dtype=torch.float16), fixed=ATPROBE)
value("stable_sA_fp16_ok", torch.tensor(res_a[("fp16", 10.375)]["stable"], dtype=torch.float16), fixed=ATPROBE)
value("ce_sA_fp16_ok", torch.tensor(res_a[("fp16", 10.375)]["ce"], dtype=torch.float16))
sanity("fp16_sum_first", math.isfinite(r["exp"]) and r["denom"] == math.inf and r["naive"] == math.inf
       and r["psum"] == 0.0, "at s = 10.5 in fp16 exp(s) is finite, the sum is inf, every p is 0, the loss inf")
sanity("fp16_probes_bracket", 10.375 < sA_bad <= 10.5, "the two fp16 probes lie either side of the found line",
       operands=(10.375, sA_bad), relation="smaller")
for name, s in [("fp32", 89.0), ("bf16", 89.0), ("fp16", 11.125)]:
    sanity(f"naive_nan_{name}", math.isnan(res_a[(name, s)]["naive"]) and math.isnan(res_a[(name, s)]["psum"]),
           f"naive softmax in {name} at s = {s} gives inf/inf = nan")

# -- Step 3: row B, confident and wrong: the probability underflows ------------------------
print("\nStep 3: row B (target logit 0, one rival logit s, the rest 0): where torch.softmax's p_c becomes 0")
row("dtype", "finite up to", "inf from", "-ln(subn/2)", "ln(2/subn-(|V|-1))", w=6, cw=20)
fail = {}
for name, dt in DTYPES.items():
    g_ok, g_bad = bisect_gap(lambda z: math.isfinite(shifted_softmax_then_log(z)[1].item()), 1.0, 200.0, dt)
    fail[name] = g_bad
    exact = math.log(2 / lim[name]["subn"] - (V - 1))     # p_c = 1 / (e^s + |V| - 1) < subnormal / 2
    value(f"sB_fail_{name}", g_bad, fixed=LINE)
    row(name, f"{g_ok:.5f}", f"{g_bad:.5f}", f"{lim[name]['ln_half_subn']:.5f}", f"{exact:.5f}", w=6, cw=20)
    sanity(f"fail_line_{name}", abs(g_bad - lim[name]["ln_half_subn"]) < 0.01 and abs(g_bad - exact) < 0.005,
           f"{name}: the bisection finds the loss infinite from -ln(subnormal / 2), to within 0.01",
           operands=(g_bad, lim[name]["ln_half_subn"]),
           relation=("smaller", "half", "smallest") if name == "fp32" else None)

print("\n  torch.softmax then log, at probes below, between and past the two lines")
row("dtype", "s", "p_c", "-log p_c", "stable", "cross_ent", "log_softmax", "fp64 ref", w=6)
cases_b = [("fp32", 100.0), ("fp32", 103.5), ("fp32", 110.0), ("fp16", 16.0), ("fp16", 17.0), ("fp16", 18.0),
           ("bf16", 92.0), ("bf16", 92.5), ("bf16", 94.0)]
res_b = {}
for name, s in cases_b:
    dt = DTYPES[name]
    z = row_b(s, dt)
    pc, nl = shifted_softmax_then_log(z)
    lsm = -torch.log_softmax(z, dim=-1)[C].item()
    res_b[(name, s)] = dict(pc=pc.item(), naive=nl.item(), stable=stable_loss(z).item(), ce=ce(z), lsm=lsm,
                            ref=reference(z), exp_naive=naive_loss(z)[2].item())
    r = res_b[(name, s)]
    row(name, s, fmt(r["pc"]), fmt(r["naive"]), fmt(r["stable"]), fmt(r["ce"]), fmt(lsm), f"{r['ref']:.4f}", w=6)

value("sB_fp32_sub", 100.0, fixed=PROBE)
value("naive_sB_fp32_sub", torch.tensor(res_b[("fp32", 100.0)]["naive"]), fixed=ATPROBE)
value("ref_sB_fp32_sub", res_b[("fp32", 100.0)]["ref"], fixed=ATPROBE)
sanity("subnormal_loses_bits", lim["fp32"]["ln_tiny"] < 100.0 < lim["fp32"]["ln_subn"]
       and abs(res_b[("fp32", 100.0)]["naive"] - res_b[("fp32", 100.0)]["ref"]) > 1e-3,
       "at s = 100 in fp32 p_c is subnormal and -log p_c is off by more than fp32 rounding",
       operands=(res_b[("fp32", 100.0)]["naive"], res_b[("fp32", 100.0)]["ref"]),
       relation=("smaller", "smallest", "larger"))
for name, s_mid, s_past in [("fp32", 103.5, 110.0), ("fp16", 17.0, 18.0), ("bf16", 92.5, 94.0)]:
    dt = DTYPES[name]
    mid, past = res_b[(name, s_mid)], res_b[(name, s_past)]
    value(f"sB_mid_{name}", s_mid, fixed=PROBE)
    value(f"sB_{name}", s_past, fixed=PROBE)
    value(f"pc_mid_{name}", torch.tensor(mid["pc"], dtype=dt), fixed=ATPROBE)
    value(f"naive_mid_{name}", torch.tensor(mid["naive"], dtype=dt), fixed=ATPROBE)
    value(f"ref_mid_{name}", mid["ref"], fixed=ATPROBE if name != "fp16" else None)
    value(f"naive_sB_{name}_pc", past["pc"], fixed=ATPROBE)
    value(f"ref_sB_{name}", past["ref"], fixed=ATPROBE if name != "fp16" else None)
    sanity(f"between_{name}", lim[name]["ln_subn"] < s_mid < fail[name] and mid["pc"] == lim[name]["subn"]
           and math.isfinite(mid["naive"]) and mid["ref"] - mid["naive"] > 0.1,
           f"{name}, s = {s_mid}, between the two lines: p_c is the smallest subnormal, -log p_c finite but too small",
           operands=(mid["naive"], mid["ref"]), relation=("smallest", "smaller") if name == "fp32" else None)
    sanity(f"underflow_{name}", past["pc"] == 0.0 and past["naive"] == math.inf and s_past >= fail[name],
           f"{name}, s = {s_past}, past the found line: p_c = 0 and -log p_c = inf", operands=(s_past, fail[name]))

# -- Step 4: the stable form agrees with torch everywhere -----------------------------------
worst = 0.0
for (name, s), r in list(res_a.items()) + list(res_b.items()):
    tol = 4 * torch.finfo(DTYPES[name]).eps * max(1.0, abs(r["ref"]) + s)
    for k in ("stable", "ce"):
        worst = max(worst, abs(r[k] - r["ref"]) / tol)
    sanity(f"stable_{name}_{str(s).replace('.', '_')}",
           math.isfinite(r["stable"]) and abs(r["stable"] - r["ref"]) <= tol and abs(r["ce"] - r["ref"]) <= tol,
           f"{name}, s = {s}: the log-sum-exp loss and F.cross_entropy are finite and match fp64",
           operands=(r["stable"], r["ref"]))
value("worst_err_in_tolerances", worst)
n_cases = value("n_cases", len(res_a) + len(res_b), fixed=COUNT)
n_exp_bad_a = value("n_exp_bad_a", sum(not math.isfinite(r["naive"]) for r in res_a.values()), fixed=COUNT)
n_sm_bad_b = value("n_softmax_bad_b", sum(not math.isfinite(r["naive"]) for r in res_b.values()), fixed=COUNT)
WRONG_BY = value("wrong_by", 0.1, fixed="the page's line between a rounding error and a wrong loss (nats)")
n_sm_wrong_b = value("n_softmax_wrong_b", sum(math.isfinite(r["naive"]) and abs(r["naive"] - r["ref"]) > WRONG_BY
                                              for r in res_b.values()), fixed=COUNT)
n_prob_bad = value("n_naive_bad", n_exp_bad_a + n_sm_bad_b, fixed=COUNT)
value("n_rows_b", len(res_b))
n_exp_bad_b = value("n_exp_bad_b", sum(not math.isfinite(r["exp_naive"]) for r in res_b.values()), fixed=COUNT)
value("n_exp_bad_all", n_exp_bad_a + n_exp_bad_b, fixed=COUNT)
sanity("exp_fails_all_b", n_exp_bad_b == len(cases_b), "exp/sum/divide is not finite at any probe of row B",
       operands=(n_exp_bad_b, len(cases_b)))
n_stable_bad = value("n_stable_bad", sum(not math.isfinite(r["stable"]) for r in [*res_a.values(), *res_b.values()]),
                     fixed=COUNT)
print(f"\n  {n_cases} probes: exp/sum/divide fails at {n_exp_bad_a} of row A and {n_exp_bad_b} of row B; "
      f"softmax-then-log returns inf at {n_sm_bad_b} of row B and a wrong finite value at {n_sm_wrong_b}; "
      f"log-sum-exp fails at {n_stable_bad}")
sanity("stable_never_fails", n_stable_bad == 0 < n_prob_bad,
       "the log-sum-exp form is finite at every probe where a route through probabilities fails",
       operands=(n_stable_bad, n_prob_bad), relation="not")

# gradients of the naive route at row A, fp32, s = 89: nan flows back to every logit
S_GRAD = 89.0                                               # the row-A probe past ln(max) of fp32
za = row_a(S_GRAD, torch.float32).requires_grad_(True)
naive_loss(za)[2].backward()
value("naive_grad_nan", int(za.grad.isnan().sum()))
zc = row_a(S_GRAD, torch.float32).requires_grad_(True)
F.cross_entropy(zc[None], torch.tensor([C])).backward()
value("ce_grad_nan", int(zc.grad.isnan().sum()),
      fixed="F.cross_entropy's backward never forms a probability: no nan at any size")
print(f"  row A, fp32, s = {S_GRAD}: nan gradient entries, naive {int(za.grad.isnan().sum()):,}, "
      f"F.cross_entropy {int(zc.grad.isnan().sum()):,}")
sanity("naive_grad_poisoned", int(za.grad.isnan().sum()) == V and int(zc.grad.isnan().sum()) == 0,
       "the naive backward is nan at every logit; F.cross_entropy's at none",
       operands=(int(za.grad.isnan().sum()), int(zc.grad.isnan().sum())))

# the hand-written log-sum-exp against torch.logsumexp, on a realistic fp32 batch of rows
g = torch.Generator().manual_seed(0)
SD = 4.0                                                    # standard deviation of the logits
zb = torch.randn(64, V, generator=g) * SD
shift = value("batch_shift", 110.0, fixed="how far the check pushes the target logits: chosen to pass ln(max) of fp32")
# the target column from its own generator, so that it does not depend on |V|
zb[:, C] = torch.randn(zb.shape[0], generator=torch.Generator().manual_seed(1)) * SD + shift
m = zb.max(dim=-1, keepdim=True).values
lse_hand = (m + torch.log(torch.exp(zb - m).sum(dim=-1, keepdim=True))).squeeze(1)
lse_torch = torch.logsumexp(zb, dim=-1)
value("batch_rows", zb.shape[0], fixed="the number of rows the check draws")
d_lse = value("lse_hand_vs_torch", (lse_hand - lse_torch).abs().max(), fixed=SAME)
ce_hand = (lse_hand - zb[:, C]).mean()
ce_torch = F.cross_entropy(zb, torch.full((zb.shape[0],), C))
value("ce_hand_vs_torch", (ce_hand - ce_torch).abs(), fixed=SAME)
naive_rows = [naive_loss(r)[2].item() for r in zb]
n_naive_rows_bad = value("naive_batch_rows_nonfinite", sum(not math.isfinite(x) for x in naive_rows), fixed=COUNT)
min_target = zb[:, C].min().item()
print(f"\nStep 4: {zb.shape[0]} fp32 rows, logits N(0, {SD ** 2:g}) with the target pushed up by {shift:g}"
      f" (max {zb.max().item():.1f})")
row("max |hand lse - torch.logsumexp|", f"{d_lse.item():.2e}", w=44)
row("|hand CE - F.cross_entropy|", f"{(ce_hand - ce_torch).abs().item():.2e}", w=44)
row("smallest target logit", f"{min_target:.1f}", w=44)
row("rows where the naive loss is not finite", n_naive_rows_bad, w=44)
sanity("naive_batch_fails", n_naive_rows_bad == zb.shape[0] and min_target > lim["fp32"]["ln_max"],
       "every target logit exceeds ln(max) of fp32 and the naive loss fails on every row",
       operands=(min_target, lim["fp32"]["ln_max"]), relation=("larger", "equal", "largest", "not"))
sanity("lse_matches_torch", d_lse.item() < 1e-4 and (ce_hand - ce_torch).abs().item() < 1e-5,
       "hand-written log-sum-exp equals torch.logsumexp and F.cross_entropy",
       operands=(ce_hand.item(), ce_torch.item()))

# -- Variation: Qwen2's vocabulary in fp16, an all-zero row ----------------------------------
V2 = fact("qwen2_0_5b_vocab", "V2")
z0 = torch.zeros(1, V2, dtype=torch.float16)
v_naive = z0.exp().sum().item()
v_lse = torch.logsumexp(z0, dim=-1).item()
v_ce = F.cross_entropy(z0, torch.tensor([0])).item()
v_sm = torch.softmax(z0, dim=-1)[0, 0]
v_fp32 = F.cross_entropy(z0.float(), torch.tensor([0]))
v_sum32 = z0.float().exp().sum().item()                  # the same sum, in a format that holds it
value("v_ln_V2", math.log(V2))
value("v_fp32", v_fp32)
value("v_softmax_p", v_sm, fixed=ATPROBE)
value("v_one_over_V2", 1 / V2)


def first_nonfinite(f, lo=1_000, hi=300_000):
    """Smallest n for which f(n) is not finite (f finite at lo, not at hi)."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if math.isfinite(f(mid)) else (lo, mid)
    return hi


n_ce = value("first_bad_V_ce_fp16",
             first_nonfinite(lambda n: F.cross_entropy(torch.zeros(1, n, dtype=torch.float16),
                                                       torch.tensor([0])).item()), fixed=LINE)
n_lse = value("first_bad_V_lse_fp16",
              first_nonfinite(lambda n: torch.logsumexp(torch.zeros(n, dtype=torch.float16), 0).item()), fixed=LINE)
fp16_max = lim["fp16"]["max"]
half_step = (fp16_max - torch.nextafter(torch.tensor(fp16_max, dtype=torch.float16),
                                        torch.tensor(0.0, dtype=torch.float16)).item()) / 2
value("fp16_max_plus_half_step", fp16_max + half_step, fixed=DTYPE)
print(f"\nVariation: |V| = {V2:,}, all-zero logits, fp16 (CPU kernels)")
row("naive sum of exp (fp16 / fp32)", fmt(v_naive), fmt(v_sum32), w=44)
row("torch.logsumexp (fp16)", fmt(v_lse), w=44)
row("F.cross_entropy (fp16)", fmt(v_ce), w=44)
row("torch.softmax p_0 (fp16)", f"{v_sm.item():.4e}", w=44)
row("1 / |V|", f"{1 / V2:.4e}", w=44)
row("F.cross_entropy (upcast to fp32)", f"{v_fp32.item():.4f}", w=44)
row("ln |V|", f"{math.log(V2):.4f}", w=44)
row("first |V| where fp16 cross_entropy is inf", f"{n_ce:,}", w=44)
row("first |V| where fp16 logsumexp is inf", f"{n_lse:,}", w=44)
row("fp16 max + half its spacing", f"{fp16_max + half_step:,.0f}", w=44)
sanity("variation_fp16_fails", v_naive == math.inf and v_lse == math.inf and v_ce == math.inf
       and v_sum32 > fp16_max,
       "the fp32 sum |V| exceeds fp16's max: the sum, logsumexp and cross_entropy are inf in fp16",
       operands=(v_sum32, fp16_max), relation="larger")
sanity("variation_fp32_ok", abs(v_fp32.item() - math.log(V2)) < 1e-4, "in fp32 the loss is ln|V|",
       operands=(v_fp32.item(), math.log(V2)))
sanity("variation_threshold_near_max",
       abs(n_ce - (fp16_max + half_step)) <= half_step and abs(n_lse - (fp16_max + half_step)) <= half_step,
       "the first failing |V| found by bisection lies within the fp16 rounding step of max + half its spacing",
       operands=(n_ce, fp16_max + half_step), relation=("largest", "half"))
