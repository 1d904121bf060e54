"""Lesson 5 — three batch bugs, each shown with real autograd.

A. Sum where the configuration assumes mean: the same eight examples, fed once and then twice
   (a batch of 16), give the same mean gradient but twice the summed gradient.
B. Average twice: dividing the gradient of a mean loss by B again makes it B times too small.
C. Stale gradient buffers: without zeroing, the second backward adds to the first, so the
   step uses both batches.
"""

import torch
import torch.nn.functional as F

from numbook.check import given, sanity, value

B = given("B", 8)
g = torch.Generator().manual_seed(0)
X = torch.randn(B, 3, generator=g)
y = torch.randint(0, 5, (B,), generator=g)
W = torch.randn(3, 5, generator=g).requires_grad_()


def grad(X, y, reduction):
    W.grad = None
    F.cross_entropy(X @ W, y, reduction=reduction).backward()
    return W.grad.clone()


# -- A. sum where mean was assumed -------------------------------------------------------------
X16, y16 = torch.cat([X, X]), torch.cat([y, y])
B_doubled = value("B_doubled", X16.shape[0])
sanity("doubled_batch", B_doubled == 2 * B and torch.equal(X16[B:], X16[:B]),
       "the batch of 2B is the same B examples fed twice", operands=(B_doubled, 2 * B))
mean8, mean16 = grad(X, y, "mean"), grad(X16, y16, "mean")
sum8, sum16 = grad(X, y, "sum"), grad(X16, y16, "sum")
r_mean = value("mean_grad_ratio", (mean16.norm() / mean8.norm()).item(),
               fixed="the mean over the same examples repeated is the same mean: 1 for any data and any B")
r_sum = value("sum_grad_ratio", (sum16.norm() / sum8.norm()).item(),
              fixed="the sum over the same examples repeated twice is twice the sum: 2 for any data and any B")
lr = 0.1
print(f"A. {B} examples, then the same {B} twice (B = {B_doubled}); SGD step, lr = {lr}")
print(f"   reduction='mean': |update| {lr * mean8.norm():.4f} -> {lr * mean16.norm():.4f}  (x{r_mean:.2f})")
print(f"   reduction='sum':  |update| {lr * sum8.norm():.4f} -> {lr * sum16.norm():.4f}  (x{r_sum:.2f})")
sanity("sum_doubles", torch.allclose(sum16, 2 * sum8), "summing over twice the examples doubles the gradient",
       operands=(sum16.norm().item(), 2 * sum8.norm().item()), relation="grows")
sanity("mean_unchanged", torch.allclose(mean16, mean8), "the mean gradient does not depend on B here",
       operands=(mean16.norm().item(), mean8.norm().item()))

# -- B. average twice ----------------------------------------------------------------------------
once = grad(X, y, "mean")           # the loss is already divided by B
twice = once / B                    # ... and the gradient divided by B again
r_twice = value("twice_ratio", (twice.norm() / once.norm()).item())
print("\nB. mean loss, then the gradient divided by B again")
print(f"   |grad| {once.norm():.4f} -> {twice.norm():.4f}  (x{r_twice:.4f} = 1/{B})")
sanity("twice_is_over_B", torch.allclose(twice * B, once), "the second division shrinks the gradient by B")
sanity("twice_is_over_B_squared", torch.allclose(twice * B * B, sum8), "in all the sum is divided by B squared")

# -- C. stale gradient buffers --------------------------------------------------------------------
X2 = torch.randn(B, 3, generator=g)
y2 = torch.randint(0, 5, (B,), generator=g)
first = grad(X, y, "mean")
fresh = grad(X2, y2, "mean")
W.grad = None
F.cross_entropy(X @ W, y).backward()          # batch 1
F.cross_entropy(X2 @ W, y2).backward()        # batch 2, no W.grad = None / zero_grad() in between
stale = W.grad.clone()
leftover = value("stale_leftover_maxdiff", (stale - fresh - first).abs().max().item())
value("stale_over_fresh", (stale.norm() / fresh.norm()).item())   # Frobenius norms
print(f"\nC. two batches of {B} random tickets (seed 0), two backward calls without zeroing")
print(f"   |W.grad| {stale.norm():.4f}; the second batch alone {fresh.norm():.4f}  (Frobenius norms)")
print(f"   W.grad - grad(batch 2) - grad(batch 1): largest entry {leftover:.1e}")
sanity("stale_is_sum", torch.allclose(stale, first + fresh), "the buffer holds batch 1 + batch 2",
       operands=(stale.norm().item(), (first + fresh).norm().item()), relation=("equal", "differs"))
