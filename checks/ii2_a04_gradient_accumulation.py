"""II.2.A04 — Gradient accumulation against a larger batch: the same gradient, and how much time.

On a small Llama-style model with real tensors: the gradient of one batch of k*b sequences against k
micro-batches of b sequences, each loss divided by k and the gradients accumulated in .grad, in fp32 and
in fp64 (equal to rounding: the sums run in another order); the same with right-padded sequences whose
labels are ignore_index (the mean of micro-batch means is another gradient; dividing each micro-batch's
summed loss by the global count of counted tokens is the fix); the activation bytes autograd saves for
one micro-batch against the large batch (saved_tensors_hooks); and the time of one accumulated step
against one large-batch step, timed over repeats.
"""

import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from numbook.check import estimate, given, sanity, value

torch.set_num_threads(1)
IGNORE = -100


def row(label, *cells, w=44, cw=16):
    print(f"  {label:<{w}}" + "".join(f"{c!s:>{cw}}" for c in cells))


class Block(nn.Module):
    def __init__(self, d, H, f):
        super().__init__()
        self.H = H
        self.n1, self.n2 = nn.RMSNorm(d), nn.RMSNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.gate, self.up = nn.Linear(d, f, bias=False), nn.Linear(d, f, bias=False)
        self.down = nn.Linear(f, d, bias=False)

    def forward(self, x):
        B, T, d = x.shape
        h = self.n1(x)
        q, k, v = (p(h).view(B, T, self.H, d // self.H).transpose(1, 2) for p in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(B, T, d))
        h = self.n2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class FusedBlock(Block):
    """The same layer with q, k and v in one Linear of width 3d: the same parameters, written otherwise."""

    def __init__(self, d, H, f):
        super().__init__(d, H, f)
        del self.q, self.k, self.v
        self.qkv = nn.Linear(d, 3 * d, bias=False)

    def forward(self, x):
        B, T, d = x.shape
        h = self.n1(x)
        q, k, v = (t.view(B, T, self.H, d // self.H).transpose(1, 2) for t in self.qkv(h).split(d, dim=-1))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(B, T, d))
        h = self.n2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self, V, d, L, H, f, block=Block):
        super().__init__()
        self.embed = nn.Embedding(V, d)
        self.layers = nn.ModuleList(block(d, H, f) for _ in range(L))
        self.norm = nn.RMSNorm(d)
        self.head = nn.Linear(d, V, bias=False)

    def forward(self, tokens, labels, reduction="mean"):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE, reduction=reduction)


V_s = given("V_s", 256)
d_s = given("d_s", 128, nudge=4)
L_s = given("L_s", 2)
H_s = given("H_s", 4, nudge=4)
f_s = given("f_s", 344)
T_s = given("T_s", 128)
b = given("b", 4)
k = given("k", 4)
seed = given("seed", 0, nudge=0)
repeats = given("repeats", 5)
inner = given("inner", 5)
shrink = given("shrink", 0.5)            # micro-batch j holds sequences of round(T * shrink^j) tokens, then padding

B = k * b
gen = torch.Generator().manual_seed(seed)
tokens = torch.randint(0, V_s, (B, T_s + 1), generator=gen)
inputs, labels = tokens[:, :-1], tokens[:, 1:].clone()   # T + 1 drawn: the first T in, the last T the labels
value("T_drawn", tokens.shape[1])


def make(dtype=torch.float32):
    torch.manual_seed(seed)
    return Llama(V_s, d_s, L_s, H_s, f_s).to(dtype)


def grads(model):
    return torch.cat([p.grad.flatten() for p in model.parameters()])


def big_step(model, lab, reduction="mean"):
    model.zero_grad(set_to_none=True)
    loss = model(inputs, lab)
    loss.backward()
    return loss.item(), grads(model)


def accum_step(model, lab, mode="mean/k", n_total=None):
    model.zero_grad(set_to_none=True)
    total = 0.0
    for j in range(k):
        sl = slice(j * b, (j + 1) * b)
        if mode == "mean/k":
            loss = model(inputs[sl], lab[sl]) / k
        else:                                   # the fix: the micro-batch's sum over the global count
            loss = model(inputs[sl], lab[sl], reduction="sum") / n_total
        loss.backward()                         # .grad accumulates across micro-batches
        total += loss.item()
    return total, grads(model)


def compare(g, ref):
    return (g - ref).abs().max().item(), ((g - ref).norm() / ref.norm()).item()


# -- 1. full sequences: accumulation against the large batch, fp32 and fp64 ----------------------------
m32, m64 = make(), make(torch.float64)
N = value("N", sum(p.numel() for p in m32.parameters()))
value("B", B)
value("tokens_big", B * T_s)
value("tokens_micro", b * T_s)
loss_big, g_big = big_step(m32, labels)
loss_acc, g_acc = accum_step(m32, labels)
max32, rel32 = compare(g_acc, g_big)
_, g_big64 = big_step(m64, labels)
_, g_acc64 = accum_step(m64, labels)
max64, rel64 = compare(g_acc64, g_big64)
_, rel32_vs64 = compare(g_big.double(), g_big64)
n_differ = value("n_differ", int((g_acc != g_big).sum()))
value("frac_differ", n_differ / N)
value("loss_big", loss_big)
value("loss_acc", loss_acc)
value("ln_V_s", math.log(V_s))
value("max32", max32)
value("rel32", rel32)
value("max64", max64)
value("rel64", rel64)
value("rel32_vs64", rel32_vs64)
eps32 = value("eps32", torch.finfo(torch.float32).eps,
              fixed="the spacing of fp32 just above 1: a property of the format")
eps_ratio = value("eps_ratio", torch.finfo(torch.float64).eps / eps32,
                  fixed="2^-52 / 2^-23 = 2^-29: the ratio of the two formats' precisions")
ratio64_32 = value("ratio64_32", rel64 / rel32)
value("ratio_over_eps", ratio64_32 / eps_ratio)
print(f"Model: V={V_s}, d={d_s}, L={L_s}, H={H_s}, f={f_s}: {N:,} parameters. Batch {B} x {T_s}; "
      f"k = {k} micro-batches of b = {b}")
row("", "max |diff|", "relative (norm)")
row("fp32: accumulated vs large batch", f"{max32:.2e}", f"{rel32:.2e}")
row("fp64: accumulated vs large batch", f"{max64:.2e}", f"{rel64:.2e}")
row("fp32 large batch vs fp64 large batch", "", f"{rel32_vs64:.2e}")
print(f"  losses: large batch {loss_big:.6f}, accumulated {loss_acc:.6f}; "
      f"{n_differ:,} of {N:,} gradient entries differ in fp32")
sanity("fp32_rounding", 0 < rel32 < 5e-7 and n_differ > 0,
       "in fp32 the accumulated gradient differs from the large batch's, by less than 5e-7 of its norm",
       operands=(rel32, 5e-7), relation="differs")
sanity("fp64_shrinks", rel64 < 1e-14 and rel64 < rel32 * 10 * eps_ratio,
       "in fp64 the relative difference is smaller than the fp32 one by more than the ratio of the formats' "
       "precisions over ten: it is rounding, not a different gradient",
       operands=(rel64, rel32), relation="smaller")
sanity("same_size_as_precision", rel32 < 10 * rel32_vs64,
       "the fp32 difference is within ten times the fp32 large-batch gradient's own distance from fp64",
       operands=(rel32, rel32_vs64))

# the cause, on one weight: the head's gradient is a sum over all rows; the order of that sum changes
torch.manual_seed(seed)
X = torch.randn(B * T_s, d_s)
G = torch.randn(B * T_s, V_s)


def orders(X, G):
    """One product over all rows, the sum of k products over their parts: relative distance of the two."""
    one = X.T @ G
    parts = sum(X[j * b * T_s:(j + 1) * b * T_s].T @ G[j * b * T_s:(j + 1) * b * T_s] for j in range(k))
    return ((one - parts).norm() / one.norm()).item()


order_rel = value("order_rel", orders(X, G))
order_rel64 = value("order_rel64", orders(X.double(), G.double()))
value("rows", B * T_s)
sanity("order_cause", 0 < order_rel < 10 * rel32 and rel32 < 10 * order_rel and order_rel64 < order_rel * 1e-6,
       "one product over all rows and the sum of k products over their parts differ in fp32, by rounding alone, "
       "within ten times the model's fp32 difference; in fp64 by less than a millionth of that",
       operands=(order_rel, rel32), relation="differs")

# -- 2. padded sequences: the mean of micro-batch means ------------------------------------------------
lab_pad = labels.clone()
lengths = [max(1, round(T_s * shrink ** (i // b))) for i in range(B)]
for i, n_i in enumerate(lengths):
    lab_pad[i, n_i:] = IGNORE
counted = [int((lab_pad[j * b:(j + 1) * b] != IGNORE).sum()) for j in range(k)]
n_total = value("n_total", sum(counted))
for j, c in enumerate(counted):
    value(f"counted_{j}", c)
value("counted_max_over_min", max(counted) / min(counted))
loss_ref, g_ref = big_step(m32, lab_pad)
loss_mom, g_mom = accum_step(m32, lab_pad)
loss_fix, g_fix = accum_step(m32, lab_pad, mode="sum/n", n_total=n_total)
_, rel_mom = compare(g_mom, g_ref)
_, rel_fix = compare(g_fix, g_ref)
value("loss_ref", loss_ref)
value("loss_mom", loss_mom)
value("loss_fix", loss_fix)
value("rel_mom", rel_mom)
value("rel_fix", rel_fix)
cos_mom = value("cos_mom", F.cosine_similarity(g_mom, g_ref, dim=0).item())
w_short = value("w_short", n_total / (k * counted[-1]))
w_long = value("w_long", n_total / (k * counted[0]))
counted_full = [int((labels[j * b:(j + 1) * b] != IGNORE).sum()) for j in range(k)]
w_equal = value("w_equal", sum(counted_full) / (k * counted_full[-1]),
                fixed="with equal counts n / (k n_j) is 1 whatever k, b and T: the case the Variation asks about")
sanity("equal_weight_one", w_equal == 1 and len(set(counted_full)) == 1,
       "with the same count in every micro-batch each counted token weighs exactly its share",
       operands=(w_equal, 1), relation="equal")
print(f"\nPadded: counted tokens per micro-batch {counted}, {n_total} in all")
row("", "loss", "relative error")
row("one batch, mean over all counted tokens", f"{loss_ref:.6f}", "reference")
row("mean of each micro-batch / k", f"{loss_mom:.6f}", f"{rel_mom:.3e}")
row("sum of each micro-batch / global count", f"{loss_fix:.6f}", f"{rel_fix:.3e}")
value("mom_over_round", rel_mom / rel32)
sanity("mom_wrong", rel_mom > 1e6 * rel32, "the mean of micro-batch means is another gradient, "
       "its error more than a million times the rounding of step 1", operands=(rel_mom, rel32), relation="more than")
sanity("fix_exact", rel_fix < 5e-7 and math.isclose(loss_fix, loss_ref, rel_tol=1e-6),
       "dividing each micro-batch's sum by the global count gives the reference to rounding",
       operands=(rel_fix, 5e-7))
sanity("weights_closed", math.isclose(w_short, n_total / (k * counted[-1])) and w_short > 1 > w_long,
       "a counted token of the shortest micro-batch weighs more than its share, one of the longest less",
       operands=(w_short, w_long), relation="larger")

# -- 3. activation bytes: what autograd saves for b against k*b -------------------------------------------
def saved_bytes(model, n_seq):
    """Bytes of every storage autograd saves for backward, the parameters' own left out; the batch is
    copied out of the full tensor first, as a data loader hands it over, so no view reaches other rows."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen, scalars = {}, set()

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in params:
            seen[s.data_ptr()] = s.nbytes()
            if t.dim() == 0:
                scalars.add(s.data_ptr())
        return t

    reps = -(-n_seq // B)
    x, y = inputs.repeat(reps, 1)[:n_seq].clone(), labels.repeat(reps, 1)[:n_seq].clone()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(x, y)
    del loss
    return sum(seen.values()), sum(seen[p] for p in scalars), len(seen)


(act_micro, const_micro, n_saved), (act_big, const_big, n_saved_big) = saved_bytes(m32, b), saved_bytes(m32, B)
value("act_micro_mb", act_micro / 1e6, unit="MB")
value("act_big_mb", act_big / 1e6, unit="MB")
act_ratio = value("act_ratio", act_big / act_micro)
value("n_saved", n_saved)
torch.manual_seed(seed)
fused = Llama(V_s, d_s, L_s, H_s, f_s, block=FusedBlock)
n_saved_fused = value("n_saved_fused", saved_bytes(fused, b)[2])
sanity("fused_fewer", n_saved_fused < n_saved and sum(p.numel() for p in fused.parameters()) == N,
       "the same model with one fused q/k/v projection saves fewer storages", operands=(n_saved_fused, n_saved),
       relation="fewer")
act_2k, const_2k, _ = saved_bytes(m32, 2 * B)
value("act_2k_ratio", (act_2k - const_2k) / (act_micro - const_micro))
value("const_bytes", const_big, unit="B", fixed="one 0-dim fp32 tensor: 4 bytes whatever the batch")
param_mb = value("param_mb", 4 * N / 1e6, unit="MB")
print(f"\nActivations saved for backward ({n_saved} storages): micro-batch {act_micro:,} B, large batch {act_big:,} B "
      f"(ratio {act_ratio:.6f}); of it {const_big} B in 0-dim tensors; fp32 weights {param_mb:.3f} MB, "
      "gradients the same")
sanity("act_scale_k", act_big - const_big == k * (act_micro - const_micro) and const_big == const_micro
       and n_saved == n_saved_big,
       "apart from one scalar, the large batch saves exactly k times the activation bytes of one micro-batch",
       operands=(act_big - const_big, k * (act_micro - const_micro)), relation="equal")
sanity("act_scale_2k", act_2k - const_2k == 2 * k * (act_micro - const_micro) and const_2k == const_micro,
       "a batch of 2k micro-batches keeps exactly 2k times one micro-batch's activation bytes, apart from one scalar",
       operands=(act_2k - const_2k, 2 * k * (act_micro - const_micro)), relation="equal")

# -- 4. time: one accumulated step against one large-batch step ----------------------------------------
def flops(fn):
    with FlopCounterMode(display=False) as fc:
        fn()
    return fc.get_total_flops()


fl_big = value("flops_big_g", flops(lambda: big_step(m32, labels)) / 1e9, unit="GFLOP")
fl_acc = value("flops_acc_g", flops(lambda: accum_step(m32, labels)) / 1e9, unit="GFLOP")
sanity("same_flops", fl_big == fl_acc, "the accumulated step and the large batch count the same FLOPs",
       operands=(fl_acc, fl_big), relation="equal")
n_mm = sum(m.weight.numel() for m in m32.modules() if isinstance(m, nn.Linear))
value("Nmm", n_mm)
sanity("flops_mm_only", round(fl_big * 1e9) == 6 * n_mm * B * T_s,
       "the count is exactly 6 N_w per token (N_w: the weights of matrix products): the weights' products alone, "
       "no attention products",
       operands=(fl_big, 6 * n_mm * B * T_s / 1e9), relation=("equal", "not"))
value("attn_uncounted_g", 12 * L_s * T_s * d_s * B * T_s / 1e9, unit="GFLOP")


def timed(fn):
    t0 = time.thread_time()
    fn()
    return time.thread_time() - t0
for _ in range(2):                               # warm-up: allocator, kernels
    big_step(m32, labels)
    accum_step(m32, labels)
t_big, t_acc, ratio = [], [], []
for r in range(repeats):
    # one repeat: the best of `inner` back-to-back pairs, the order alternating, so that a busy neighbour
    # that slows one timing does not decide the figure
    tb, ta = [], []
    for i in range(inner):
        if (r + i) % 2 == 0:
            tb.append(timed(lambda: big_step(m32, labels)))
            ta.append(timed(lambda: accum_step(m32, labels)))
        else:
            ta.append(timed(lambda: accum_step(m32, labels)))
            tb.append(timed(lambda: big_step(m32, labels)))
    t_big.append(min(tb) * 1e3)
    t_acc.append(min(ta) * 1e3)
    ratio.append(min(ta) / min(tb))
what = f"forward and backward of {B} sequences of {T_s} tokens, CPU time of the one thread"
e_big = estimate("t_big_ms", t_big, unit="ms", n=repeats * inner, measured="one large-batch step: " + what)
e_acc = estimate("t_acc_ms", t_acc, unit="ms", n=repeats * inner,
                 measured=f"one accumulated step, {k} micro-batches of {b}: " + what)
e_ratio = estimate("t_ratio", ratio, n=repeats * inner, measured="accumulated step time over large-batch step time, "
                   f"per repeat the shortest of each over {inner} back-to-back pairs (thread CPU time)")
print(f"\nStep time over {repeats} repeats: large batch {e_big:.1f} ms ({e_big.lo:.1f}-{e_big.hi:.1f}), "
      f"accumulated {e_acc:.1f} ms ({e_acc.lo:.1f}-{e_acc.hi:.1f}); ratio {e_ratio:.3f} "
      f"({e_ratio.lo:.3f}-{e_ratio.hi:.3f})")
