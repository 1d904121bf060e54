# numbook: alone, timeout=180, memory=16GiB
"""I.2.A05 — Timing a real matrix product on this CPU against its measured ceilings.

Reads the size of this machine's last-level cache from every source it has (the kernel's cache
hierarchy in /sys, glibc's sysconf) and sizes the memory-bound work by the largest reading: the
weights one decode token streams and the tensor the copy moves are each at least llc_factor times
that cache, so that neither can be served from it. Then measures this machine's practical ceilings
with servebench.ceilings (matmul_flops: the FLOP/s of a large square fp32 product; copy_bandwidth:
the bytes/s of the tensor copy), and times one decode token through the gate_proj of as many of
Llama 3 8B's layers as that takes, each a (1, d) @ (d, f) product in fp32 with its own weight, with
servebench.ceilings.median_time. The three are measured in alternating rounds, each the median of
ITERS timed iterations; every measured figure is the mean over the rounds of its per-round figure
(ratios formed within a round), with a 95% t interval over the rounds (numbook.check.estimate).
Its FLOPs are counted with FlopCounterMode and its bytes read from .nbytes, so its intensity is
exact; its FLOP/s and bytes/s are measured and stated only as bounds that hold over their interval.
"""

import glob
import math
import os
import platform
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from numbook.check import estimate, fact, given, sanity, value
from servebench.ceilings import copy_bandwidth, matmul_flops, median_time

CPU = torch.device("cpu")
FP32 = torch.float32
TIMED = "timed on this machine"
ROUNDS, ITERS = 5, 7    # alternating rounds; timed iterations of each measurement per round
LEVEL = 0.95            # the confidence level of the t intervals


def row(label, *cells, w=34, cw=16):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


def _size(text):
    """A cache size as /sys writes it: '32768K', '1M', or bytes."""
    text = text.strip()
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:].upper(), 1)
    return int(text.rstrip("KkMmGg")) * scale


def last_level_cache():
    """The last-level cache as each source on this machine reports it, in bytes: {source: bytes}.

    The kernel's hierarchy (/sys/devices/system/cpu/cpu*/cache/index*: the highest level of data or
    unified cache, summed over its distinct instances, as lscpu adds them up) and glibc's sysconf
    (from cpuid; on a virtual machine it can report the host's cache rather than the guest's share).
    """
    seen = {}
    for idx in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cache/index[0-9]*"):
        try:
            fields = [Path(idx, n).read_text().strip() for n in ("level", "type", "size", "shared_cpu_list")]
        except OSError:
            continue
        level, kind, size, shared = fields
        if kind in ("Data", "Unified") and size:
            seen.setdefault(int(level), {})[shared] = _size(size)
    found = {}
    if seen:
        found["/sys cache hierarchy"] = sum(seen[max(seen)].values())
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        # glibc's _SC_LEVEL{2,3,4}_CACHE_SIZE (191, 194, 197), which Python's table may not name
        levels = (("SC_LEVEL4_CACHE_SIZE", 197), ("SC_LEVEL3_CACHE_SIZE", 194), ("SC_LEVEL2_CACHE_SIZE", 191))
        for name, number in levels:
            try:
                size = os.sysconf(os.sysconf_names.get(name, number))
            except (OSError, ValueError):
                continue
            if size > 0:
                found["glibc sysconf"] = size
                break
    if not found:
        raise RuntimeError("this machine reports no cache size (no /sys cache hierarchy, no glibc sysconf): "
                           "the check cannot size its work beyond the last-level cache")
    return found


def counted(fn):
    with FlopCounterMode(display=False) as fc:
        out = fn()
    return out, fc.get_total_flops()


d = fact("llama3_8b_hidden", "d")
f = fact("llama3_8b_intermediate", "f")
n = given("n_big", 1536)
llc_factor = given("llc_factor", 4)                # the streamed bytes over the largest cache reading
threads = torch.get_num_threads()                  # as the runner gives it: not set here
print(f"torch threads: {threads}")
caches = last_level_cache()
llc = max(caches.values())
print("Last-level cache as this machine reports it")
for source, size in caches.items():
    row(source, f"{size / 2**20:,.0f} MiB")

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
x = torch.randn(1, d, generator=g)
w_bytes = torch.empty(f, d, device="meta").nbytes  # one layer's gate_proj weight in fp32
layers = max(1, math.ceil(llc_factor * llc / w_bytes))   # layers whose weights outsize the cache by the factor
Ws = [torch.randn(f, d, generator=g) for _ in range(layers)]   # nn.Linear's layout: (out, in); one per layer
W = Ws[0]
y, sk_flops = counted(lambda: F.linear(x, W))
sk_bytes = x.nbytes + W.nbytes + y.nbytes
sk_I = value("skinny_intensity", sk_flops / sk_bytes, unit="FLOP/B")
value("skinny_mflop", sk_flops / 1e6)
value("skinny_mb", sk_bytes / 1e6)
value("skinny_w_mib", W.nbytes / 2**20)
streamed = layers * sk_bytes                       # one token through each layer's gate_proj
copy_bytes = layers * w_bytes                      # the copied tensor: as large as the weights streamed
# a reading of this machine's caches, not a timing: the same in every run on this machine, so no interval
stream_over = value("stream_over_llc", layers * w_bytes / llc)
print(f"\nOne token through the gate_proj of {layers} layers streams {layers * w_bytes / 2**20:,.0f} MiB of weights,"
      f" {stream_over:.1f} times the largest cache reading; the copy moves a tensor of as many bytes")
sanity("work_outsizes_cache", layers * w_bytes >= llc_factor * llc and copy_bytes >= llc_factor * llc,
       "the weights streamed and the tensor copied are each at least llc_factor times the largest last-level "
       "cache reading", operands=(layers * w_bytes, llc_factor * llc), relation="at least")
print("\nThe two products (fp32), per layer")
row("product", "FLOPs", "bytes", "FLOP/byte")
row(f"({n}, {n}) @ ({n}, {n})", f"{big_flops:,}", f"{big_bytes:,}", f"{big_I:.1f}")
row(f"(1, {d}) @ ({d}, {f})", f"{sk_flops:,}", f"{sk_bytes:,}", f"{sk_I:.5f}")
sanity("big_closed", big_flops == 2 * n**3 and big_I == n / 6,
       "the square product does 2 n^3 FLOPs on 12 n^2 bytes: n / 6 FLOP per byte", operands=(big_I, n / 6))
sanity("skinny_closed", sk_flops == 2 * d * f and sk_bytes == 4 * (d + d * f + f) and sk_I < 0.5,
       "one token does 2 d f FLOPs on 4 (d + d f + f) bytes: just under half a FLOP per byte",
       operands=(sk_I, 0.5))

# -- the ceilings and the skinny product, measured in alternating rounds ------------------------------
# Each round measures the three in turn, each the median of ITERS timed iterations (after one warm-up):
# matmul_flops and copy_bandwidth from servebench.ceilings, the decode token with median_time. Every
# figure below is formed within a round (a ratio divides two medians of the same round, so a disturbance
# that slows the whole round cancels in it) and recorded as the mean over the rounds with a 95% t
# interval over them: n counts the timed iterations behind it, ITERS per round.
value("rounds", ROUNDS, fixed="the number of alternating measurement rounds: a choice of the check")
value("iters", ITERS, fixed="the timed iterations of each measurement in a round: a choice of the check")
value("ci_level", LEVEL, fixed="the confidence level of every interval of the check: a choice of the check")


def token():
    for w in Ws:
        F.linear(x, w)


peaks, bws, times = [], [], []
for _ in range(ROUNDS):
    peaks.append(matmul_flops(CPU, FP32, n=n, repeats=ITERS))
    bws.append(copy_bandwidth(CPU, nbytes=copy_bytes, repeats=ITERS))
    times.append(median_time(token, CPU, repeats=ITERS) / layers)   # per layer
per_round = {
    "peak_gflops": [p / 1e9 for p in peaks],
    "copy_gbs": [b / 1e9 for b in bws],
    "ridge": [p / b for p, b in zip(peaks, bws, strict=True)],
    "skinny_gflops": [sk_flops / t / 1e9 for t in times],
    "skinny_gbs": [sk_bytes / t / 1e9 for t in times],
    "skinny_ms": [t * 1e3 for t in times],
    "flops_ratio": [sk_flops / t / p for t, p in zip(times, peaks, strict=True)],
    "bw_ratio": [sk_bytes / t / b for t, b in zip(times, bws, strict=True)],
}
per_round["ridge_over_skinny"] = [r / sk_I for r in per_round["ridge"]]
per_round["big_over_ridge"] = [big_I / r for r in per_round["ridge"]]
UNITS = {"peak_gflops": "GFLOP/s", "copy_gbs": "GB/s", "ridge": "FLOP/B", "skinny_gflops": "GFLOP/s",
         "skinny_gbs": "GB/s", "skinny_ms": "ms"}
N_ITERS = ROUNDS * ITERS
est = {name: estimate(name, xs, unit=UNITS.get(name), n=N_ITERS, repeated="rounds", level=LEVEL,
                      measured=f"timed on this machine: the median of {ITERS} iterations in each of {ROUNDS} rounds")
       for name, xs in per_round.items()}
peak, bw, ridge = (float(est[k]) for k in ("peak_gflops", "copy_gbs", "ridge"))
flops_ratio, bw_ratio = est["flops_ratio"], est["bw_ratio"]


def show(label, name, fmt, unit=""):
    e = est[name]
    row(label, f"{format(e.point, fmt)}{unit}", f"{format(e.lo, fmt)} to {format(e.hi, fmt)}", w=40, cw=16)


print(f"\nMeasured in {ROUNDS} rounds, each the median of {ITERS} timed iterations:")
print(f"the mean over the rounds and its {est['ridge'].kind}")
row("", "mean", f"{LEVEL:.0%} CI", w=40, cw=16)
show("matmul_flops (GFLOP/s)", "peak_gflops", ".1f")
show("copy_bandwidth (GB/s)", "copy_gbs", ".1f")
show("ridge = peak / bandwidth (FLOP/byte)", "ridge", ".1f")
print("One token through gate_proj, per layer")
show("time (ms)", "skinny_ms", ".2f")
show("achieved (GFLOP/s)", "skinny_gflops", ".2f")
show("achieved (GB/s)", "skinny_gbs", ".1f")
show("share of the measured peak", "flops_ratio", ".3f")
show("bytes/s over the copy bandwidth", "bw_ratio", ".2f")
show("ridge over its intensity", "ridge_over_skinny", ".1f")
show("square product's intensity over ridge", "big_over_ridge", ".1f")
print("In each round")
row("  bytes/s over copy bandwidth", *(f"{r:.2f}" for r in per_round["bw_ratio"]), w=32, cw=8)
row("  ridge (FLOP/byte)", *(f"{r:.1f}" for r in per_round["ridge"]), w=32, cw=8)

lo_ridge, hi_ridge = est["ridge"].lo, est["ridge"].hi
sanity("skinny_below_ridge", sk_I < lo_ridge and hi_ridge < big_I,
       "the skinny product's intensity is below the measured ridge, the square product's above it, over the "
       "ridge's whole interval", operands=(sk_I, lo_ridge), relation=("smaller", "larger"))
sanity("skinny_far_from_peak", flops_ratio.hi < 0.5,
       "the skinny product reaches less than half the square product's FLOP/s, over the whole interval",
       operands=(flops_ratio.hi, 0.5), relation="half")
sanity("skinny_at_bandwidth", bw_ratio.lo >= 0.25 and bw_ratio.hi <= 5,
       "its bytes/s are between 0.25 and 5 times the copy bandwidth, over the whole interval",
       operands=(bw_ratio.lo, bw_ratio.hi))
sanity("rounds_at_bandwidth", all(0.25 <= r <= 5 for r in per_round["bw_ratio"]),
       "in every round its bytes/s are between 0.25 and 5 times the copy bandwidth of the same round",
       operands=(min(per_round["bw_ratio"]), max(per_round["bw_ratio"])))

# -- variation: the batch at which gate_proj in fp32 would cross this machine's ridge ---------------------
# fp32 intensity of (m, d) @ (d, f): 2 m d f / (4 (m d + d f + m f)); solve for the first m at the ridge


def crossing(ridge):
    """The first batch m at which (m, d) @ (d, f) in fp32 reaches the ridge: 2 m d f / (4 (m d + d f + m f))."""
    return next(m for m in range(1, 1 << 20) if 2 * m * d * f / (4 * (m * d + d * f + m * f)) >= ridge)


m_cpu = estimate("m_star_cpu", [crossing(r) for r in per_round["ridge"]], n=N_ITERS, repeated="rounds", level=LEVEL,
                 measured=f"from the ceilings measured in each of {ROUNDS} rounds on this machine")
print(f"\nVariation: gate_proj in fp32 reaches this machine's ridge at m = {m_cpu:.1f} "
      f"(mean over the rounds; {LEVEL:.0%} CI {m_cpu.lo:.1f} to {m_cpu.hi:.1f})")
