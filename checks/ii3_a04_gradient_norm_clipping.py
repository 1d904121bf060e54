"""II.3.A04 — The global gradient norm and clipping.

Runs a real backward pass of a small MLP classifier and compares torch.nn.utils.clip_grad_norm_'s
total norm with two routes by hand (the root of the sum of squared per-parameter norms, in float64,
and the norm of all gradients concatenated). Checks the clip coefficient against the formula of the
installed torch source, min(max_norm / (total_norm + 1e-6), 1), element by element; measures the
cosine between the gradient before and after global clipping and after per-tensor clipping. Probes
fp16 gradients: where torch's norm overflows to inf (by bisection on the real call), what the clip
then does to the gradients, what error_if_nonfinite does, and what GradScaler's unscale_ does with
fp16 gradients and with an inf in fp32 ones. Then counts the clipped steps of short real training
runs over five seeds.
"""

import inspect
import math
import statistics

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import clip_grad_norm_

from numbook.check import estimate, given, sanity, value

torch.set_num_threads(1)
HF, F32 = torch.float16, torch.float32
FORMAT = "a property of the fp16 format"


def row(label, *cells, w=40, cw=14):
    print(f"  {label:<{w}}" + "".join(f"{c!s:>{cw}}" for c in cells))


d = given("d", 32)
width = given("width", 128)
C = given("C", 10)
B = given("B", 64)
seed = given("seed", 0, nudge=0)
max_norm = given("max_norm", 1.0)
data_offset = given("data_offset", 1000)


def make(seed):
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(d, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, C))
    gen = torch.Generator().manual_seed(seed + data_offset)
    teacher = torch.randn(d, C, generator=gen)
    return net, gen, teacher


def batch(gen, teacher):
    x = torch.randn(B, d, generator=gen)
    return x, (x @ teacher).argmax(1)


def flat(gs):
    return torch.cat([g.flatten() for g in gs])


# -- Step 1: the total norm, three routes ------------------------------------------------------------------
net, gen, teacher = make(seed)
x, y = batch(gen, teacher)
F.cross_entropy(net(x), y, reduction="sum").backward()
params = list(net.parameters())
SHAPE = "three linear layers, a weight and a bias each: the model's shape, not a size"
n_tensors = value("n_tensors", len(params), fixed=SHAPE)
value("n_params", sum(p.numel() for p in params))
before = [p.grad.detach().clone() for p in params]
per = [g.double().norm().item() for g in before]
by_hand = math.sqrt(sum(n * n for n in per))
concat = flat(before).double().norm().item()
src = inspect.getsource(torch.nn.utils.clip_grad._clip_grads_with_norm_)
formula_in_source = "max_norm / (total_norm + 1e-6)" in src and "torch.clamp(clip_coef, max=1.0)" in src
total = clip_grad_norm_(params, max_norm)
total_f = value("total_norm", total.item())
value("total_by_hand", by_hand)
value("total_concat", concat)
value("norm_over_max", total_f / max_norm)
rel = value("rel_diff_routes", max(abs(total_f - by_hand), abs(total_f - concat)) / by_hand)
for k, nrm in enumerate(per):
    value(f"per_norm_{k}", nrm)
value("per_norm_max", max(per))
row("clip_grad_norm_ total norm", f"{total_f:.6f}")
row("sqrt(sum of per-parameter norms^2)", f"{by_hand:.6f}")
row("norm of all gradients concatenated", f"{concat:.6f}")
sanity("norm_two_routes", rel < 1e-6, "clip_grad_norm_'s total norm equals the root of the sum of squared "
       "per-parameter norms and the norm of the concatenated gradient, to fp32 rounding", operands=(total_f, by_hand),
       relation="equal")

# -- Step 2: the clip coefficient ------------------------------------------------------------------------------
coef = value("clip_coef", max_norm / (total_f + 1e-6))
after = [p.grad.detach().clone() for p in params]
coef_t = torch.clamp(max_norm / (total + 1e-6), max=1.0)       # the source's line, on the returned fp32 norm
exact = (all(torch.equal(a, b * coef_t) for a, b in zip(after, before, strict=True))
         and abs(coef_t.item() / coef - 1) < 1e-6)
norm_after = value("norm_after", flat(after).double().norm().item())
sanity("coef_formula", formula_in_source and exact and coef < 1, "every clipped gradient equals the gradient times "
       "max_norm / (total_norm + 1e-6), smaller than 1, as the installed source says", operands=(coef, 1.0),
       relation=("equal", "smaller"))
sanity("norm_after_is_max", abs(norm_after - max_norm) < 1e-5 * max_norm, "the clipped gradient's norm equals max_norm",
       operands=(norm_after, max_norm), relation="equal")
# clamped at 1: with max_norm above the norm nothing changes
for p, g in zip(params, before, strict=True):
    p.grad = g.clone()
big = value("max_norm_loose", 2 * total_f)
clip_grad_norm_(params, big)
unchanged = all(torch.equal(p.grad, g) for p, g in zip(params, before, strict=True))
sanity("clamped_at_one", unchanged and big / (total_f + 1e-6) > 1, "with max_norm above the norm the coefficient "
       "is clamped to 1 and the gradients are unchanged, not scaled up", operands=(big, total_f),
       relation=("larger", "not"))

# -- Step 3: direction -----------------------------------------------------------------------------------------
cos_global = value("cos_global", F.cosine_similarity(flat(before).double(), flat(after).double(), dim=0).item())
for p, g in zip(params, before, strict=True):
    p.grad = g.clone()
for p in params:
    clip_grad_norm_([p], max_norm)
per_clipped = [p.grad.detach().clone() for p in params]
cos_per = value("cos_per_tensor", F.cosine_similarity(flat(before).double(), flat(per_clipped).double(), dim=0).item())
value("angle_per_deg", math.degrees(math.acos(min(1.0, cos_per))))
n_clipped_tensors = value("n_tensors_clipped", sum(n > max_norm for n in per),
                          fixed="every tensor: the smallest per-tensor norm, bound beside it, is far above max_norm")
norm_per = value("norm_after_per", flat(per_clipped).double().norm().item())
row("cosine, global clipping", f"{cos_global:.9f}")
row("cosine, per-tensor clipping", f"{cos_per:.6f}")
sanity("global_keeps_direction", abs(cos_global - 1) < 1e-6 and cos_per < 0.999,
       "global clipping keeps the direction (cosine 1); per-tensor clipping turns it (cosine smaller than 1)",
       operands=(cos_per, cos_global), relation=("equal", "smaller"))
sanity("per_tensor_norm_larger", max_norm < norm_per <= math.sqrt(n_tensors) * max_norm + 1e-6,
       "per-tensor clipping leaves a total norm larger than max_norm, at most sqrt(tensors) times it",
       operands=(norm_per, max_norm), relation=("larger", "at most"))
value("sqrt_tensors", math.sqrt(n_tensors), fixed=SHAPE)
per_min = value("per_norm_min", min(per))
sanity("all_tensors_above", n_clipped_tensors == n_tensors and per_min > max_norm,
       "every tensor's norm is above max_norm, the smallest too", operands=(per_min, max_norm),
       relation=("larger", "smallest"))

# -- Step 4: fp16 gradients -------------------------------------------------------------------------------------
n16 = given("n16", 1024)
vals = torch.arange(1, 0x7C00, dtype=torch.int16).view(HF)   # every positive finite fp16 number, ascending


def norm16(xv):
    p = nn.Parameter(torch.zeros(n16, dtype=HF))
    p.grad = torch.full((n16,), xv, dtype=HF)
    return clip_grad_norm_([p], max_norm), p


lo, hi = 0, vals.numel() - 1                                  # bisection: the smallest value whose norm is inf
while hi - lo > 1:
    mid = (lo + hi) // 2
    if torch.isinf(norm16(vals[mid].item())[0]):
        hi = mid
    else:
        lo = mid
x_fin, x_inf = vals[lo].item(), vals[hi].item()
value("x_last_finite", x_fin)
value("x_first_inf", x_inf)
fp16_max = value("fp16_max", torch.finfo(HF).max, fixed=FORMAT)
# fp16 rounds to inf from max + half a spacing: 65504 + 16 = 65520
below_max = torch.nextafter(torch.tensor(fp16_max, dtype=HF), torch.tensor(0.0, dtype=HF)).item()
inf_from = value("fp16_inf_from", fp16_max + (fp16_max - below_max) / 2, fixed=FORMAT)
x_pred = value("x_pred", inf_from / math.sqrt(n16))
sanity("inf_from_half", math.isinf(torch.tensor(inf_from).to(HF).item())
       and torch.nextafter(torch.tensor(inf_from), torch.tensor(0.0)).to(HF).item() == fp16_max,
       "fp16 rounds to inf from max plus half a spacing", operands=(inf_from, fp16_max), relation="larger")
t_fin = value("norm_last_finite", norm16(x_fin)[0].item(),
              fixed="fp16's largest finite number, where the probe stops")
value("sumsq_last_finite", x_fin * x_fin * n16)

print(f"\nfp16 gradient of {n16} equal elements: the norm is finite up to {x_fin} (norm {t_fin}), inf from {x_inf}")
sanity("norm_overflow_probe", x_fin < x_pred <= x_inf and x_fin * x_fin * n16 > fp16_max,
       "the norm overflows to inf first where x * sqrt(n) passes 65,520, not where the sum of squares passes 65,504",
       operands=(x_pred, x_inf), relation=("larger", "not"))
# the accumulation: torch's fp16 norm equals the fp32 norm rounded once to fp16
demo_scale = given("demo_scale", 300)
g16 = (torch.randn(n16, generator=torch.Generator().manual_seed(seed)) * demo_scale).to(HF)
n_torch = torch.linalg.vector_norm(g16)
n_ref = g16.float().norm().to(HF)
value("demo_norm", n_torch.item())
value("demo_sumsq", g16.float().pow(2).sum().item())
value("demo_dtype_bits", torch.finfo(n_torch.dtype).bits, fixed="the norm of an fp16 tensor is returned in fp16")
sanity("accumulates_wide", n_torch.item() == n_ref.item() and g16.float().pow(2).sum().item() > fp16_max,
       "torch's norm of fp16 gradients equals the fp32 norm rounded once to fp16, although the sum of squares "
       "exceeds fp16's max", operands=(n_torch.item(), n_ref.item()), relation=("equal", "larger", "not"))
# an inf total norm: the clip multiplies by max_norm / inf = 0 and zeroes every gradient
tn, p = norm16(x_inf)
zeroed = value("n_zeroed", int((p.grad == 0).sum()))
# several tensors, each finite, whose total overflows when the norms are stacked in fp16
k16 = given("k16", 4)
ps = [nn.Parameter(torch.zeros(n16, dtype=HF)) for _ in range(k16)]
xv = x_fin / math.sqrt(k16) * 1.5
for q in ps:
    q.grad = torch.full((n16,), xv, dtype=HF)
each = [torch.linalg.vector_norm(q.grad).item() for q in ps]
tot_k = clip_grad_norm_(ps, max_norm)
value("each_norm", each[0])
value("stack_total_fp32", math.sqrt(sum(e * e for e in each)))
zeroed_k = value("n_zeroed_stack", sum(int((q.grad == 0).sum()) for q in ps))
sanity("stack_overflows", all(math.isfinite(e) for e in each) and torch.isinf(tot_k),
       "each tensor's norm is finite, and the total of the stacked fp16 norms overflows to inf",
       operands=(each[0], fp16_max),
       relation="not")
sanity("inf_norm_zeroes", torch.isinf(tn) and zeroed == n16 and torch.isinf(tot_k) and zeroed_k == k16 * n16,
       "an inf total norm makes the coefficient zero: every gradient element is zero after the clip, in the single "
       "tensor and in the stacked case", operands=(zeroed, n16), relation="equal")
# double rounding: two tensors whose true total is under 65,520, each norm rounded up in fp16, the total then inf.
# Each true norm t lies between the midpoint below f and 65,520 / sqrt(2), where f is the first fp16 value with
# f * sqrt(2) >= 65,520: t rounds up to f, and the stacked norm f * sqrt(2) rounds to inf.
f_up = next(v for v in vals.tolist() if v * math.sqrt(2) >= inf_from)
f_below = torch.nextafter(torch.tensor(f_up, dtype=HF), torch.tensor(0.0, dtype=HF)).item()
t_target = ((f_up + f_below) / 2 + inf_from / math.sqrt(2)) / 2    # the middle of that window
a_lo = math.floor(t_target / math.sqrt(n16))                         # n16 elements of a_lo or a_lo + 1
k_hi = round((t_target**2 - n16 * a_lo**2) / (2 * a_lo + 1))
g_dr = torch.full((n16,), float(a_lo), dtype=HF)
g_dr[:k_hi] = a_lo + 1
dr_ps = [nn.Parameter(torch.zeros(n16, dtype=HF)) for _ in range(2)]
for q in dr_ps:
    q.grad = g_dr.clone()
value("dr_k", k_hi)
value("dr_hi", a_lo + 1)
value("dr_lo", a_lo)
dr_true = value("dr_true_each", g_dr.double().norm().item())
dr_each16 = value("dr_each16", torch.linalg.vector_norm(g_dr).item(),
                  fixed="the first fp16 value f with f sqrt(2) >= 65,520: the tensors are built so that each true norm "
                  "rounds up to it, for any n16; a property of the fp16 format")
dr_total_true = value("dr_true_total", math.sqrt(2) * dr_true)
dr_tot = clip_grad_norm_(dr_ps, max_norm)
dr_zeroed = value("dr_zeroed", sum(int((q.grad == 0).sum()) for q in dr_ps))
print(f"two tensors of {n16} elements ({k_hi} of {a_lo + 1}, the rest {a_lo}): true norms {dr_true:.2f} each, "
      f"{dr_each16} in fp16; true total {dr_total_true:.2f}; clip_grad_norm_ returns {dr_tot.item()}")
sanity("double_rounding", dr_total_true < inf_from and dr_true < dr_each16 and torch.isinf(dr_tot)
       and dr_zeroed == 2 * n16 and dr_each16 * math.sqrt(2) >= inf_from,
       "two tensors with a true total norm smaller than 65,520: each norm rounds up in fp16 and the stacked norm is "
       "inf, not finite; every element is zeroed", operands=(dr_total_true, inf_from), relation=("smaller", "not"))
try:
    q = nn.Parameter(torch.zeros(n16, dtype=HF))
    q.grad = torch.full((n16,), x_inf, dtype=HF)
    clip_grad_norm_([q], max_norm, error_if_nonfinite=True)
    raised = False
except RuntimeError as e:
    raised = "non-finite" in str(e)
grad_kept = bool(torch.equal(q.grad, torch.full((n16,), x_inf, dtype=HF)))
sanity("error_if_nonfinite", raised and grad_kept, "error_if_nonfinite=True raises a RuntimeError and leaves the "
       "gradients untouched", operands=(raised, grad_kept), relation="not")
# GradScaler: fp16 gradients are refused
scaler = torch.amp.GradScaler("cpu")
q = nn.Parameter(torch.zeros(4, dtype=HF))
opt = torch.optim.SGD([q], lr=0.1)
scaler.scale(q.float().sum()).backward()
try:
    scaler.unscale_(opt)
    refused = False
except ValueError as e:
    refused = "FP16" in str(e)
sanity("scaler_refuses_fp16", refused, "GradScaler's unscale_ raises a ValueError on fp16 gradients",
       operands=(refused, True),
       relation="not")
# the recipe: fp32 parameters, fp16 autocast; the scale overflows the backward; unscale_, clip, step
scale0 = given("big_scale_exp", 40)


def recipe(reduction):
    """One scaled step of the recipe on the first batch of the seed's data; returns what the check reads."""
    net2, gen2, teacher2 = make(seed)
    opt2 = torch.optim.SGD(net2.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**scale0)
    w0 = [p.detach().clone() for p in net2.parameters()]
    x2, y2 = batch(gen2, teacher2)
    with torch.autocast("cpu", dtype=HF):
        loss2 = F.cross_entropy(net2(x2), y2, reduction=reduction)
    scaler.scale(loss2).backward()
    scaler.unscale_(opt2)
    found = sum(v.item() for v in scaler._found_inf_per_device(opt2).values())   # what step() reads
    tn2 = clip_grad_norm_(net2.parameters(), max_norm)
    gs = [p.grad for p in net2.parameters()]
    n_nan = sum(int(g.isnan().sum()) for g in gs)
    n_inf = sum(int(g.isinf().sum()) for g in gs)
    scaler.step(opt2)
    kept = all(torch.equal(a, b.detach()) for a, b in zip(w0, net2.parameters(), strict=True))
    scale_after_step = scaler.get_scale()                     # step() skips; the scale is still the initial one
    scaler.update()
    return dict(tn=tn2, nan=n_nan, inf=n_inf, found=found, kept=kept, s_step=scale_after_step,
                s_after=scaler.get_scale(), n_p=sum(g.numel() for g in gs))


rc = recipe("mean")
rc_sum = recipe("sum")
nonfin2 = value("recipe_nonfinite_grads", rc["nan"] + rc["inf"])
value("recipe_nan_grads", rc["nan"])
value("recipe_inf_grads", rc["inf"], fixed="the overflowed backward pass gives nan, not inf, in every element")
n_p2 = rc["n_p"]
sanity("recipe_overflows", nonfin2 == rc["nan"] == n_p2 and rc["inf"] == 0 and torch.isnan(rc["tn"]),
       "after unscale_ every gradient element of the overflowed backward pass is nan, none inf, equal to the "
       "parameter count, and the total norm is nan", operands=(rc["nan"], n_p2), relation=("equal", "not"))
sanity("recipe_reduction_free", all(rc_sum[k] == rc[k] for k in ("nan", "inf", "kept", "s_after"))
       and torch.isnan(rc_sum["tn"]), "with the loss summed over the batch instead of averaged the same elements "
       "are nan, the step is skipped and the scale halved", operands=(rc_sum["nan"], rc["nan"]), relation="equal")
value("recipe_scale_after", rc["s_after"])
value("recipe_scale_before", 2.0**scale0)
sanity("scaler_skips", not torch.isfinite(rc["tn"]) and rc["found"] > 0 and rc["kept"]
       and rc["s_step"] == 2.0**scale0 and rc["s_after"] == 2.0 ** (scale0 - 1),
       "with a non-finite value in the unscaled gradients (found_inf counts nan as well as inf) the clip's norm is "
       "not finite, but scaler.step skips the step: the weights are unchanged; scaler.update then halves the scale",
       operands=(rc["s_after"], 2.0**scale0), relation=("half", "not"))
row("recipe: total norm after unscale_", f"{rc['tn'].item()}")

# -- Step 5: how often a real run clips ---------------------------------------------------------------------------
steps = given("steps", 300)
lr = given("lr", 0.05)
seeds = given("n_seeds", 5)


def run(s):
    net, gen, teacher = make(s)
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    norms, losses = [], []
    for _ in range(steps):
        x, y = batch(gen, teacher)
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        norms.append(clip_grad_norm_(net.parameters(), max_norm).item())
        opt.step()
        losses.append(loss.item())
    return norms, losses


runs = [run(seed + k) for k in range(seeds)]
norms0, losses0 = runs[0]
clipped0 = value("clipped_seed0", sum(n > max_norm for n in norms0))
value("clipped_frac_seed0", clipped0 / steps)
first_clip = value("first_clipped_step", 1 + next(i for i, n in enumerate(norms0) if n > max_norm))

value("norm_first", norms0[0])
value("norm_median", statistics.median(norms0))
value("loss_first10", sum(losses0[:10]) / 10)
value("loss_last10", sum(losses0[-10:]) / 10)
fr = estimate("clipped_frac", [sum(n > max_norm for n in nr) / steps for nr, _ in runs], n=steps * seeds,
              repeated="seeds", measured=f"steps whose total norm exceeded max_norm, {steps} steps per seed")
print(f"\n{steps} SGD steps, max_norm {max_norm}: seed {seed} clipped {clipped0} steps; over {seeds} seeds {fr:.3f} "
      f"({fr.lo:.3f} to {fr.hi:.3f})")
sanity("clipping_counts", 0 < clipped0 < steps, "some steps are clipped, fewer than all", operands=(clipped0, steps),
       relation="smaller")
sanity("training_learns", sum(losses0[-10:]) < 0.8 * sum(losses0[:10]), "the mean loss of the last ten steps is lower "
       "than that of the first ten", operands=(sum(losses0[-10:]) / 10, sum(losses0[:10]) / 10), relation="falls")
# Variation: k16 tensors of n16 equal elements; the largest fp16 value whose total norm stays finite
root = value("var_root", math.sqrt(k16 * n16))
bound = value("var_bound", inf_from / root)


def total_k(xv):
    qs = [nn.Parameter(torch.zeros(n16, dtype=HF)) for _ in range(k16)]
    for q in qs:
        q.grad = torch.full((n16,), xv, dtype=HF)
    return clip_grad_norm_(qs, max_norm)


lo, hi = 0, vals.numel() - 1
while hi - lo > 1:
    mid = (lo + hi) // 2
    if torch.isinf(total_k(vals[mid].item())):
        hi = mid
    else:
        lo = mid
var_x = value("var_x", vals[lo].item())
value("var_x_inf", vals[hi].item())
sanity("var_probe", var_x < bound <= vals[hi].item(), "the largest finite value found by bisection lies below "
       "65,520 / sqrt(k n), and the next fp16 value does not", operands=(var_x, bound), relation=("smaller", "not"))
