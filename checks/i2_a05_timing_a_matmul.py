# numbook: alone, timeout=120
"""I.2.A05 — Timing a real matrix product on this CPU against its measured ceilings.

Measures this machine's practical ceilings with servebench.ceilings (matmul_flops: the FLOP/s of
a large square fp32 product; copy_bandwidth: the bytes/s of a large tensor copy), then times one
decode token through Llama 3 8B's gate_proj in fp32, a (1, d) @ (d, f) product, with
servebench.ceilings.best_time. Its FLOPs are counted with FlopCounterMode and its bytes read from
.nbytes, so its intensity is exact; its FLOP/s and bytes/s are measured and stated only as bounds.
The variation times q_proj, whose weight is a quarter of the size.
"""

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from numbook.check import fact, given, sanity, value
from servebench.ceilings import best_time, copy_bandwidth, matmul_flops

CPU = torch.device("cpu")
FP32 = torch.float32
TIMED = "timed on this machine"
ROUNDS, REPEATS = 3, 7


def row(label, *cells, w=34, cw=16):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


def counted(fn):
    with FlopCounterMode(display=False) as fc:
        out = fn()
    return out, fc.get_total_flops()


d = fact("llama3_8b_hidden", "d")
f = fact("llama3_8b_intermediate", "f")
n = given("n_big", 1536)
copy_mb = given("copy_mb", 256)
threads = torch.get_num_threads()                  # as the runner gives it: not set here
print(f"torch threads: {threads}")

# -- the two products on paper: FLOPs counted, bytes from .nbytes -----------------------------------
a = torch.empty(n, n, device="meta")
_, big_flops = counted(lambda: a @ a)
big_bytes = 3 * a.nbytes                           # two operands read, one result written
big_I = value("big_intensity", big_flops / big_bytes)
value("n_over_big_intensity", n / big_I,
      fixed="fp32 square product: 3 n^2 elements of 4 bytes for n^3 multiply-adds of 2 FLOPs, at any n")
value("flops_per_mac", big_flops / n**3, fixed="FlopCounterMode counts a multiply-add as two FLOPs: its convention")
value("fp32_bytes", a.element_size(), fixed="bytes of an fp32 element: a property of the dtype")
value("big_gflop", big_flops / 1e9)
value("big_mb", big_bytes / 1e6)

g = torch.Generator().manual_seed(0)
W = torch.randn(f, d, generator=g)                 # nn.Linear's layout: (out, in)
x = torch.randn(1, d, generator=g)
y, sk_flops = counted(lambda: F.linear(x, W))
sk_bytes = x.nbytes + W.nbytes + y.nbytes
sk_I = value("skinny_intensity", sk_flops / sk_bytes, unit="FLOP/B")
value("skinny_mflop", sk_flops / 1e6)
value("skinny_mb", sk_bytes / 1e6)
value("skinny_w_mib", W.nbytes / 2**20)
print("\nThe two products (fp32)")
row("product", "FLOPs", "bytes", "FLOP/byte")
row(f"({n}, {n}) @ ({n}, {n})", f"{big_flops:,}", f"{big_bytes:,}", f"{big_I:.1f}")
row(f"(1, {d}) @ ({d}, {f})", f"{sk_flops:,}", f"{sk_bytes:,}", f"{sk_I:.5f}")
sanity("big_closed", big_flops == 2 * n**3 and big_I == n / 6,
       "the square product does 2 n^3 FLOPs on 12 n^2 bytes: n / 6 FLOP per byte", operands=(big_I, n / 6))
sanity("skinny_closed", sk_flops == 2 * d * f and sk_bytes == 4 * (d + d * f + f) and sk_I < 0.5,
       "one token does 2 d f FLOPs on 4 (d + d f + f) bytes: just under half a FLOP per byte",
       operands=(sk_I, 0.5))

# -- the ceilings and the skinny product, measured in alternating rounds ------------------------------
# Other work on a shared machine only ever slows a run down, so each figure keeps its best round:
# the highest matmul_flops and copy_bandwidth (each the median of its own repeats), the shortest time.
peaks, bws, times = [], [], []
value("rounds", ROUNDS, fixed="the number of alternating measurement rounds: a choice of the check")
for _ in range(ROUNDS):
    peaks.append(matmul_flops(CPU, FP32, n=n))
    bws.append(copy_bandwidth(CPU, nbytes=copy_mb * 10**6))
    times.append(best_time(lambda: F.linear(x, W), CPU, repeats=REPEATS))
peak = value("peak_gflops", max(peaks) / 1e9, measured=TIMED)
bw = value("copy_gbs", max(bws) / 1e9, measured=TIMED)
t = min(times)
value("copy_moved_mb", 2 * copy_mb)
ridge = value("ridge", peak / bw, measured=TIMED)
print(f"\nCeilings measured on this machine (servebench.ceilings, best of {ROUNDS} rounds)")
row("matmul_flops", f"{peak:.1f} GFLOP/s")
row("copy_bandwidth", f"{bw:.1f} GB/s")
row("ridge = peak / bandwidth", f"{ridge:.1f} FLOP/byte")

sk_gflops = value("skinny_gflops", sk_flops / t / 1e9, measured=TIMED)
sk_gbs = value("skinny_gbs", sk_bytes / t / 1e9, measured=TIMED)
value("skinny_ms", t * 1e3, measured=TIMED)
flops_ratio = value("flops_ratio", sk_gflops / peak, measured=TIMED)
bw_ratio = value("bw_ratio", sk_gbs / bw, measured=TIMED)
ridge_over = value("ridge_over_skinny", ridge / sk_I, measured=TIMED)
big_over = value("big_over_ridge", big_I / ridge, measured=TIMED)
print(f"\nOne token through gate_proj (best of {ROUNDS} x {REPEATS} runs)")
row("time", f"{t * 1e3:.2f} ms")
row("achieved", f"{sk_gflops:.2f} GFLOP/s", f"{sk_gbs:.1f} GB/s")
row("share of the measured peak", f"{flops_ratio:.1%}")
row("bytes/s over the copy bandwidth", f"{bw_ratio:.2f}")
row("ridge over its intensity", f"{ridge_over:.1f}")
row("square product's intensity over ridge", f"{big_over:.1f}")

sanity("skinny_below_ridge", sk_I < ridge < big_I,
       "the skinny product's intensity is below the measured ridge, the square product's above it",
       operands=(sk_I, ridge), relation=("smaller", "larger"))
sanity("skinny_far_from_peak", flops_ratio < 0.5,
       "the skinny product reaches less than half the square product's FLOP/s", operands=(sk_gflops, peak),
       relation="half")
sanity("skinny_at_bandwidth", 0.25 <= bw_ratio <= 5,
       "its bytes/s are within a small factor of the copy bandwidth", operands=(sk_gbs, bw))

# -- variation: the batch at which gate_proj in fp32 would cross this machine's ridge ---------------------
# fp32 intensity of (m, d) @ (d, f): 2 m d f / (4 (m d + d f + m f)); solve for the first m at the ridge
m_cpu = next(m for m in range(1, 1 << 20) if 2 * m * d * f / (4 * (m * d + d * f + m * f)) >= ridge)
value("m_star_cpu", m_cpu, measured="from the ceilings measured on this machine")
print(f"\nVariation: gate_proj in fp32 reaches this machine's ridge at m = {m_cpu}")
