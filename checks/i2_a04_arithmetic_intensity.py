"""I.2.A04 — Arithmetic intensity of a matrix product, from decode to batch.

For Llama 3 8B's q_proj (d -> d) and gate_proj (d -> f) in bf16, counts the FLOPs of
(m, k) @ (k, n) with FlopCounterMode and the bytes moved once (input, weight and output, from
.nbytes of meta tensors), for m from one decode token to a batch. It places each against the
ridge point of an H100 SXM from its datasheet (peak bf16 dense FLOP/s over HBM bandwidth), and
finds, by probing m, the batch at which each layer crosses the ridge; the closed form
m* = ceil(R k n / (k n - R (k + n))) must agree. The variation repeats it for an H200 and an A100.
"""

import itertools
import math

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from numbook.check import fact, given, sanity, value

BF16 = torch.bfloat16


def row(label, *cells, w=24, cw=15):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


def cost(m, k, n):
    """FLOPs (counted) and bytes (.nbytes of input, weight and output, each moved once) of
    y = x W^T with x (m, k) and W (n, k) in bf16, on meta tensors."""
    x = torch.empty(m, k, device="meta", dtype=BF16)
    w = torch.empty(n, k, device="meta", dtype=BF16)
    with FlopCounterMode(display=False) as fc:
        y = F.linear(x, w)
    return fc.get_total_flops(), x.nbytes + w.nbytes + y.nbytes, (x.nbytes, w.nbytes, y.nbytes)


def intensity(m, k, n):
    flops, nbytes, _ = cost(m, k, n)
    return flops / nbytes


def crossing(k, n, ridge, hi=1 << 20):
    """The smallest m whose counted intensity reaches the ridge, by bisection on real counts."""
    lo = 1
    if intensity(lo, k, n) >= ridge:
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if intensity(mid, k, n) < ridge else (lo, mid)
    return hi


def closed_crossing(k, n, ridge):
    """m k n / (m k + k n + m n) >= R  <=>  m >= R k n / (k n - R (k + n))."""
    return math.ceil(ridge * k * n / (k * n - ridge * (k + n)))


d = fact("llama3_8b_hidden", "d")
f = fact("llama3_8b_intermediate", "f")
peak_tflops = fact("h100_sxm_bf16_dense_tflops", "peak_tflops", unit="TFLOP/s")
bw_tbs = fact("h100_sxm_hbm_tbs", "bw_tbs")
batches = given("batches", [1, 8, 64, 256, 1024])
prompt = given("prompt", 512)

elem = value("bf16_bytes", torch.empty(0, dtype=BF16).element_size(),
             fixed="bytes of a bf16 element: a property of the dtype")
peak, bw = peak_tflops * 1e12, bw_tbs * 1e12
R = value("ridge", peak / bw, unit="FLOP/B")
print(f"H100 SXM: {peak_tflops} TFLOP/s bf16 dense, {bw_tbs} TB/s -> ridge {R:.1f} FLOP/byte")

# -- one decode token through q_proj ------------------------------------------------------------
fl1, by1, (xb, wb, yb) = cost(1, d, d)
value("q1_flops", fl1)
value("flops_per_mac", fl1 / (d * d), fixed="FlopCounterMode counts a multiply-add as two FLOPs: its convention")
value("q1_bytes", by1)
value("q1_x_bytes", xb)
value("q1_w_bytes", wb)
value("q1_w_mb", wb / 1e6)
value("q1_mb", by1 / 1e6)
int1 = value("q1_intensity", fl1 / by1)
value("q1_below_ridge", R / int1)
value("q1_peak_share", int1 * bw / peak)
t_mem, t_cmp = by1 / bw, fl1 / peak
value("q1_t_mem_us", t_mem * 1e6)
value("q1_t_cmp_us", t_cmp * 1e6)
value("q1_mem_over_cmp", t_mem / t_cmp)
print(f"\nq_proj, one token: {fl1:,} FLOPs, {by1:,} bytes (x {xb:,}, W {wb:,}, y {yb:,})")
row("intensity", f"{int1:.4f} FLOP/byte")
row("time at bandwidth", f"{t_mem * 1e6:.2f} us", "at peak", f"{t_cmp * 1e6:.4f} us")
bytes_closed, flops_closed = elem * (d + d * d + d), 2 * d * d
sanity("bytes_from_nbytes", by1 == bytes_closed and fl1 == flops_closed,
       "bytes = 2 (k + k n + n) and FLOPs = 2 k n at m = 1", operands=(by1, bytes_closed), relation="equal")
sanity("decode_about_one", int1 < 1 and math.isclose(int1, d * d / (2 * d + d * d)),
       "at m = 1 the intensity is k n / (k + k n + n): just under one FLOP per byte",
       operands=(int1, d * d / (2 * d + d * d)), relation="equal")
sanity("decode_memory_bound", t_mem > t_cmp and int1 < R,
       "at m = 1 moving the bytes takes longer than doing the FLOPs", operands=(t_mem, t_cmp),
       relation=("smaller", "at most", "larger"))


# -- the intensity as m grows --------------------------------------------------------------------
def closed_I(m, k, n):
    return m * k * n / (m * k + k * n + m * n)


print("\nIntensity (FLOP/byte) and the bound on an H100 SXM")
row("m", "q_proj", "gate_proj", "q_proj bound", "share of peak")
for m in batches + [prompt]:
    if m == prompt:
        print(f"  one prefill of a {prompt}-token prompt:")
    iq, ig = intensity(m, d, d), intensity(m, d, f)
    key = "prompt" if m == prompt else m          # named by role, so that a nudged prompt keeps its name
    value(f"iq_{key}", iq)
    value(f"ig_{key}", ig)
    share = value(f"share_{key}", min(peak, iq * bw) / peak)
    row(f"{m:,}", f"{iq:.1f}", f"{ig:.1f}", "memory" if iq < R else "compute", f"{share:.1%}")
    sanity(f"closed_{key}", math.isclose(iq, closed_I(m, d, d)) and math.isclose(ig, closed_I(m, d, f)),
           "counted FLOPs over .nbytes equal m k n / (m k + k n + m n)", operands=(iq, closed_I(m, d, d)),
           relation="equal" if key == 1 else None)
limit_q = value("limit_q", d * d / (d + d))
value("limit_g", d * f / (d + f))
sanity("intensity_grows", all(intensity(a, d, d) < intensity(b, d, d) < limit_q
                              for a, b in itertools.pairwise(batches)),
       "the intensity grows with m and stays below k n / (k + n)", operands=(intensity(batches[-1], d, d), limit_q),
       relation=("grows", "not", "smaller"))
sanity("prompt_compute_bound", intensity(prompt, d, d) > R,
       "a prompt of this length in one prefill pass is past the ridge", operands=(intensity(prompt, d, d), R))

# -- where each layer crosses the ridge ---------------------------------------------------------
mq = value("m_star_q", crossing(d, d, R))
mg = value("m_star_g", crossing(d, f, R))
value("iq_below", intensity(mq - 1, d, d))
value("iq_at", intensity(mq, d, d))
value("ig_below", intensity(mg - 1, d, f))
value("ig_at", intensity(mg, d, f))
print()
row("first m past the ridge", "q_proj", "gate_proj", w=26)
row("probe on counts", f"{mq:,}", f"{mg:,}", w=26)
row("closed form", f"{closed_crossing(d, d, R):,}", f"{closed_crossing(d, f, R):,}", w=26)
sanity("m_star_q_closed", mq == closed_crossing(d, d, R) and intensity(mq - 1, d, d) < R <= intensity(mq, d, d),
       "the probe agrees with m* = ceil(R k n / (k n - R (k + n))) for q_proj", operands=(mq, closed_crossing(d, d, R)),
       relation="equal")
sanity("m_star_g_closed", mg == closed_crossing(d, f, R) and intensity(mg - 1, d, f) < R <= intensity(mg, d, f),
       "the probe agrees with the closed form for gate_proj", operands=(mg, closed_crossing(d, f, R)))
sanity("wider_crosses_sooner", mg < mq, "the wider gate_proj reaches the ridge at a smaller batch", operands=(mg, mq),
       relation=("larger", "smaller"))
sanity("m_star_above_ridge", mq > R and mg > R,
       "m* exceeds the ridge: I < m, since the weight is not the only traffic", operands=(min(mq, mg), R),
       relation="larger")

# -- variation: H200 and A100 ----------------------------------------------------------------------
h200_bw = fact("h200_sxm_hbm_tbs", "h200_bw_tbs")
h200_peak = fact("h200_sxm_bf16_dense_tflops", "h200_peak_tflops", unit="TFLOP/s")
a100_peak = fact("a100_sxm_bf16_dense_tflops", "a100_peak_tflops", unit="TFLOP/s")
a100_bw = fact("a100_80gb_sxm_hbm_tbs", "a100_bw_tbs")
print("\nVariation: other GPUs")
row("GPU", "ridge", "m* q_proj", "m* gate_proj")
other = {}
for name, pk, b in (("h200", h200_peak, h200_bw), ("a100", a100_peak, a100_bw)):
    r = value(f"ridge_{name}", pk / b, unit="FLOP/B")
    cq, cg = value(f"m_star_q_{name}", crossing(d, d, r)), value(f"m_star_g_{name}", crossing(d, f, r))
    row(name.upper(), f"{r:.1f}", f"{cq:,}", f"{cg:,}")
    other[name] = cq
    closed_pair = (closed_crossing(d, d, r), closed_crossing(d, f, r))
    sanity(f"closed_{name}", (cq, cg) == closed_pair, "the probe agrees with the closed form",
           operands=((cq, cg), closed_pair), relation="smaller" if name == "h200" else None)
sanity("lower_ridge_smaller_batch",
       other["a100"] < other["h200"] < mq and a100_peak / a100_bw < h200_peak / h200_bw < R,
       "a lower ridge is reached at a smaller batch", operands=(other["h200"], mq), relation="smaller")
