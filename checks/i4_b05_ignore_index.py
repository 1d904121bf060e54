"""I.4.B05 — ignore_index and masked means in PyTorch.

Real F.cross_entropy calls on (N, |V|) logits with padded targets: what reduction="mean"
divides by, with and without class weights; what happens when the padding label is not the
ignore_index; and the all-ignored batch, whose loss is nan, with the gradients that
F.cross_entropy and a hand-written masked mean send back, and an optimiser step taken on them.
"""

import inspect
import math

import torch
import torch.nn.functional as F

from numbook.check import given, sanity, value


def row(label, *cells, w=46, cw=14):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


B = given("B", 4)
T = given("T", 512)
V = given("V", 32_000)
lengths = given("lengths", (512, 463, 402, 364))
PAD_ID = given("pad_id", 0)               # the tokenizer's padding token id
# PyTorch's default ignore_index, read from the signature of F.cross_entropy
IGNORE = value("ignore_index", inspect.signature(F.cross_entropy).parameters["ignore_index"].default,
               fixed="PyTorch's default ignore_index, read from the signature of F.cross_entropy")
W_HI = given("w_hi", 2.0)                 # class weight of the upper half of the vocabulary
N = value("N", B * T)

g = torch.Generator().manual_seed(0)
z = torch.randn(N, V, generator=g)
tokens = torch.randint(0, V - 1, (B, T), generator=g)
tokens = tokens + (tokens >= PAD_ID).long()                              # real tokens are never PAD_ID
seq_len = [lengths[i % len(lengths)] for i in range(B)]                  # one length per sequence
mask = torch.arange(T)[None, :] < torch.tensor(seq_len)[:, None]         # True = real token
input_ids = tokens.masked_fill(~mask, PAD_ID)
labels = input_ids.masked_fill(~mask, IGNORE).view(N)                    # the right way
mask = mask.view(N)
n_valid = value("n_valid", int(mask.sum()))
value("n_pad", N - n_valid)

# -- 1. what reduction="mean" divides by ------------------------------------------------------
l_none = F.cross_entropy(z, labels, reduction="none", ignore_index=IGNORE)
l_sum = F.cross_entropy(z, labels, reduction="sum", ignore_index=IGNORE).item()
l_mean = F.cross_entropy(z, labels, ignore_index=IGNORE).item()
value("loss_sum", l_sum)
value("loss_mean", l_mean)
value("sum_over_valid", l_sum / n_valid)
value("sum_over_N", l_sum / N)
print("Step 1: reduction='mean' with ignore_index")
row("valid targets / positions", f"{n_valid:,}", f"{N:,}")
row("reduction='sum'", f"{l_sum:.2f}")
row("reduction='mean'", f"{l_mean:.4f}")
row("sum / valid count", f"{l_sum / n_valid:.4f}")
row("sum / all positions", f"{l_sum / N:.4f}")
sanity("mean_is_sum_over_valid", math.isclose(l_mean, l_sum / n_valid, rel_tol=1e-5),
       "mean = sum / number of non-ignored targets", relation="equal")
sanity("ignored_are_zero", bool((l_none[~mask] == 0).all()), "reduction='none' gives exactly 0 at ignored positions")

# -- 2. with class weights -----------------------------------------------------------------------
w = torch.ones(V)
w[V // 2:] = W_HI
value("V_half", V // 2)
lw_mean = F.cross_entropy(z, labels, weight=w, ignore_index=IGNORE).item()
lw_none = F.cross_entropy(z, labels, weight=w, reduction="none", ignore_index=IGNORE)
wsum = value("weight_sum_valid", w[labels[mask]].sum().item())
n_hi = value("n_valid_hi", int((labels[mask] >= V // 2).sum()))
value("weighted_loss_mean", lw_mean)
value("weighted_sum_over_wsum", lw_none.sum().item() / wsum)
value("weighted_sum_over_count", lw_none.sum().item() / n_valid)
w_ratio = value("weighted_ratio", (lw_none.sum().item() / n_valid) / lw_mean)
print(f"\nStep 2: with weight= (w = 1 in the lower half of the vocabulary, {W_HI:g} in the upper)")
row(f"valid targets with weight {W_HI:g}", f"{n_hi:,}")
row("sum of w[y] over valid targets", f"{wsum:,.0f}")
row("reduction='mean'", f"{lw_mean:.4f}")
row("weighted sum / sum of weights", f"{lw_none.sum().item() / wsum:.4f}")
row("weighted sum / valid count", f"{lw_none.sum().item() / n_valid:.4f}")
sanity("weighted_mean_divides_by_wsum", math.isclose(lw_mean, lw_none.sum().item() / wsum, rel_tol=1e-5),
       "with weight=, mean divides by the sum of the targets' weights", relation="equal")
sanity("wsum_count", math.isclose(wsum, n_valid + (W_HI - 1) * n_hi, rel_tol=1e-6),
       "sum of weights = count + (w_hi - 1) * count above |V|/2", operands=(wsum, n_valid + (W_HI - 1) * n_hi))
sanity("count_divisor_larger", w_ratio > 1 and math.isclose(w_ratio, wsum / n_valid, rel_tol=1e-5),
       "dividing the weighted sum by the count instead of the weight sum makes the mean larger by wsum / count",
       operands=(w_ratio, wsum / n_valid), relation="larger")

# -- 3. padding labels left as the pad token --------------------------------------------------------
labels_bug = input_ids.view(N)                       # PAD_ID where there is padding, no ignore_index
l_bug = F.cross_entropy(z, labels_bug, reduction="none", ignore_index=IGNORE)
n_counted_bug = value("n_counted_bug", int((labels_bug != IGNORE).sum()))
n_pad_targets = value("n_pad_targets", int((labels_bug == PAD_ID).sum()))
value("loss_mean_bug", l_bug.mean().item())
print(f"\nStep 3: labels = input_ids (pad id {PAD_ID} kept, no {IGNORE})")
row("targets counted", f"{n_counted_bug:,}")
row("of which the target is the pad token", f"{n_pad_targets:,}")
row("reduction='mean'", f"{l_bug.mean().item():.4f}")
sanity("bug_counts_all", n_counted_bug == N and n_pad_targets == N - n_valid,
       "every padding position becomes a 'predict the pad token' target")

# -- 4. a batch with nothing to predict ----------------------------------------------------------------
d = given("d", 64)                                   # a small head, enough to take an optimiser step
torch.manual_seed(0)
h = torch.randn(T, d)                                # one sequence, all padding
empty = torch.full((T,), IGNORE)
m0 = empty != IGNORE


def head_and_grad(loss_fn):
    head = torch.nn.Linear(d, V, bias=False)
    opt = torch.optim.SGD(head.parameters(), lr=0.1)
    loss = loss_fn(head(h))
    loss.backward()
    grad_nan = int(head.weight.grad.isnan().sum())
    grad_abs = head.weight.grad.abs().sum().item()
    opt.step()
    return loss.item(), grad_nan, grad_abs, int(head.weight.isnan().sum()), head.weight.numel()


def hand_masked(zz, denom_min=None):
    """Per-position loss at EVERY position (logsumexp - z_y, labels clamped to a valid index, as a
    custom or fused kernel computes it), then the mask removes the ignored ones."""
    nll = torch.logsumexp(zz, dim=-1) - zz.gather(1, empty.clamp(min=0)[:, None]).squeeze(1)
    cnt = m0.sum() if denom_min is None else m0.sum().clamp(min=denom_min)
    return (nll * m0).sum() / cnt


def none_masked(zz):
    """Per-position loss from F.cross_entropy(reduction="none"), then the same masked division."""
    nll = F.cross_entropy(zz, empty, reduction="none", ignore_index=IGNORE)
    return (nll * m0).sum() / m0.sum()


cases = {
    "F.cross_entropy, mean": lambda zz: F.cross_entropy(zz, empty, ignore_index=IGNORE),
    "F.cross_entropy, sum": lambda zz: F.cross_entropy(zz, empty, reduction="sum", ignore_index=IGNORE),
    "reduction='none', masked / mask.sum()": none_masked,
    "every position, masked / mask.sum()": hand_masked,
    "every position, / mask.sum().clamp(min=1)": lambda zz: hand_masked(zz, 1),
}
print(f"\nStep 4: one sequence of {T} positions, every label {IGNORE}; head ({V} x {d}), one SGD step")
row("loss", "value", "nan grads", "sum |grad|", "nan weights", w=46)
res = {}
for name, fn in cases.items():
    res[name] = head_and_grad(fn)
    loss, gnan, gabs, wnan, numel = res[name]
    row(name, f"{loss}", f"{gnan:,}", f"{gabs:.1f}", f"{wnan:,}", w=46)
ZERO = "an all-ignored batch: a sum of nothing or a count of nan entries, zero at every size, which is the finding"
numel = value("head_params", res["F.cross_entropy, mean"][4])
ce_mean = res["F.cross_entropy, mean"]
hand = res["every position, masked / mask.sum()"]
fixed = res["every position, / mask.sum().clamp(min=1)"]
none_r = res["reduction='none', masked / mask.sum()"]
value("empty_none_nan_grads", none_r[1], fixed=ZERO)
value("empty_none_nan_weights", none_r[3], fixed=ZERO)
value("empty_mean_is_nan", math.isnan(ce_mean[0]))
value("empty_sum", res["F.cross_entropy, sum"][0], fixed=ZERO)
value("empty_sum_nan_grads", res["F.cross_entropy, sum"][1], fixed=ZERO)
value("empty_sum_nan_weights", res["F.cross_entropy, sum"][3], fixed=ZERO)
value("empty_fixed_nan_grads", fixed[1], fixed=ZERO)
value("empty_ce_nan_grads", ce_mean[1], fixed=ZERO)
value("empty_ce_nan_weights", ce_mean[3], fixed=ZERO)
value("empty_hand_nan_grads", hand[1])
value("empty_hand_nan_weights", hand[3])
value("empty_fixed_loss", fixed[0], fixed=ZERO)
value("empty_fixed_nan_weights", fixed[3], fixed=ZERO)
sanity("empty_mean_nan", math.isnan(ce_mean[0]) and res["F.cross_entropy, sum"][0] == 0.0,
       "all ignored: mean is 0/0 = nan, sum is 0")
sanity("empty_ce_grad_clean", ce_mean[1] == 0 and ce_mean[2] == 0.0 and ce_mean[3] == 0,
       "F.cross_entropy's backward writes zero gradient at ignored targets, even under a nan loss", relation="not")
sanity("empty_hand_poisons", math.isnan(hand[0]) and hand[1] == numel and hand[3] == numel,
       "losses at every position, then 0/0: nan in every gradient and every weight after one step",
       operands=(hand[3], numel), relation="at least")
sanity("empty_none_clean", math.isnan(none_r[0]) and none_r[1] == 0 and none_r[3] == 0,
       "losses from reduction='none', then 0/0: a nan loss, but the backward zeroes the ignored positions",
       operands=(none_r[1], hand[1]), relation="larger")
sanity("empty_fixed", fixed[0] == 0.0 and fixed[1] == 0 and fixed[3] == 0, "clamping the count to 1 gives 0 and no nan")

# -- variation: packing, with next-token targets that do not cross documents --------------------
docs = value("packed_docs", (*seq_len, N - n_valid))          # a fifth document fills the padding
doc_id = torch.repeat_interleave(torch.arange(len(docs)), torch.tensor(docs))
stream = torch.randint(1, V, (N,), generator=g)
next_tok = torch.cat([stream[1:], stream[:1]])
same_doc = torch.cat([doc_id[1:] == doc_id[:-1], torch.tensor([False])])
packed_labels = torch.where(same_doc, next_tok, torch.full_like(next_tok, IGNORE))
packed_valid = value("packed_valid", int((packed_labels != IGNORE).sum()))
padded_shift_valid = value("padded_shift_valid", sum(n - 1 for n in seq_len))
pl_sum = F.cross_entropy(z, packed_labels, reduction="sum", ignore_index=IGNORE).item()
pl_mean = F.cross_entropy(z, packed_labels, ignore_index=IGNORE).item()
value("packed_docs_count", len(docs))
print(f"\nVariation: {len(docs)} documents packed into one {N:,}-position buffer, next-token targets")
row("document lengths", str(docs), w=30, cw=30)
row("targets (packed, no cross-document)", f"{packed_valid:,}", w=40, cw=12)
row("targets (padded, shifted)", f"{padded_shift_valid:,}", w=40, cw=12)
row("reduction='mean' / (sum / targets)", f"{pl_mean:.4f}", f"{pl_sum / packed_valid:.4f}", w=40, cw=12)
sanity("packed_divisor", packed_valid == N - len(docs) and math.isclose(pl_mean, pl_sum / packed_valid, rel_tol=1e-5),
       "packed: one ignored target per document, mean divides by N - documents", operands=(packed_valid, N - len(docs)),
       relation=("smaller", "equal"))
sanity("packed_more_targets", packed_valid > padded_shift_valid, "packing keeps more targets than padding",
       operands=(packed_valid, padded_shift_valid))
