"""Lesson 4 — bias and broadcasting.

Adds a bias of shape (5,) to the router of lesson 3, shows what it does for a ticket with no
signal at all, and then what broadcasting does with it for four tickets at once. It records
the one broadcast that torch refuses and the one it accepts silently with a wrong result.
"""

import torch

from numbook.check import given, sanity, value

W = torch.tensor([
    [1.5, -0.5, 0.0, -0.5, -0.2],
    [0.2, 1.2, 0.3, -0.4, -0.2],
    [-0.3, 0.1, 1.4, -0.2, -0.2],
])
b = torch.tensor(given("b", [0.0, 0.0, 0.0, -0.5, 0.5]))  # a little against 'feature', a little for 'other'
CLASSES = ["billing", "bug", "account", "feature", "other"]

empty = torch.zeros(3)  # a ticket with none of the three kinds of words
z_no_bias = empty @ W
z = empty @ W + b
print(f"no signal, no bias: z = {z_no_bias.tolist()}  (a five-way tie)")
print(f"no signal, bias b:  z = {z.tolist()}  -> '{CLASSES[int(z.argmax())]}'")
value("empty_pick", int(z.argmax()))
value("b_shape", b.shape)
value("b_len", b.shape[-1])
value("n_classes", W.shape[1])
value("n_params", W.numel() + b.numel())
sanity("tie_without_bias", bool((z_no_bias == 0).all()), "with x = 0 and no bias every score is 0")

X = torch.tensor([[2.0, 1.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]])
XW = X @ W
Z = XW + b
print(f"\nX {tuple(X.shape)} @ W {tuple(W.shape)} -> {tuple(XW.shape)}; + b {tuple(b.shape)} -> {tuple(Z.shape)}")
print(Z)
print("picks:", [CLASSES[i] for i in Z.argmax(dim=1).tolist()])
value("xw_shape", XW.shape)
value("z_shape", Z.shape)
value("b_copies", Z.shape[0])
value("n_tickets", X.shape[0])
value("b_aligned_shape", b[None, :].shape)              # the missing axis counts as length 1
value("b_stretched_shape", b[None, :].expand_as(XW).shape)
sanity("bias_on_every_row", all(torch.equal(Z[i], XW[i] + b) for i in range(4)),
       "broadcasting adds the same b to each of the four rows")
sanity("no_copy_of_b", b.expand(4, 5).stride() == (0, 1),
       "the stretched bias has stride 0 along the batch axis: no copies are made")

per_ticket = torch.tensor([0.1, 0.2, 0.3, 0.4])
try:
    Z + per_ticket
    refused = ""
except RuntimeError as exc:
    refused = str(exc)
print(f"\n(4, 5) + (4,) raises RuntimeError:\n  {refused.replace(' at ', chr(10) + '  at ')}")
sanity("row_vector_refused", "must match" in refused, "a (4,) tensor lines up with the class axis, not the batch axis")
value("extra_shape", per_ticket.shape)
value("extra_len", per_ticket.shape[-1])
value("extra_col_shape", per_ticket[:, None].shape)
fixed = Z + per_ticket[:, None]
value("fixed_shape", fixed.shape)
print(f"(4, 5) + (4, 1) works: {tuple(fixed.shape)}")

pred = torch.tensor([[0.9], [0.2], [0.4], [0.7]])  # (4, 1): one prediction per ticket
target = torch.tensor([1.0, 0.0, 0.0, 1.0])        # (4,)
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
print(f"\n(4, 1) - (4,) gives {tuple(diff.shape)}: {diff.numel()} differences instead of 4")
print(f"mean squared error over them: {wrong.item():.4f}; with matching shapes: {right.item():.4f}")
