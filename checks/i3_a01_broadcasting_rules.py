"""I.3.A01 — The broadcasting rules.

A table of shape pairs from a transformer layer (Llama 2 7B's width and head count): the result
shape from torch.broadcast_shapes, from a twenty-line implementation of the rule, and from the
real operation on meta tensors; the pairs that raise, with the real RuntimeError of a CPU add;
and the memory of a broadcast bias (expand, stride 0) against the copy repeat makes.
"""

import torch

from numbook.check import fact, given, sanity, value

MB = 10**6


def row(label, *cells, w=24, cw=20):
    print(f"  {label:<{w}}" + "".join(f"{str(c):>{cw}}" for c in cells))


def my_broadcast(a, b):
    """The rule by hand: align from the right, a missing axis counts as 1, a 1 stretches."""
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise ValueError(f"axis {i - n}: {x} against {y}")
    return tuple(out)


B = given("B", 4)                           # sequences in the batch
T = given("T", 512)                         # tokens per sequence
d = fact("llama2_7b_hidden", "d")           # hidden size
H = fact("llama2_7b_heads", "H")            # attention heads

# -- the table: pairs a layer meets, and three that should have been reshaped first ------------
PAIRS = [
    ("hidden + bias", (B, T, d), (d,)),
    ("hidden + positions", (B, T, d), (T, d)),
    ("hidden / row norm", (B, T, d), (B, T, 1)),
    ("scores + causal mask", (B, H, T, T), (T, T)),
    ("scores + padding mask", (B, H, T, T), (B, 1, 1, T)),
    ("pred (B,1) - target (B,)", (B, 1), (B,)),
    ("hidden + per-seq vector", (B, T, d), (B, d)),
    ("(B, T) / row sums (B,)", (B, T), (B,)),
    ("scores + mask (B, T)", (B, H, T, T), (B, T)),
]

print("Broadcasting table (torch.broadcast_shapes, the rule by hand, the op on meta tensors)")
row("pair", "left", "right", "result")
results, messages, agree = {}, {}, []
for i, (name, a, b) in enumerate(PAIRS):
    try:
        ours = my_broadcast(a, b)
    except ValueError:
        ours = None
    try:
        theirs = tuple(torch.broadcast_shapes(a, b))
    except RuntimeError:
        theirs = None
    try:
        op = tuple((torch.empty(a, device="meta") + torch.empty(b, device="meta")).shape)
    except RuntimeError:
        op = None
    if op is None:
        # the real message of a CPU add; stride-0 views of one element keep the operands free
        try:
            torch.zeros(()).expand(a) + torch.zeros(()).expand(b)
        except RuntimeError as exc:
            messages[i] = str(exc).splitlines()[0]
    agree.append(ours == theirs == op)
    results[i] = theirs
    row(name, str(a), str(b), str(theirs) if theirs else "RuntimeError")
    value(f"pair{i}_left", a)
    value(f"pair{i}_right", b)
    if theirs is not None:
        value(f"pair{i}_result", theirs)

n_raise = value("n_raise", sum(r is None for r in results.values()),
                fixed="the pairs of the table that mismatch, by construction: B, T, d and H differ")
value("n_pairs", len(PAIRS), fixed="the number of pairs the table lists")
value("n_ok", len(PAIRS) - n_raise, fixed="the pairs of the table that broadcast, by construction")
sanity("three_routes_agree", all(agree),
       "the rule by hand, torch.broadcast_shapes and the real op give the same shape or all refuse",
       operands=(sum(agree), len(PAIRS)))
print("\nThe real errors of a CPU add for the pairs that refuse")
for i, msg in messages.items():
    print(f"  {PAIRS[i][0]}:\n    RuntimeError: {msg}")
sanity("errors_are_runtime", len(messages) == n_raise and all("must match" in m for m in messages.values()),
       "each refused pair raises RuntimeError 'The size of tensor a … must match the size of tensor b'")

# the silent pair: (B, 1) against (B,) gives (B, B), every prediction against every target
silent = results[5]
value("silent_numel", silent[0] * silent[1])
sanity("silent_is_square", silent == (B, B), "(B, 1) against (B,) broadcasts to (B, B)",
       operands=(silent, (B, B)))

# the result is the elementwise max of the aligned sizes when no pair mismatches
ok_pairs = [(a, b) for (_, a, b), r in zip(PAIRS, results.values(), strict=True) if r is not None]
sanity("result_is_max", all(
    results[i] == tuple(max(x, y) for x, y in zip((1,) * (len(r) - len(a)) + a, (1,) * (len(r) - len(b)) + b,
                                                  strict=True))
    for i, (_, a, b) in enumerate(PAIRS) if (r := results[i]) is not None),
    "where the pair broadcasts, each axis of the result is the larger of the two aligned sizes",
       relation=("largest", "differs", "larger", "not"))

# the first mismatching axis of each refused pair, counted from the right
for i in messages:
    a, b = PAIRS[i][1], PAIRS[i][2]
    bad = next(k for k in range(1, min(len(a), len(b)) + 1) if a[-k] != b[-k] and 1 not in (a[-k], b[-k]))
    value(f"pair{i}_bad_axis", -bad, fixed="the axis the pair's layout puts B against T: no size moves it")
    value(f"pair{i}_bad_sizes", (a[-bad], b[-bad]))

# -- memory: a broadcast bias is a view with stride 0; repeat copies --------------------------
bias = torch.randn(d)                                  # fp32, the dtype of a bias in training
view = bias.expand(B, T, d)                            # what broadcasting does, made explicit
copy = bias.repeat(B, T, 1)                            # a real copy, B * T rows of it
value("bias_bytes", bias.nbytes)
value("expand_shape", view.shape)
value("expand_stride", view.stride(), fixed="a stretched axis has stride 0 and the bias's own axis 1, at any size")
value("repeat_stride", copy.stride())
expand_storage = value("expand_storage_bytes", view.untyped_storage().nbytes())
repeat_storage = value("repeat_storage_bytes", copy.untyped_storage().nbytes())
value("repeat_mb", copy.untyped_storage().nbytes() / MB)
value("logical_mb", view.numel() * view.element_size() / MB)
ratio = value("repeat_over_expand", repeat_storage / expand_storage)
value("elem_bytes", bias.element_size(), fixed="bytes of an fp32 element: a property of the dtype")

print("\nA bias of shape (d,) stretched to (B, T, d)")
row("", "shape", "stride", "storage bytes")
row("bias", str(tuple(bias.shape)), str(bias.stride()), f"{bias.nbytes:,}")
row("bias.expand(B, T, d)", str(tuple(view.shape)), str(view.stride()), f"{expand_storage:,}")
row("bias.repeat(B, T, 1)", str(tuple(copy.shape)), str(copy.stride()), f"{repeat_storage:,}")
row("repeat / expand", "", "", f"{ratio:,.0f}x")

sanity("expand_shares", view.data_ptr() == bias.data_ptr() and expand_storage == bias.nbytes
       and view.stride()[:2] == (0, 0),
       "expand is a view of the bias: same storage, stride 0 on the stretched axes")
sanity("repeat_copies", copy.data_ptr() != bias.data_ptr() and repeat_storage == B * T * d * bias.element_size(),
       "repeat allocates B * T * d elements of its own")
sanity("ratio_is_BT", ratio == B * T, "repeat takes B * T times the bias's bytes", operands=(ratio, B * T))
sanity("same_values", torch.equal(view, copy), "the two hold the same values", relation="equal")

# the sum with the hidden state is the same either way; the output is allocated both ways
hidden = torch.randn(B, T, d)
sanity("sum_equal", torch.equal(hidden + bias, hidden + copy),
       "hidden + bias (broadcast) equals hidden + repeated bias exactly")
out_bytes = value("out_mb", (hidden + bias).nbytes / MB)
sanity("output_allocated", (hidden + bias).nbytes == copy.nbytes,
       "the output of hidden + bias takes as many bytes as the repeated bias", operands=(out_bytes, copy.nbytes / MB),
       relation="not")

# writing in place into the stretched view is refused: every row is the same memory
step = 1.0
try:
    view.add_(step)
    inplace_msg = ""
except RuntimeError as exc:
    inplace_msg = str(exc).splitlines()[0]
print(f"\nbias.expand(B, T, d).add_({step}):\n  RuntimeError: {inplace_msg}")
sanity("inplace_refused", "more than one element" in inplace_msg,
       "an in-place write into an expanded view raises RuntimeError")

# -- variation: a batch of B = T sequences; the refused pairs now run, along the wrong axis -----
Bv = T
print(f"\nVariation: B = T = {Bv}")
row("pair", "left", "right", "result")
var_shapes = []
for i in messages:
    name, a, b = PAIRS[i]
    a = tuple(Bv if (x == B and k == 0) else x for k, x in enumerate(a))
    b = tuple(Bv if (x == B and k == 0) else x for k, x in enumerate(b))
    r = tuple((torch.empty(a, device="meta") + torch.empty(b, device="meta")).shape)
    var_shapes.append(r)
    value(f"var{i}_result", r)
    row(name, str(a), str(b), str(r))
sanity("var_all_run", len(var_shapes) == len(messages) and all(
    r == my_broadcast(*[tuple(Bv if (x == B and k == 0) else x for k, x in enumerate(s)) for s in PAIRS[i][1:]])
    for i, r in zip(messages, var_shapes, strict=True)),
    "with B = T every refused pair runs, and the rule by hand agrees with the op", relation="equal")
big = bias.to("meta").repeat(Bv, T, 1)
value("var_repeat_gb", big.nbytes / 10**9)
row("bias.repeat(T, T, 1)", str(tuple(big.shape)), "", f"{big.nbytes / 10**9:.2f} GB")
