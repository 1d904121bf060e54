"""Lesson 5 — batches: the Python bridge.

Runs the router of lessons 3 and 4 on a batch of four tickets in one matrix product, checks
that this equals scoring the tickets one at a time, then takes one training step's worth of
autograd: a mean cross-entropy loss and its gradient. The gradient has the shape of the
weights whatever the batch size, which the check confirms for B = 4, 8 and 64.
"""

import torch
import torch.nn.functional as F

from numbook.check import given, sanity, value

W = torch.tensor([
    [1.5, -0.5, 0.0, -0.5, -0.2],
    [0.2, 1.2, 0.3, -0.4, -0.2],
    [-0.3, 0.1, 1.4, -0.2, -0.2],
], requires_grad=True)
b = torch.tensor([0.0, 0.0, 0.0, -0.5, 0.5], requires_grad=True)
X = torch.tensor([[2.0, 1.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]])
labels = torch.tensor([0, 1, 2, 4])  # billing, bug, account, other

logits = X @ W + b                          # (B, F) @ (F, C) + (C,) -> (B, C)
loss = F.cross_entropy(logits, labels)      # reduction="mean" by default -> ()
loss.backward()                             # training only: fills W.grad and b.grad

for name, t in [("X", X), ("W", W), ("b", b), ("logits", logits), ("labels", labels), ("loss", loss),
                ("W.grad", W.grad), ("b.grad", b.grad)]:
    print(f"{name:<8}{str(tuple(t.shape)):>10}")
    value(name.replace(".", "_") + "_shape", t.shape)
print(f"loss = {loss.item():.4f}")
value("loss", loss)
value("B", X.shape[0])
value("x_row_shape", X[0].shape)            # one ticket, one row of X

one_by_one = torch.stack([X[i] @ W + b for i in range(X.shape[0])])
sanity("batch_equals_loop", torch.allclose(logits, one_by_one),
       "one (4, 3) @ (3, 5) product gives the same scores as four separate (3,) @ (3, 5) products")

g = torch.Generator().manual_seed(0)
print("\nthe same router on bigger batches:")
B_big = given("B_big", 64)                  # the largest batch tried
for B in (4, 8, B_big):
    Xb = torch.randn(B, 3, generator=g)
    yb = torch.randint(0, 5, (B,), generator=g)
    W.grad = None
    zb = Xb @ W + b
    F.cross_entropy(zb, yb).backward()
    print(f"  B = {B:>2}: X {str(tuple(Xb.shape)):>8} -> logits {str(tuple(zb.shape)):>8}, "
          f"W {tuple(W.shape)}, W.grad {tuple(W.grad.shape)}")
    value(f"x{B}_shape", Xb.shape)
    value(f"z{B}_shape", zb.shape)
    value(f"z{B}_numel", zb.numel())
    sanity(f"grad_shape_{B}", W.grad.shape == W.shape, "the gradient has the weights' shape for every B")
value("n_params", W.numel() + b.numel())
