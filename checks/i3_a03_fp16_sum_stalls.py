"""I.3.A03 — A float16 sum that stalls.

Adds ones one at a time in real fp16 and bf16 torch scalars and finds where the running sum stops
moving, against the point torch.finfo predicts (2 / eps); shows that torch.sum and torch.cumsum on an
fp16 tensor carry the running sum in fp32 (a sum that would overflow fp16 on the way comes back 0);
and measures naive (sequential) against pairwise summation of long fp32 vectors against math.fsum,
with the classical error bounds (n - 1) u and ceil(log2 n) u.
"""

import math

import numpy as np
import torch

from numbook.check import given, sanity, value

FMT = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
FORMAT = "a property of the format, read from torch.finfo"


def row(label, *cells, w=30, cw=14):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


def sequential(dtype, step, n):
    """Add `step` to a running sum n times, one torch scalar add at a time; return the sum and the
    value at which it first stopped moving (None if it never did)."""
    acc = torch.zeros((), dtype=dtype)
    one = torch.tensor(step, dtype=dtype)
    stall = None
    for _ in range(n):
        nxt = acc + one
        if stall is None and nxt == acc:
            stall = acc.item()
        acc = nxt
    return acc.item(), stall


def pairwise(x):
    """Textbook pairwise summation: add neighbours level by level, in x's dtype."""
    x = np.asarray(x)
    while x.size > 1:
        if x.size % 2:
            x = np.append(x, x.dtype.type(0))
        x = x[0::2] + x[1::2]
    return x[0]


n_ones = given("n_ones", 4096, nudge=4)      # ones to add; nudged by 4 so that n stays exact in fp16
big = given("big", 60000.0)                  # the magnitude in the overflow example
n_long = given("n_long", 2**20)              # length of the long fp32 vectors
n_seeds = given("n_seeds", 8)                # vectors drawn at each length
n_lengths = given("n_lengths", 6)            # lengths, each a quarter of the next, up to n_long

# -- Step 1: the stall point from torch.finfo ----------------------------------------------------
print("Where adding one stops changing the sum: from torch.finfo, and by probing")
row("format", "eps", "mantissa bits", "2 / eps", "probe")
stalls = {}
for name, dt in FMT.items():
    fi = torch.finfo(dt)
    bits = -math.log2(fi.eps)
    predicted = 2 / fi.eps
    s = torch.tensor(predicted, dtype=dt)
    # second route, one step each: below the point 1 is added exactly, at the point it is lost
    at_point = bool((s + 1 == s) and (s - 1) + 1 == s and (s - 2) + 1 == s - 1)
    if name == "fp32":                                  # 16.7 million adds: the one-step test only
        probe = predicted if at_point else None
    else:
        total, probe = sequential(dt, 1.0, n_ones)
        value(f"{name}_total", total,
              fixed="past the stall point more ones do not move the sum: a property of the format")
    stalls[name] = probe
    value(f"{name}_eps", fi.eps, fixed=FORMAT)
    value(f"{name}_bits", int(bits), fixed=FORMAT)
    value(f"{name}_stall_pred", predicted, fixed=FORMAT)
    value(f"{name}_stall", probe, fixed="found by adding ones until the sum stops moving: a property of the format")
    row(name, f"{fi.eps:.3g}", int(bits), f"{predicted:,.0f}", f"{probe:,.0f}")
    sanity(f"{name}_probe_matches", probe == predicted and at_point,
           f"{name}: the running sum stops at 2 / eps, and one add at that point is lost",
           operands=(probe, predicted), relation=("smaller", "not"))

sp = torch.tensor(stalls["fp16"], dtype=torch.float16)
spacing = value("fp16_spacing_at_stall", (torch.nextafter(sp, torch.tensor(math.inf, dtype=torch.float16)) - sp).item(),
                fixed=FORMAT)
below = torch.tensor(stalls["fp16"] / 2, dtype=torch.float16)
value("fp16_spacing_below", (torch.nextafter(below, torch.tensor(math.inf, dtype=torch.float16)) - below).item(),
      fixed=FORMAT)
sanity("spacing_two", spacing == 2 * 1.0, "the fp16 spacing at the stall point is 2, twice the added 1",
       operands=(spacing, 2.0), relation=("smaller", "twice"))
value("fp16_lost", n_ones - stalls["fp16"])
value("fp16_lost_frac", 1 - stalls["fp16"] / n_ones)
ratio = value("stall_ratio", stalls["fp16"] / stalls["bf16"],
              fixed="2^(10 - 7): the two formats' mantissa widths")
sanity("bf16_earlier", stalls["bf16"] < stalls["fp16"] and ratio == torch.finfo(torch.bfloat16).eps
       / torch.finfo(torch.float16).eps, "bf16 stalls earlier, by the ratio of the two eps",
       operands=(stalls["bf16"], stalls["fp16"]), relation="smaller")
print(f"\n{n_ones:,} ones added one at a time: fp16 ends at {stalls['fp16']:,.0f}, bf16 at {stalls['bf16']:,.0f}")

# -- Step 2: torch.sum on fp16 does not stall ----------------------------------------------------
ones16 = torch.ones(n_ones, dtype=torch.float16)
s16 = ones16.sum()
value("sum_dtype", str(s16.dtype), fixed="torch.sum returns the input's dtype")
tsum = value("torch_sum_ones", s16.item())
value("torch_sum_ones_fp32", ones16.sum(dtype=torch.float32).item())
sanity("sum_no_stall", tsum == float(torch.tensor(float(n_ones), dtype=torch.float16)) and tsum > stalls["fp16"],
       "torch.sum of n fp16 ones returns n (rounded once to fp16), far past the stall",
       operands=(tsum, stalls["fp16"]), relation="equal")

g = torch.Generator().manual_seed(0)
r16 = torch.rand(n_ones, generator=g).half()
once = r16.float().sum().half()
seq16 = np.cumsum(r16.numpy(), dtype=np.float16)[-1]       # numpy rounds each fp16 add to fp16
value("rand_sum_fp16", r16.sum())
value("rand_sum_seq16", float(seq16), dtype="float16")
value("rand_sum_exact", math.fsum(r16.double().tolist()))
sanity("sum_is_fp32_rounded_once", torch.equal(r16.sum(), once),
       "torch.sum of an fp16 tensor equals the fp32 sum rounded once to fp16", operands=(r16.sum(), once),
       relation="equal")

x = torch.tensor([big, big, -big, -big], dtype=torch.float16)
acc = torch.zeros((), dtype=torch.float16)
steps16 = []
for v in x:
    acc = acc + v
    steps16.append(acc.item())
value("big_fp16", x[0].item(), dtype="float16")
value("partial_fp32", x[:2].float().sum().item())
value("fp16_max", torch.finfo(torch.float16).max, fixed=FORMAT)
value("overflow_seq", steps16[-1], fixed="once a partial sum passes the fp16 maximum the sequential sum is inf")
value("overflow_sum", x.sum().item(), fixed="pairs of +big and -big cancel exactly at any big")
cs = x.cumsum(0)
value("cumsum_second", cs[1].item(), fixed="big + big overflows fp16 for the big of the problem")
value("cumsum_last", cs[-1].item(), fixed="pairs of +big and -big cancel exactly at any big")
print(f"\n[big, big, -big, -big] with big = {big:,.0f} in fp16")
row("running sum in fp16", *(f"{s:,.0f}" for s in steps16))
row("torch.cumsum (fp16 out)", *(f"{s:,.0f}" for s in cs.tolist()))
row("torch.sum", f"{x.sum().item():,.0f}")
sanity("overflow_on_the_way", x[:2].float().sum() > torch.finfo(torch.float16).max and math.isinf(steps16[-1]),
       "the partial sum 2 big exceeds the fp16 maximum: the fp16 running sum is inf",
       operands=(x[:2].float().sum().item(), torch.finfo(torch.float16).max), relation=("larger", "largest"))
sanity("sum_survives", x.sum().item() == 0.0 and cs[-1].item() == 0.0 and math.isinf(cs[1].item()),
       "torch.sum and torch.cumsum return 0: their running sum is wider than fp16", relation="not")

# -- Step 3: naive against pairwise in fp32 ------------------------------------------------------
u = np.finfo(np.float32).eps / 2                           # unit roundoff of fp32
value("u32", u, fixed=FORMAT)
sizes = [n_long // 4**k for k in range(n_lengths - 1, -1, -1)]
print("\nfp32 sums of n uniform [0, 1) values: relative error against math.fsum, RMS over seeds")
row("n", "naive", "pairwise", "np.sum", "torch.sum", "(n-1) u", "log2(n) u", w=10, cw=11)
table = {}
per_seed = {}                                              # n -> each method's error for each seed
check_loop = None
for n in sizes:
    errs = {"naive": [], "pairwise": [], "np": [], "torch": [], "f64": []}
    for s in range(n_seeds):
        xs = np.random.default_rng(s).random(n, dtype=np.float32)
        exact = math.fsum(xs.astype(np.float64).tolist())
        naive = np.cumsum(xs, dtype=np.float32)[-1]        # add.accumulate: strictly left to right
        if check_loop is None:                              # the same, as an explicit loop
            acc32 = np.float32(0)
            for v in xs:
                acc32 = np.float32(acc32 + v)
            check_loop = (acc32, naive)
        for k, val in (("naive", naive), ("pairwise", pairwise(xs)), ("np", np.sum(xs, dtype=np.float32)),
                       ("torch", torch.from_numpy(xs).sum().item()), ("f64", xs.astype(np.float64).sum())):
            errs[k].append(abs(float(val) - exact) / exact)
    rms = {k: math.sqrt(sum(e * e for e in v) / len(v)) for k, v in errs.items()}
    table[n] = rms
    per_seed[n] = errs
    row(f"{n:,}", *(f"{rms[k]:.2e}" for k in ("naive", "pairwise", "np", "torch")),
        f"{(n - 1) * u:.1e}", f"{math.ceil(math.log2(n)) * u:.1e}", w=10, cw=11)

sanity("cumsum_is_sequential", check_loop[0] == check_loop[1],
       "np.cumsum in fp32 equals an explicit left-to-right loop of fp32 adds", operands=check_loop, relation="equal")
top, bottom = table[sizes[-1]], table[sizes[0]]
value("naive_err", top["naive"], dtype="float32")
value("pair_err", top["pairwise"], dtype="float32")
value("np_err", top["np"], dtype="float32")
value("torch_err", top["torch"], dtype="float32")
value("f64_err", top["f64"], fixed="numpy's fp32 uniforms are multiples of 2^-24 and the totals stay below 2^20: "
      "their fp64 sum is exact at every n here")
value("naive_bound", (n_long - 1) * u)
value("pair_bound", math.ceil(math.log2(n_long)) * u)
value("n_small", sizes[0])
value("naive_over_pair", top["naive"] / top["pairwise"])
# the ratios of RMS errors depend on the draw: the same ratio for each seed alone, at the largest n
seed_ratio = [a / b for a, b in zip(per_seed[sizes[-1]]["naive"], per_seed[sizes[-1]]["pairwise"], strict=True)]
value("naive_over_pair_seed_min", min(seed_ratio))
value("naive_over_pair_seed_max", max(seed_ratio))
print(f"  naive / pairwise at n = {sizes[-1]:,}, seed by seed: {min(seed_ratio):.0f} to {max(seed_ratio):.0f}")
sanity("ratio_depends_on_seed", min(seed_ratio) < top["naive"] / top["pairwise"] < max(seed_ratio),
       "the ratio of RMS errors lies inside the range of the seeds' own ratios, which differ from seed to seed",
       operands=(min(seed_ratio), max(seed_ratio)), relation="differs")
growth = value("naive_growth", top["naive"] / bottom["naive"])
size_ratio = value("size_ratio", sizes[-1] / sizes[0])
slope = value("naive_slope", math.log(growth) / math.log(size_ratio))
sanity("naive_under_bound", all(table[n]["naive"] <= (n - 1) * u for n in sizes),
       "the naive error stays under (n - 1) u at every n", operands=(top["naive"], (n_long - 1) * u),
       relation=("larger", "grows"))
sanity("pair_under_bound", all(table[n]["pairwise"] <= math.ceil(math.log2(n)) * u for n in sizes),
       "the pairwise error stays under ceil(log2 n) u at every n",
       operands=(top["pairwise"], math.ceil(math.log2(n_long)) * u))
sanity("naive_worse", top["naive"] > 30 * top["pairwise"],
       "at the largest n the naive error is more than 30 times the pairwise error",
       operands=(top["naive"], top["pairwise"]), relation="largest")
sanity("naive_grows", growth > 10, "the naive error grows more than tenfold over the range of n",
       operands=(top["naive"], bottom["naive"]), relation=("larger", "grows"))
sanity("naive_like_sqrt", 0.3 < slope < 0.7,
       "the naive RMS error grows about as sqrt(n): the rounding errors have random signs",
       operands=(slope, 0.5), relation="not")
sanity("libraries_pairwise", max(top["np"], top["torch"]) < top["naive"] / 10,
       "np.sum and torch.sum are far more accurate than the naive loop: they do not add left to right",
       operands=(max(top["np"], top["torch"]), top["naive"]), relation=("not", "larger"))
sanity("f64_reference", top["f64"] < 1e-12, "the fp64 sum agrees with math.fsum to 1e-12",
       operands=(top["f64"], 1e-12))

# numpy adds pairwise only when the reduced axis is its innermost loop. Reducing axis 0 of a C-contiguous
# (n, 2) array, the inner loop runs along axis 1, and each column is summed left to right. A 1-D strided
# view is still reduced by the inner loop, pairwise.
# The same vectors as the table's last row (one per seed at n_long), with the table's statistic: the RMS.
strided = {"np": [], "torch": [], "torch_contig": [], "np_view": []}
np_is_naive, torch_differs, view_is_pairwise = [], [], []
for s in range(n_seeds):
    xs = np.random.default_rng(s).random(n_long, dtype=np.float32)
    exact = math.fsum(xs.astype(np.float64).tolist())
    x2 = np.stack([xs, xs], axis=1)                       # (n, 2): axis 0 has stride 2 elements
    np_s = x2.sum(axis=0)[0]
    torch_s = torch.from_numpy(x2).sum(0)[0].item()
    torch_c = torch.from_numpy(xs).sum().item()
    view = x2.ravel()[::2]                                # 1-D view of the same values, stride 2 elements
    np_v = np.sum(view, dtype=np.float32)
    view_is_pairwise.append(view.strides[0] == 2 * xs.itemsize and np_v == np.sum(xs, dtype=np.float32))
    np_is_naive.append(np_s == np.cumsum(xs, dtype=np.float32)[-1])
    torch_differs.append(torch_s != torch_c)
    for k, val in (("np", np_s), ("torch", torch_s), ("torch_contig", torch_c), ("np_view", np_v)):
        strided[k].append(abs(float(val) - exact) / exact)
srms = {k: math.sqrt(sum(e * e for e in v) / len(v)) for k, v in strided.items()}
np_strided_err = value("np_strided_err", srms["np"], dtype="float32")
torch_strided_err = value("torch_strided_err", srms["torch"], dtype="float32")
np_view_err = value("np_view_err", srms["np_view"], dtype="float32")
value("seed_last", n_seeds - 1)
value("naive_over_torch_strided", top["naive"] / srms["torch"])
print(f"\nSum along axis 0 of an (n, {x2.shape[1]}) array, n = {n_long:,}: relative error, RMS over {n_seeds} seeds")
row("np.sum, strided", f"{srms['np']:.2e}", w=30)
row("torch.sum, strided", f"{srms['torch']:.2e}", w=30)
row("torch.sum, contiguous", f"{srms['torch_contig']:.2e}", w=30)
row("np.sum, 1-D view x[::2]", f"{srms['np_view']:.2e}", w=30)
print(f"  torch.sum strided over contiguous: {srms['torch'] / srms['torch_contig']:.2f}"
      " (above or below 1 depending on the seeds)")
print(f"  torch.sum returns another sum along the strided axis than along the contiguous one"
      f" for {sum(torch_differs)} of the {n_seeds} vectors")
sanity("np_strided_is_naive", all(np_is_naive) and srms["np"] == top["naive"],
       "np.sum along axis 0 of an (n, 2) array returns exactly the left-to-right sum of every vector: the same RMS "
       "error",
       operands=(srms["np"], top["naive"]), relation="equal")
sanity("torch_strided_differs", srms["torch_contig"] == top["torch"] and any(torch_differs),
       "torch.sum along the strided axis returns another sum than along the contiguous one for some vectors",
       operands=(srms["torch"], srms["torch_contig"]), relation="differs")
sanity("np_view_pairwise",
       all(view_is_pairwise) and srms["np_view"] == top["np"] and srms["np_view"] < top["naive"] / 10,
       "np.sum of a 1-D strided view returns the contiguous np.sum of every vector, far below the left-to-right error",
       operands=(srms["np_view"], top["naive"]), relation=("equal", "smaller"))
sanity("torch_strided_accurate", srms["torch"] < srms["np"] / 10,
       "torch.sum along the strided axis stays more than ten times more accurate than the left-to-right sum",
       operands=(srms["torch"], srms["np"]), relation="smaller")

# compensated (Kahan) summation: the lost low part of each add is carried in c
n_kahan = sizes[len(sizes) // 2]
kahan_seed = given("kahan_seed", 0, nudge=0)              # one vector, not an RMS over the seeds
xk = np.random.default_rng(kahan_seed).random(n_kahan, dtype=np.float32)
exact_k = math.fsum(xk.astype(np.float64).tolist())
s_k, c_k = np.float32(0), np.float32(0)
for v in xk.tolist():
    y_k = np.float32(np.float32(v) - c_k)
    t_k = np.float32(s_k + y_k)
    c_k = np.float32(np.float32(t_k - s_k) - y_k)
    s_k = t_k
kahan_err = value("kahan_err", abs(float(s_k) - exact_k) / exact_k, dtype="float32")
naive_k = value("kahan_naive_err", abs(float(np.cumsum(xk, dtype=np.float32)[-1]) - exact_k) / exact_k,
                dtype="float32")
value("n_kahan", n_kahan)
print(f"\nKahan summation of n = {n_kahan:,} values: error {kahan_err:.2e} against naive {naive_k:.2e}")
sanity("kahan_tight", kahan_err <= 2 * u * (1 + n_kahan * u) and kahan_err < naive_k,
       "the compensated sum stays within about 2u, and under the naive error", operands=(kahan_err, 2 * u))

# -- Variation: a constant step, and a constant vector ------------------------------------------
step_var = given("step_var", 0.25)
total_v, stall_v = sequential(torch.float16, step_var, 4 * n_ones)
step16 = torch.tensor(step_var, dtype=torch.float16).item()
k = math.ceil(math.log2(2 * step16 / torch.finfo(torch.float16).eps))
value("var_stall", stall_v)
value("var_stall_pred", 2 * step16 / torch.finfo(torch.float16).eps)
sanity("var_stall_binade", stall_v is not None and 2**k <= stall_v < 2 ** (k + 1),
       "the sum of a constant step stalls in the first binade whose spacing is at least twice the step",
       operands=(stall_v, 2**k))
const = given("const", 0.1)
c = np.full(n_long, const, dtype=np.float32)
exact_c = math.fsum(c.astype(np.float64).tolist())
naive_c = abs(float(np.cumsum(c, dtype=np.float32)[-1]) - exact_c) / exact_c
pair_c = abs(float(pairwise(c)) - exact_c) / exact_c
value("const_naive_err", naive_c, dtype="float32")
value("const_pair_err", pair_c, dtype="float32")
value("const_naive_sum", float(np.cumsum(c, dtype=np.float32)[-1]), dtype="float32")
value("const_exact", exact_c)
value("const_fp32", float(np.float32(const)))               # the value fp32 actually stores
sanity("const_exact_is_fp32_times_n", exact_c == float(np.float32(const)) * n_long and exact_c != const * n_long,
       "the exact sum is n times the stored fp32 value, not n times the decimal", operands=(exact_c, const * n_long),
       relation="not")
print(f"\nVariation: fp16 sum of {step_var} stalls at {stall_v:,.0f};"
      f" {n_long:,} copies of {const} in fp32: naive {naive_c:.2e}, pairwise {pair_c:.2e}")
sanity("const_naive_systematic", naive_c > 10 * top["naive"] and naive_c < (n_long - 1) * u,
       "with a constant summand the naive errors share a sign: far above the random case, under the bound",
       operands=(naive_c, top["naive"]), relation="equal")
