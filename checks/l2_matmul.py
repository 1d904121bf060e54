"""Lesson 2 — the dot product and the matrix product.

Computes one dot product by hand and with torch, then an (m, k) @ (k, n) product, checks that
each of its entries is the dot product of a row and a column, counts its multiply-adds, and
records the error torch raises when the inner dimensions do not match. Last, it computes the
answer of the first quick check, a product the text has not worked.
"""

import torch

from numbook.check import given, sanity, value

# x0, w0 and w2 are the inputs; x[1] = 0 and x[2] = 1 are structural (a zero term, a unit term),
# and a zero cannot be nudged by 1%.
x0 = given("x0", 2.0)
w0 = given("w0", 0.5)
w2 = given("w2", 2.0)
x = torch.tensor([x0, 0.0, 1.0])                  # one ticket's three features
w = torch.tensor([w0, -1.0, w2])                  # three weights
value("x", x.tolist())
value("w", w.tolist())
by_hand = sum(float(a) * float(b) for a, b in zip(x, w, strict=True))
dot = torch.dot(x, w)
print(f"x = {x.tolist()}, w = {w.tolist()}")
terms = " + ".join(f"{float(a):g} x {float(b):g}" for a, b in zip(x, w, strict=True))
print(f"by hand: {terms} = {by_hand:g}")
print(f"torch.dot(x, w) = {dot.item()}  shape {tuple(dot.shape)}")
value("dot", dot)
value("dot_shape", dot.shape, fixed="a dot product of two vectors is a 0-d tensor: shape () by definition")
value("dot_terms", x.numel(), fixed="the example's vectors have one entry per ticket feature: three by construction")
try:
    torch.dot(x, w[:-1])
    short_refused = ""
except RuntimeError as exc:
    short_refused = str(exc)
print(f"torch.dot with lengths {x.numel()} and {w[:-1].numel()} raises: {short_refused}")
sanity("dot_needs_equal_length", x.numel() == w.numel() and "same number of elements" in short_refused,
       "a dot product pairs entries one for one: equal lengths work, unequal lengths are refused",
       operands=(x.numel(), w.numel()), relation="differs")

m = given("m", 4)                                   # rows of A: four tickets
k = given("k", 3)                                   # the inner dimension: three features
n = given("n", 5)                                   # columns of B: five classes
g = torch.Generator().manual_seed(0)
A = torch.randint(-3, 4, (m, k), generator=g).float()
Bm = torch.randint(-3, 4, (k, n), generator=g).float()
C = A @ Bm
print(f"\nA {tuple(A.shape)} =\n{A}\nB {tuple(Bm.shape)} =\n{Bm}")
print(f"C = A @ B {tuple(C.shape)} =\n{C}")
value("a_shape", A.shape)
value("b_shape", Bm.shape)
value("c_shape", C.shape)
value("c_numel", C.numel())
value("c_rank", C.dim(), fixed="a matrix times a matrix is a matrix: two axes whatever their lengths")
i, j = m - 1, n - 1                                  # one entry, the last row and column
entry = C[i, j]
value("c_entry", entry)
value("c_entry_dot", torch.dot(A[i], Bm[:, j]))
print(f"C[{i}, {j}] = {entry.item()} = A[{i}] . B[:, {j}] = {torch.dot(A[i], Bm[:, j]).item()}")
sanity("every_entry_is_a_dot", all(
    C[r, c] == torch.dot(A[r], Bm[:, c]) for r in range(m) for c in range(n)),
    "C[i, j] is the dot product of row i of A and column j of B, for every entry")
macs = value("macs", m * k * n)
value("flops", 2 * m * k * n)
print(f"multiply-adds: {m} x {k} x {n} = {macs} (FLOPs, counting multiply and add: {2 * macs})")


def product_shape(P, Q):
    """The shape of P @ Q, or the message of the error torch raises."""
    try:
        return tuple((P @ Q).shape)
    except RuntimeError as exc:
        return str(exc)


bad = torch.zeros(n, k)                             # B stored the other way round
value("bad_shape", bad.shape)
value("bad_rows", bad.shape[0])
message = product_shape(A, bad)
print(f"\n{tuple(A.shape)} @ {tuple(bad.shape)} raises RuntimeError:\n  {message}")
sanity("mismatch_raises", "cannot be multiplied" in message, "torch refuses a product whose inner sizes differ")
value("bad_t_shape", bad.T.shape)
value("ok_after_transpose", product_shape(A, bad.T))
print(f"{tuple(A.shape)} @ {tuple(bad.shape)}.T works: {product_shape(A, bad.T)}")
# A times itself is defined only when A is square (m == k); the page's A is (4, 3).
sanity("a_times_a_raises", ("cannot be multiplied" in str(product_shape(A, A))) == (m != k),
       "a non-square matrix times itself is undefined")

left, right = bad, A.T                              # the defined product of the second quick check
value("quiz_left", left.shape)
value("quiz_right", right.shape)
value("quiz_inner", left.shape[1])
value("quiz_shape", product_shape(left, right))
print(f"{tuple(left.shape)} @ {tuple(right.shape)} works: {product_shape(left, right)}")

# -- the first quick check: a product the text has not worked ------------------------------------
q_m = given("q_m", 2)
q_k = given("q_k", 6)
q_n = given("q_n", 7)
qA, qB = torch.zeros(q_m, q_k), torch.zeros(q_k, q_n)
value("q_a_shape", qA.shape)
value("q_b_shape", qB.shape)
value("q_c_shape", product_shape(qA, qB))
value("q_inner", (q_k, q_k))                        # the wrong option made of the inner dimensions
value("q_outer3", (q_m, q_k, q_n))                  # the wrong option that keeps every length
sanity("q_options_differ", len({product_shape(qA, qB), (q_k, q_k), (q_m, q_k, q_n)}) == 3,
       "the three options of the first quick check are three different shapes")
print(f"\nquick check: {tuple(qA.shape)} @ {tuple(qB.shape)} -> {product_shape(qA, qB)}")
