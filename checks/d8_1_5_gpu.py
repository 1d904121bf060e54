# numbook: requires=cuda, timeout=600, memory=16GiB
"""8.1.5 — Decode on a GPU: achieved HBM bandwidth against the datasheet.

Builds the benchmark's GPU-sized model (servebench preset "gpu", bf16) on CUDA, captures one
decode step of static shape (servebench.StaticDecode: batch B, every sequence at context L) as
a CUDA graph, replays it, and divides the bytes the step must move (servebench.roofline.decode_cost)
by its time: the achieved memory bandwidth, against the device's datasheet peak from the facts file.

What only the GPU can say goes through measurement(): the device's name, how far the replayed graph
is from the eager step, and the time of one step at each batch. Those raw numbers are what
`numbook freeze` writes to checks/frozen/; everything after them (bytes, bandwidths, shares of the
peak, the sanities) is plain code, so a build without a GPU derives it again from the frozen
measurements, and a forged time that breaks a sanity fails that build.
"""

import sys
from functools import cache

import torch

from numbook.check import fact, given, measurement, replaying, sanity, value
from servebench import DecoderLM, decode_cost, preset, ridge_point
from servebench.static_decode import StaticDecode

if not replaying() and not torch.cuda.is_available():
    sys.exit("checks/d8_1_5_gpu.py needs CUDA: torch sees no GPU on this machine (a CPU build replays its frozen "
             "measurements)")

cfg = preset("gpu").model
PEAK_TBS = fact("h200_sxm_hbm_tbs", "hbm_tbs")
PEAK_TFLOPS = fact("h200_sxm_bf16_dense_tflops", "peak_tflops")
L = given("context", 512)
BATCHES = (given("batch_small", 1), given("batch_large", 64))
REPS = given("replays", 200)


@cache
def gpu_model() -> DecoderLM:
    """The GPU-sized model on CUDA: built on the first measurement, never in a replay."""
    return DecoderLM(cfg, dtype="bf16", device="cuda", max_slots=1)


def graph_vs_eager() -> float:
    """The largest difference between the logits of the replayed graph and of the eager step."""
    check = StaticDecode(gpu_model(), batch=2, context=L)
    eager = check.step().float().clone()
    check.capture()
    check.replay()
    torch.cuda.synchronize()
    return float((check.logits.float() - eager).abs().max())


def step_seconds(b: int) -> float:
    """Seconds per decode step at batch ``b``: REPS replays of the captured graph, timed by CUDA events."""
    sd = StaticDecode(gpu_model(), batch=b, context=L)
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
    return start.elapsed_time(end) / 1e3 / REPS


value("device", measurement("device_name", lambda: torch.cuda.get_device_name(0)))

# the static step computes what the served model computes
graph_diff = value("graph_vs_eager", measurement("graph_max_abs_diff", graph_vs_eager),
                   measured="logits of a replayed CUDA graph against the eager step")
sanity(
    "graph_matches_eager", graph_diff < 0.1, "the replayed graph computes the eager step", operands=(graph_diff, 0.1)
)

ridge = ridge_point(PEAK_TFLOPS * 1e12, PEAK_TBS * 1e12)
ratios = {}
for b in BATCHES:
    key = "small" if b == BATCHES[0] else "large"
    step_s = measurement(f"step_s_{key}", lambda b=b: step_seconds(b), unit="s")
    cost = decode_cost(cfg, "bf16", batch=b, context=L)
    achieved = cost.bytes / step_s
    ratios[b] = achieved / (PEAK_TBS * 1e12)
    value(f"step_us_{key}", step_s * 1e6, measured="one decode step, timed by CUDA events")
    value(f"bytes_mb_{key}", cost.bytes / 1e6)
    value(f"achieved_tbs_{key}", achieved / 1e12, measured="bytes moved over a timed step")
    value(f"share_of_peak_{key}", ratios[b], measured="bytes moved over a timed step, over the datasheet peak")
    value(f"intensity_{key}", cost.intensity)
    print(
        f"B={b}, L={L}: {step_s * 1e6:.1f} us per step, {cost.bytes / 1e6:.1f} MB -> {achieved / 1e12:.2f} TB/s, "
        f"{ratios[b]:.0%} of {PEAK_TBS} TB/s; {cost.intensity:.1f} FLOP/B against a ridge of {ridge:.0f}"
    )
    sanity(f"memory_bound_{key}", cost.intensity < ridge, operands=(cost.intensity, ridge))
    sanity(
        f"below_peak_{key}",
        ratios[b] < 1.0,
        "no step moves its bytes faster than the datasheet allows",
        operands=(ratios[b], 1.0),
    )
