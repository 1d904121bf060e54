"""I.3.A02 — The silent (B, 1) against (B,) bug.

A linear regression model predicts a column (B, 1); the targets are a vector (B,). The check
computes ((pred - target) ** 2).mean() with and without the bug on a real regression set, checks
the wrong value against its closed form (var p + var y + (mean p - mean y)^2), compares the
gradients autograd sends back with their closed forms, trains one model with each loss, and
catches the UserWarning that F.mse_loss raises for the same shapes.
"""

import copy
import warnings

import torch
import torch.nn.functional as F

from numbook.check import given, sanity, value


def row(label, *cells, w=40, cw=14):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


def pvar(x):
    return x.var(correction=0)


B = given("B", 16)                    # examples in the batch
Fe = given("F", 3)                    # features per example
sigma = given("sigma", 0.5)           # noise on the targets
seed = given("seed", 0, nudge=0)      # names the draw
steps = given("steps", 300)           # full-batch gradient steps
lr = given("lr", 0.1)                 # learning rate of plain gradient descent

g = torch.Generator().manual_seed(seed)
X = torch.randn(B, Fe, generator=g)
w_true = torch.randn(Fe, generator=g)
y = X @ w_true + sigma * torch.randn(B, generator=g)      # targets: shape (B,)
model0 = torch.nn.Linear(Fe, 1)
with torch.no_grad():                                      # a seeded initialisation
    model0.weight.copy_(0.1 * torch.randn(1, Fe, generator=g))
    model0.bias.zero_()


def loss_bug(pred, target):
    return ((pred - target) ** 2).mean()                   # (B, 1) - (B,) -> (B, B)


def loss_right(pred, target):
    return ((pred.squeeze(-1) - target) ** 2).mean()       # (B,) - (B,) -> (B,)


# -- train one model with each loss ---------------------------------------------------------------
trained = {}
for name, fn in (("right", loss_right), ("bug", loss_bug)):
    m = copy.deepcopy(model0)
    opt = torch.optim.SGD(m.parameters(), lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        fn(m(X), y).backward()
        opt.step()
    trained[name] = m

# -- the two losses on the model trained the right way --------------------------------------------
m = trained["right"]
pred = m(X).detach()                                       # (B, 1)
diff = pred - y
value("pred_shape", pred.shape)
value("target_shape", y.shape)
value("diff_shape", diff.shape)
value("diff_numel", diff.numel())
value("sq_shape", (diff ** 2).shape)
value("fixed_diff_shape", (pred.squeeze(-1) - y).shape)
wrong = value("loss_wrong", loss_bug(pred, y))
value("loss_shape", wrong.shape, fixed="the shape of a scalar: no size moves it")
right = value("loss_right", loss_right(pred, y))
value("wrong_over_right", (wrong / right).item())
p, yy = pred.squeeze(-1), y
closed = pvar(p) + pvar(yy) + (p.mean() - yy.mean()) ** 2
cov = ((p - p.mean()) * (yy - yy.mean())).mean()
value("loss_wrong_closed", closed)
value("two_cov", 2 * cov)
value("var_y", pvar(yy))
value("var_p", pvar(p))
print("Losses on the model trained with the right loss")
row("pred", str(tuple(pred.shape)))
row("target", str(tuple(y.shape)))
row("pred - target", str(tuple(diff.shape)))
row("mean over (B, B), the bug", f"{wrong.item():.4f}")
row("mean over (B,), the right loss", f"{right.item():.4f}")
row("var p + var y + (mean p - mean y)^2", f"{closed.item():.4f}")
row("right + 2 cov(p, y)", f"{(right + 2 * cov).item():.4f}")

sanity("diff_is_square", tuple(diff.shape) == tuple(torch.broadcast_shapes(pred.shape, y.shape)) == (B, B),
       "(B, 1) - (B,) broadcasts to (B, B)", operands=(tuple(diff.shape), (B, B)))
sanity("wrong_closed_form", torch.allclose(wrong, closed, rtol=1e-5),
       "the mean over all pairs equals var p + var y + (mean p - mean y)^2", operands=(wrong, closed),
       relation=("equal", "larger"))
sanity("gap_is_two_cov", torch.allclose(wrong - right, 2 * cov, rtol=1e-4, atol=1e-6),
       "the bug adds 2 cov(p, y) to the right loss", operands=(wrong - right, 2 * cov))
sanity("wrong_larger", wrong > right and cov > 0,
       "for a model whose predictions follow the targets, the buggy loss is larger", operands=(wrong, right),
       relation="larger")

# -- the gradients at the start of training -------------------------------------------------------
p0 = model0(X).detach().requires_grad_(True)
(g_bug,) = torch.autograd.grad(loss_bug(p0, y), p0)
(g_right,) = torch.autograd.grad(loss_right(p0, y), p0)
g_bug_closed = 2 / B * (p0.detach().squeeze(-1) - y.mean())
g_right_closed = 2 / B * (p0.detach().squeeze(-1) - y)
value("grad_shape", g_bug.shape)
value("grad_bug_norm", g_bug.norm())
value("grad_right_norm", g_right.norm())
sanity("grad_bug_smaller", g_bug.norm() < g_right.norm() and (p0.detach() - y.mean()).abs().mean() < (
    p0.detach().squeeze(-1) - y).abs().mean(), "at initialisation the predictions are nearer the mean target than "
    "their own targets, so the buggy gradient is the smaller", operands=(g_bug.norm(), g_right.norm()),
       relation="smaller")
print("\nGradient of each loss with respect to the predictions, at initialisation")
row("i", "p_i", "y_i", "bug", "closed form", "right", cw=12, w=4)
for i in range(B):
    row(str(i), f"{p0[i, 0]:.3f}", f"{y[i]:.3f}", f"{g_bug[i, 0]:.4f}", f"{g_bug_closed[i]:.4f}",
        f"{g_right[i, 0]:.4f}", cw=12, w=4)
sanity("grad_bug_closed", torch.allclose(g_bug.squeeze(-1), g_bug_closed, atol=1e-6),
       "the buggy gradient is 2/B (p_i - mean y): each prediction is pulled to the mean target",
       relation=("not", "equal"))
print(f"  the closed form of the bug uses the mean target, mean y = {y.mean():.4f}")
sanity("grad_right_closed", torch.allclose(g_right.squeeze(-1), g_right_closed, atol=1e-6),
       "the right gradient is 2/B (p_i - y_i)")

# -- what each model learned ----------------------------------------------------------------------
for name, mm in trained.items():
    pp = mm(X).detach().squeeze(-1)
    value(f"{name}_w_norm", mm.weight.detach().norm())
    value(f"{name}_bias", mm.bias.detach()[0])
    value(f"{name}_pred_std", pp.std(correction=0))
    value(f"{name}_true_mse", F.mse_loss(pp, y))
value("y_mean", y.mean())
value("w_true_norm", w_true.norm())
print(f"\nAfter {steps} steps of gradient descent, learning rate {lr}")
row("", "right loss", "buggy loss")
row("|w|", *(f"{trained[k].weight.detach().norm():.4f}" for k in ("right", "bug")))
row("bias", *(f"{trained[k].bias.item():.4f}" for k in ("right", "bug")))
row("std of the predictions", *(f"{trained[k](X).detach().std(correction=0):.4f}" for k in ("right", "bug")))
row("mean squared error, per example", *(f"{F.mse_loss(trained[k](X).detach().squeeze(-1), y):.4f}"
                                         for k in ("right", "bug")))
row("mean target, var of the targets", f"{y.mean():.4f}", f"{pvar(y):.4f}")
pb = trained["bug"](X).detach().squeeze(-1)
mse_bug = F.mse_loss(pb, y)
w_bug, w_right = trained["bug"].weight.detach().norm(), trained["right"].weight.detach().norm()
sanity("bug_learns_mean", w_bug < 0.01 * w_right and abs(pb.mean() - y.mean()) < 1e-3,
       "the buggy loss drives the weights to zero (under 1% of the right model's) and the mean prediction"
       " to the mean target", operands=(pb.mean(), y.mean()), relation="equal")
sanity("bug_mse_is_var_y", torch.allclose(mse_bug, pvar(y), rtol=1e-2) and mse_bug > 2 * F.mse_loss(
    trained["right"](X).detach().squeeze(-1), y),
    "the model trained with the bug has the error of predicting the mean: var y", operands=(mse_bug, pvar(y)))

# -- why it is not an error, and what F.mse_loss says ---------------------------------------------
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    via_mse = F.mse_loss(pred, y)
msgs = [f"{w.category.__name__}: {w.message}" for w in caught]
value("n_warnings", len(caught), fixed="F.mse_loss warns once per call with mismatched shapes")
print(f"\nF.mse_loss(pred, target) = {via_mse.item():.4f}, with {len(caught)} warning:")
for msg_ in msgs:
    print(f"  {msg_}")
sanity("mse_warns", len(caught) == 1 and issubclass(caught[0].category, UserWarning)
       and "broadcasting" in str(caught[0].message), "F.mse_loss warns with a UserWarning about broadcasting",
       relation="not")
sanity("mse_same_wrong", torch.allclose(via_mse, wrong), "F.mse_loss still returns the broadcast (wrong) value",
       operands=(via_mse, wrong))
with warnings.catch_warnings(record=True) as caught2:
    warnings.simplefilter("always")
    F.mse_loss(pred.squeeze(-1), y)
sanity("no_warning_fixed", len(caught2) == 0, "with matching shapes F.mse_loss is silent")

# the other losses warn too; a broadcast_shapes assertion catches it in a hand-written loss
other = {}
for fn in (F.l1_loss, F.smooth_l1_loss, F.huber_loss):
    with warnings.catch_warnings(record=True) as caught3:
        warnings.simplefilter("always")
        fn(pred, y)
    other[fn.__name__] = len(caught3) == 1 and issubclass(caught3[0].category, UserWarning)
print("  warn on the same shapes:", ", ".join(f"F.{k}: {v}" for k, v in other.items()))
sanity("others_warn", all(other.values()), "F.l1_loss, F.smooth_l1_loss and F.huber_loss warn the same way")
sanity("assertion_catches", torch.broadcast_shapes(pred.shape, y.shape) != y.shape
       and torch.broadcast_shapes(pred.squeeze(-1).shape, y.shape) == y.shape,
       "broadcast_shapes(pred, target) == target.shape fails on the bug and holds on the fix", relation="not")
sanity("order_irrelevant", torch.equal((y - pred) ** 2, (pred - y) ** 2),
       "target - pred broadcasts to the same square: entry (i, j) is y_j - p_i, the same squared",
       relation=("equal", "not"))
sanity("sum_scales_B2", torch.allclose(((pred - y) ** 2).sum(), B * B * wrong)
       and torch.allclose(((pred.squeeze(-1) - y) ** 2).sum(), B * right),
       "a sum instead of a mean scales the buggy loss by B^2 and the right one by B")
const_p = torch.full_like(pred, y.mean().item() + 0.3)        # a model that ignores its input
sanity("constant_hides", torch.allclose(loss_bug(const_p, y), loss_right(const_p, y)),
       "with constant predictions the covariance is zero and the two losses agree",
       operands=(loss_bug(const_p, y), loss_right(const_p, y)), relation="not")

# with one example the bug cannot show: (1, 1) - (1,) -> (1, 1), one pair, the right one
one_wrong, one_right = loss_bug(pred[:1], y[:1]), loss_right(pred[:1], y[:1])
sanity("one_example_hides", torch.equal(one_wrong, one_right),
       "with B = 1 the buggy and the right loss are equal", operands=(one_wrong, one_right), relation=("equal", "not"))

# -- variation: predictions that move against the targets -----------------------------------------
anti = -pred                                               # Cov(-p, y) = -Cov(p, y) < 0
anti_wrong = value("anti_wrong", loss_bug(anti, y))
anti_right = value("anti_right", loss_right(anti, y))
print(f"\nVariation: predictions negated, Cov(p, y) < 0: bug {anti_wrong.item():.4f}, right {anti_right.item():.4f}")
sanity("anti_smaller", anti_wrong < anti_right and torch.allclose(anti_right - anti_wrong, 2 * cov, rtol=1e-4),
       "with anti-correlated predictions the buggy loss is smaller, by 2 |Cov(p, y)|",
       operands=(anti_wrong, anti_right))
