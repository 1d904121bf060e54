"""Lesson 5 — batches: the Python bridge.

Runs the router of lessons 3 and 4 on a batch of four tickets in one matrix product, checks
that this equals scoring the tickets one at a time, then takes one training step's worth of
autograd: a mean cross-entropy loss and its gradient. The gradient has the shape of the
weights whatever the batch size, which the check confirms for the page's batch, a batch of
eight and a batch of 64.
"""

import torch
import torch.nn.functional as F
from _tickets import TICKETS, batch

from numbook.check import given, sanity, value

W = torch.tensor([
    [1.5, -0.5, 0.0, -0.5, -0.2],
    [0.2, 1.2, 0.3, -0.4, -0.2],
    [-0.3, 0.1, 1.4, -0.2, -0.2],
], requires_grad=True)
b = torch.tensor([0.0, 0.0, 0.0, -0.5, 0.5], requires_grad=True)
DESIGN = "the router's design: one row per named feature (3 names), one column per named class (5 names)"
n_tickets = given("n_tickets", 4)
X, labels = batch(n_tickets)   # the four tickets of lessons 4 to 6 (checks/_tickets.py)
for i in range(len(TICKETS)):
    value(f"ticket_{i}", TICKETS[i].tolist(), fixed="the lesson's example data, stated on the page")
value("labels", labels.tolist())

logits = X @ W + b                          # (B, F) @ (F, C) + (C,) -> (B, C)
loss = F.cross_entropy(logits, labels)      # reduction="mean" by default -> ()
loss.backward()                             # training only: fills W.grad and b.grad

fixed_shape = {"W": DESIGN, "b": DESIGN, "W.grad": DESIGN, "b.grad": DESIGN,
               "loss": "a mean reduction returns a 0-d tensor: shape () by definition"}
for name, t in [("X", X), ("W", W), ("b", b), ("logits", logits), ("labels", labels), ("loss", loss),
                ("W.grad", W.grad), ("b.grad", b.grad)]:
    print(f"{name:<8}{str(tuple(t.shape)):>10}")
    value(name.replace(".", "_") + "_shape", t.shape, fixed=fixed_shape.get(name))
print(f"loss = {loss.item():.4f}")
value("loss", loss)
value("B", X.shape[0])
value("x_row_shape", X[0].shape, fixed=DESIGN)   # one ticket, one row of X

one_by_one = torch.stack([X[i] @ W + b for i in range(X.shape[0])])
max_diff = (logits - one_by_one).abs().max().item()
print(f"batch product vs one ticket at a time: largest difference {max_diff:.1e}")
sanity("batch_equals_loop", torch.allclose(logits, one_by_one),
       "one (B, 3) @ (3, 5) product gives the same scores as B separate (3,) @ (3, 5) products, up to rounding",
       operands=(logits.detach().tolist(), one_by_one.detach().tolist()), relation=("differs", "not"))

g = torch.Generator().manual_seed(0)
print("\nthe same router on bigger batches:")
B_quiz = given("B_quiz", 8)                 # the batch of the quick check and the exercise
B_big = given("B_big", 64)                  # the largest batch tried
for name, B in (("page", n_tickets), ("quiz", B_quiz), ("big", B_big)):
    Xb = torch.randn(B, 3, generator=g)
    yb = torch.randint(0, 5, (B,), generator=g)
    W.grad = None
    zb = Xb @ W + b
    F.cross_entropy(zb, yb).backward()
    print(f"  B = {B:>2}: X {str(tuple(Xb.shape)):>8} -> logits {str(tuple(zb.shape)):>8}, "
          f"W {tuple(W.shape)}, W.grad {tuple(W.grad.shape)}")
    if name == "quiz":
        value("x8_shape", Xb.shape)
        value("z8_shape", zb.shape)
    if name == "big":
        zbig_numel = value("zbig_numel", zb.numel())
    sanity(f"grad_shape_{name}", W.grad.shape == W.shape, "the gradient has the weights' shape for every B")
n_params = value("n_params", W.numel() + b.numel(), fixed=DESIGN)
value("q_copies", B_big * n_params)         # the wrong option: one copy of the parameters per request
print(f"parameters: {W.numel()} + {b.numel()} = {n_params} for every B; "
      f"one copy per request would be {B_big * n_params:,}")
sanity("params_independent_of_B", len({n_params, B_big * n_params, zbig_numel}) == 3,
       "the options of the quick check on the parameters are three different numbers")
