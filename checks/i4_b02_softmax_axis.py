"""I.4.B02 — Softmax along the right axis.

Real (B, T, |V|) logits; torch.softmax along each of the three axes; for each, the number of
slices that sum to one and what the per-position sum over the vocabulary becomes. Then the
implicit-dim trap of F.softmax (which axis it picks for a 3-D tensor, with its warning) and
what that does to the loss, and the error F.cross_entropy raises on unflattened logits.
"""

import math
import warnings

import torch
import torch.nn.functional as F

from numbook.check import given, sanity, value


def row(label, *cells, w=26, cw=16):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


B = given("B", 4)
T = given("T", 512)
V = given("V", 32_000)

g = torch.Generator().manual_seed(0)
z = torch.randn(B, T, V, generator=g)               # logits as at initialisation: N(0, 1)
y = torch.randint(0, V, (B, T), generator=g)


def nll(p):
    """Mean of -log p[b, t, y[b, t]]: the loss as a user would compute it from p."""
    return -torch.log(p.gather(-1, y[..., None])).mean().item()


print(f"logits {tuple(z.shape)}: softmax along each axis")
row("dim", "slices summing", "max |slice-1|", "mean vocab sum", "min vocab sum", "max vocab sum", "loss")
res = {}
for dim, name in [(2, "vocab"), (1, "time"), (0, "batch")]:
    p = torch.softmax(z, dim=dim)
    slice_sums = p.sum(dim=dim)                         # what softmax normalised
    vocab_sums = p.sum(dim=-1)                          # what a probability over tokens needs
    res[name] = dict(
        slices=slice_sums.numel(),
        slice_err=(slice_sums - 1).abs().max().item(),
        vmean=vocab_sums.mean().item(), vmin=vocab_sums.min().item(), vmax=vocab_sums.max().item(),
        loss=nll(p),
    )
    r = res[name]
    row(f"{dim} ({name})", f"{r['slices']:,}", f"{r['slice_err']:.1e}", f"{r['vmean']:.4g}", f"{r['vmin']:.4g}",
        f"{r['vmax']:.4g}", f"{r['loss']:.4f}")
    value(f"slices_{name}", r["slices"])
    one = ("a softmax over the vocabulary sums to one, up to fp32 rounding, whatever the sizes"
           if name == "vocab" else None)
    value(f"vocab_sum_mean_{name}", r["vmean"], fixed=one)
    value(f"vocab_sum_min_{name}", r["vmin"], fixed=one)
    value(f"vocab_sum_max_{name}", r["vmax"], fixed=one)
    value(f"loss_{name}", r["loss"])
    del p
value("V_over_T", V / T)
value("T_minus_1", T - 1)
value("V_minus_1", V - 1)
value("rank", z.dim(), fixed="the logits have the axes (B, T, |V|): three, by construction")
value("V_over_B", V / B)
value("N", B * T)
ce = value("loss_ce", F.cross_entropy(z.view(-1, V), y.view(-1)).item())
row("F.cross_entropy (flattened)", "", "", "", "", "", f"{ce:.4f}")

sanity("vocab_axis_normalised", res["vocab"]["slice_err"] < 1e-4 and abs(res["vocab"]["vmean"] - 1) < 1e-6,
       "dim=-1: every position's probabilities sum to 1")
sanity("slices_count", res["vocab"]["slices"] == B * T and res["time"]["slices"] == B * V
       and res["batch"]["slices"] == T * V, "softmax over dim k makes numel/size(k) slices sum to 1")
sanity("time_mean", math.isclose(res["time"]["vmean"], V / T, rel_tol=1e-4),
       "dim=1: total mass B*|V| spread over B*T positions, mean |V|/T")
sanity("batch_mean", math.isclose(res["batch"]["vmean"], V / B, rel_tol=1e-4),
       "dim=0: total mass T*|V| spread over B*T positions, mean |V|/B")
sanity("ce_matches_vocab", abs(ce - res["vocab"]["loss"]) < 1e-4, "the dim=-1 loss equals F.cross_entropy",
       operands=(res["vocab"]["loss"], ce), relation=("half", "equal"))
sanity("wrong_loss_plausible",
       0 < res["time"]["loss"] < res["vocab"]["loss"] and 0 < res["batch"]["loss"] < res["vocab"]["loss"],
       "the wrong-axis losses are finite and lower than the right one: nothing looks broken",
       operands=(res["time"]["loss"], res["vocab"]["loss"]), relation="smaller")
half_var = value("half_var", z.var().item() / 2)   # sigma^2 / 2 of the logits: E[lse] ~ ln n + sigma^2/2
value("ln_T_plus_half", math.log(T) + 0.5)
value("ln_V_plus_half", math.log(V) + 0.5)
sanity("time_loss_near_lnT", abs(res["time"]["loss"] - (math.log(T) + half_var)) < 0.05,
       "dim=1 normalises over T entries, so the loss sits near ln T + sigma^2/2",
       operands=(res["time"]["loss"], math.log(T) + half_var))
sanity("vocab_loss_near_lnV", abs(res["vocab"]["loss"] - (math.log(V) + half_var)) < 0.05,
       "dim=-1 normalises over |V| entries, so the loss sits near ln |V| + sigma^2/2",
       operands=(res["vocab"]["loss"], math.log(V) + half_var))

# -- the implicit dim ------------------------------------------------------------------------
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    p_implicit = F.softmax(z)                           # no dim given
msg = str(caught[0].message) if caught else ""
implicit_dim = next(k for k in range(3) if torch.allclose(p_implicit.sum(dim=k), torch.ones(1)))
value("implicit_dim", implicit_dim, fixed="the axis F.softmax picks for a rank-3 tensor: a rule of the library")
value("warned", bool(caught))
category = caught[0].category.__name__ if caught else ""
value("warning_category", category)
print(f"\nF.softmax(z) with no dim on a {z.dim()}-D tensor: normalises dim {implicit_dim}")
print(f"  {category}: {msg}")
del p_implicit
sanity("implicit_is_batch", implicit_dim == 0 and "Implicit dimension" in msg and "deprecated" in msg
       and caught[0].category is UserWarning and not issubclass(caught[0].category, DeprecationWarning),
       "F.softmax without dim picks dim 0 for a 3-D tensor and warns with a UserWarning, not a DeprecationWarning",
       operands=(implicit_dim, category), relation="not")

z1, y1 = z[:1], y[:1]
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    p1 = F.softmax(z1)
ones = value("b1_all_ones", bool((p1 == 1).all()))
loss1 = value("b1_loss", -torch.log(p1.gather(-1, y1[..., None])).mean().item(),
              fixed="with B = 1 every batch-axis probability is exactly one, so the loss is zero by construction")
true1 = value("b1_true_loss", F.cross_entropy(z1.reshape(-1, V), y1.reshape(-1)).item())
print(f"\nB = 1, implicit dim: every p == 1: {ones};  loss {loss1:.4f}  (right axis: {true1:.4f})")
sanity("b1_zero_loss", ones and loss1 == 0.0, "with B = 1 the batch-axis softmax is all ones and the loss is 0")
zg = z1.clone().requires_grad_(True)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    (-torch.log(F.softmax(zg).gather(-1, y1[..., None])).mean()).backward()
value("b1_grad_abs_sum", zg.grad.abs().sum().item(),
      fixed="a softmax over one element is constant: zero gradient by construction")
sanity("b1_zero_grad", zg.grad.abs().sum().item() == 0.0, "and its gradient with respect to the logits is exactly 0")
del zg

# -- cross_entropy wants the class axis second ------------------------------------------------
try:
    F.cross_entropy(z, y)
    err = ""
except (RuntimeError, ValueError) as exc:
    err = str(exc).splitlines()[0]
value("unflattened_raises", bool(err))
print(f"\nF.cross_entropy(z of shape {tuple(z.shape)}, y of shape {tuple(y.shape)}):")
print(f"  {err}")
sanity("unflattened_error", bool(err), "rank-3 logits with (B, T) targets are rejected")
PERM = (0, 2, 1)                                    # (B, T, |V|) -> (B, |V|, T)
ok_perm = F.cross_entropy(z.permute(*PERM), y).item()
value("perm_loss", ok_perm)
sanity("perm_equals_flat", abs(ok_perm - ce) < 1e-4, "(B, |V|, T) logits give the flattened loss",
       operands=(ok_perm, ce))
print(f"  F.cross_entropy(z.permute{PERM}, y) = {ok_perm:.4f}, same as flattened")

# -- variation: one long sequence, B = 1, T = 8192 --------------------------------------------
# Normalised over time, the loss at position t reads only column y_t of the logits:
# log p[t, y_t] = z[t, y_t] - logsumexp_t' z[t', y_t]. So the check draws just the columns that
# occur as targets (i.i.d. N(0, 1), like every other column) instead of all 32,000 of them.
del z, p1
T2 = given("T_var", 8192)
yv = torch.randint(0, V, (T2,), generator=g)
cols, col_of = torch.unique(yv, return_inverse=True)
zc = torch.randn(T2, cols.numel(), generator=g)               # z[:, cols] for one sequence
lse_t = torch.logsumexp(zc, dim=0)                            # over the 8,192 positions
var_loss_time = value("var_loss_time", -(zc[torch.arange(T2), col_of] - lse_t[col_of]).mean().item())
value("var_cols_drawn", cols.numel())
value("var_slices_time", V)                                   # one distribution over time per token
value("var_V_over_T", V / T2)
value("var_ln_T_plus_half", math.log(T2) + 0.5)
print(f"\nVariation: B = 1, T = {T2:,}, softmax over time ({cols.numel():,} target columns drawn)")
row("slices summing to one (B * |V|)", f"{V:,}")
row("mean vocab sum |V| / T", f"{V / T2:.4g}")
row("loss", f"{var_loss_time:.4f}")
row("ln T + 1/2", f"{math.log(T2) + 0.5:.4f}")
sanity("var_time_near_lnT", abs(var_loss_time - (math.log(T2) + 0.5)) < 0.05,
       "the time-axis loss of one long sequence sits near ln T + 1/2")
