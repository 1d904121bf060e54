"""Lesson 2 — the dot product and the matrix product.

Computes one dot product by hand and with torch, then a (4, 3) @ (3, 5) product, checks that
each of its entries is the dot product of a row and a column, counts its multiply-adds, and
records the error torch raises when the inner dimensions do not match.
"""

import torch

from numbook.check import given, sanity, value

x = torch.tensor(given("x", [2.0, 0.0, 1.0]))     # one ticket's three features
w = torch.tensor(given("w", [0.5, -1.0, 2.0]))    # three weights
for i in range(x.numel()):
    value(f"x{i}", x[i])
    value(f"w{i}", w[i])
by_hand = sum(float(a) * float(b) for a, b in zip(x, w, strict=True))
dot = torch.dot(x, w)
print(f"x = {x.tolist()}, w = {w.tolist()}")
terms = " + ".join(f"{float(a):g} x {float(b):g}" for a, b in zip(x, w, strict=True))
print(f"by hand: {terms} = {by_hand:g}")
print(f"torch.dot(x, w) = {dot.item()}  shape {tuple(dot.shape)}")
value("dot", dot)
value("dot_shape", dot.shape)
value("dot_terms", x.numel())

g = torch.Generator().manual_seed(0)
A = torch.randint(-3, 4, (4, 3), generator=g).float()
Bm = torch.randint(-3, 4, (3, 5), generator=g).float()
C = A @ Bm
print(f"\nA {tuple(A.shape)} =\n{A}\nB {tuple(Bm.shape)} =\n{Bm}")
print(f"C = A @ B {tuple(C.shape)} =\n{C}")
value("a_shape", A.shape)
value("b_shape", Bm.shape)
value("c_shape", C.shape)
value("c_numel", C.numel())
value("c_rank", C.dim())
entry = C[2, 4]
value("c24", entry)
value("c24_dot", torch.dot(A[2], Bm[:, 4]))
print(f"C[2, 4] = {entry.item()} = A[2] . B[:, 4] = {torch.dot(A[2], Bm[:, 4]).item()}")
sanity("every_entry_is_a_dot", all(
    C[i, j] == torch.dot(A[i], Bm[:, j]) for i in range(4) for j in range(5)),
    "C[i, j] is the dot product of row i of A and column j of B, for all 20 entries")
m, k = A.shape
n = Bm.shape[1]
value("m", m)
value("k", k)
macs = value("macs", m * k * n)
value("flops", 2 * m * k * n)
print(f"multiply-adds: {m} x {k} x {n} = {macs} (FLOPs, counting multiply and add: {2 * macs})")


def product_shape(P, Q):
    """The shape of P @ Q, or the message of the error torch raises."""
    try:
        return tuple((P @ Q).shape)
    except RuntimeError as exc:
        return str(exc)


bad = torch.zeros(5, 3)
value("bad_shape", bad.shape)
value("bad_rows", bad.shape[0])
message = product_shape(A, bad)
print(f"\n(4, 3) @ (5, 3) raises RuntimeError:\n  {message}")
sanity("mismatch_raises", "cannot be multiplied" in message, "torch refuses a product whose inner sizes differ")
value("bad_t_shape", bad.T.shape)
value("ok_after_transpose", product_shape(A, bad.T))
print(f"(4, 3) @ (5, 3).T works: {product_shape(A, bad.T)}")
sanity("a_times_a_raises", "cannot be multiplied" in product_shape(A, A), "a (4, 3) matrix times itself is undefined")

left = torch.zeros(given("quiz_left", (5, 3)))     # the defined product of the quick check
right = torch.zeros(given("quiz_right", (3, 4)))
value("quiz_inner", left.shape[1])
value("quiz_shape", product_shape(left, right))
print(f"(5, 3) @ (3, 4) works: {product_shape(left, right)}")
