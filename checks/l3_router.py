"""Lesson 3 — one request through a linear router.

One support ticket is described by three counts (payment words, error words, login words).
A linear router holds a (3, 5) weight matrix, one column per class, and scores the ticket with
z = x @ W. The check verifies that each score is the dot product of x with one column of W,
and records the shapes, the scores and the class the router picks.
"""

import torch

from numbook.check import given, sanity, value

CLASSES = ["billing", "bug", "account", "feature", "other"]
FEATURES = ["payment words", "error words", "login words"]

W = torch.tensor(given("W", [
    #  billing  bug   account feature other
    [1.5, -0.5, 0.0, -0.5, -0.2],   # payment words
    [0.2, 1.2, 0.3, -0.4, -0.2],    # error words
    [-0.3, 0.1, 1.4, -0.2, -0.2],   # login words
]))
x = torch.tensor(given("x", [2.0, 1.0, 0.0]))  # "charged twice, and the invoice page shows an error"
for i in range(W.shape[0]):
    value(f"x_{i}", x[i])
    for j in range(W.shape[1]):
        value(f"W_{i}_{j}", W[i, j])     # the weight of feature i for class j

z = x @ W
print(f"x {tuple(x.shape)} = {x.tolist()}  ({', '.join(FEATURES)})")
print(f"W {tuple(W.shape)}: one row per feature, one column per class")
print(f"z = x @ W {tuple(z.shape)}:")
for j, name in enumerate(CLASSES):
    col = W[:, j]
    terms = " + ".join(f"{float(a):g} x {float(b):g}" for a, b in zip(x, col, strict=True))
    print(f"  {name:<8} {terms} = {z[j].item():+.1f}")
    value(f"z_{name}", z[j])
pick = int(z.argmax())
print(f"the router picks '{CLASSES[pick]}' (index {pick}), the largest score")

value("x_shape", x.shape)
value("w_shape", W.shape)
value("z_shape", z.shape)
value("n_features", x.numel())
value("n_classes", W.shape[1])
value("n_weights", W.numel())
value("pick", pick)
value("z_billing_minus_next", z[pick] - z.topk(2).values[1])
sanity("score_is_dot_with_column", all(torch.isclose(z[j], torch.dot(x, W[:, j])) for j in range(5)),
       "z[j] is x . W[:, j] for every class j")
sanity("zero_row_ignored", torch.equal(z, 2 * W[0] + 1 * W[1]),
       "a feature equal to 0 contributes nothing: z is 2 x W[0] + 1 x W[1]")

# The exercise: "I cannot log in, the page shows an error" -> one error word, one login word.
x2 = torch.tensor([0.0, 1.0, 1.0])
z2 = x2 @ W
print(f"\nx = {x2.tolist()}: z = {[round(v, 1) for v in z2.tolist()]} -> '{CLASSES[int(z2.argmax())]}'")
for j, name in enumerate(CLASSES):
    value(f"z2_{name}", z2[j])
value("pick2", int(z2.argmax()))
