# numbook: alone
"""8.1.2 — Roofline for prefill and decode.

Counts FLOPs and bytes of a prefill and of a decode step for the benchmark's GPU-sized model
(servebench preset "gpu", bf16) with servebench.roofline, places them against the
datasheet ceilings of an H100 SXM, and finds where decode stops being memory bound. Then it
times decode steps of the CPU-sized model on this machine against the roofline drawn from
ceilings measured here.
"""

import dataclasses
import time
from fractions import Fraction

import torch
from torch.utils.flop_counter import FlopCounterMode

from numbook.check import estimate, given, sanity, value
from servebench import (
    DecoderLM,
    critical_decode_batch,
    decode_cost,
    decode_terms,
    kv_bytes_per_token,
    matmul_params,
    param_count,
    part_intensities,
    prefill_cost,
    preset,
    ridge_point,
    step_time_bound,
    tpot_lower_bound,
    weight_bytes,
)
from servebench.ceilings import copy_bandwidth, matmul_flops
from servebench.textplot import bars

torch.set_num_threads(1)

# --- the model and the ceilings -----------------------------------------------------------------
GPU_MODEL = preset("gpu").model
LAYOUT = "the attention layout of the harness's gpu preset (heads and KV heads), kept as the preset has it"
# the model's size is the page's input; its attention layout stays the preset's (a nudge must keep d_model % heads)
cfg = dataclasses.replace(
    GPU_MODEL,
    layers=given("layers", GPU_MODEL.layers),
    d_model=given("d_model", GPU_MODEL.d_model, nudge=GPU_MODEL.heads),
    vocab=given("vocab", GPU_MODEL.vocab),
    max_seq=given("max_seq", GPU_MODEL.max_seq),
)
DT = "bf16"
value("heads", cfg.heads, fixed=LAYOUT)
value("kv_heads", cfg.n_kv_heads, fixed=LAYOUT)
value("head_dim", cfg.head_dim)
value("d_ff", cfg.d_ff)
mm = value("matmul_params", matmul_params(cfg), unit="FLOP")
value("matmul_params_m", mm / 1e6)
value("params_m", param_count(cfg) / 1e6)
W = value("weights_mb", weight_bytes(cfg, DT) / 1e6)
kvb = value("kv_bytes_per_token", kv_bytes_per_token(cfg, DT))
value("kv_kib_per_token", kvb / 2**10)

PEAK_TFLOPS = given("peak_tflops", 989, unit="TFLOP/s")
BW_TBS = given("bw_tbs", 3.35)
peak, bw = PEAK_TFLOPS * 1e12, BW_TBS * 1e12
ridge = value("ridge", ridge_point(peak, bw), unit="FLOP/B")
print(
    f"model: {cfg.layers} layers, d_model {cfg.d_model}, {cfg.heads} heads ({cfg.n_kv_heads} KV), "
    f"vocab {cfg.vocab}: {param_count(cfg) / 1e6:.1f} M parameters, {W:.1f} MB in bf16"
)
KV_FACTOR, BF16_BYTES = 2, 2
print(f"KV cache: {KV_FACTOR} x {cfg.layers} x {cfg.n_kv_heads} x {cfg.head_dim} x {BF16_BYTES} B = {kvb} B per token")
value("norm_bytes", (2 * cfg.layers + 1) * cfg.d_model * BF16_BYTES)
value("emb_row_bytes", 2 * cfg.d_model * BF16_BYTES)
print(f"ceilings: {PEAK_TFLOPS} TFLOP/s, {BW_TBS} TB/s -> ridge {ridge:.1f} FLOP/B\n")

# --- one decode step ----------------------------------------------------------------------------
L = given("context", 512)
one = decode_cost(cfg, DT, batch=1, context=L)
value("dec1_mflops", one.flops / 1e6)
value("dec1_mb", one.bytes / 1e6)

value("dec1_below_ridge", round(ridge / one.intensity))
tpot_floor = value("tpot_floor_us", tpot_lower_bound(cfg, DT, batch=1, context=L, bandwidth=bw) * 1e6)
value("tok_s_ceiling", round(1e6 / tpot_floor), unit="tokens/s")
print(
    f"decode, B=1, L={L}: {one.flops / 1e6:.1f} MFLOP, {one.bytes / 1e6:.1f} MB, "
    f"{one.intensity:.2f} FLOP/B; TPOT >= {tpot_floor:.1f} us"
)

print(f"\n{'B':>4} {'GFLOP':>8} {'MB':>8} {'FLOP/B':>7} {'bound us':>9} {'tok/s bound':>12} {'KV share':>9}")
for b in (1, 8, 64, 256):
    c = decode_cost(cfg, DT, batch=b, context=L)
    t = step_time_bound(c, peak, bw)
    kv_share = b * L * kvb / c.bytes
    print(
        f"{b:>4} {c.flops / 1e9:8.2f} {c.bytes / 1e6:8.1f} {c.intensity:7.2f} {t * 1e6:9.1f} {b / t:12,.0f} "
        f"{kv_share:9.1%}"
    )
    value(f"dec{b}_intensity", c.intensity, unit="FLOP/B")
    value(f"dec{b}_bound_us", t * 1e6)
    value(f"dec{b}_tok_s", round(b / t))
    value(f"dec{b}_batch", b, fixed="a row of the table: the batch sizes it tabulates")
    value(f"dec{b}_kv_share", kv_share)

# the asymptote: per-sequence FLOPs over per-sequence bytes
per_seq = decode_cost(cfg, DT, batch=2, context=L)
f1, m1 = per_seq.flops - one.flops, per_seq.bytes - one.bytes
value("asymptote", f1 / m1, unit="FLOP/B")
crit = {}
for ctx in (32, 64, 128, 512):
    crit[ctx] = critical_decode_batch(cfg, DT, context=ctx, peak_flops=peak, bandwidth=bw)
    print(f"L={ctx:>4}: smallest compute-bound decode batch = {crit[ctx]}")
value("crit_32", crit[32])
value("crit_64", crit[64])
value("crit_none_128", crit[128] is None)
value("crit_none_512", crit[512] is None)
value("ctx_short", 32, fixed="a context the table tabulates")
value("ctx_mid", 128, fixed="a context the table tabulates")
value("ctx_64", 64, fixed="a context the table tabulates")
value("kv_factor", KV_FACTOR, fixed="keys and values: two tensors per position, by definition")
value("bf16_bytes", BF16_BYTES, fixed="bytes of one bf16 element")
sanity(
    "kv_over_half_at_64",
    decode_cost(cfg, DT, batch=64, context=L).bytes < 2 * 64 * L * kvb,
    "at B = 64 the KV reads are more than half the bytes",
    operands=(64 * L * kvb / decode_cost(cfg, DT, batch=64, context=L).bytes, 0.5),
       relation=("grows", "larger", "half"),
)
no_batch_from = next(
    ctx for ctx in range(1, 1025) if critical_decode_batch(cfg, DT, context=ctx, peak_flops=peak, bandwidth=bw) is None
)
value("ctx_none_from", no_batch_from)
sanity("crit_grows_with_context", crit[32] < crit[64] and crit[128] is None, operands=(crit[32], crit[64]),
       relation="smallest")
terms = decode_terms(cfg, DT, context=L, peak_flops=peak, bandwidth=bw)
value("terms_weights_us", terms.weights_s * 1e6)
value("terms_per_seq_us", terms.bytes_per_seq_s * 1e6)
value("terms_per_seq_flops_us", terms.flops_per_seq_s * 1e6)
value("terms_ratio", terms.per_seq_ratio)
w_i1, att_i = part_intensities(cfg, DT, batch=1, context=L)
value("attn_intensity", att_i, unit="FLOP/B",
      fixed="attention reads each cached key and value once per query: its FLOP/B does "
      "not depend on the batch, the context or the model's size")
value("weights_intensity_1", w_i1, unit="FLOP/B", fixed="at one sequence each bf16 weight (2 bytes) takes part in one "
      "multiply-add (2 FLOPs): 1 FLOP/B whatever the model's size")
cross = next(b for b in range(1, 10_000) if part_intensities(cfg, DT, batch=b, context=L)[0] >= ridge)
value("weights_cross_batch", cross)
w_before = part_intensities(cfg, DT, batch=cross - 1, context=L)[0]
sanity(
    "weights_cross_there",
    w_before < ridge <= part_intensities(cfg, DT, batch=cross, context=L)[0],
    "the weight matmuls' intensity grows with the batch and crosses the ridge there",
    operands=(w_before, ridge), relation="grows",
)
att_big = part_intensities(cfg, DT, batch=cross, context=L)[1]
sanity(
    "attention_flat",
    att_big == att_i and att_i < ridge,
    "attention's intensity does not move with the batch",
    operands=(att_big, att_i),
)
value("gqa_factor", cfg.heads // cfg.n_kv_heads, fixed=LAYOUT)
value(
    "dec8_gain",
    (8 / step_time_bound(decode_cost(cfg, DT, batch=8, context=L), peak, bw)) / (1 / step_time_bound(one, peak, bw)),
)

# --- prefill ------------------------------------------------------------------------------------
T = given("prompt_len", 512)
pre = prefill_cost(cfg, DT, prompt_len=T)
value("pre_gflops", pre.flops / 1e9)
value("pre_mb", pre.bytes / 1e6)
value("pre_intensity", round(pre.intensity), unit="FLOP/B")
pre_t = step_time_bound(pre, peak, bw)
value("pre_bound_us", pre_t * 1e6)
value("pre_over_decode", pre_t / step_time_bound(one, peak, bw))
t_cross = next(t for t in range(1, cfg.max_seq + 1) if prefill_cost(cfg, DT, prompt_len=t).intensity >= ridge)
value("prefill_crossover", t_cross)
below = prefill_cost(cfg, DT, prompt_len=t_cross - 1).intensity
sanity(
    "prefill_crosses_there",
    below < ridge <= prefill_cost(cfg, DT, prompt_len=t_cross).intensity,
    operands=(below, ridge), relation="smaller",
)
print(
    f"\nprefill, T={T}: {pre.flops / 1e9:.1f} GFLOP, {pre.bytes / 1e6:.1f} MB, {pre.intensity:.0f} FLOP/B, "
    f">= {pre_t * 1e6:.1f} us ({pre_t / step_time_bound(one, peak, bw):.2f} decode steps)"
)
print(f"prefill is compute bound from T = {t_cross} tokens")

sanity("decode_memory_bound", one.intensity < ridge, "a batch-1 decode step is far below the ridge",
       operands=(one.intensity, ridge), relation=("smaller", "larger"))
sanity(
    "intensity_rises_with_batch",
    all(
        decode_cost(cfg, DT, batch=b + 1, context=L).intensity > decode_cost(cfg, DT, batch=b, context=L).intensity
        for b in range(1, 300)
    ), relation="grows",
)
sanity("asymptote_below_ridge", f1 / m1 < ridge, "at L = 512 no batch reaches the ridge", operands=(f1 / m1, ridge),
       relation=("smaller", "not"))
sanity("prefill_compute_bound", pre.intensity > ridge, operands=(pre.intensity, ridge), relation="larger")

# --- measured on this machine: the CPU-sized model --------------------------------------------------
print("\n--- measured here ---")
ccfg = preset("cpu").model
dev = torch.device("cpu")
COPY_MIB = 64
MATMUL_N = 1024
CL = 128
batches = (1, 4, 16)
RUNS = value("cpu_runs", 5, fixed="the number of runs, a choice of this check")
STEPS = value("cpu_steps", 15, fixed="the timed steps per batch size in a run, a choice of this check")
WARM = 2  # untimed steps per batch size before them
model = DecoderLM(ccfg, max_slots=sum(batches))
groups, first = {}, 0
for b in batches:  # one group of slots per batch size
    groups[b] = list(range(first, first + b))
    first += b
# the timed steps attend PROMPT + WARM + 1 .. + STEPS positions, CL on average
PROMPT = CL - 1 - WARM - (STEPS - 1) // 2


def one_run():
    """Measure the ceilings, then time decode steps of each batch size at a context of about CL."""
    peak = matmul_flops(dev, torch.float32, n=MATMUL_N, repeats=5)
    bw = copy_bandwidth(dev, nbytes=COPY_MIB * 2**20, repeats=5)
    model.reset()
    for b in batches:
        for s in groups[b]:
            model.prefill(s, [(7 * s + k) % ccfg.vocab for k in range(PROMPT)])
    # Round-robin over the batch sizes, so that load from other processes hits all of them alike;
    # the shortest of the timed steps is the least disturbed.
    times = {b: [] for b in batches}
    for rep in range(WARM + STEPS):
        for b in batches:
            t0 = time.perf_counter()
            model.decode_step(groups[b])
            if rep >= WARM:
                times[b].append(time.perf_counter() - t0)
    return peak, bw, {b: min(times[b]) for b in batches}


runs = [one_run() for _ in range(RUNS)]
print(f"{RUNS} runs; in each: one thread, the ceilings (a {MATMUL_N}x{MATMUL_N} matmul, a copy of {COPY_MIB} MiB), "
      f"then "
      f"the shortest of {STEPS} decode steps per batch size at contexts averaging {CL}")
print(f"{'run':>3} {'GFLOP/s':>8} {'GB/s':>6} {'ridge':>6} " + " ".join(f"{'B=' + str(b) + ' ms':>9}" for b in batches)
      + "  compute-bound from B")
for k, (pk, bw_k, t) in enumerate(runs):
    crit_k = critical_decode_batch(ccfg, "fp32", context=CL, peak_flops=pk, bandwidth=bw_k)
    print(f"{k + 1:>3} {pk / 1e9:8.1f} {bw_k / 1e9:6.1f} {pk / bw_k:6.2f} "
          + " ".join(f"{t[b] * 1e3:9.2f}" for b in batches) + f"  {crit_k}")
rows = []
for b in batches:
    cost_b = decode_cost(ccfg, "fp32", batch=b, context=CL)
    ratios = [t[b] / step_time_bound(cost_b, pk, bw_k) for pk, bw_k, t in runs]
    estimate(f"cpu_ratio_{b}", ratios, n=RUNS * STEPS,
             measured="a decode step timed on this machine over the roofline bound from the ceilings measured in "
             "the same run; per run the shortest of its timed steps")
    pk, bw_k, t = runs[0]
    rows.append((f"B={b:<2} measured", t[b] * 1e3))
    rows.append((f"B={b:<2} roofline", step_time_bound(cost_b, pk, bw_k) * 1e3))
print("run 1:")
print(bars(rows, unit=" ms"))
big = value("cpu_batch_big", batches[-1], fixed="the largest batch the CPU measurement tabulates")
gain = estimate("cpu_gain_16", [(big / t[big]) / (1 / t[1]) for _, _, t in runs], n=RUNS * 2 * STEPS,
                measured="tokens per second of decode steps timed on this machine, a batch of 16 over a batch of "
                "one; per run the shortest of each one's timed steps")
print(f"B={big} delivers {gain:.1f}x the tokens/s of B=1 ({gain.kind}: {gain.lo:.1f} to {gain.hi:.1f})")

# The intensity a decode step of the cpu preset tends to as the batch grows, at L = CL in fp32: the FLOPs
# one more sequence adds over the bytes it adds (servebench.roofline); decode can turn compute bound only
# on a machine whose ridge lies below it.
CPU_PRESET = ("the harness's cpu preset at the context the CPU section decodes at, in fp32: no input of this page "
              "moves it")
c1 = decode_cost(ccfg, "fp32", batch=1, context=CL)
c2 = decode_cost(ccfg, "fp32", batch=2, context=CL)
cpu_asym = value("cpu_asymptote", (c2.flops - c1.flops) / (c2.bytes - c1.bytes), unit="FLOP/B", fixed=CPU_PRESET)
value("cpu_context", CL, fixed="the context the CPU section decodes at")
# A second route, on the model itself: the FLOPs torch's counter sees in real decode steps of one and of
# two sequences (every slot CL - 1 tokens long, so each attends CL positions), and the bytes of the tensors
# one more sequence reads: its two embedding rows and its keys and values at CL positions in every layer.
probe = DecoderLM(ccfg, max_slots=3)
for s in range(3):
    probe.prefill(s, [(5 * s + k) % ccfg.vocab for k in range(CL - 1)])


def counted_flops(slots):
    with FlopCounterMode(display=False) as fc:
        probe.decode_logits(slots)
    for s in slots:  # undo the step: the next one overwrites the position it wrote
        probe.cache.lengths[s] -= 1
    return fc.get_total_flops()


seq_flops = counted_flops([1, 2]) - counted_flops([0])
seq_bytes = (probe.tok_emb[0].nbytes + probe.pos_emb[0].nbytes
             + CL * (probe.cache.k[:, 0, :, 0].nbytes + probe.cache.v[:, 0, :, 0].nbytes))
model_asym = seq_flops / seq_bytes
print(f"\nper sequence at L={CL}: {c2.flops - c1.flops:,} FLOPs, {c2.bytes - c1.bytes:,} B (roofline counts); "
      f"{seq_flops:,} FLOPs, {seq_bytes:,} B (counted on the model)")
sanity("cpu_asymptote_on_the_model",
       Fraction(seq_flops, seq_bytes) == Fraction(c2.flops - c1.flops, c2.bytes - c1.bytes),
       "the FLOPs torch counts in the model's decode steps over the bytes of the tensors a sequence reads equal "
       "the roofline's per-sequence ratio", operands=(model_asym, cpu_asym), relation="equal")


def cpu_intensity(b):
    return decode_cost(ccfg, "fp32", batch=b, context=CL).intensity


sanity("cpu_intensity_rises",
       all(cpu_intensity(b) < cpu_intensity(b + 1) < cpu_asym for b in (1, 4, 16, 64, 256, 10**6))
       and cpu_intensity(10**9) > cpu_asym * (1 - 1e-6),
       "the decode intensity rises with the batch, stays below the asymptote and reaches it within 10^-6 at a "
       "batch of 10^9", operands=(cpu_intensity(10**9), cpu_asym), relation=("grows", "smaller"))

# Whether a batch crosses depends on the ridge alone: none when the ridge is at or above the asymptote,
# otherwise the smallest batch whose intensity (decode_cost, a second route) reaches the ridge. Tested at
# each run's measured ridge and at ridges half and twice the asymptote, so both cases run on every machine.
def crit_ok(ridge_x):
    crit_x = critical_decode_batch(ccfg, "fp32", context=CL, peak_flops=ridge_x * 1e9, bandwidth=1e9)
    if crit_x is None:
        return ridge_x >= cpu_asym
    return (ridge_x < cpu_asym and cpu_intensity(crit_x) >= ridge_x * (1 - 1e-12)
            and (crit_x == 1 or cpu_intensity(crit_x - 1) < ridge_x * (1 + 1e-12)))


ridges = [pk / bw_k for pk, bw_k, _ in runs]
sanity("cpu_crit_consistent", all(crit_ok(r_x) for r_x in [*ridges, cpu_asym / 2, cpu_asym * 2]),
       "no batch is compute bound exactly when the ridge is at or above the asymptote; otherwise the batch found "
       "is the smallest whose intensity reaches the ridge", operands=(cpu_asym, sum(ridges) / RUNS),
       relation=("smaller", "smallest", "larger", "not"))
crossed = [critical_decode_batch(ccfg, "fp32", context=CL, peak_flops=pk, bandwidth=bw_k) for pk, bw_k, _ in runs]
print(f"decode intensity at L={CL} tends to {cpu_asym:.2f} FLOP/B; measured ridges "
      + ", ".join(f"{r_x:.2f}" for r_x in ridges) + " FLOP/B: "
      + ("no batch reaches them" if all(c is None for c in crossed)
         else "smallest compute-bound batch per run " + ", ".join(str(c) for c in crossed)))
value("cpu_weights_mb", weight_bytes(ccfg, "fp32") / 1e6,
      fixed="the weights of the harness's cpu preset, the model the CPU section measures")
value("cpu_copy_mib", COPY_MIB, fixed="the size of the copy that measures the bandwidth ceiling")
