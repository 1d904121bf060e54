"""I.3.A04 — Reductions over padded batches.

A per-token loss on a right-padded batch (B, T), zero at the padding as ignore_index leaves it. The
check computes its mean and variance with a mask, by two or three routes each, and the wrong ways:
padding in the denominator, the mean of per-sequence means, the variance around the wrong mean. Each
wrong value is compared with its closed form. Then keepdim=True: the row sums as (B,) and as (B, 1),
the RuntimeError the (B,) form raises when it meets (B, T), and the silent wrong result when B == T.
"""

import torch

from numbook.check import given, sanity, value


def row(label, *cells, w=44, cw=12):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


lengths = given("lengths", (10, 7, 4, 2))      # real tokens per sequence, right-padded
T = given("T", 10)                             # padded length
l_inf = given("l_inf", 2.0)                    # the loss far into a sequence, in nats
delta = given("delta", 3.0)                    # how much higher the loss is at the first token
sigma = given("sigma", 0.3)                    # noise on each token's loss
seed = given("seed", 0, nudge=0)

B = len(lengths)
L = torch.tensor(lengths)
g = torch.Generator().manual_seed(seed)
t = torch.arange(T)
mask = t[None, :] < L[:, None]                                  # (B, T) bool, True = real token
raw = l_inf + delta / torch.sqrt(t[None, :] + 1.0) + sigma * torch.randn(B, T, generator=g)
loss = torch.where(mask, raw, torch.zeros(()))                  # padding holds 0, as ignore_index leaves it
m = mask.float()

print(f"Per-token loss (B, T) = {tuple(loss.shape)}, padding shown as '.'")
for b in range(B):
    print("  " + " ".join(f"{x:5.2f}" if k else "    ." for x, k in zip(loss[b].tolist(), mask[b].tolist(),
                                                                      strict=True)))
LEN = "the sum of the given lengths: a list of counts, which --perturb does not nudge"
n = value("n_valid", int(mask.sum()), fixed=LEN)
N = value("N", loss.numel())
value("loss_shape", loss.shape)
value("pad_frac", 1 - n / N)
sanity("lengths_sum", n == sum(lengths), "the mask counts the real tokens", operands=(n, sum(lengths)))

# -- the mean ------------------------------------------------------------------------------------
mu = (loss * m).sum() / m.sum()                                 # masked mean
mu_idx = loss[mask].mean()                                      # boolean indexing: the valid tokens only
seq_mean = (loss * m).sum(1) / m.sum(1)                         # (B,) per-sequence means
mu_weighted = (L * seq_mean).sum() / L.sum()                    # length-weighted mean of those
mu_zeros = loss.mean()                                          # padding zeros in the denominator
mu_of_means = seq_mean.mean()                                   # every sequence weighted equally
value("mu", mu)
value("mu_zeros", mu_zeros)
value("mu_of_means", mu_of_means)
value("seq_means", tuple(round(x, 2) for x in seq_mean.tolist()))
value("zeros_under", 1 - mu_zeros.item() / mu.item())
value("means_over", mu_of_means.item() / mu.item() - 1)
sanity("mean_three_routes", torch.allclose(mu, mu_idx) and torch.allclose(mu, mu_weighted),
       "masked sum / count = loss[mask].mean() = length-weighted mean of the per-sequence means",
       operands=(mu, mu_idx), relation="equal")
sanity("zeros_closed_form", torch.allclose(mu_zeros, mu * n / N),
       "with zeros in the denominator the mean is the right mean times n / N", operands=(mu_zeros, mu * n / N),
       relation="equal")
sanity("zeros_smaller", mu_zeros < mu, "the mean with padding in the denominator is smaller",
       operands=(mu_zeros, mu), relation=("smaller", "larger"))
# mean of means - token mean = -Cov(L, mu_b) / mean(L): short sequences weigh as much as long ones
cov_L = ((L - L.float().mean()) * (seq_mean - seq_mean.mean())).mean()
gap_closed = -cov_L / L.float().mean()
value("mean_gap", mu_of_means - mu)
value("mean_gap_closed", gap_closed)
sanity("means_gap_closed_form", torch.allclose(mu_of_means - mu, gap_closed, atol=1e-6),
       "mean of means - token mean = -Cov(L, per-sequence mean) / mean L", operands=(mu_of_means - mu, gap_closed))
sanity("means_larger", mu_of_means > mu and cov_L < 0,
       "short sequences have the higher mean loss, so the mean of means is larger", operands=(mu_of_means, mu),
       relation="larger")
value("short_mean", seq_mean[L.argmin()])
value("long_mean", seq_mean[L.argmax()])

# -- the variance --------------------------------------------------------------------------------
var = ((loss - mu) ** 2 * m).sum() / m.sum()                    # masked population variance
var_idx = loss[mask].var(correction=0)
var_zeros = loss.var(correction=0)                              # zeros counted as tokens
p = n / N
var_zeros_closed = p * var + p * (1 - p) * mu**2
var_wrong_mean = ((loss - mu_zeros) ** 2 * m).sum() / m.sum()  # right mask, wrong mean
value("var", var)
value("var_zeros", var_zeros)
value("var_zeros_closed", var_zeros_closed)
value("var_wrong_mean", var_wrong_mean)
value("var_zeros_ratio", (var_zeros / var).item())
value("var_unbiased", loss[mask].var())
sanity("var_two_routes", torch.allclose(var, var_idx), "masked variance = loss[mask].var(correction=0)",
       operands=(var, var_idx), relation="equal")
sanity("var_zeros_closed_form", torch.allclose(var_zeros, var_zeros_closed, rtol=1e-5),
       "with the zeros: p var + p (1 - p) mu^2, p = n / N", operands=(var_zeros, var_zeros_closed))
sanity("var_zeros_larger", var_zeros > var, "the zeros widen the spread: the variance with them is larger",
       operands=(var_zeros, var))
sanity("var_wrong_mean_closed", torch.allclose(var_wrong_mean, var + (mu - mu_zeros) ** 2, rtol=1e-5)
       and var_wrong_mean > var, "around the wrong mean: var + (mu - mu_zeros)^2, larger",
       operands=(var_wrong_mean, var + (mu - mu_zeros) ** 2), relation="larger")

print("\nReductions of the per-token loss")
row("", "value")
row("mean, masked (sum over mask / count)", f"{mu.item():.4f}")
row("mean, loss[mask].mean()", f"{mu_idx.item():.4f}")
row("mean, padding zeros in the denominator", f"{mu_zeros.item():.4f}")
row("mean of per-sequence means", f"{mu_of_means.item():.4f}")
row("variance, masked", f"{var.item():.4f}")
row("variance, zeros included", f"{var_zeros.item():.4f}")
row("variance, masked, around the zeros mean", f"{var_wrong_mean.item():.4f}")
print("\nPer sequence")
row("length", *lengths, w=20, cw=8)
row("mean loss", *(f"{x:.3f}" for x in seq_mean.tolist()), w=20, cw=8)

# -- keepdim=True --------------------------------------------------------------------------------
rs = loss.sum(1)                                                # (B,)
rs_k = loss.sum(1, keepdim=True)                                # (B, 1)
BATCH = "B is the number of given lengths, which --perturb does not nudge"
value("rowsum_shape", rs.shape, fixed=BATCH)
value("rowsum_keep_shape", rs_k.shape, fixed=BATCH)
shares = loss / rs_k                                            # each row sums to one
value("shares_shape", shares.shape)
sanity("keepdim_is_unsqueeze", torch.equal(rs_k, rs.unsqueeze(1)) and torch.equal(rs_k, rs[:, None]),
       "sum(1, keepdim=True) equals sum(1) followed by unsqueeze(1) or [:, None]", relation="equal")
sanity("rows_sum_to_one", torch.allclose(shares.sum(1), torch.ones(B)), "with keepdim the rows sum to one")
try:
    loss / rs
    err = ""
except RuntimeError as exc:
    err = str(exc).splitlines()[0]
print(f"\nloss {tuple(loss.shape)} / loss.sum(1) {tuple(rs.shape)}:\n  RuntimeError: {err}")
sanity("no_keepdim_raises", "must match" in err, "(B, T) / (B,) raises when T != B", relation="not")

sq = loss[:, :B]                                                # a square (B, B) batch: B tokens each
sq_rs = sq.sum(1)
silent = sq / sq_rs                                             # runs: divides column j by row j's sum
right_sq = sq / sq.sum(1, keepdim=True)
value("square_shape", sq.shape, fixed=BATCH)
value("silent_row_sums", tuple(round(x, 3) for x in silent.sum(1).tolist()))
value("silent_max_dev", (silent.sum(1) - 1).abs().max())
sanity("silent_divides_columns", torch.allclose(silent, sq / sq_rs[None, :]),
       "(B, B) / (B,) divides column j by the sum of row j")
sanity("silent_wrong", not torch.allclose(silent.sum(1), torch.ones(B)) and torch.allclose(right_sq.sum(1),
       torch.ones(B)), "the silent result's rows do not sum to one; keepdim's do",
       operands=(silent.sum(1).tolist(), right_sq.sum(1).tolist()), relation="not")
print(f"square (B, B) = {tuple(sq.shape)} / row sums (B,): runs; row sums of the result:",
      ", ".join(f"{x:.3f}" for x in silent.sum(1).tolist()))

# -- variation: the same losses with no padding (every sequence T tokens) ------------------------
full = raw                                                      # (B, T), every position real
eq_mu = full.mean()
eq_means = full.mean(1).mean()
eq_masked = (full * torch.ones_like(m)).sum() / torch.ones_like(m).sum()
value("eq_mu", eq_mu)
value("eq_means", eq_means)
sanity("eq_all_agree", torch.allclose(eq_mu, eq_means) and torch.allclose(eq_mu, eq_masked),
       "with equal lengths and no padding the three means agree", operands=(eq_mu, eq_means), relation=("equal", "not"))
print(f"\nVariation, no padding: mean {eq_mu.item():.4f}, mean of means {eq_means.item():.4f}")

# -- where this breaks: an empty sequence, and mean pooling ----------------------------------------
m0 = torch.cat([m, torch.zeros(1, T)])                          # one more sequence, of length zero
l0 = torch.cat([loss, torch.zeros(1, T)])
seq_mean0 = (l0 * m0).sum(1) / m0.sum(1)
sanity("empty_is_nan", bool(torch.isnan(seq_mean0[-1])) and bool(torch.isnan(seq_mean0.mean()))
       and torch.allclose((l0 * m0).sum() / m0.sum(), mu),
       "a length-zero sequence has mean 0/0 = nan and so has the mean of means; the token mean is unchanged")
dh = T + 1                                                      # a hidden size that differs from B
h = torch.randn(B, T, dh, generator=g)
pooled = (h * m[..., None]).sum(1) / m.sum(1, keepdim=True)     # (B, dh) / (B, 1)
try:
    (h * m[..., None]).sum(1) / m.sum(1)                        # (B, dh) / (B,)
    pool_err = ""
except RuntimeError as exc:
    pool_err = str(exc).splitlines()[0]
sanity("pooling_keepdim", torch.allclose(pooled, torch.stack([h[i, :n_].mean(0) for i, n_ in enumerate(lengths)]))
       and "must match" in pool_err, "masked mean pooling with keepdim equals the mean over each sequence's real"
       " tokens; without keepdim it raises")
print(f"\nMean pooling (B, T, d) -> (B, d): with keepdim matches the per-sequence mean; without: {pool_err}")
