"""II.3.A01 — fp16 gradients that flush to zero, and the loss scale that brings them back.

Reads fp16's smallest normal number from torch.finfo and finds its smallest subnormal by probing
fp16 itself. Runs one real backward pass of a small language-model head in fp32 (the reference)
and under torch.autocast with fp16, at loss scale 1 and at torch.amp.GradScaler's default
initial scale, and counts the gradient elements that are zero or subnormal in fp16. Then trains
a tiny classifier under autocast with a real GradScaler and traces its scale step by step.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from numbook.check import fact, given, sanity, value

torch.set_num_threads(1)
H = torch.float16
fi = torch.finfo(H)
FORMAT = "a property of the fp16 format"


def row(label, *cells, w=40, cw=16):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


# -- Step 1: the thresholds ------------------------------------------------------------------------------
smallest_normal = value("fp16_smallest_normal", fi.smallest_normal, fixed=FORMAT)
eps16 = value("fp16_eps", fi.eps, fixed=FORMAT)
value("frac_bits", -math.log2(fi.eps), fixed=FORMAT)
fp16_max = value("fp16_max", fi.max, fixed=FORMAT)
sub_pred = smallest_normal * eps16                       # 2^-14 * 2^-10: the last bit of the subnormal range
zero = torch.zeros((), dtype=H)
sub_probe = torch.nextafter(zero, torch.ones((), dtype=H)).item()   # the first fp16 number above zero
smallest_sub = value("fp16_smallest_subnormal", sub_probe, fixed=FORMAT)
flush = value("flush_below", smallest_sub / 2, fixed=FORMAT)
value("sub_exp", math.log2(smallest_sub), fixed=FORMAT)
value("normal_exp", math.log2(smallest_normal), fixed=FORMAT)
value("flush_exp", math.log2(flush), fixed=FORMAT)
half_rounds = torch.tensor(flush, dtype=torch.float32).to(H).item()
above_half = torch.tensor(flush * (1 + 2**-20), dtype=torch.float32).to(H).item()
print("fp16 thresholds (torch.finfo and probes)")
row("smallest normal (finfo.smallest_normal)", f"{smallest_normal:.4e}")
row("smallest subnormal (nextafter(0, 1))", f"{smallest_sub:.4e}")
row("half of it, rounds to", f"{half_rounds:.4e}")
row("just above half of it, rounds to", f"{above_half:.4e}")
sanity("subnormal_two_routes", smallest_sub == sub_pred == 2.0**-24,
       "nextafter(0, 1) in fp16 is finfo.smallest_normal * finfo.eps = 2^-24", operands=(smallest_sub, sub_pred),
       relation="equal")
sanity("half_flushes", half_rounds == 0.0 and above_half == smallest_sub,
       "an fp32 value of exactly half the smallest subnormal rounds to 0 (the tie goes to even), one just above "
       "rounds up to the smallest subnormal", operands=(half_rounds, above_half), relation="equal")
sanity("subnormal_below_normal", smallest_sub < smallest_normal,
       "the subnormals reach 2^10 times below the smallest normal", operands=(smallest_sub, smallest_normal),
       relation="smaller")

# -- Step 2: one real backward pass ------------------------------------------------------------------------
V = given("V", 8192)
d = given("d", 32)
B = given("B", 4)
T = given("T", 256)
seed = given("seed", 0, nudge=0)
N = value("N", B * T)
torch.manual_seed(seed)
model = nn.Sequential(nn.Embedding(V, d), nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Linear(d, V))
g = torch.Generator().manual_seed(seed)
tokens = torch.randint(0, V, (N,), generator=g)
targets = torch.randint(0, V, (N,), generator=g)
head = model[4]

scaler0 = torch.amp.GradScaler("cpu")
S_init = value("init_scale", scaler0.get_scale(), fixed="GradScaler's default, a property of the library")
value("init_exp", math.log2(S_init), fixed="GradScaler's default, a property of the library")


def backward(scale, fp16):
    """One forward and backward pass; returns the logits' gradient, the fp32 gradient that reached the
    cast to fp32 inside the loss, the head's weight gradient and the unscaled loss."""
    model.zero_grad(set_to_none=True)
    seen = {}
    with torch.autocast("cpu", dtype=H, enabled=fp16):
        z = model(tokens)                 # fp16 under autocast: the head is a Linear
        z.retain_grad()
        z32 = z.float()                   # what cross_entropy computes in; autocast does the same
        z32.register_hook(lambda gr: seen.setdefault("g32", gr.detach().clone()))
        loss = F.cross_entropy(z32, targets)
    (loss * scale).backward()
    return z.grad.detach(), seen["g32"], head.weight.grad.detach().clone(), loss.item()


zr, _, wr, loss_ref = backward(1.0, False)                     # the fp32 reference
z1, g32_1, w1, _ = backward(1.0, True)                         # fp16, no loss scale
zs, g32_s, ws, _ = backward(S_init, True)                      # fp16, GradScaler's initial scale
value("loss_ref", loss_ref)
sanity("reference_rounded_differs", not torch.equal(z1, zr.to(H)),
       "the fp16 pass's logits' gradient is not the fp32 reference's gradient rounded to fp16",
       relation=("not", "differs"))
value("bf16_tiny", torch.finfo(torch.bfloat16).tiny, fixed="a property of the bf16 format")
value("z_dtype", str(z1.dtype).replace("torch.", ""), fixed="autocast's dtype, set by the problem")
n_z = value("n_logit_grads", zr.numel())
n_w = value("n_head_grads", wr.numel())


def counts(gr, ref):
    nz = ref != 0
    zero = int(((gr == 0) & nz).sum())
    sub = int(((gr != 0) & (gr.abs() < smallest_normal)).sum())
    return zero, sub


z_zero1, z_sub1 = counts(z1.float(), zr)
z_zeros, z_subs = counts(zs.float(), zr)
w_zero1, _ = counts(w1, wr)
w_zeros, _ = counts(ws, wr)
ZERO = "1/(|V| N) stays between the flush threshold and the normal range at every nearby size"
value("z_zero_1", z_zero1, fixed=ZERO)
value("z_sub_1", z_sub1)
value("z_sub_1_frac", z_sub1 / n_z)
value("z_normal_1", n_z - z_sub1 - z_zero1)
value("z_zero_s", z_zeros, fixed="the scaled logit gradients are normal numbers at every nearby size")
value("z_sub_s", z_subs, fixed="the scaled logit gradients are normal numbers at every nearby size")
value("w_zero_1", w_zero1)
value("w_zero_1_frac", w_zero1 / n_w)
value("w_zero_s", w_zeros)
ref_zero = value("ref_zero", int((zr == 0).sum()) + int((wr == 0).sum()),
                 fixed="an fp32 gradient of a randomly initialised model has no exact zeros at any nearby size")
med = value("z_median", zr.abs().median().item())
value("inv_VN", 1 / (V * N))
value("median_over_inv_VN", med * V * N)


def rel_err(gr, ref):
    nz = ref != 0
    return ((gr.float()[nz] - ref[nz]).abs() / ref[nz].abs()).median().item()


# error against the fp32 gradient that fp16 was cast from (the cast alone), and against the fp32 reference
err1 = value("z_relerr_1", rel_err(z1, g32_1))
errs = value("z_relerr_s", rel_err(zs.float() / S_init, g32_s / S_init))
value("w_relerr_1", rel_err(w1, wr))
value("w_relerr_s", rel_err(ws / S_init, wr))
value("half_eps", eps16 / 2, fixed=FORMAT)
print(f"\nOne backward pass: N = {N:,} tokens, |V| = {V:,}; logits' gradient {n_z:,} elements,"
      f" head weight gradient {n_w:,}")
row("", "zero (ref not)", "subnormal", "median rel. err")
row("logits' grad, fp16, scale 1", f"{z_zero1:,}", f"{z_sub1:,}", f"{err1:.2e}")
row(f"logits' grad, fp16, scale {S_init:.0f}", f"{z_zeros:,}", f"{z_subs:,}", f"{errs:.2e}")
row("head weight grad, fp16, scale 1", f"{w_zero1:,}", "", f"{rel_err(w1, wr):.2e}")
row(f"head weight grad, fp16, scale {S_init:.0f}", f"{w_zeros:,}", "", f"{rel_err(ws / S_init, wr):.2e}")
row("median |dL/dz| (fp32)", f"{med:.3e}")
row("1 / (|V| N)", f"{1 / (V * N):.3e}")

sanity("flush_at_the_cast", torch.equal(z1, g32_1.to(H)) and torch.equal(zs, g32_s.to(H)),
       "the fp16 logits' gradient is exactly the fp32 gradient of the loss rounded to fp16", relation="equal")
sanity("ref_has_no_zeros", ref_zero == 0, "the fp32 reference has no zero gradient element in these tensors",
       relation="not")
sanity("scale1_loses", w_zero1 > 0 and z_sub1 == n_z - N,
       "at scale 1 some head weight gradients flush to zero and every logit gradient but the N target entries is "
       "subnormal", operands=(z_sub1, n_z - N), relation="equal")
sanity("scale_recovers", z_zeros == 0 and z_subs == 0 and w_zeros < w_zero1 / 100,
       "at the initial scale no logit gradient is zero or subnormal, and the zero count of the weight gradient falls "
       "more than a hundredfold", operands=(w_zeros, w_zero1), relation=("not", "falls"))
sanity("scaled_error_is_rounding", errs <= eps16 / 2 < err1,
       "with the scale the median relative error is within half an fp16 eps; without, it is larger",
       operands=(errs, err1), relation=("smaller", "at most"))
sanity("median_is_inv_VN", 0.8 < med * V * N < 1.25,
       "at initialisation the median logit gradient is about 1/(|V| N)", operands=(med, 1 / (V * N)))

# -- Step 3: at Llama 2 7B's vocabulary and context ----------------------------------------------------------
V_l = fact("llama2_7b_vocab", "V_llama2")
N_l = fact("llama2_7b_max_positions", "N_llama2")
g_l = value("g_llama2", 1 / (V_l * N_l))
k_need = math.ceil(math.log2(smallest_normal * V_l * N_l))   # smallest power of two that lifts 1/(VN) to normal
S_need = value("S_need", 2.0**k_need, fixed="a power of two: a 1% change of |V| or N does not cross one")
value("S_need_exp", k_need, fixed="a power of two: a 1% change of |V| or N does not cross one")
value("g_llama2_scaled", S_init * g_l)
value("init_over_need", S_init / S_need, fixed="a power of two: a 1% change of |V| or N does not cross one")
# probe: the fp16 cast of the typical gradient, unscaled and scaled
l_cast = torch.tensor(g_l).to(H).item()
l_cast_s = torch.tensor(S_init * g_l).to(H).item()
l_cast_half = torch.tensor(S_need / 2 * g_l).to(H).item()
print(f"\nLlama 2 7B: |V| = {V_l:,}, N = {N_l:,} tokens: typical logit gradient 1/(|V| N) = {g_l:.3e}")
row("in fp16", f"{l_cast:.3e}")
row(f"times {S_init:.0f}, in fp16", f"{l_cast_s:.3e}")
row("smallest power-of-two scale to normal", f"{S_need:.0f}")
sanity("llama_flushes", g_l < flush and l_cast == 0.0,
       "1/(|V| N) at Llama 2's vocabulary and context lies below half the smallest subnormal: it flushes to 0",
       operands=(g_l, flush), relation="smaller")
sanity("llama_scaled_normal", S_need * g_l >= smallest_normal > S_need / 2 * g_l and 0 < l_cast_half < smallest_normal
       and S_init >= S_need, "2^k is the first power of two that lifts 1/(|V| N) to the normal range; the initial "
       "scale is at least that", operands=(S_init, S_need), relation="at least")

# -- Step 4: GradScaler traced on real steps -------------------------------------------------------------------
scaler = torch.amp.GradScaler("cpu")
growth = value("growth_factor", scaler.get_growth_factor(), fixed="GradScaler's default")
backoff = value("backoff_factor", scaler.get_backoff_factor(), fixed="GradScaler's default")
interval = value("growth_interval", scaler.get_growth_interval(), fixed="GradScaler's default")
C = given("C", 16)
width = given("width", 64)
n_batch = given("n_batch", 64)
after = given("after", 94)          # steps run after the step of the first growth
max_steps = value("max_steps", 4 * interval, fixed="a guard of four growth intervals that the run does not reach")
lr = given("lr", 1e-3)
n_batches = given("n_batches", 8)
torch.manual_seed(seed)
net = nn.Sequential(nn.Linear(d, width), nn.GELU(), nn.Linear(width, C))
opt = torch.optim.SGD(net.parameters(), lr=lr)
X = torch.randn(n_batches * n_batch, d, generator=g)
Y = torch.randint(0, C, (n_batches * n_batch,), generator=g)
events = []                  # (step, scale before, scale after, skipped)
hand_scale, tracker = scaler.get_scale(), 0
mismatch = 0
skipped = 0
losses = []
step = -1
grew_at = None
while step + 1 < max_steps and (grew_at is None or step < grew_at + after):
    step += 1
    i = (step % n_batches) * n_batch
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=H):
        loss = F.cross_entropy(net(X[i:i + n_batch]).float(), Y[i:i + n_batch], reduction="sum")
    losses.append(loss.item() / n_batch)
    s0 = scaler.get_scale()
    scaler.scale(loss).backward()
    inf = any(not torch.isfinite(p.grad).all() for p in net.parameters())   # our own test, before unscaling
    before = [p.detach().clone() for p in net.parameters()]
    scaler.step(opt)
    scaler.update()
    s1 = scaler.get_scale()
    moved = any(not torch.equal(a, p) for a, p in zip(before, net.parameters(), strict=True))
    # the rule, by hand: halve and reset on inf; else count, and double after `interval` clean steps
    if inf:
        hand_scale, tracker = hand_scale * backoff, 0
    else:
        tracker += 1
        if tracker == interval:
            hand_scale, tracker = hand_scale * growth, 0
    mismatch += hand_scale != s1
    skipped += inf
    if moved == inf:                                 # a skipped step must leave the weights alone
        mismatch += 1
    if s1 != s0:
        events.append((step, s0, s1, inf))
        if not inf and grew_at is None:
            grew_at = step
steps = value("steps", step + 1)
print(f"\nGradScaler: init_scale {S_init:.0f}, growth_factor {growth}, backoff_factor {backoff},"
      f" growth_interval {interval}; {steps:,} steps")
row("step", "scale before", "scale after", "inf found", w=8)
for e in events:
    row(f"{e[0]}", f"{e[1]:.0f}", f"{e[2]:.0f}", str(e[3]), w=8)
value("n_events", len(events))
value("n_skipped", skipped)
backs = [e for e in events if e[3]]
grows = [e for e in events if not e[3]]
value("n_backoffs", len(backs))
value("n_growths", len(grows))
early = [e for e in backs if e[0] < grows[0][0]]
first_clean = early[-1][0] + 1 if early else 0
value("first_backoffs", len(early))
value("settled_scale", grows[0][1])
value("first_growth_step", grows[0][0])
value("first_growth_to", grows[0][2])
value("final_scale", scaler.get_scale())
loss_first = value("loss_first", sum(losses[:n_batches]) / n_batches)     # one pass over the batches
loss_last = value("loss_last", sum(losses[-n_batches:]) / n_batches)
print(f"  mean loss per example over the first {n_batches} steps {loss_first:.3f},"
      f" over the last {n_batches} {loss_last:.3f}")
sanity("guard_not_reached", steps < max_steps, "the run ended on its own, before the guard",
       operands=(steps, max_steps), relation="smaller")
sanity("training_learns", loss_last < loss_first, "the loss falls over the run: the unskipped steps train",
       operands=(loss_last, loss_first), relation="falls")
for k, e in enumerate((events + [(-1, -1.0, -1.0, False)] * 4)[:4]):
    EARLY = "the first steps overflow at any nearby input, and each halves GradScaler's default initial scale"
    value(f"ev{k}_step", e[0], fixed=EARLY if k < 2 else None)
    value(f"ev{k}_to", e[2], fixed=EARLY if k < 3 else None)
sanity("rule_by_hand", mismatch == 0,
       "the hand-written rule gives GradScaler's scale after every step, and exactly the steps with an inf "
       "gradient leave the weights unchanged", relation="equal")
sanity("growth_after_interval", grows[0][0] - first_clean + 1 == interval,
       "the first growth comes growth_interval clean steps after the last backoff",
       operands=(grows[0][0] - first_clean + 1, interval), relation="equal")
sanity("skips_are_backoffs", skipped == len(backs) and all(e[2] == e[1] * backoff for e in backs)
       and all(e[2] == e[1] * growth for e in grows), "every skipped step halves the scale, every growth doubles it",
       operands=(skipped, len(backs)), relation=("half", "twice"))

# -- Variation: Llama 3 8B's vocabulary and context --------------------------------------------------------------
V3 = fact("llama3_8b_vocab", "V_llama3")
N3 = fact("llama3_8b_context", "N_llama3")
g3 = value("g_llama3", 1 / (V3 * N3))
k3 = math.ceil(math.log2(smallest_normal * V3 * N3))
S3 = value("S_need3", 2.0**k3, fixed="a power of two: a 1% change of |V| or N does not cross one")
value("S_need3_exp", k3, fixed="a power of two: a 1% change of |V| or N does not cross one")
value("g_llama3_scaled", S_init * g3)
c3 = torch.tensor(g3).to(H).item()
c3_below = torch.tensor(S3 / 2 * g3).to(H).item()
print(f"\nVariation: Llama 3 8B, |V| = {V3:,}, N = {N3:,}: 1/(|V| N) = {g3:.3e}, in fp16 {c3:.1e};"
      f" first power-of-two scale to normal {S3:.0f}")
sanity("llama3_flushes", g3 < flush and c3 == 0.0, "1/(|V| N) for Llama 3 8B flushes to 0 in fp16",
       operands=(g3, flush), relation="smaller")
sanity("llama3_needs_init", S3 * g3 >= smallest_normal > S3 / 2 * g3 and 0 < c3_below < smallest_normal
       and S_init >= S3, "2^k is the first power of two that makes 1/(|V| N) normal, and the initial scale reaches it",
       operands=(S3, S_init), relation=("equal", "larger"))
tiny16 = torch.finfo(torch.bfloat16).tiny
sanity("bf16_keeps_it_normal", min(g_l, g3) > tiny16 and torch.tensor(min(g_l, g3)).to(torch.bfloat16).item() > 0,
       "1/(|V| N) at both Llamas' sizes is a normal bf16 number, far above bf16's smallest normal",
       operands=(min(g_l, g3), tiny16), relation=("not", "smallest"))
