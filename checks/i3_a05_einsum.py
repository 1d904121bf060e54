"""I.3.A05 — einsum as the general form.

Writes a matmul, a batched matmul, attention scores, a trace, an outer product, a sum over axes, a
transpose and a diagonal as einsum strings, compares each with the dedicated torch op (allclose),
and counts the FLOPs of each with torch.utils.flop_counter.FlopCounterMode against 2 x the product of
all index sizes. At Llama 2 7B's attention shapes (meta tensors) it counts the scores einsum, and a
three-operand einsum whose contraction order changes its FLOPs by three orders of magnitude.
"""

import math

import torch
from torch.utils.flop_counter import FlopCounterMode

from numbook.check import fact, given, sanity, value


def row(label, *cells, w=16, cw=13):
    print(f"  {label:<{w}}" + "".join(f"{str(c):>{cw}}" for c in cells))


OPS = {}


def flops(fn, tag=None):
    with FlopCounterMode(display=False) as fc:
        out = fn()
    if tag:
        OPS[tag] = sorted(str(op) for op in fc.get_flop_counts().get("Global", {}))
    return out, fc.get_total_flops()


def rule(eq, *ops):
    """2 x the product of the sizes of every index in the equation."""
    sizes = {}
    for spec, t in zip(eq.split("->")[0].split(","), ops, strict=True):
        for ch, n in zip(spec, t.shape, strict=True):
            sizes[ch] = n
    return 2 * math.prod(sizes.values())


def contracts(eq):
    """An index summed away that appears in two operands: a product of tensors, not a reduction."""
    ins, out = eq.split("->")
    specs = ins.split(",")
    return any(ch not in out and sum(ch in s for s in specs) >= 2 for ch in set(ins) - {","})


B = given("B", 2)      # batch
H = given("H", 4)      # heads
T = given("T", 5)      # query positions
S = given("S", 6)      # key positions
D = given("D", 8)      # head dimension

g = torch.Generator().manual_seed(0)
q = torch.randn(B, H, T, D, generator=g, dtype=torch.float64)
k = torch.randn(B, H, S, D, generator=g, dtype=torch.float64)
a2 = q[0, 0]                      # (T, D)
b2 = k[0, 0].T.contiguous()       # (D, S)
a3 = q[:, 0]                      # (B, T, D)
b3 = k[:, 0].transpose(1, 2)      # (B, D, S)
sq = torch.randn(D, D, generator=g, dtype=torch.float64)
u = torch.randn(T, generator=g, dtype=torch.float64)
v = torch.randn(S, generator=g, dtype=torch.float64)

CASES = [
    ("matmul", "td,ds->ts", (a2, b2), lambda: a2 @ b2, "a @ b"),
    ("batched matmul", "btd,bds->bts", (a3, b3), lambda: torch.bmm(a3, b3), "torch.bmm(a, b)"),
    ("scores", "bhtd,bhsd->bhts", (q, k), lambda: q @ k.transpose(-2, -1), "q @ k.transpose(-2, -1)"),
    ("trace", "ii->", (sq,), lambda: torch.trace(sq), "torch.trace(a)"),
    ("outer", "t,s->ts", (u, v), lambda: torch.outer(u, v), "torch.outer(u, v)"),
    ("sum over t, s", "bhts->bh", None, None, "x.sum((2, 3))"),
    ("transpose", "td->dt", (a2,), lambda: a2.T, "a.T"),
    ("diagonal", "ii->i", (sq,), lambda: torch.diagonal(sq), "torch.diagonal(a)"),
]
scores = q @ k.transpose(-2, -1)
CASES[5] = ("sum over t, s", "bhts->bh", (scores,), lambda: scores.sum((2, 3)), "x.sum((2, 3))")

def trow(*c):
    print(f"  {c[0]:<15}{c[1]:>17}{c[2]:>14}" + "".join(f"{x:>11}" for x in c[3:]))


print("Each einsum against its dedicated op (fp64), and its FLOPs")
trow("", "einsum", "shape", "max |diff|", "counted", "2 x prod", "view")
maxdiff, agree = 0.0, []
for name, eq, ops, ref, _code in CASES:
    out, counted = flops(lambda eq=eq, ops=ops: torch.einsum(eq, *ops), tag=eq)
    expect, counted_ref = flops(ref)
    diff = (out - expect).abs().max().item()
    maxdiff = max(maxdiff, diff)
    agree.append(torch.allclose(out, expect))
    r = rule(eq, *ops)
    is_view = out.untyped_storage().data_ptr() == ops[0].untyped_storage().data_ptr()
    key = name.split()[0].replace(" ", "_")
    value(f"{key}_shape", out.shape, fixed="the shape of a scalar: no size moves it" if out.dim() == 0 else None)
    zero = None if contracts(eq) else "FlopCounterMode counts matrix products only: zero at any size"
    value(f"{key}_counted", counted, fixed=zero)
    value(f"{key}_rule", r)
    value(f"{key}_ref_counted", counted_ref, fixed=zero)
    value(f"{key}_view", is_view, fixed="whether einsum returns a view is set by the string, not the sizes")
    trow(name, eq, str(tuple(out.shape)), f"{diff:.1e}", f"{counted:,}", f"{r:,}", "yes" if is_view else "no")
    if contracts(eq):
        sanity(f"{key}_flops_rule", counted == r == counted_ref,
               f"{eq}: FlopCounterMode counts 2 x the product of all index sizes, as for the dedicated op",
               operands=(counted, r), relation="equal" if key == "matmul" else None)
    else:
        sanity(f"{key}_not_counted", counted == 0 == counted_ref and r > 0,
               f"{eq}: no index is shared and summed, FlopCounterMode counts nothing for it or the op",
               operands=(counted, r), relation=("larger", "not") if key == "trace" else None)
contracting = [eq for _, eq, *_ in CASES if contracts(eq)]
print("ops FlopCounterMode saw for the contracting strings:", ", ".join(f"{eq}: {OPS[eq]}" for eq in contracting))
sanity("contractions_are_bmm", all(OPS[eq] == ["aten.bmm"] for eq in contracting)
       and all(OPS[eq] == [] for _, eq, *_ in CASES if not contracts(eq)),
       "torch runs each contracting einsum as aten.bmm, and the others as no counted op")
value("max_diff", maxdiff)
value("n_cases", len(CASES), fixed="the number of einsum strings in the table")
value("n_counted", sum(contracts(eq) for _, eq, *_ in CASES), fixed="which strings contract: set by the strings")
sanity("all_allclose", all(agree) and maxdiff < 1e-12, "every einsum agrees with its dedicated op (allclose, fp64)",
       operands=(maxdiff, 1e-12), relation=("largest", "not"))
sanity("permutation_is_view", torch.einsum("td->dt", a2).data_ptr() == a2.data_ptr()
       and torch.einsum("ii->i", sq).data_ptr() == sq.data_ptr()
       and torch.einsum("td->dt", a2).stride() == a2.T.stride(),
       "a transpose and a diagonal written as einsum return views, with the strides of a.T and torch.diagonal",
       relation="not")

# -- at Llama 2 7B's attention shapes (meta tensors: shapes only) --------------------------------
d = fact("llama2_7b_hidden", "d")
Hm = fact("llama2_7b_heads", "H_model")
Tm = fact("llama2_7b_max_positions", "T_model")
b = given("b", 1)
Dm = value("D_model", d // Hm)
qm = torch.empty(b, Hm, Tm, Dm, device="meta", dtype=torch.bfloat16)
km = torch.empty(b, Hm, Tm, Dm, device="meta", dtype=torch.bfloat16)
sm, counted_m = flops(lambda: torch.einsum("bhtd,bhsd->bhts", qm, km))
_, counted_sdpa_free = flops(lambda: qm @ km.transpose(-2, -1))
rule_m = rule("bhtd,bhsd->bhts", qm, km)
value("model_q_shape", qm.shape)
value("model_scores_shape", sm.shape)
value("model_scores_flops", counted_m)
value("model_scores_rule", rule_m)
value("model_scores_gb", sm.nbytes / 1e9)
print(f"\nLlama 2 7B attention scores: q, k {tuple(qm.shape)} bf16 -> {tuple(sm.shape)}")
row("FlopCounterMode", f"{counted_m:,}", w=24, cw=20)
row("2 x b h t s d", f"{rule_m:,}", w=24, cw=20)
row("q @ k^T counted", f"{counted_sdpa_free:,}", w=24, cw=20)
row("scores in bf16, GB", f"{sm.nbytes / 1e9:.2f}", w=24, cw=20)
sanity("model_flops_rule", counted_m == rule_m == counted_sdpa_free == 2 * b * Hm * Tm * Tm * Dm,
       "at model scale the counted FLOPs equal 2 b H T T D and those of q @ k^T", operands=(counted_m, rule_m))

# -- three operands: the order of the contraction --------------------------------------------------
x = torch.empty(d, d, device="meta")
W = torch.empty(d, d, device="meta")
vec = torch.empty(d, device="meta")
_, chain = flops(lambda: torch.einsum("ij,jk,k->i", x, W, vec))
_, right_first = flops(lambda: torch.einsum("ij,j->i", x, torch.einsum("jk,k->j", W, vec)))
left_first_closed = 2 * d * d * d + 2 * d * d
right_first_closed = 2 * d * d + 2 * d * d
opt = torch.backends.opt_einsum.is_available()
value("opt_einsum", opt)
value("chain_flops", chain)
value("chain_rule", rule("ij,jk,k->i", x, W, vec))
value("right_first_flops", right_first)
value("chain_over_right", chain / right_first)
print(f"\nx W v with x, W ({d}, {d}) and v ({d},); opt_einsum available: {opt}")
row("einsum('ij,jk,k->i')", f"{chain:,}", w=30, cw=20)
row("x @ (W @ v)", f"{right_first:,}", w=30, cw=20)
row("ratio", f"{chain / right_first:,.1f}", w=30, cw=20)
sanity("chain_order", (chain == left_first_closed) if not opt else (chain == right_first_closed),
       "without opt_einsum torch contracts left to right: 2 d^3 + 2 d^2 FLOPs",
       operands=(chain, left_first_closed))
sanity("right_first_cheaper", right_first == right_first_closed and right_first < chain / 1000,
       "W v first, then x (W v): 4 d^2 FLOPs, over a thousand times fewer", operands=(right_first, chain),
       relation=("smaller", "not"))

# -- variation: the second matmul of attention, weights times values -------------------------------
pm = torch.empty(b, Hm, Tm, Tm, device="meta", dtype=torch.bfloat16)
vm = torch.empty(b, Hm, Tm, Dm, device="meta", dtype=torch.bfloat16)
om, counted_pv = flops(lambda: torch.einsum("bhts,bhsd->bhtd", pm, vm))
value("pv_shape", om.shape)
value("pv_flops", counted_pv)
value("attn_flops", counted_pv + counted_m)
print(f"\nVariation: einsum('bhts,bhsd->bhtd') -> {tuple(om.shape)}: {counted_pv:,} FLOPs")
sanity("pv_equals_scores", counted_pv == counted_m == rule("bhts,bhsd->bhtd", pm, vm),
       "the weighted sum of values has the same index set, so the same FLOPs as the scores",
       operands=(counted_pv, counted_m), relation="differs")
