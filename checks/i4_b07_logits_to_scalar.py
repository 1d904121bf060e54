"""I.4.B07 — From a logit tensor to one scalar.

Builds the real (B, T, |V|) logits tensor, reads its memory from torch, flattens it, runs
torch.nn.functional.cross_entropy with a padding mask under both reductions, and compares the
gradients the two reductions send back. The variation uses meta tensors (shape and dtype only,
no storage) to find the batch size where the fp32 logits pass a budget in GB and in GiB.
"""

import inspect
import itertools
import math

import torch
import torch.nn.functional as F

from numbook.check import fact, given, sanity, value

MB, MiB, GB, GiB = 10**6, 2**20, 10**9, 2**30


def row(label, *cells, w=34):
    print(f"  {label:<{w}}" + "".join(f"{c:>18}" for c in cells))


B = given("B", 4)
T = given("T", 512)
V = given("V", 32_000)
d = given("d", 4096)
pad_frac = given("pad_frac", 0.15)
# PyTorch's default ignore_index, read from the library
IGNORE = value("ignore_index", inspect.signature(F.cross_entropy).parameters["ignore_index"].default,
               fixed="the default ignore_index of F.cross_entropy, a property of the library")

g = torch.Generator().manual_seed(0)
logits = torch.randn(B, T, V, generator=g)          # fp32, the dtype a loss is usually computed in
targets = torch.randint(0, V, (B, T), generator=g)  # int64 class indices
hidden = torch.empty(B, T, d)                      # the final hidden state the logits came from

# -- Steps 1-5: the shape trace --------------------------------------------------------------
N = value("N", B * T)
flat = logits.view(N, V)          # view: same storage, no copy
flat_t = targets.view(N)
per_pos = F.cross_entropy(flat, flat_t, reduction="none")
loss = per_pos.mean()

trace = [
    ("logits", logits), ("targets", targets), ("flattened logits", flat),
    ("flattened targets", flat_t), ("per-position loss", per_pos), ("reduced loss", loss),
]
print("Shape trace")
row("stage", "shape", "rank", "elements", "dtype")
for name, t in trace:
    row(name, str(tuple(t.shape)), t.dim(), f"{t.numel():,}", str(t.dtype).replace("torch.", ""))
value("logits_shape", logits.shape)
value("targets_shape", targets.shape)
value("flat_shape", flat.shape)
value("flat_targets_shape", flat_t.shape)
value("per_pos_shape", per_pos.shape)
value("loss_shape", loss.shape, fixed="the shape of a scalar: no size moves it")
value("targets_numel", targets.numel())
value("loss_numel", loss.numel(), fixed="a 0-d tensor holds one element")

ranks = [logits.dim(), flat.dim(), per_pos.dim(), loss.dim()]
RANK_WHY = "a rank is set by the operations (merge, index, reduce), not by the sizes B, T, |V|"
drops = value("rank_drops", sum(1 for a, b in itertools.pairwise(ranks) if b == a - 1), fixed=RANK_WHY)
for name, t in trace:
    value("rank_" + name.replace("-", "_").replace(" ", "_"), t.dim(), fixed=RANK_WHY)
# two routes: the count of one-step drops between stages, and the rank of the logits minus the loss's
sanity("three_drops", ranks == [3, 2, 1, 0] and drops == logits.dim() - loss.dim(),
       "rank goes 3 -> 2 (flatten) -> 1 (index away |V|) -> 0 (reduce), one per operation",
       operands=(drops, logits.dim() - loss.dim()), relation="falls")
sanity("view_no_copy", flat.data_ptr() == logits.data_ptr() and flat.numel() == logits.numel(),
       "flattening is a view: same storage, same element count")

# -- Step 6: memory -----------------------------------------------------------------------
numel = value("numel", logits.numel())
fp32_bytes = value("fp32_bytes", logits.nbytes)
bf16 = logits.to(torch.bfloat16)
bf16_bytes = value("bf16_bytes", bf16.nbytes)
value("fp32_elem", logits.element_size(), unit="B", fixed="bytes of an fp32 element: a property of the dtype")
value("bf16_elem", bf16.element_size(), fixed="bytes of a bf16 element: a property of the dtype")
value("int64_elem", targets.element_size())
fp32_mb = value("fp32_mb", fp32_bytes / MB)
bf16_mb = value("bf16_mb", bf16_bytes / MB)
value("fp32_mib", fp32_bytes / MiB)
value("bf16_mib", bf16_bytes / MiB)
value("targets_kb", targets.nbytes / 10**3)
value("targets_bytes", targets.nbytes)
probs = torch.softmax(flat, dim=-1)   # what the naive route of I.4.B04 materialises
value("with_probs_fp32_mb", (logits.nbytes + probs.nbytes) / MB)
value("with_probs_bf16_mb", (bf16.nbytes + probs.to(torch.bfloat16).nbytes) / MB)
del probs
value("hidden_mb", hidden.nbytes / MB)
value("logits_over_hidden", logits.nbytes / hidden.nbytes)
del bf16

print("\nMemory of the logits")
row("", "elements", "bytes", "MB", "MiB")
row("fp32 (.nbytes)", f"{numel:,}", f"{fp32_bytes:,}", f"{fp32_mb:.1f}", f"{fp32_bytes / MiB:.1f}")
row("bf16 (.nbytes)", f"{numel:,}", f"{bf16_bytes:,}", f"{bf16_mb:.1f}", f"{bf16_bytes / MiB:.1f}")
row("targets int64 (.nbytes)", f"{targets.numel():,}", f"{targets.nbytes:,}", f"{targets.nbytes / MB:.4f}", "")
row(f"hidden (B, T, d={d}) fp32", f"{hidden.numel():,}", f"{hidden.nbytes:,}", f"{hidden.nbytes / MB:.1f}", "")
row("logits / hidden", f"{logits.nbytes / hidden.nbytes:.4f}")

sanity("bytes_two_routes", fp32_bytes == numel * logits.element_size() == B * T * V * 4
       and bf16_bytes == numel * 2, ".nbytes agrees with numel * element_size and with B*T*|V|*4", relation="half")
sanity("bf16_half", fp32_bytes == 2 * bf16_bytes, "bf16 is exactly half of fp32")
sanity("ratio_is_V_over_d", math.isclose(logits.nbytes / hidden.nbytes, V / d) and logits.nbytes > hidden.nbytes,
       "logits/hidden = |V|/d: the logits are larger", operands=(logits.nbytes / hidden.nbytes, V / d),
       relation=("larger", "equal"))
# linear growth: doubling B, T or |V| doubles the logits' bytes (meta tensors: shape only)
grow = [torch.empty(B * (1 + (i == 0)), T * (1 + (i == 1)), V * (1 + (i == 2)), device="meta").nbytes
        for i in range(3)]
sanity("logits_linear", all(nb == 2 * logits.nbytes for nb in grow),
       "doubling B, T or |V| doubles the logits' memory", operands=(grow, 2 * logits.nbytes), relation="grows")

# -- Step 4 by a second route: lse - z_c --------------------------------------------------
lse = torch.logsumexp(flat, dim=-1)
z_c = flat.gather(1, flat_t[:, None]).squeeze(1)
hand = lse - z_c
ref64 = torch.logsumexp(flat.double(), dim=-1) - flat.double().gather(1, flat_t[:, None]).squeeze(1)
max_diff = value("hand_vs_ce_maxdiff", max((hand.double() - ref64).abs().max().item(),
                                           (per_pos.double() - ref64).abs().max().item()))
del ref64
print(f"\nPer-position loss: cross_entropy and logsumexp - z_c against fp64, max |diff| = {max_diff:.2e}")
sanity("hand_matches_ce", max_diff < 1e-5, "cross_entropy equals logsumexp(z) - z_c per position",
       operands=(max_diff, 1e-5), relation=("largest", "equal"))

# -- Step 7: padding and the two reductions -------------------------------------------------
valid_frac = value("valid_frac", 1 - pad_frac)
n_valid = value("n_valid", round(N * valid_frac))
n_pad = value("n_pad", N - n_valid)
# Right-padded sequences: sequence b gets a share of the n_pad padding positions proportional to b
# (the first is full), rounded by largest remainder so that the lengths add up to n_valid.
share = [n_pad * b / sum(range(B)) if B > 1 else n_pad for b in range(B)]
pads = [math.floor(x) for x in share]
for b in sorted(range(B), key=lambda b: pads[b] - share[b])[: n_pad - sum(pads)]:
    pads[b] += 1
lengths = value("lengths", tuple(T - p for p in pads))
sanity("lengths_sum", sum(lengths) == n_valid and max(lengths) <= T and min(lengths) > 0,
       "the lengths give the valid count", operands=(sum(lengths), n_valid), relation="equal")
mask = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]        # (B, T) bool, True = real token
masked_t = targets.masked_fill(~mask, IGNORE).view(N)

x = flat.detach().clone().requires_grad_(True)
loss_valid = F.cross_entropy(x, masked_t, ignore_index=IGNORE, reduction="mean")   # divides by n_valid
(g_valid,) = torch.autograd.grad(loss_valid, x)
per_pos_m = F.cross_entropy(x, masked_t, ignore_index=IGNORE, reduction="none")    # 0 at padding
S = per_pos_m.sum()
loss_all = S / N                                                                    # divides by all N
(g_all,) = torch.autograd.grad(loss_all, x)

S_v = value("masked_sum", S.item())
lv = value("loss_valid", loss_valid.item())
la = value("loss_all", loss_all.item())
ratio = value("ratio_valid_over_all", lv / la)
value("ratio_exact", N / n_valid)
under = value("understate", 1 - la / lv)          # how far the all-positions mean falls below
over = value("overstate", lv / la - 1)            # how far the valid mean lies above
grad_ratio = value("grad_ratio", (g_all.norm() / g_valid.norm()).item())
value("lr_cut", 1 - grad_ratio)
value("ln_V_plus_half", math.log(V) + 0.5)
# A causal LM predicts the next token: the last real position of each sequence has no target.
n_shift = value("n_valid_shifted", sum(n - 1 for n in lengths))
# second route: a label at t is the token at t + 1, kept where both positions are real tokens
shift_kept = int((mask[:, :-1] & mask[:, 1:]).sum())
sanity("shift_drops_one_per_sequence", shift_kept == n_shift == n_valid - B,
       "next-token labels lose the last real position of each sequence", operands=(shift_kept, n_valid - B),
       relation="not")

print(f"\nMasking: {pad_frac:.0%} padding")
row("positions N", f"{N:,}")
row("valid positions", f"{n_valid:,}")
row("padding positions", f"{n_pad:,}")
row("masked sum S", f"{S_v:.2f}")
row('mean over valid  (reduction="mean")', f"{lv:.4f}")
row("mean over all    (S / N)", f"{la:.4f}")
row("ratio valid / all", f"{ratio:.4f}")
row("N / n_valid", f"{N / n_valid:.4f}")
row("all-mean understates valid by", f"{100 * under:.2f} %")
row("valid mean exceeds all by", f"{100 * over:.2f} %")
row("|grad all| / |grad valid|", f"{grad_ratio:.4f}")

sanity("ce_mean_divides_by_valid", math.isclose(lv, S_v / n_valid, rel_tol=1e-5),
       'reduction="mean" with ignore_index divides by the valid count')
sanity("padding_contributes_zero", bool((per_pos_m.view(B, T)[~mask] == 0).all()),
       "ignored positions have loss exactly 0")
sanity("ratio_two_routes", math.isclose(ratio, N / n_valid, rel_tol=1e-5),
       "ratio of the computed losses equals N / n_valid", operands=(ratio, N / n_valid), relation="not")
sanity("understate_is_valid_share", la < lv and math.isclose(under, 1 - n_valid / N, rel_tol=1e-4),
       "the all-positions mean falls below the valid mean by 1 - n_valid/N", operands=(under, 1 - n_valid / N),
       relation=("smaller", "larger"))
sanity("overstate_is_inverse", lv > la and math.isclose(over, N / n_valid - 1, rel_tol=1e-4),
       "the valid mean lies above the all-positions mean by N/n_valid - 1", operands=(over, N / n_valid - 1),
       relation="larger")
# N / n_valid is 1 / (1 - pad_frac) up to the rounding of n_valid: |N (1 - p) - n_valid| <= 1/2
sanity("ratio_bounds", N / n_valid >= 1
       and abs(N / n_valid - 1 / (1 - pad_frac)) <= 0.5 / (n_valid * (1 - pad_frac)) + 1e-12,
       "1 <= N / n_valid, equal to 1 / (1 - pad_frac) up to the rounding of n_valid",
       operands=(N / n_valid, 1 / (1 - pad_frac)))
sanity("grad_scaled", torch.allclose(g_all, g_valid * n_valid / N, atol=1e-9)
       and math.isclose(grad_ratio, n_valid / N, rel_tol=1e-4),
       "the all-positions gradient is the valid gradient times n_valid/N, element by element",
       operands=(grad_ratio, n_valid / N), relation="equal")
sanity("init_loss", abs(lv - (math.log(V) + 0.5)) < 0.05, "random N(0,1) logits give a loss near ln|V| + 1/2")

# -- Variation: a larger |V|; when do fp32 logits pass a budget in GB and in GiB? ------------
V2 = given("V2", 128_000)
V_llama3 = fact("llama3_8b_vocab", "V_llama3")
limit_gb = given("limit_gb", 10)
limit_gib = given("limit_gib", 10)
big = torch.empty(B, T, V2, device="meta")        # metadata only: shape, dtype, nbytes
value("v2_numel", big.numel())
value("v2_fp32_mb", big.nbytes / MB)
value("v2_bf16_mb", big.to(torch.bfloat16).nbytes / MB)
v2_over_v = value("v2_over_v", big.nbytes / logits.nbytes)


def first_batch_over(limit, vocab):
    """Probe meta tensors of growing batch size until their .nbytes passes the limit."""
    b = 1
    while torch.empty(b, T, vocab, device="meta").nbytes <= limit:
        b += 1
    return b


b_gb = value("B_over_10GB", first_batch_over(limit_gb * GB, V2))
b_gib = value("B_over_10GiB", first_batch_over(limit_gib * GiB, V2))
b_gb3 = value("B_over_10GB_llama3", first_batch_over(limit_gb * GB, V_llama3))
b_gib3 = value("B_over_10GiB_llama3", first_batch_over(limit_gib * GiB, V_llama3))
value("B_below_gb", b_gb - 1)
value("B_below_gib", b_gib - 1)
at_gb = value("bytes_at_B_gb", torch.empty(b_gb, T, V2, device="meta").nbytes / GB)
below_gb = value("bytes_below_B_gb", torch.empty(b_gb - 1, T, V2, device="meta").nbytes / GB)
at_gib = value("bytes_at_B_gib", torch.empty(b_gib, T, V2, device="meta").nbytes / GiB)
below_gib = value("bytes_below_B_gib", torch.empty(b_gib - 1, T, V2, device="meta").nbytes / GiB)
value("ten_gib_in_gb", limit_gib * GiB / GB)
per_seq = T * V2 * 4                               # the closed form: bytes per sequence
value("per_seq_mb", per_seq / MB)
value("per_seq_mb_llama3", torch.empty(1, T, V_llama3, device="meta").nbytes / MB, unit="MB")

print(f"\nVariation: |V| = {V2:,}")
row("elements", f"{big.numel():,}")
row("fp32 MB", f"{big.nbytes / MB:.1f}")
row("bf16 MB", f"{big.nbytes / 2 / MB:.1f}")
row("MB per sequence (T x |V| x 4)", f"{per_seq / MB:.1f}")
row("", "first B over", "at B-1", "at B")
row(f"{limit_gb} GB  = {limit_gb * GB:.0e} bytes", b_gb, f"{below_gb:.2f} GB", f"{at_gb:.2f} GB")
row(f"{limit_gib} GiB = {limit_gib * GiB / GB:.2f} GB", b_gib, f"{below_gib:.2f} GiB", f"{at_gib:.2f} GiB")
row(f"same at Llama 3's {V_llama3:,}", b_gb3, b_gib3)

closed_gb = math.floor(limit_gb * GB / per_seq) + 1
closed_gib = math.floor(limit_gib * GiB / per_seq) + 1
sanity("threshold_gb", b_gb == closed_gb and below_gb <= limit_gb < at_gb,
       "the meta-tensor probe agrees with floor(limit / bytes per sequence) + 1, in GB", operands=(b_gb, closed_gb))
sanity("threshold_gib", b_gib == closed_gib and below_gib <= limit_gib < at_gib,
       "the meta-tensor probe agrees with floor(limit / bytes per sequence) + 1, in GiB",
       operands=(b_gib, closed_gib))
shift = value("units_shift", b_gib - b_gb)
sanity("units_shift", shift == closed_gib - closed_gb, "GB against GiB moves the threshold by this many sequences",
       operands=(shift, closed_gib - closed_gb))
sanity("threshold_llama3", (b_gb3, b_gib3) == (math.floor(limit_gb * GB / (T * V_llama3 * 4)) + 1,
                                              math.floor(limit_gib * GiB / (T * V_llama3 * 4)) + 1),
       "the probe agrees with the closed form at Llama 3's vocabulary", operands=((b_gb3, b_gib3), (b_gb, b_gib)))
sanity("v2_ratio", math.isclose(v2_over_v, V2 / V), "the logits grow by |V2| / |V|", operands=(v2_over_v, V2 / V))
