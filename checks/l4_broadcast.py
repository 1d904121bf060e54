"""Lesson 4 — bias and broadcasting.

Adds a bias of shape (5,) to the router of lesson 3, shows what it does for a ticket with no
signal at all, and then what broadcasting does with it for a batch of tickets at once. It records
the one broadcast that torch refuses and the one it accepts silently with a wrong result, and
computes the answers of the two quick checks, which ask about shapes the text has not worked.
"""

import torch

from numbook.check import given, sanity, value

W = torch.tensor([
    [1.5, -0.5, 0.0, -0.5, -0.2],
    [0.2, 1.2, 0.3, -0.4, -0.2],
    [-0.3, 0.1, 1.4, -0.2, -0.2],
])
# The bias: a little against 'feature', a little for 'other'; the zeros are structural (no
# baseline for the first three classes) and a zero cannot be nudged by 1%.
b = torch.tensor([0.0, 0.0, 0.0, given("b_3", -0.5), given("b_4", 0.5)])
value("b", b.tolist())
CLASSES = ["billing", "bug", "account", "feature", "other"]
C = W.shape[1]
DESIGN = "the router's design: one column per named class (5 names), one row per named feature (3 names)"
INDEX = "an index: a 1% nudge of the bias does not change which class wins"

empty = torch.zeros(W.shape[0])  # a ticket with none of the three kinds of words
z_no_bias = empty @ W
z = empty @ W + b
print(f"no signal, no bias: z = {z_no_bias.tolist()}  (a {C}-way tie)")
print(f"no signal, bias b:  z = {z.tolist()}  -> '{CLASSES[int(z.argmax())]}'")
value("empty_pick", int(z.argmax()), fixed=INDEX)
value("b_shape", b.shape, fixed=DESIGN)
value("b_len", b.shape[-1], fixed=DESIGN)
value("n_classes", C, fixed=DESIGN)
value("n_params", W.numel() + b.numel(), fixed=DESIGN)
sanity("tie_without_bias", bool((z_no_bias == 0).all()), "with x = 0 and no bias every score is 0")

# The tickets of lessons 4 to 6 (word counts: payment, error, login), repeated if the batch is larger.
TICKETS = torch.tensor([[2.0, 1.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]])
n_tickets = given("n_tickets", 4)
X = TICKETS[torch.arange(n_tickets) % len(TICKETS)]
XW = X @ W
Z = XW + b
print(f"\nX {tuple(X.shape)} @ W {tuple(W.shape)} -> {tuple(XW.shape)}; + b {tuple(b.shape)} -> {tuple(Z.shape)}")
print(Z)
print("picks:", [CLASSES[i] for i in Z.argmax(dim=1).tolist()])
value("xw_shape", XW.shape)
value("z_shape", Z.shape)
value("b_copies", Z.shape[0])
aligned = b.unsqueeze(0)                                   # the missing axis counts as length 1
value("b_aligned_shape", aligned.shape, fixed=DESIGN)
value("b_stretched_shape", aligned.expand_as(XW).shape)
sanity("missing_axis_is_one", tuple(aligned.shape) == (1,) * (XW.dim() - b.dim()) + tuple(b.shape)
       and torch.broadcast_shapes(b.shape, XW.shape) == torch.broadcast_shapes(aligned.shape, XW.shape),
       "the shorter shape gains leading axes of length 1, and broadcasts exactly as if it had them",
       operands=(tuple(aligned.shape), (1,) * (XW.dim() - b.dim()) + tuple(b.shape)), relation="smaller")
sanity("bias_on_every_row", all(torch.equal(Z[i], XW[i] + b) for i in range(n_tickets)),
       "broadcasting adds the same b to each row")
sanity("no_copy_of_b", b.expand(n_tickets, C).stride() == (0, 1),
       "the stretched bias has stride 0 along the batch axis: no copies are made")

per_ticket = torch.arange(1, n_tickets + 1) / 10          # one extra score per ticket: 0.1, 0.2, ...
try:
    Z + per_ticket
    refused = ""
except RuntimeError as exc:
    refused = str(exc)
verdict = "raises RuntimeError" if refused else "runs, lined up with the class axis"
print(f"\n{tuple(Z.shape)} + {tuple(per_ticket.shape)} {verdict}:\n  {refused.replace(' at ', chr(10) + '  at ')}")
# A (B,) tensor lines up with the class axis: torch refuses it unless B happens to equal C,
# when the sum runs and is silently wrong (the page's batch has B != C).
sanity("row_vector_refused", ("must match" in refused) == (n_tickets != C),
       "a (B,) tensor lines up with the class axis, not the batch axis")
value("extra_shape", per_ticket.shape)
value("extra_len", per_ticket.shape[-1])
value("extra_col_shape", per_ticket[:, None].shape)
fixed = Z + per_ticket[:, None]
value("fixed_shape", fixed.shape)
print(f"{tuple(Z.shape)} + {tuple(per_ticket[:, None].shape)} works: {tuple(fixed.shape)}")

# One prediction per ticket as a column, and the targets as a flat vector.
PRED = [given(f"pred_{i}", p) for i, p in enumerate([0.9, 0.2, 0.4, 0.7])]
TARGET = [1.0, 0.0, 0.0, 1.0]
pred = torch.tensor(PRED)[torch.arange(n_tickets) % len(PRED)][:, None]      # (B, 1)
target = torch.tensor(TARGET)[torch.arange(n_tickets) % len(TARGET)]         # (B,)
value("pred_values", pred.squeeze(1).tolist())
value("target_values", target.tolist())
diff = pred - target
value("pred_shape", pred.shape)
value("target_shape", target.shape)
value("target_len", target.shape[-1])
value("pred_rows", pred.shape[0])
value("pred_squeezed_shape", pred.squeeze(1).shape)
value("silent_shape", diff.shape)
value("silent_numel", diff.numel())
wrong = (diff ** 2).mean()
right = ((pred.squeeze(1) - target) ** 2).mean()
value("mse_wrong", wrong)
value("mse_right", right)
by_pairs = sum((float(p) - float(t)) ** 2 for p, t in zip(pred.squeeze(1), target, strict=True)) / n_tickets
sanity("squeeze_fixes", tuple((pred.squeeze(1) - target).shape) == tuple(target.shape)
       and abs(right.item() - by_pairs) < 1e-6,
       "squeezed first, the difference has one entry per ticket and the MSE is the mean over matching pairs",
       operands=(right.item(), by_pairs))
print(f"\n{tuple(pred.shape)} - {tuple(target.shape)} gives {tuple(diff.shape)}: "
      f"{diff.numel()} differences instead of {target.numel()}")
print(f"mean squared error over them: {wrong.item():.4f}; with matching shapes: {right.item():.4f}")

# -- the quick checks: shapes the text has not worked ----------------------------------------------
q_B = given("q_B", 8)                       # quick check on the bias: eight tickets
q_sum = torch.zeros(q_B, C) + b
value("q_scores_shape", (q_B, C))
value("q_sum_shape", q_sum.shape)
sanity("q_sum_keeps_size", q_sum.numel() == q_B * C and q_sum.numel() >= b.numel(),
       "broadcasting never shrinks: the sum has as many entries as the scores", operands=(q_sum.numel(), q_B * C),
       relation="does not fall")
q_n = given("q_n", 3)                       # quick check on the quiet bug: three tickets
q_diff = torch.zeros(q_n, 1) - torch.zeros(q_n)
value("q_pred_shape", (q_n, 1))
value("q_target_shape", (q_n,))
value("q_diff_shape", q_diff.shape)
value("q_n_diff", q_diff.numel())
sanity("q_options_differ", tuple(q_sum.shape) != tuple(b.shape) and tuple(q_diff.shape) != (q_n,),
       "the keys of the quick checks differ from their wrong options")
print(f"\nquick checks: {(q_B, C)} + {tuple(b.shape)} -> {tuple(q_sum.shape)}; "
      f"{(q_n, 1)} - {(q_n,)} -> {tuple(q_diff.shape)}")
