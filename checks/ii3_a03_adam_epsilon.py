"""II.3.A03 — Adam's epsilon against the second moment in low precision.

Reads Adam's default epsilon from torch.optim.Adam and rounds it to fp16 and bf16. Probes a real
torch.optim.Adam step on every positive finite fp16 number as a gradient, with the parameters (and so,
in torch, the optimiser's state) in fp16, bf16 and fp32, and counts the second moments that are zero
and the updated parameters that are inf or nan; finds the gradient sizes at which the second and first
moments flush to zero and sets them against the formulas. Then takes one real step on a small MLP's
real gradient in each dtype, measures the first step's update against the gradient's scale for three
epsilons, and counts what raising epsilon changes.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim.adam as adam_mod
from torch.optim.optimizer import _get_foreach_kernels_supported_devices

from numbook.check import given, sanity, value

torch.set_num_threads(1)
HF, BF, F32 = torch.float16, torch.bfloat16, torch.float32
FORMAT = "a property of the formats"
DEFAULT = "torch.optim.Adam's default"
PROBE = "set by Adam's default betas and eps and the fp16 format, whatever the learning rate"


def row(label, *cells, w=34, cw=14):
    print(f"  {label:<{w}}" + "".join(f"{c!s:>{cw}}" for c in cells))


def adam_step(grad, dtype, lr, eps, p0=None, **impl):
    """One real Adam step on a parameter of `dtype` (torch keeps the state in that dtype); returns Δp, m, v.

    The single-tensor implementation (foreach=False) unless `impl` names another (fused=True, foreach=True)."""
    p = (torch.zeros_like(grad) if p0 is None else p0).to(dtype).clone().requires_grad_(True)
    before = p.detach().clone()
    p.grad = grad.to(dtype)
    opt = torch.optim.Adam([p], lr=lr, eps=eps, **(impl or {"foreach": False}))
    opt.step()
    st = opt.state[p]
    return p.detach().float() - before.float(), st["exp_avg"], st["exp_avg_sq"]


# -- Step 1: epsilon in the formats ------------------------------------------------------------------------
probe = torch.optim.Adam([torch.zeros(1, requires_grad=True)])
eps = value("adam_eps", probe.defaults["eps"], fixed=DEFAULT)
b1, b2 = probe.defaults["betas"]
value("beta1", b1, fixed=DEFAULT)
value("beta2", b2, fixed=DEFAULT)
fh, fb = torch.finfo(HF), torch.finfo(BF)
sub16 = torch.nextafter(torch.zeros(1, dtype=HF), torch.ones(1, dtype=HF)).item()
value("fp16_smallest_subnormal", sub16, fixed=FORMAT)
value("sub_exp", math.log2(sub16), fixed=FORMAT)
half_sub = value("fp16_half_sub", sub16 / 2, fixed=FORMAT)
value("half_sub_exp", math.log2(sub16 / 2), fixed=FORMAT)
value("fp16_smallest_normal", fh.smallest_normal, fixed=FORMAT)
eps16 = value("eps_in_fp16", torch.tensor(eps).to(HF).item(), fixed=DEFAULT)
eps_bf = value("eps_in_bf16", torch.tensor(eps).to(BF).item(), fixed=DEFAULT)
value("eps_bf16_relerr", abs(eps_bf - eps) / eps, fixed=DEFAULT)
value("eps_over_half_sub", eps / half_sub, fixed=DEFAULT)
print(f"Adam's eps {eps:g}: in fp16 {eps16:g} (half the smallest subnormal is {half_sub:.4e}); in bf16 {eps_bf:.6e}")
sanity("half_flushes", torch.tensor(half_sub).to(HF).item() == 0 and half_sub == sub16 / 2
       and torch.nextafter(torch.tensor(half_sub), torch.tensor(1.0)).to(HF).item() == sub16,
       "half the smallest subnormal rounds to zero (the tie goes to the even neighbour); "
       "the next fp32 number up does not",
       operands=(half_sub, sub16), relation="half")
sanity("eps_flushes_fp16", eps16 == 0 and eps < half_sub, "Adam's eps is smaller than half of fp16's smallest "
       "subnormal and rounds to zero", operands=(eps, half_sub), relation="smaller")
sanity("eps_normal_bf16", eps_bf >= fb.smallest_normal and eps_bf != eps,
       "in bf16 eps is a normal number, not zero, rounded to bf16's 8 significant bits",
       operands=(eps_bf, fb.smallest_normal),
       relation="not")

# -- Step 2: every fp16 gradient, one real Adam step -----------------------------------------------------------
lr = given("lr", 1e-3)
bits = torch.arange(1, 0x7C00, dtype=torch.int16)           # every positive finite fp16 bit pattern
G = bits.view(HF).float()
n_g = value("n_fp16_grads", G.numel(), fixed=FORMAT)
dp16, m16, v16 = adam_step(G, HF, lr, eps)
v_zero = v16 == 0
m_zero = m16 == 0
n_vzero = value("n_v_zero", int(v_zero.sum()), fixed=PROBE)
n_inf = value("n_inf", int(dp16.isinf().sum()), fixed=PROBE)
n_nan = value("n_nan", int(dp16.isnan().sum()), fixed=PROBE)
n_fin = value("n_finite", int(dp16.isfinite().sum()), fixed=PROBE)
g_v = value("g_v_probe", G[v_zero].max().item(), fixed=PROBE)          # the largest gradient whose v is zero
g_v_up = G[~v_zero].min().item()
g_m = value("g_m_probe", G[m_zero].max().item(), fixed=PROBE)
g_v_formula = value("g_v_formula", math.sqrt(half_sub / (1 - b2)), fixed=PROBE)
g_m_formula = value("g_m_formula", half_sub / (1 - b1), fixed=PROBE)
value("g_v_log2", math.log2(g_v_formula), fixed=PROBE)
value("n_m_zero", int(m_zero.sum()), fixed=PROBE)
g2_flush = value("g2_flush", math.sqrt(half_sub), fixed=PROBE)
value("g2_flush_log2", math.log2(g2_flush), fixed=PROBE)
value("g_v_over_g2", g_v_formula / g2_flush, fixed=PROBE)
g2_just_above = torch.tensor(g2_flush * 1.01).to(HF).float().pow(2).to(HF).item()
sanity("beta2_moves_flush_up", g_v > 30 * g2_flush and g2_just_above != 0,
       "the factor 1 - beta2 moves the flush point of v above the point where g^2 alone flushes, by sqrt(1000)",
       operands=(g_v, g2_flush), relation="larger")
print(f"\nOne Adam step, lr {lr}, on all {n_g:,} positive fp16 gradients, parameters and state in fp16")
row("v = 0", f"{n_vzero:,}", f"g <= {g_v:.4e}")
row("m = 0", f"{int(m_zero.sum()):,}", f"g <= {g_m:.4e}")
row("updated parameter inf / nan / finite", f"{n_inf:,}", f"{n_nan:,}", f"{n_fin:,}")
sanity("v_threshold_two_routes", g_v <= g_v_formula <= g_v_up and g_v_formula / g_v < 1.001,
       "the largest gradient whose second moment is zero, found by the real step, equals sqrt(2^-25 / (1 - beta2)) "
       "to one fp16 spacing", operands=(g_v, g_v_formula), relation="equal")
sanity("m_threshold_two_routes", g_m <= g_m_formula and g_m_formula / g_m < 1.001,
       "the first moment is zero up to 2^-25 / (1 - beta1)", operands=(g_m, g_m_formula), relation="equal")
inf_pred = int((v_zero & ~m_zero).sum())
nan_pred = int((v_zero & m_zero).sum())
sanity("inf_is_m_over_zero", n_inf == inf_pred and n_nan == nan_pred and n_fin == int((~v_zero).sum()),
       "every update with v = 0 is inf where m is not zero and nan where m is zero too; every other update is finite",
       operands=(n_inf, inf_pred), relation=("equal", "not"))
# the same gradients in bf16 and fp32 state
dpb, _, vb = adam_step(G, BF, lr, eps)
dp32, _, v32 = adam_step(G, F32, lr, eps)
nf_b = value("nonfinite_bf16", int((~dpb.isfinite()).sum()), fixed="bf16 has fp32's range: nothing near it overflows")
nf_32 = value("nonfinite_fp32", int((~dp32.isfinite()).sum()), fixed="fp32: nothing near it overflows")
vz_b = value("v_zero_bf16", int((vb == 0).sum()), fixed="bf16 has fp32's range")
vz_32 = value("v_zero_fp32", int((v32 == 0).sum()), fixed="fp32's range")
row("bf16 state: v = 0, non-finite", f"{vz_b:,}", f"{nf_b:,}")
row("fp32 state: v = 0, non-finite", f"{vz_32:,}", f"{nf_32:,}")
sanity("wide_formats_clean", nf_b == nf_32 == vz_b == vz_32 == 0 < n_inf,
       "with bf16 or fp32 state no second moment is zero and no update is inf or nan", operands=(nf_b, n_inf),
       relation="not")

# -- Step 3: a real model's gradient --------------------------------------------------------------------------
d = given("d", 64)
width = given("width", 256)
N = given("N", 1024)
seed = given("seed", 0, nudge=0)
torch.manual_seed(seed)
net = nn.Sequential(nn.Linear(d, width), nn.GELU(), nn.Linear(width, d))
gen = torch.Generator().manual_seed(seed)
X, Y = torch.randn(N, d, generator=gen), torch.randn(N, d, generator=gen)
F.mse_loss(net(X), Y).backward()
params = [p.detach().clone() for p in net.parameters()]
grads = [p.grad.detach().clone() for p in net.parameters()]
g_all = torch.cat([g.flatten() for g in grads])
n_p = value("n_params", g_all.numel())
value("g_median", g_all.abs().median().item())

below_v = value("frac_below_gv", float((g_all.abs().to(HF).float() <= g_v).float().mean()))
g_med = g_all.abs().median().item()
sanity("model_below_flush", below_v > 0.99 and g_med < g_v, "more than 99% of the MLP's gradients, "
       "and its median, lie below the flush point of v", operands=(g_med, g_v), relation="smaller")
res = {}
for name, dt in (("fp16", HF), ("bf16", BF), ("fp32", F32)):
    dps = [adam_step(g, dt, lr, eps, p0=p) for p, g in zip(params, grads, strict=True)]
    dp = torch.cat([x[0].flatten() for x in dps])
    vz = sum(int((x[2] == 0).sum()) for x in dps)
    res[name] = (int(dp.isinf().sum()), int(dp.isnan().sum()), vz)
print(f"\nOne Adam step on the MLP's real gradient ({n_p:,} parameters, median |g| {g_all.abs().median():.2e})")
row("", "inf", "nan", "v = 0")
for name, (a, b, c) in res.items():
    row(name, f"{a:,}", f"{b:,}", f"{c:,}")
value("model_inf_fp16", res["fp16"][0])
value("model_nan_fp16", res["fp16"][1])
value("model_nonfinite_fp16_frac", (res["fp16"][0] + res["fp16"][1]) / n_p)
value("model_vzero_fp16_frac", res["fp16"][2] / n_p)
WIDE = "bf16 and fp32 have fp32's range: no second moment of these gradients flushes"
for name in ("bf16", "fp32"):
    for k, what in enumerate(("inf", "nan", "vzero")):
        value(f"model_{what}_{name}", res[name][k], fixed=WIDE)
model_clean = value("model_nonfinite_wide", sum(res["bf16"]) + sum(res["fp32"]), fixed=WIDE)
sanity("model_fp16_breaks", res["fp16"][0] + res["fp16"][1] == res["fp16"][2] > 0 and model_clean == 0,
       "in fp16 every parameter whose second moment flushed is inf or nan after the step; in bf16 and fp32 none is",
       operands=(res["fp16"][2], res["fp16"][0] + res["fp16"][1]), relation=("equal", "not"))

# -- Step 4: the update against the gradient's scale, and a larger eps ----------------------------------------
eps_hi = given("eps_hi", 1e-5)
eps_mid = given("eps_mid", 1e-6)
scales = [1e-3, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10]
print("\nFirst-step |update| / lr against a gradient of size g (fp32 state)")
row("g", *(f"eps {e:g}" for e in (eps, eps_mid, eps_hi)), "fp16, 1e-8", "fp16, eps_hi")
worst = 0.0
fp16_col = []
for k, s in enumerate(scales):
    gs = torch.full((4,), s)
    cells = []
    for j, e in enumerate((eps, eps_mid, eps_hi)):
        r = adam_step(gs, F32, lr, e)[0].abs().max().item() / lr
        worst = max(worst, abs(r - s / (s + e)))
        if j == 0:
            value(f"u_{k}_{j}", r, fixed="Adam's default eps and the table's gradient sizes")
        else:
            value(f"u_{k}_{j}", r)
        cells.append(f"{r:.4f}")
    r16 = adam_step(gs, HF, lr, eps)[0].abs().max().item() / lr
    r16h = adam_step(gs, HF, lr, eps_hi)[0].abs().max().item() / lr
    cells += [f"{r16:.4f}", f"{r16h:.4f}"]
    row(f"{s:g}", *cells)
    fp16_col.append((s, r16))
    # below the first moment's flush point m is 0 and the update 0 / eps is 0 for any eps and learning rate
    value(f"u16h_{k}", r16h, fixed="m flushes to zero in fp16 at this gradient: 0 / eps" if s <= g_m else None)
g16_scales = [torch.tensor(s).to(HF).item() for s in scales]
value("g16_1e7", g16_scales[3], fixed="1e-7 rounded to fp16: a property of the format")
n_g16_zero = value("n_scales_g16_zero", sum(g == 0 for g in g16_scales),
                   fixed="the table's gradient sizes under half fp16's smallest subnormal")
sanity("small_g_rounds_zero", all((g == 0) == (s < half_sub) for s, g in zip(scales, g16_scales, strict=True))
       and 0 < g16_scales[3] <= g_m,
       "the table's gradients under 2^-25 are themselves zero in fp16; 1e-7 is not, but lies under the first "
       "moment's flush point", operands=(g16_scales[4], 0.0), relation="smaller")
g_m_hi = [s for s, r in fp16_col if math.isinf(r)]
g_m_lo = [s for s, r in fp16_col if math.isnan(r)]
sanity("fp16_column", g_m_hi == scales[:3] and g_m_lo == scales[3:] and min(g_m_hi) > g_m > max(g_m_lo),
       "in fp16 with eps 1e-8 every gradient size of the table gives inf or nan: inf above the first moment's flush "
       "point, nan below it", operands=(min(g_m_hi), g_m), relation=("larger", "smaller"))
sanity("update_formula", worst < 1e-4, "the fp32 first step's update is lr * g / (g + eps) for every g and eps",
       operands=(worst, 1e-4), relation=("equal", "half"))
# the raised eps in fp16: no inf, but where v flushed the update is lr * m / ((1 - beta1) * eps), about lr * g / eps
e16h = value("eps_hi_in_fp16", torch.tensor(eps_hi).to(HF).item())
dph, m_h, vh = adam_step(G, HF, lr, eps_hi)
n_inf_h = value("n_inf_hi", int(dph.isinf().sum()), fixed="with eps in fp16 not zero, no update divides by zero")
n_nan_h = value("n_nan_hi", int(dph.isnan().sum()), fixed="with eps in fp16 not zero, no update divides by zero")
sanity("no_nonfinite_hi", n_inf_h == n_nan_h == 0 < n_inf, "with eps 1e-5, not zero in fp16, the probe leaves no inf "
       "or nan", operands=(n_inf_h + n_nan_h, n_inf), relation="not")
vz_h = vh == 0
n_vz_h = value("n_v_zero_hi", int(vz_h.sum()), fixed=PROBE)
over = (dph.double().abs() > lr) & vz_h                       # compared with the learning rate in float64
n_over = value("n_over_lr_hi", int(over.sum()),
               fixed="the fp16 gradients between eps_hi and g_v whose rounded update exceeds lr; independent of lr, "
               "and a 1% nudge of eps_hi moves its fp16 value by one subnormal spacing, which the rounding of the "
               "updates next to lr absorbs (5% gives 7,401)")
# the second route: lr / (1 - beta1) * m / eps with m and eps as stored in fp16, rounded once to fp16
pred_upd = (lr / (1 - b1) * m_h.double() / e16h).to(HF).double()
n_over_pred = int(((pred_upd.abs() > lr) & vz_h).sum())
same_upd = bool((pred_upd.abs()[vz_h] == dph.double().abs()[vz_h]).all())
sanity("raised_eps_fp16", 0 < n_over == n_over_pred < n_vz_h and same_upd,
       "where v flushed every update equals lr * m / ((1 - beta1) eps) with m and eps as stored in fp16; fewer than "
       "all of those updates are larger than lr, as many as that formula gives", operands=(n_over, n_over_pred),
       relation=("larger", "smaller", "equal"))
# with m exact the formula is lr * g / eps: approximate where m = fp16(0.1 g) is a coarse subnormal
gd = G.double()
n_over_g = value("n_over_g_formula", int(((lr * gd / eps_hi > lr) & vz_h).sum()))
n_over_g16 = value("n_over_g_formula16", int(((lr * gd / e16h > lr) & vz_h).sum()))
ratio_g = dph.double().abs() / (lr * gd / e16h)
sel_m = vz_h & (m_h != 0)
sel_hi = vz_h & (gd > eps_hi)
r_lo = value("g_formula_ratio_lo", ratio_g[sel_m].min().item())
r_hi = value("g_formula_ratio_hi", ratio_g[sel_m].max().item())
r_lo_e = value("g_formula_ratio_lo_above_eps", ratio_g[sel_hi].min().item())
r_hi_e = value("g_formula_ratio_hi_above_eps", ratio_g[sel_hi].max().item())
print(f"eps {eps_hi:g} in fp16, v = 0: {n_over:,} updates above lr ({n_over_pred:,} by lr m / ((1 - beta1) eps16)); "
      f"lr g / eps gives {n_over_g:,}, lr g / eps16 {n_over_g16:,}; real / (lr g / eps16) {r_lo:.3f} to {r_hi:.3f}, "
      f"above eps {r_lo_e:.3f} to {r_hi_e:.3f}")
sanity("g_formula_approx", n_over_g16 < n_over and n_over_g < n_over and r_lo < 1 < r_hi
       and r_lo < r_lo_e < 1 < r_hi_e < r_hi,
       "lr * g / eps is approximate where v flushed: the real update lies on both sides of it, nearer above eps, and "
       "it counts fewer updates above lr than the real step", operands=(n_over_g, n_over),
       relation=("larger", "smaller"))
# the 1e-3 row of the table lies below the flush point: its update is about lr * g / eps
u16h_0 = abs(adam_step(torch.full((4,), scales[0]), HF, lr, eps_hi)[0]).max().item() / lr
g16_0 = torch.tensor(scales[0]).to(HF).item()
sanity("table_hi_flushed", scales[0] < g_v and abs(u16h_0 / (g16_0 / e16h) - 1) < 0.01,
       "g = 1e-3 lies below the flush point of v; its update is lr * g / eps to 1%", operands=(scales[0], g_v),
       relation="smaller")
# the largest update: at the flush point, a little above g_v / eps16 because m is rounded to fp16
worst_over = value("max_over_lr_hi", dph.abs().max().item() / lr)
pred_over = value("pred_max_over", g_v / e16h)
k_max = int(dph.abs().argmax())
sanity("max_over_from_m", G[k_max].item() == g_v and worst_over > pred_over
       and worst_over == pred_upd.abs()[vz_h].max().item() / lr and abs(worst_over / pred_over - 1) < 0.01,
       "the largest update is at the flush point g_v; with m rounded to fp16 it lies above g_v / eps16, by under 1%",
       operands=(worst_over, pred_over), relation=("larger", "largest"))
# above the flush point v is a subnormal with few significant bits: updates there still exceed lr
ratio_h = dph.double().abs() / lr
k_top = int(torch.where(vz_h, torch.zeros_like(ratio_h), ratio_h).argmax())
top_vnz = value("max_over_lr_hi_vnonzero", ratio_h[k_top].item())
sanity("coarse_v_overshoots", not vz_h[k_top] and 0 < vh[k_top].item() < fh.smallest_normal and top_vnz > 1.1,
       "where v is a non-zero subnormal the update still exceeds lr", operands=(top_vnz, 1.0), relation="larger")
# on the real model, fp32 state: share of updates under lr/2 for each eps
halves = []
for j, e in enumerate((eps, eps_mid, eps_hi)):
    dp = torch.cat([adam_step(g, F32, lr, e, p0=p)[0].flatten() for p, g in zip(params, grads, strict=True)])
    value(f"model_half_{j}", float((dp.abs() < lr / 2).float().mean()))
    value(f"model_pred_half_{j}", float((g_all.abs() < e).float().mean()))
    value(f"model_max_update_{j}", dp.abs().max().item())
    halves.append((float((dp.abs() < lr / 2).float().mean()), float((g_all.abs() < e).float().mean())))
    print(f"  eps {e:g}: share of updates under half the learning rate {float((dp.abs() < lr / 2).float().mean()):.4%}")
# -- Which implementation a default Adam runs: record the calls of the two candidates ------------------------
called = []
_single, _multi = adam_mod._single_tensor_adam, adam_mod._multi_tensor_adam
adam_mod._single_tensor_adam = lambda *a, **k: (called.append("single"), _single(*a, **k))[1]
adam_mod._multi_tensor_adam = lambda *a, **k: (called.append("foreach"), _multi(*a, **k))[1]
try:
    q = torch.zeros(8, dtype=HF, requires_grad=True)
    q.grad = G[:8].to(HF)
    torch.optim.Adam([q], lr=lr).step()                      # foreach and fused left at their default, None
finally:
    adam_mod._single_tensor_adam, adam_mod._multi_tensor_adam = _single, _multi
foreach_devices = _get_foreach_kernels_supported_devices()
print(f"\ndefault Adam on a CPU tensor runs: {called}; foreach kernels by default on: {foreach_devices}")
sanity("cpu_default_single_tensor", called == ["single"] and "cpu" not in foreach_devices and "cuda" in foreach_devices,
       "a default Adam step on CPU tensors runs the single-tensor implementation, not foreach; foreach is the default "
       "on CUDA", operands=(called[0], "single"), relation="not")

# -- Other implementations: fused=True on the CPU ---------------------------------------------------------------
dpf, _, vf = adam_step(G, HF, lr, eps, fused=True)
dpe, _, _ = adam_step(G, HF, lr, eps, foreach=True)
vzf = vf == 0
n_vzero_fused = value("n_v_zero_fused", int(vzf.sum()), fixed=PROBE)
g_v_fused = value("g_v_fused", G[vzf].max().item(), fixed=PROBE)
nonfin_fused = value("n_nonfinite_fused", int((~dpf.isfinite()).sum()),
                     fixed="the fused step divides in fp32, where eps is not zero")
n_inf_fe = value("n_inf_foreach", int(dpe.isinf().sum()), fixed=PROBE)
n_nan_fe = value("n_nan_foreach", int(dpe.isnan().sum()), fixed=PROBE)
uf = dpf.double().abs() / lr
value("fused_min_over_lr", uf.min().item(), fixed=PROBE)
value("fused_max_over_lr", uf.max().item(), fixed=PROBE)
# the second route: the fp32 first-step formula lr * g / (g + eps), rounded once to fp16
ref_f = (lr * G / (G + eps)).to(HF).double()
fused_rel = ((dpf.double().abs() - ref_f).abs() / ref_f).max().item()
print(f"\nfused=True, fp16 state: v = 0 for {n_vzero_fused:,} (g <= {g_v_fused:.4e}), non-finite {nonfin_fused}, "
      f"|update|/lr {uf.min():.4f} to {uf.max():.4f}; max rel. diff from the fp32 formula {fused_rel:.2e}")
sanity("fused_same_flush", n_vzero_fused == n_vzero and g_v_fused == g_v and n_inf_fe == n_inf
       and n_nan_fe == n_nan, "with fused=True the stored v is zero for the same gradients, the flush point does "
       "not move; foreach=True gives the same inf and nan counts as the single-tensor step",
       operands=(g_v_fused, g_v), relation="not")
sanity("fused_no_division_by_zero", nonfin_fused == 0 < n_inf and fused_rel <= 2.0**-10,
       "the fused step leaves no inf or nan: its update equals the fp32 formula lr * g / (g + eps) rounded to fp16",
       operands=(nonfin_fused, n_inf), relation=("equal", "not"))
dpm = torch.cat([adam_step(g, HF, lr, eps, p0=p, fused=True)[0].flatten() for p, g in zip(params, grads, strict=True)])
model_fused = value("model_nonfinite_fused", int((~dpm.isfinite()).sum()),
                    fixed="the fused step divides in fp32, where eps is not zero")
sanity("model_fused_clean", model_fused == 0 < res["fp16"][0], "on the MLP with fp16 state fused=True leaves "
       "no parameter non-finite, where the single-tensor step leaves almost all",
       operands=(model_fused, res["fp16"][0]), relation="not")
sanity("model_half_is_share", all(a == b for a, b in halves) and halves[0][0] < halves[1][0] < halves[2][0],
       "the share of the MLP's updates below lr/2 is equal to the share of its gradients below eps, and grows with eps",
       operands=halves[2], relation=("equal", "grows"))
