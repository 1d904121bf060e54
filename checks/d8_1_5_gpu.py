# numbook: requires=cuda, timeout=600, memory=16GiB
"""8.1.5 — Decode on a GPU: achieved HBM bandwidth against the datasheet.

Builds the benchmark's GPU-sized model (servebench preset "gpu", bf16) on CUDA, captures one
decode step of static shape (servebench.StaticDecode: batch B, every sequence at context L) as
a CUDA graph, replays it, and divides the bytes the step must move (servebench.roofline.decode_cost)
by its time: the achieved memory bandwidth, against the device's datasheet peak from the facts file.
"""

import sys

import torch

from numbook.check import fact, given, sanity, value
from servebench import DecoderLM, decode_cost, preset, ridge_point
from servebench.static_decode import StaticDecode

if not torch.cuda.is_available():
    sys.exit("checks/d8_1_5_gpu.py needs CUDA: torch sees no GPU on this machine (a CPU build shows the frozen result)")

cfg = preset("gpu").model
PEAK_TBS = fact("h200_sxm_hbm_tbs", "hbm_tbs")
PEAK_TFLOPS = fact("h200_sxm_bf16_dense_tflops", "peak_tflops")
L = given("context", 512)
BATCHES = (given("batch_small", 1), given("batch_large", 64))
REPS = given("replays", 200)
model = DecoderLM(cfg, dtype="bf16", device="cuda", max_slots=1)
value("device", torch.cuda.get_device_name(0))

# the static step computes what the served model computes
check = StaticDecode(model, batch=2, context=L)
eager = check.step().float().clone()
check.capture()
check.replay()
torch.cuda.synchronize()
graph_diff = value("graph_vs_eager", float((check.logits.float() - eager).abs().max()))
sanity(
    "graph_matches_eager", graph_diff < 0.1, "the replayed graph computes the eager step", operands=(graph_diff, 0.1)
)

ratios = {}
for b in BATCHES:
    sd = StaticDecode(model, batch=b, context=L)
    sd.capture()
    for _ in range(10):
        sd.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(REPS):
        sd.replay()
    end.record()
    torch.cuda.synchronize()
    step_s = start.elapsed_time(end) / 1e3 / REPS
    cost = decode_cost(cfg, "bf16", batch=b, context=L)
    achieved = cost.bytes / step_s
    ratios[b] = achieved / (PEAK_TBS * 1e12)
    key = "small" if b == BATCHES[0] else "large"
    value(f"step_us_{key}", step_s * 1e6)
    value(f"bytes_mb_{key}", cost.bytes / 1e6)
    value(f"achieved_tbs_{key}", achieved / 1e12)
    value(f"share_of_peak_{key}", ratios[b])
    value(f"intensity_{key}", cost.intensity)
    print(
        f"B={b}, L={L}: {step_s * 1e6:.1f} us per step, {cost.bytes / 1e6:.1f} MB -> {achieved / 1e12:.2f} TB/s, "
        f"{ratios[b]:.0%} of {PEAK_TBS} TB/s; {cost.intensity:.1f} FLOP/B against a ridge of "
        f"{ridge_point(PEAK_TFLOPS * 1e12, PEAK_TBS * 1e12):.0f}"
    )
    sanity(
        f"memory_bound_{key}",
        cost.intensity < ridge_point(PEAK_TFLOPS * 1e12, PEAK_TBS * 1e12),
        operands=(cost.intensity, ridge_point(PEAK_TFLOPS * 1e12, PEAK_TBS * 1e12)),
    )
    sanity(
        f"below_peak_{key}",
        ratios[b] < 1.0,
        "no step moves its bytes faster than the datasheet allows",
        operands=(ratios[b], 1.0),
    )
