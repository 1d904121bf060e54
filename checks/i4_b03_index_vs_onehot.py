# numbook: alone
"""I.4.B03 — Integer targets vs one-hot.

Real int64 targets and their F.one_hot expansion: memory from .nbytes, the loss by gather and
by the one-hot contraction (equal, and equal to F.cross_entropy with index and with probability
targets), their measured times, and the embedding lookup as the gather that replaces a
one-hot matmul. The two selections are timed in RUNS runs; in each, each route is warmed up once
and timed ITERS times in a row, and the run gives the median time of each route and their ratio.
Each figure is the mean over the runs with a 95% t interval over them (numbook.check.estimate).
"""

import statistics
import time

import torch
import torch.nn.functional as F

from numbook.check import estimate, fact, given, sanity, value

MB = 10**6


def row(label, *cells, w=40, cw=16):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


RUNS, ITERS = 5, 7     # timed runs; timed iterations of each route in a run
LEVEL = 0.95           # the confidence level of the t intervals


def median_time(fn, iters=ITERS):
    """fn once to warm up (the gather's entries back in cache after the contraction), then its median of iters."""
    fn()
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


B = given("B", 4)
T = given("T", 512)
V = given("V", 32_000)
d = given("d", 4096)
N = value("N", B * T)

g = torch.Generator().manual_seed(0)
z = torch.randn(N, V, generator=g)
y = torch.randint(0, V, (N,), generator=g)

# -- memory -----------------------------------------------------------------------------------
onehot = F.one_hot(y, num_classes=V)                 # what F.one_hot returns: int64
onehot_f = onehot.float()
ELEM = "bytes per element of the dtype: a property of the format"
value("y_dtype_bytes", y.element_size(), fixed=ELEM)
value("y_bytes", y.nbytes)
value("onehot_shape", onehot.shape)
value("onehot_dtype_bytes", onehot.element_size(), fixed=ELEM)
value("onehot_dtype", str(onehot.dtype))
value("onehot_i64_mb", onehot.nbytes / MB)
value("onehot_f32_mb", onehot_f.nbytes / MB)
value("onehot_bf16_mb", onehot.to(torch.bfloat16).nbytes / MB)
value("onehot_f32_elem", onehot_f.element_size(), fixed=ELEM)
value("onehot_bf16_elem", onehot.to(torch.bfloat16).element_size(), fixed=ELEM)
ratio = value("ratio_i64", onehot.nbytes / y.nbytes)
nonzero = value("onehot_nonzero", int(onehot.count_nonzero()))
value("onehot_numel", onehot.numel())
value("onehot_zero_frac", 1 - nonzero / onehot.numel())
print("Memory")
row("tensor", "shape", "dtype", "bytes", "MB")
row("targets y", str(tuple(y.shape)), str(y.dtype)[6:], f"{y.nbytes:,}", f"{y.nbytes / MB:.4f}")
row("F.one_hot(y)", str(tuple(onehot.shape)), str(onehot.dtype)[6:], f"{onehot.nbytes:,}", f"{onehot.nbytes / MB:.1f}")
row("F.one_hot(y).float()", str(tuple(onehot_f.shape)), "float32", f"{onehot_f.nbytes:,}",
    f"{onehot_f.nbytes / MB:.1f}")
row("one-hot int64 / index int64", f"{ratio:,.0f}")
row("non-zeros in the one-hot", f"{nonzero:,} of {onehot.numel():,}")
sanity("bytes_two_routes", onehot.nbytes == N * V * 8 and y.nbytes == N * 8 and onehot_f.nbytes == N * V * 4,
       ".nbytes equals numel * element_size for every tensor", relation="equal")
sanity("one_per_row", nonzero == N and bool((onehot.sum(-1) == 1).all()), "exactly one 1 per row", relation="equal")
sanity("ratio_is_V", ratio == V, "int64 one-hot / int64 index = |V|", operands=(ratio, V))

# F.one_hot's dtype: call it on indices of every integer dtype
oh_out, oh_err = {}, {}
for dt in (torch.int64, torch.int32, torch.int16, torch.uint8):
    yy = y[:8].to(dt) if dt != torch.uint8 else (y[:8] % 256).to(dt)
    try:
        oh_out[dt] = F.one_hot(yy, num_classes=V).dtype
    except RuntimeError as exc:
        oh_err[dt] = str(exc).splitlines()[0]
print("\nF.one_hot on indices of each integer dtype")
for dt in (torch.int64, torch.int32, torch.int16, torch.uint8):
    shown = f"-> {str(oh_out[dt])[6:]}" if dt in oh_out else f"RuntimeError: {oh_err[dt]}"
    row(f"  indices {str(dt)[6:]}", shown, cw=0)
value("one_hot_rejected_dtypes", len(oh_err),
      fixed="the integer dtypes other than int64 the check tries, each rejected")
sanity("one_hot_int64_only", list(oh_out) == [torch.int64] and oh_out[torch.int64] == torch.int64,
       "F.one_hot returns int64 and rejects int32, int16 and uint8 indices",
       operands=(str(oh_out.get(torch.int64)), len(oh_err)), relation="smaller")

# -- the loss two ways -------------------------------------------------------------------------
logp = torch.log_softmax(z, dim=-1)
by_gather = -logp.gather(1, y[:, None]).squeeze(1)            # N reads
by_onehot = -(onehot_f * logp).sum(-1)                        # N * |V| multiply-adds
ce_index = F.cross_entropy(z, y, reduction="none")
ce_prob = F.cross_entropy(z, onehot_f, reduction="none")      # probability ("soft") targets
d1 = value("gather_vs_onehot", (by_gather - by_onehot).abs().max().item(),
           fixed="a one-hot row selects one term and adds zeros: "
                 "the contraction equals the gather exactly at every size")
d2 = value("gather_vs_ce", (by_gather - ce_index).abs().max().item())
d3 = value("ce_index_vs_prob", (ce_index - ce_prob).abs().max().item())
value("loss_mean", ce_index.mean().item())
value("macs_onehot", onehot_f.numel())
value("reads_gather", y.numel())
print("\nLoss per position, four routes (max |difference|)")
row("gather vs one-hot contraction", f"{d1:.1e}")
row("gather vs F.cross_entropy(z, y)", f"{d2:.1e}")
row("cross_entropy index vs probability targets", f"{d3:.1e}")
sanity("four_routes_agree", max(d1, d2, d3) < 1e-4, "gather, one-hot contraction and both cross_entropy forms agree",
       operands=(by_gather.mean().item(), by_onehot.mean().item()), relation="largest")

value("runs", RUNS, fixed="the number of timed runs: a choice of the check")
value("iters", ITERS, fixed="the timed iterations of each route in a run: a choice of the check")
value("ci_level", LEVEL, fixed="the confidence level of every interval of the check: a choice of the check")
runs = [(median_time(lambda lp=logp: lp.gather(1, y[:, None])), median_time(lambda lp=logp: (onehot_f * lp).sum(-1)))
        for _ in range(RUNS)]
TIMED = f"timed on this machine: the median of {ITERS} iterations in each of {RUNS} runs"
t_gather = estimate("t_gather_ms", [g_ * 1e3 for g_, _ in runs], unit="ms", n=RUNS * ITERS, level=LEVEL, measured=TIMED)
t_onehot = estimate("t_onehot_ms", [o_ * 1e3 for _, o_ in runs], unit="ms", n=RUNS * ITERS, level=LEVEL, measured=TIMED)
speedup = estimate("speedup_gather", [o_ / g_ for g_, o_ in runs], n=RUNS * ITERS, level=LEVEL,
                   measured=TIMED)
print(f"\nSelecting the target log-probability: {RUNS} runs, each the median of {ITERS} iterations,")
print(f"the mean over the runs and its {speedup.kind}")
row("", "mean", f"{LEVEL:.0%} CI", w=30, cw=20)
row("gather", f"{t_gather:.3f} ms", f"{t_gather.lo:.3f} to {t_gather.hi:.3f} ms", w=30, cw=20)
row("one-hot multiply and sum", f"{t_onehot:.1f} ms", f"{t_onehot.lo:.1f} to {t_onehot.hi:.1f} ms", w=30, cw=20)
row("ratio, one-hot over gather", f"{speedup:,.0f}x", f"{speedup.lo:,.0f} to {speedup.hi:,.0f}x", w=30, cw=20)
row("  in each run", *(f"{o_ / g_:,.0f}x" for g_, o_ in runs), w=30, cw=8)
sanity("gather_faster", speedup.lo > 100 and t_onehot.lo > 100 * t_gather.hi,
       "the gather is more than 100x faster than the contraction, over the whole interval of the ratio and of "
       "the two times", operands=(t_onehot.lo, t_gather.hi), relation=("slower", "faster", "larger"))
del logp, by_onehot, ce_prob

# -- the embedding lookup: the same gather replacing a matmul -------------------------------------
E = torch.randn(V, d, generator=g)                             # an embedding table (|V|, d)
rows = value("emb_rows", 64, fixed="the number of positions the check compares row by row")
via_matmul = onehot_f[:rows] @ E                               # (rows, |V|) @ (|V|, d)
via_index = E[y[:rows]]                                        # the lookup nn.Embedding does
emb = torch.nn.functional.embedding(y[:rows], E)
value("emb_equal", bool(torch.equal(via_matmul, via_index) and torch.equal(via_index, emb)))
value("emb_flops_full", 2 * N * V * d)
value("emb_copy_full", N * d)
print(f"\nEmbedding lookup for {rows} positions: one_hot @ E equals E[y] exactly:",
      torch.equal(via_matmul, via_index))
row("FLOPs of one_hot @ E for all N", f"{2 * N * V * d:.3e}")
row("values copied by E[y] for all N", f"{N * d:,}")
sanity("emb_exact", torch.equal(via_matmul, via_index) and torch.equal(via_index, emb),
       "one-hot matmul, indexing and F.embedding give identical rows", relation="equal")

# -- dtype of the targets -------------------------------------------------------------------------
try:
    F.cross_entropy(z[:8], y[:8].int())
    msg = ""
except RuntimeError as exc:
    msg = str(exc).splitlines()[0]
value("int32_rejected", bool(msg))
print(f"\nint32 targets: {msg}")
sanity("int32_rejected", bool(msg), "cross_entropy rejects int32 class indices")

# -- variation: Qwen2's vocabulary (meta tensor: no storage) ---------------------------------
V2 = fact("qwen2_0_5b_vocab", "V2")
big = torch.empty(N, V2, dtype=torch.int64, device="meta")
value("v2_onehot_i64_mb", big.nbytes / MB)
value("v2_ratio", big.nbytes / y.nbytes)
print(f"\nVariation: |V| = {V2:,}: int64 one-hot {tuple(big.shape)} = {big.nbytes / MB:,.1f} MB,"
      f" {big.nbytes / y.nbytes:,.0f}x the indices")
