"""III.1.A03 — The memory of the (B, H, T, T) score tensor, and why fused attention never holds it.

The bytes of the scores at Llama 3 8B's context come from .nbytes of meta tensors (fp32 and bf16),
compared with Q and K, and the bytes the explicit route would keep for the backward come from the
autograd saved-tensor hooks on meta tensors. Then, at a moderate length on real CPU tensors,
torch.profiler (profile_memory=True) records every allocation of the explicit
softmax(QK^T / sqrt(Dh)) V and of F.scaled_dot_product_attention: the explicit route allocates
(B, H, T, T) buffers, the fused flash-attention kernel allocates nothing near that size. Each route is
profiled in RUNS runs, one call each; every measured figure is the mean over the runs with a 95% t
interval over them (numbook.check.estimate), and the check asserts that the runs allocate alike.
"""

import math

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

from numbook.check import estimate, fact, given, sanity, value

MB, GB, MiB, GiB = 10**6, 10**9, 2**20, 2**30
# The fused kernel's working buffers are per thread; capping the threads keeps the measured bounds
# true on a machine with many cores (the explicit route's allocations do not depend on threads).
MAX_THREADS = value("max_threads", 4, fixed="a choice of this check: the cap on torch's intra-op threads")
torch.set_num_threads(min(torch.get_num_threads(), MAX_THREADS))


def row(label, *cells, w=40, cw=16):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


d = fact("llama3_8b_hidden", "d", nudge=32)          # nudged by a head count: the heads must divide it
H = fact("llama3_8b_heads", "H", nudge=32)           # doubled: it must divide d, and H_kv must divide it
Hkv = fact("llama3_8b_kv_heads", "Hkv", nudge=8)     # doubled: it must divide H
layers = fact("llama3_8b_layers", "layers")
T = fact("llama3_8b_context", "T")
B = given("B", 1)
Dh = value("Dh", d // H)
value("group", H // Hkv)

# -- Step 1: the analytic bytes, from meta tensors ---------------------------------------------------
meta = dict(device="meta")
S32 = torch.empty(B, H, T, T, dtype=torch.float32, **meta)
S16 = torch.empty(B, H, T, T, dtype=torch.bfloat16, **meta)
Q16 = torch.empty(B, H, T, Dh, dtype=torch.bfloat16, **meta)
K16 = torch.empty(B, Hkv, T, Dh, dtype=torch.bfloat16, **meta)
value("score_shape", S32.shape)
value("score_numel", S32.numel())
s32 = value("score_fp32_bytes", S32.nbytes)
s16 = value("score_bf16_bytes", S16.nbytes)
value("score_fp32_gib", s32 / GiB)
value("score_fp32_gb", s32 / GB)
value("score_bf16_gib", s16 / GiB)
value("score_bf16_gb", s16 / GB)
value("q_bf16_mib", Q16.nbytes / MiB)
value("k_bf16_mib", K16.nbytes / MiB)
s_over_q = value("score_over_q", S16.nbytes / Q16.nbytes)
s_over_k = value("score_over_k", S16.nbytes / K16.nbytes)
print(f"Llama 3 8B, one layer, B = {B}, T = {T:,} (meta tensors: shapes, no storage)")
row("tensor", "shape", "bytes", "GiB")
row("scores fp32", str(tuple(S32.shape)), f"{s32:,}", f"{s32 / GiB:.3f}")
row("scores bf16", str(tuple(S16.shape)), f"{s16:,}", f"{s16 / GiB:.3f}")
row("Q bf16", str(tuple(Q16.shape)), f"{Q16.nbytes:,}", f"{Q16.nbytes / GiB:.4f}")
row("K bf16", str(tuple(K16.shape)), f"{K16.nbytes:,}", f"{K16.nbytes / GiB:.4f}")
row("scores / Q", f"{s_over_q:.1f}")
row("scores / K", f"{s_over_k:.1f}")
sanity("score_bytes_closed_form", s32 == B * H * T * T * 4 and s16 * 2 == s32,
       ".nbytes equals B H T^2 times 4 bytes in fp32, and bf16 is half", operands=(s32, B * H * T * T * 4),
       relation=("equal", "half"))
sanity("score_over_q_is_T_over_Dh", math.isclose(s_over_q, T / Dh) and math.isclose(s_over_k, T / Dh * H / Hkv),
       "the scores are T / Dh times Q, and T / Dh times H / H_kv times K", operands=(s_over_q, T / Dh),
       relation=("larger", "smaller", "grows", "equal"))

# -- Step 2: what the explicit route keeps for the backward, per layer, from the saved-tensor hooks -----
saved = []


def pack(t):
    saved.append((tuple(t.shape), t.nbytes))
    return t


qm, km, vm = (torch.empty(B, H, T, Dh, dtype=torch.bfloat16, device="meta", requires_grad=True)
              for _ in range(3))
with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
    _ = (qm @ km.transpose(-2, -1) / math.sqrt(Dh)).softmax(dim=-1) @ vm
largest_saved = value("saved_largest_bytes", max(nb for _, nb in saved))
n_square = value("saved_square_count", sum(1 for sh, _ in saved if sh[-2:] == (T, T)))
sanity("backward_keeps_scores", largest_saved == s16 and n_square >= 1,
       "autograd saves a (B, H, T, T) tensor for the backward of the explicit route",
       operands=(largest_saved, s16), relation="largest")
all_layers = value("saved_all_layers_gb", layers * largest_saved / GB)
value("saved_all_layers_gib", layers * largest_saved / GiB)
h100_mib = fact("h100_sxm_memory_reported_mib", "h100_mib")   # what the device reports (nvidia-smi)
h100_cuda_mib = fact("h100_sxm_memory_cuda_total_mib", "h100_cuda_mib")   # the CUDA runtime's total
value("h100_smi_minus_cuda_mib", h100_mib - h100_cuda_mib)
h100_bytes = h100_cuda_mib * 2**20   # a process allocates from what the CUDA runtime reports, not nvidia-smi's figure
h100_gb = value("h100_gb", h100_bytes / GB)
value("h100_smi_gb", h100_mib * 2**20 / GB)
sanity("all_layers_exceed_h100", layers * largest_saved > h100_mib * 2**20,
       "one saved score tensor per layer exceeds an H100's memory, even nvidia-smi's larger figure",
       operands=(all_layers, h100_mib * 2**20 / GB), relation="larger")
value("all_layers_over_h100", all_layers / h100_gb)

# The hooks list the softmax's output more than once (the batched product saves a view of it): on real
# tensors, every saved (T, T) tensor shares one storage, so one per layer counts it once.
small, views = 16, []
qs, ks, vs = (torch.randn(1, 2, small, 8, requires_grad=True) for _ in range(3))


def pack_real(t):
    if t.shape[-2:] == (small, small):
        views.append(t.untyped_storage().data_ptr())
    return t


with torch.autograd.graph.saved_tensors_hooks(pack_real, lambda t: t):
    _ = (qs @ ks.transpose(-2, -1) / math.sqrt(8)).softmax(dim=-1) @ vs
value("saved_square_listed", len(views),
      fixed="what autograd saves for the explicit route's backward: a property of its "
      "operations (softmax and the batched product each keep the scores), not of the sizes")
sanity("saved_views_share_storage", len(views) >= 2 and len(set(views)) == 1,
       "the saved (T, T) tensors, listed more than once, are views of one storage",
       operands=(len(set(views)), 1), relation="equal")
print(f"\nSaved for the backward of the explicit route (bf16): {len(saved)} tensors")
print(f"  {n_square} of shape (B, H, T, T), the largest {largest_saved:,} bytes")
print(f"  one per layer, {layers} layers: {all_layers:.1f} GB, against the {h100_gb:.2f} GB an H100 reports")

# -- Step 3: measured, at a moderate length on real tensors --------------------------------------------
Tm = given("T_meas", 1024)
g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(B, H, Tm, Dh, generator=g) for _ in range(3))
score_m = value("meas_score_bytes", torch.empty(B, H, Tm, Tm, device="meta").nbytes)
out_m = value("meas_out_bytes", torch.empty(B, H, Tm, Dh, device="meta").nbytes)
lse_m = value("meas_lse_bytes", torch.empty(B, H, Tm, device="meta").nbytes)
value("meas_score_mib", score_m / MiB)
value("meas_out_mib", out_m / MiB)
value("out_over_score", out_m / score_m)


def explicit():
    s = q @ k.transpose(-2, -1) / math.sqrt(Dh)
    a = s.softmax(dim=-1)
    return a @ v


def fused():
    return F.scaled_dot_product_attention(q, k, v)


def lean():
    """The explicit route without the extra copies: scale Q (small), then a softmax in place."""
    s = (q * (1 / math.sqrt(Dh))) @ k.transpose(-2, -1)
    s -= s.amax(dim=-1, keepdim=True)
    s.exp_()
    s /= s.sum(dim=-1, keepdim=True)
    return s @ v


def measure(fn):
    """Run fn under the profiler; return its output, every allocation (bytes > 0) and the peak above the start.

    The events are read through the profiler's kineto results (not a public torch API), as checks/_memory.py does.
    """
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = fn()
    events = prof.profiler.kineto_results.events()
    mem = sorted((e for e in events if e.name() == "[memory]"), key=lambda e: e.start_ns())
    cur = peak = 0
    for e in mem:
        cur += e.nbytes()
        peak = max(peak, cur)
    ops = {e.name() for e in events if e.name() != "[memory]"}
    return out, [e.nbytes() for e in mem if e.nbytes() > 0], peak, ops


RUNS, LEVEL = 5, 0.95     # profiled runs of each route; the confidence level of the t intervals
value("runs", RUNS, fixed="the number of profiled runs of each route: a choice of the check")
value("ci_level", LEVEL, fixed="the confidence level of every interval of the check: a choice of the check")
runs = []
for _ in range(RUNS):
    run = {"explicit": measure(explicit), "fused": measure(fused), "lean": measure(lean)}
    with sdpa_kernel(SDPBackend.MATH):        # the same call, forced onto PyTorch's math fallback
        run["math"] = measure(fused)
    runs.append(run)
o_exp, allocs_exp, peak_exp, ops_exp = runs[0]["explicit"]       # the first run, printed below
o_fused, allocs_fused, peak_fused, ops_fused = runs[0]["fused"]
o_lean, allocs_lean, peak_lean, _ = runs[0]["lean"]
_, allocs_math, peak_math, _ = runs[0]["math"]
same = all([r[k][1:3] for r in runs] == [runs[0][k][1:3]] * RUNS for k in runs[0])
sanity("same_every_run", same, "every run of each route makes the same allocations and reaches the same peak",
       operands=(sum(len(r[k][1]) for r in runs for k in r), RUNS * sum(len(runs[0][k][1]) for k in runs[0])),
       relation="equal")
MEAS = f"profiled on this machine (torch.profiler, profile_memory=True): one call in each of {RUNS} runs"


def measured(name, per_run, unit=None):
    """A figure of each run, recorded as the mean over the runs with its 95% t interval (one call per run)."""
    return estimate(name, [per_run(r) for r in runs], unit=unit, n=RUNS, level=LEVEL, measured=MEAS)


largest_exp = measured("explicit_largest_bytes", lambda r: max(r["explicit"][1]), unit="bytes")
largest_fused = measured("fused_largest_bytes", lambda r: max(r["fused"][1]), unit="bytes")
peak_exp_over = measured("explicit_peak_over_score", lambda r: r["explicit"][2] / score_m)
peak_fused_over = measured("fused_peak_over_score", lambda r: r["fused"][2] / score_m)
largest_fused_over = measured("fused_largest_over_score", lambda r: max(r["fused"][1]) / score_m)
n_exp_square = value("explicit_score_allocs", sum(1 for a in allocs_exp if a == score_m),
                     fixed="the explicit route writes three (B, H, T, T) tensors: Q K^T, the scaling, the softmax")
diff = value("fused_vs_explicit", (o_fused - o_exp).abs().max(),
             fixed="a rounding difference between two fp32 kernels: fp32's precision sets its size, not the inputs")
kernel = "aten::_scaled_dot_product_flash_attention_for_cpu"

print(f"\nMeasured on real fp32 tensors: B = {B}, H = {H}, T = {Tm:,}, D_h = {Dh}")
print(f"  the scores would take {score_m:,} bytes")
print(f"  each route profiled in {RUNS} runs; the same allocations and peak in every run: {same}")
row("route", "largest alloc", "peak", "peak / scores")
row("explicit softmax(QK^T/sqrt(Dh))V", f"{max(allocs_exp):,}", f"{peak_exp:,}", f"{peak_exp / score_m:.3f}")
row("F.scaled_dot_product_attention", f"{max(allocs_fused):,}", f"{peak_fused:,}", f"{peak_fused / score_m:.3f}")
row("explicit, scaled Q and in-place softmax", f"{max(allocs_lean):,}", f"{peak_lean:,}",
    f"{peak_lean / score_m:.3f}")
row("  the same, math backend", f"{max(allocs_math):,}", f"{peak_math:,}", f"{peak_math / score_m:.3f}")
print(f"  explicit allocations: {', '.join(f'{a:,}' for a in allocs_exp if a > 1024)}")
print(f"  fused allocations:    {', '.join(f'{a:,}' for a in allocs_fused)}")
print(f"  fused kernel seen by the profiler: {kernel in ops_fused}; max |fused - explicit| = {diff:.1e}")

sanity("explicit_allocates_scores", largest_exp.lo >= score_m and n_exp_square >= 2,
       "the explicit route allocates (B, H, T, T) buffers", operands=(largest_exp.lo, score_m), relation="largest")
sanity("explicit_peak_two_scores", peak_exp_over.lo >= 2,
       "the explicit route holds two score-sized tensors at once", operands=(peak_exp_over.lo * score_m, 2 * score_m))
sanity("fused_largest_is_output", all(max(r["fused"][1]) == out_m for r in runs) and largest_fused.hi < score_m,
       "the fused kernel's largest allocation is its (B, H, T, Dh) output, far below the scores",
       operands=(largest_fused.hi, out_m), relation="largest")
sanity("fused_peak_small", peak_fused_over.hi < 1 / 4, "the fused kernel peaks under a quarter of the scores",
       operands=(peak_fused_over.hi * score_m, score_m / 4))
sanity("fused_is_flash_kernel", kernel in ops_fused and kernel not in ops_exp,
       "on CPU, F.scaled_dot_product_attention runs the fused flash-attention kernel", relation="larger")
peak_lean_over = measured("lean_peak_over_score", lambda r: r["lean"][2] / score_m)
n_lean = value("lean_score_allocs", sum(1 for a in allocs_lean if a == score_m),
               fixed="the lean route writes one (B, H, T, T) tensor, the product, and works on it in place")
diff_lean = (o_lean - o_exp).abs().max().item()
sanity("lean_one_buffer", n_lean == 1 and peak_lean_over.lo >= 1 and peak_lean_over.hi < 1.5 and diff_lean < 1e-5,
       "scaling Q and a softmax in place leave one score-sized buffer, still a full one, and peak under 1.5 times "
       "the scores", operands=(peak_lean_over.hi * score_m, 1.5 * score_m))
largest_math = measured("math_largest_bytes", lambda r: max(r["math"][1]), unit="bytes")
sanity("math_backend_materialises", largest_math.lo >= score_m and all(max(r["math"][1]) >= score_m for r in runs),
       "forced onto the math backend, the same call allocates a (B, H, T, T) buffer in every run",
       operands=(largest_math.lo, score_m))
sanity("fused_matches_explicit", diff < 1e-5, "both routes give the same output", operands=(float(diff), 1e-5))
# what the kernel keeps besides the output: one log-sum-exp per row, (B, H, T) in fp32
o2, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)[:2]
value("lse_shape", lse.shape)
sanity("lse_allocated", lse.nbytes == lse_m and lse_m in allocs_fused,
       "the kernel allocates one fp32 log-sum-exp per query row, (B, H, T)", operands=(lse.nbytes, lse_m))

# -- Variation: the context at which one layer's scores pass an H100's memory ---------------------------


def first_T_over(limit, dtype):
    """Smallest T whose (B, H, T, T) meta tensor of this dtype takes more than limit bytes (bisection)."""
    lo, hi = 1, 1 << 22
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if torch.empty(B, H, mid, mid, dtype=dtype, device="meta").nbytes > limit:
            hi = mid
        else:
            lo = mid
    return hi


T_over16 = value("T_over_h100_bf16", first_T_over(h100_bytes, torch.bfloat16))
T_over32 = value("T_over_h100_fp32", first_T_over(h100_bytes, torch.float32))
closed16 = math.isqrt(h100_bytes // (B * H * 2)) + 1
closed32 = math.isqrt(h100_bytes // (B * H * 4)) + 1
value("T_over_bf16_ctx", T_over16 / T)
print(f"\nVariation: one layer's scores pass {h100_gb:.2f} GB from T = {T_over16:,} (bf16), {T_over32:,} (fp32)")
sanity("threshold_closed_form", T_over16 == closed16 and T_over32 == closed32,
       "the probe agrees with floor(sqrt(limit / (B H bytes))) + 1", operands=(T_over16, closed16), relation="equal")
