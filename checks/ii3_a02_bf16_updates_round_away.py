"""II.3.A02 — bf16 weight updates that round away, and why master weights are fp32.

Reads the range and precision of bf16, fp16 and fp32 from torch.finfo. Takes a small MLP whose
weights are bf16 numbers, computes a real gradient, and applies one real torch.optim.AdamW step
three ways: to bf16 parameters, to fp16 parameters and to fp32 master weights. Counts the
elements whose weight did not change although their update was not zero, and predicts that count
from the spacing of each weight. Then runs several steps and compares how far the bf16 weights and
the bf16 copy of fp32 master weights move, and what the loss does.
"""

import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from numbook.check import given, sanity, value

torch.set_num_threads(1)
BF, HF, F32 = torch.bfloat16, torch.float16, torch.float32
FORMAT = "a property of the formats"


def row(label, *cells, w=38, cw=14):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


# -- Step 1: range and precision ------------------------------------------------------------------------
print("Formats (torch.finfo)")
row("", "bits", "eps", "smallest normal", "max", cw=16)
for name, dt in (("bf16", BF), ("fp16", HF), ("fp32", F32)):
    fi = torch.finfo(dt)
    value(f"{name}_eps", fi.eps, fixed=FORMAT)
    value(f"{name}_tiny", fi.smallest_normal, fixed=FORMAT)
    value(f"{name}_max", fi.max, fixed=FORMAT)
    value(f"{name}_bits", fi.bits, fixed=FORMAT)
    value(f"{name}_frac_bits", -math.log2(fi.eps), fixed=FORMAT)
    row(name, fi.bits, f"{fi.eps:.3e}", f"{fi.smallest_normal:.3e}", f"{fi.max:.3e}", cw=16)
fb, fh, f32 = torch.finfo(BF), torch.finfo(HF), torch.finfo(F32)
value("eps_ratio", fb.eps / fh.eps, fixed=FORMAT)
value("max_ratio_log10", math.log10(fb.max / fh.max), fixed=FORMAT)
value("fp32_bytes", f32.bits // 8, fixed=FORMAT)
sanity("bf16_range_of_fp32", fb.smallest_normal == f32.smallest_normal and fb.max > fh.max
       and fb.smallest_normal < fh.smallest_normal,
       "bf16 has fp32's smallest normal number and a wider range than fp16", operands=(fb.max, fh.max),
       relation=("larger", "equal"))
sanity("bf16_coarser", fb.eps == 8 * fh.eps, "bf16's eps is eight times fp16's: three fraction bits fewer",
       operands=(fb.eps, fh.eps), relation="larger")

# -- Step 2: one AdamW step, three ways ------------------------------------------------------------------
d = given("d", 256)
width = given("width", 1024)
N = given("N", 512)
lr = given("lr", 1e-5)
seed = given("seed", 0, nudge=0)
K = given("K", 20)
torch.manual_seed(seed)
net = nn.Sequential(nn.Linear(d, width), nn.GELU(), nn.Linear(width, d))
with torch.no_grad():
    for p in net.parameters():                     # start from weights that are bf16 numbers
        p.copy_(p.to(BF).float())
g = torch.Generator().manual_seed(seed)
X = torch.randn(N, d, generator=g)
Y = torch.randn(N, d, generator=g)
bound = value("init_bound", 1 / math.sqrt(d))       # nn.Linear's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in))


def grads_for(params):
    """The loss and its gradient at the given weights, computed in fp32 from their values."""
    work = copy.deepcopy(net)
    with torch.no_grad():
        for w, p in zip(work.parameters(), params, strict=True):
            w.copy_(p.detach().float())
    loss = F.mse_loss(work(X), Y)
    loss.backward()
    return loss.item(), [w.grad.detach().clone() for w in work.parameters()]


def make(dtype):
    ps = [p.detach().clone().to(dtype).requires_grad_(True) for p in net.parameters()]
    return ps, torch.optim.AdamW(ps, lr=lr, foreach=False)


pb, ob = make(BF)       # pure bf16: weights, gradients and optimiser states in bf16
decayed = sum(int((p.detach() * (1 - lr * ob.defaults["weight_decay"]) != p.detach()).sum()) for p in pb)
value("decay_moved_bf16", decayed)
sanity("bf16_decay_lost", decayed == 0, "AdamW's separate decay multiply, rounded to bf16, changes no bf16 weight",
       relation="not")
ph, oh = make(HF)       # the same in fp16
pm, om = make(F32)      # fp32 master weights; the model would compute with their bf16 copy
wd = value("weight_decay", ob.param_groups[0]["weight_decay"], fixed="AdamW's default")
adam_eps = value("adam_eps", ob.param_groups[0]["eps"], fixed="AdamW's default")
loss0, g0 = grads_for(pm)
n_params = value("n_params", sum(p.numel() for p in pm))
value("n_weights_first", pm[0].numel())
nonzero = sum(int((gr != 0).sum()) for gr in g0)
value("n_nonzero_grads", nonzero)


def one_step(ps, opt, grads):
    old = [p.detach().clone() for p in ps]
    for p, gr in zip(ps, grads, strict=True):
        p.grad = gr.to(p.dtype)
    opt.step()
    return old


def gap(w, dw):
    """The distance from w to the next number of its format in the direction of the update dw."""
    toward = torch.where(dw > 0, torch.full_like(w, math.inf), torch.full_like(w, -math.inf))
    return (torch.nextafter(w, toward).float() - w.float()).abs()


ob_old = one_step(pb, ob, g0)
oh_old = one_step(ph, oh, g0)
om_old = one_step(pm, om, g0)
# AdamW's first step moves every weight by lr * g / (|g| + eps) after the decay lr * wd * w
step1 = [-lr * gr / (gr.abs() + adam_eps) - lr * wd * p.float() for gr, p in zip(g0, om_old, strict=True)]


def lost(old, new, grads):
    return sum(int(((o == n) & (gr != 0)).sum()) for o, n, gr in zip(old, new, grads, strict=True))


lost_b = value("lost_bf16", lost(ob_old, pb, g0))
# fp16 weights: the same fp32 update added in one rounding (AdamW itself is not run on fp16 states: see below)
lost_h = value("lost_fp16", sum(int((((o.float() + dw).to(HF) == o) & (gr != 0)).sum())
                                for o, dw, gr in zip(oh_old, step1, g0, strict=True)))
v16 = oh.state[ph[0]]["exp_avg_sq"]
value("v16_zero_frac", float((v16 == 0).float().mean()),
      fixed="(1 - beta2) g^2 underflows fp16 for every gradient of this size at any nearby input")
v16_zero = int((v16 == 0).sum())
v16_ref_zero = int(((1 - oh.param_groups[0]["betas"][1]) * g0[0].double() ** 2 == 0).sum())
sanity("fp16_second_moment_underflows", v16_zero > 0 and v16_ref_zero == 0,
       "AdamW's second moment in fp16 has zero elements where (1 - beta2) g^2 is not zero", relation="not")
lost_m = value("lost_fp32", lost(om_old, pm, g0),
               fixed="fp32's gap at these weights is far under any nearby learning rate")
value("lost_bf16_frac", lost_b / nonzero)
# the prediction: an update is lost when it is smaller than half the spacing at the weight
pred = sum(int(((dw.abs() < gap(o, dw) / 2) & (gr != 0)).sum()) for dw, o, gr in zip(step1, ob_old, g0, strict=True))
# element by element; AdamW computes its update in bf16, so an update within 2% of the half gap may go either way
TOL = value("border_tol", 0.02, fixed="the margin the check allows for AdamW's own bf16 arithmetic")
mismatch, border = 0, 0
for dw, o, n, gr in zip(step1, ob_old, pb, g0, strict=True):
    r = dw.abs() / (gap(o, dw) / 2)
    clear = ((r - 1).abs() > TOL) & (gr != 0)
    border += int((~clear & (gr != 0)).sum())
    mismatch += int(((r < 1) != (o == n.detach()))[clear].sum())
value("n_border", border)
# the weights exactly at the bottom of a binade whose update points toward zero see half the gap
edge = sum(int(((o.float().abs() == 2.0 ** torch.floor(torch.log2(o.float().abs()))) & (o.float() * dw < 0)
                & (gr != 0)).sum()) for dw, o, gr in zip(step1, ob_old, g0, strict=True))
value("lost_bf16_pred", pred)
# with |update| close to lr, the half spacing passes lr at the binade [2^e, 2^(e+1)) with 2^e * eps / 2 > lr
e_cut = math.ceil(math.log2(2 * lr / fb.eps))
BINADE = "a binade boundary: a 1% change of the learning rate does not cross one"
w_cut = value("w_cut", 2.0**e_cut, fixed=BINADE)
value("w_cut_exp", e_cut, fixed=BINADE)
value("half_spacing_below", 2.0 ** (e_cut - 1) * fb.eps / 2, fixed=BINADE)
value("half_spacing_at", 2.0**e_cut * fb.eps / 2, fixed=BINADE)
big = sum(int(((o.float().abs() >= w_cut) & (gr != 0)).sum()) for o, gr in zip(ob_old, g0, strict=True))
value("n_above_cut", big)
value("above_cut_frac", big / nonzero)
dmax = max(dw.abs().max().item() for dw in step1)
dmin = min(dw.abs().min().item() for dw in step1)
value("update_max", dmax)
value("update_min_over_lr", dmin / lr)
print(f"\nOne AdamW step, lr = {lr}, on {n_params:,} parameters ({nonzero:,} with a non-zero gradient)")
row("updates lost in bf16 weights", f"{lost_b:,}", f"{lost_b / nonzero:.1%}")
row("  predicted: |update| < spacing / 2", f"{pred:,}")
row(f"  weights with |w| >= {w_cut}", f"{big:,}")
row("updates lost in fp16 weights", f"{lost_h:,}")
row("updates lost in fp32 master weights", f"{lost_m:,}")
row("|update| from", f"{dmin:.4e}", f"{dmax:.4e}")
sanity("lost_matches_spacing", mismatch == 0 and abs(lost_b - pred) <= border,
       "the bf16 updates lost are exactly those smaller than half the spacing at their weight",
       operands=(lost_b, pred), relation="equal")
lost_above = sum(int(((o.float().abs() >= w_cut) & (o == n.detach()) & (gr != 0)).sum())
                 for o, n, gr in zip(ob_old, pb, g0, strict=True))
value("lost_above_share", lost_above / lost_b)
value("lost_below_cut", lost_b - lost_above)
value("above_lost_share", lost_above / big)
kept_at_cut = [((o.float().abs() >= w_cut) & (o != n.detach()) & (gr != 0))
               for o, n, gr in zip(ob_old, pb, g0, strict=True)]
kept_above = value("kept_above_cut", sum(int(k.sum()) for k in kept_at_cut))
sanity("kept_sit_at_the_cut", kept_above > 0 and all(
    bool(((o.float().abs()[k] == w_cut) & (n.detach().float().abs()[k] < w_cut)).all())
    for o, n, k in zip(ob_old, pb, kept_at_cut, strict=True)),
    "every weight at or past the cut that keeps its update sits exactly at the cut and moves toward zero",
    operands=(max(float(n.detach().float().abs()[k].max()) if k.any() else 0.0
                  for n, k in zip(pb, kept_at_cut, strict=True)), w_cut), relation="smaller")
sanity("lost_above_cut", lost_above > 0.99 * lost_b and lost_above > 0.99 * big, "more than 99% of the lost updates "
       "are at weights at or above the cut, and more than 99% of those weights lose their update",
       operands=(lost_above, lost_b), relation="at least")
sanity("cut_brackets_lr", 2.0 ** (e_cut - 1) * fb.eps / 2 < 0.99 * lr and dmax < 2.0**e_cut * fb.eps / 2,
       "half the spacing is below the update under the cut and above every update from the cut on",
       operands=(2.0**e_cut * fb.eps / 2, dmax), relation=("larger", "smaller", "largest"))
sanity("fp32_keeps", lost_m == 0 < lost_h < lost_b,
       "fp32 master weights keep every update; fp16 weights lose fewer than bf16 weights",
       operands=(lost_h, lost_b), relation=("smaller", "not"))
e16 = math.ceil(math.log2(2 * lr / fh.eps))
value("w_cut16", 2.0**e16, fixed="a binade boundary: a 1% change of the learning rate does not cross one")
above16 = sum(int(((o.float().abs() >= 2.0**e16) & (gr != 0)).sum()) for o, gr in zip(oh_old, g0, strict=True))
value("n_above_cut16", above16)
CUT_TOL = value("fp16_cut_tol", 0.01, fixed="the agreement the check asks of the fp16 cut")
sanity("fp16_cut", abs(lost_h - above16) < CUT_TOL * above16 and e16 == e_cut + 3,
       "in fp16 the cut lies 2^3 times higher, and the lost updates are about the weights above it",
       operands=(lost_h, above16), relation="larger")

# -- Step 3: K steps: pure bf16 against fp32 master weights ------------------------------------------------
b0 = [p.detach().clone() for p in ob_old]            # the bf16 weights before the first step
loss_b, loss_m = [loss0], [loss0]
lost_steps = [lost_b]
lost_m_steps = [lost_m]
for _ in range(K - 1):
    lb, gb = grads_for(pb)                           # pure bf16: gradient at the bf16 weights
    old = one_step(pb, ob, gb)
    lost_steps.append(lost(old, pb, gb))
    lm, gm = grads_for([p.to(BF) for p in pm])       # master: the model computes with the bf16 copy
    old_m = one_step(pm, om, gm)
    lost_m_steps.append(lost(old_m, pm, gm))
    loss_b.append(lb)
    loss_m.append(lm)
lb_end, _ = grads_for(pb)
lm_end, _ = grads_for([p.to(BF) for p in pm])
moved_pure = sum(int((p.detach() != o).sum()) for p, o in zip(pb, b0, strict=True))
moved_copy = sum(int((p.detach().to(BF) != o).sum()) for p, o in zip(pm, b0, strict=True))
stuck = [((o.float().abs() >= w_cut) & (p.detach() == o)) for p, o in zip(pb, b0, strict=True)]
stuck_n = sum(int(s.sum()) for s in stuck)
value("moved_pure", moved_pure)
value("moved_copy", moved_copy)
value("moved_pure_frac", moved_pure / n_params)
value("moved_copy_frac", moved_copy / n_params)
value("stuck_above_cut", stuck_n)
value("stuck_frac_of_cut", stuck_n / big)
value("lost_last_frac", lost_steps[-1] / nonzero)
value("lost_last_master", lost_m_steps[-1])
value("loss_start", loss0)
value("loss_end_pure", lb_end)
value("loss_end_master", lm_end)
drop_b = value("drop_pure", loss0 - lb_end)
drop_m = value("drop_master", loss0 - lm_end)
value("drop_ratio", drop_m / drop_b)
print(f"\n{K} AdamW steps from the same bf16 weights")
row("", "pure bf16", "fp32 master")
row("weights whose bf16 value moved", f"{moved_pure:,}", f"{moved_copy:,}")
row(f"  of {big:,} with |w| >= {w_cut}, never moved", f"{stuck_n:,}")
row("updates lost at the last step", f"{lost_steps[-1]:,}", "0")
row("loss at the start", f"{loss0:.6f}", f"{loss0:.6f}")
row("loss at the end", f"{lb_end:.6f}", f"{lm_end:.6f}")
row("loss drop", f"{drop_b:.3e}", f"{drop_m:.3e}")
sanity("master_moves_more", moved_copy > moved_pure, "the bf16 copy of the fp32 master weights has more moved "
       "elements than the pure bf16 weights", operands=(moved_copy, moved_pure), relation="larger")
sanity("big_weights_stuck", stuck_n > 0.9 * big, "most weights at or above the cut never move in pure bf16",
       operands=(stuck_n, big), relation="not")
sanity("master_trains_faster", drop_m > 2 * drop_b > 0, "the loss falls more than twice as far with fp32 master "
       "weights", operands=(drop_m, drop_b), relation="falls")

# -- Variation: the learning rate at which no update is lost --------------------------------------------------
wmax = max(o.float().abs().max().item() for o in ob_old)
WMAX = "the largest |w|, near 1/sqrt(d) = 2^-4, rounds to 2^-4 in bf16 for any nearby d"
value("w_max", wmax, fixed=WMAX)
e_top = math.floor(math.log2(wmax))
lr_safe = value("lr_safe", 2.0**e_top * fb.eps / 2, fixed=WMAX)   # half the spacing in the top binade
value("lr_safe_over_lr", lr_safe / lr)
print(f"\nVariation: largest |w| {wmax:.4f}; half the bf16 spacing there {lr_safe:.3e}")
up = torch.nextafter(torch.tensor(wmax, dtype=BF), torch.tensor(1.0, dtype=BF)).item()
sanity("half_gap_above_wmax", lr_safe == (up - wmax) / 2
       and all((o.float().abs() <= wmax).all() for o in ob_old),
       "no bf16 weight is larger than w_max, and half the gap from w_max to its bf16 neighbour above is lr_safe",
       operands=(lr_safe, (up - wmax) / 2), relation=("largest", "half"))
pb1, ob1 = make(BF)
ob1.param_groups[0]["lr"] = lr_safe
old1 = one_step(pb1, ob1, g0)
pb2, ob2 = make(BF)
SAFE = value("safe_factor", 1.01, fixed="how far above the threshold the Variation's learning rate sits")
ob2.param_groups[0]["lr"] = SAFE * lr_safe
old2 = one_step(pb2, ob2, g0)
FULL = value("full_factor", 100, fixed="the definition of a full-size update in the Variation")
full = [gr.abs() > FULL * adam_eps for gr in g0]        # updates within 1% of the full lr
n_full = value("n_full", sum(int(f.sum()) for f in full))
value("min_full_over_lr", FULL / (FULL + 1))   # |g| / (|g| + eps) at |g| = FULL * eps: the smallest full-size update
lost2 = value("lost_at_safe", sum(int(((o == n.detach()) & f).sum()) for o, n, f in zip(old2, pb2, full, strict=True)))
lost2_all = value("lost_at_safe_all", lost(old2, pb2, g0))
lost1 = value("lost_at_threshold",
               sum(int(((o == n.detach()) & f).sum()) for o, n, f in zip(old1, pb1, full, strict=True)))
sanity("threshold_still_loses", lost1 > 0 == lost2, "at exactly half the gap some full-size updates are still lost "
       "(ties and AdamW's own bf16 rounding), at 1.01 times it none", operands=(lost1, lost2),
       relation="not")
sanity("safe_lr_keeps_all", lost2 == 0 < lost2_all and lr_safe > lr, "at just over half the top binade's spacing no "
       "full-size update is lost, at a rate larger than the given one", operands=(lr_safe, lr),
       relation=("not", "larger"))
