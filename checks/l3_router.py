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

# Every nonzero weight is an input of the lesson (W[0, 2] = 0 is structural: payment words say
# nothing about account problems, and a zero cannot be nudged by 1%).
TABLE = [
    #  billing  bug   account feature other
    [1.5, -0.5, 0.0, -0.5, -0.2],   # payment words
    [0.2, 1.2, 0.3, -0.4, -0.2],    # error words
    [-0.3, 0.1, 1.4, -0.2, -0.2],   # login words
]
W = torch.tensor([[given(f"W_{i}_{j}", w) if w != 0.0 else w for j, w in enumerate(row)]
                  for i, row in enumerate(TABLE)])
# "charged twice, and the invoice page shows an error": word counts, so integers
x = torch.tensor([float(given(f"x_{i}", c)) for i, c in enumerate([2, 1, 0])])
value("x", x.tolist())
DESIGN = "the router's design: one row per named feature (3 names), one column per named class (5 names)"

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

value("x_shape", x.shape, fixed=DESIGN)
value("w_shape", W.shape, fixed=DESIGN)
value("z_shape", z.shape, fixed=DESIGN)
value("n_features", x.numel(), fixed=DESIGN)
value("n_classes", W.shape[1], fixed=DESIGN)
value("n_weights", W.numel(), fixed=DESIGN)
value("pick", pick, fixed="an index: a 1% nudge of a weight does not change which class wins; the margin below moves")
value("z_billing_minus_next", z[pick] - z.topk(2).values[1])
sanity("score_is_dot_with_column", all(torch.isclose(z[j], torch.dot(x, W[:, j])) for j in range(W.shape[1])),
       "z[j] is x . W[:, j] for every class j")
sanity("zero_row_ignored", x[2] != 0 or torch.allclose(z, x[0] * W[0] + x[1] * W[1]),
       "a feature equal to 0 contributes nothing: z is x0 W[0] + x1 W[1]")

# The exercise: "I cannot log in, the page shows an error" -> one error word, one login word.
x2 = torch.tensor([0.0, 1.0, 1.0])
z2 = x2 @ W
print(f"\nx = {x2.tolist()}: z = {[round(v, 1) for v in z2.tolist()]} -> '{CLASSES[int(z2.argmax())]}'")
for j, name in enumerate(CLASSES):
    value(f"z2_{name}", z2[j])
value("pick2", int(z2.argmax()), fixed="an index: a 1% nudge of a weight does not change which class wins")

# -- the quick checks: a router the text has not worked -------------------------------------------
q_F = given("q_F", 4)                       # a fourth feature: words about shipping
q_C = given("q_C", 6)                       # a sixth class
q_W = torch.zeros(x.numel(), q_C)           # this lesson's three features, six classes
q_z = torch.zeros(x.numel()) @ q_W
value("q_w_shape", q_W.shape)
value("q_z_shape", q_z.shape)
sanity("q_shape_options_differ", len({tuple(q_z.shape), tuple(x.shape), tuple(q_W.shape)}) == 3,
       "the three options of the first quick check are three different shapes")
q_weights = torch.zeros(q_F, q_C)
value("q_n_weights", q_weights.numel())
value("q_sum", q_F + q_C)                   # the wrong option that adds the dimensions
sanity("q_count_options_differ", len({q_weights.numel(), q_F + q_C, q_C}) == 3,
       "the three options of the second quick check are three different numbers")
print(f"\nquick checks: {tuple(x.shape)} @ {tuple(q_W.shape)} -> {tuple(q_z.shape)}; "
      f"a {tuple(q_weights.shape)} router learns {q_weights.numel()} weights")
