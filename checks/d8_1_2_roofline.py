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

import torch

from numbook.check import given, sanity, value
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
cpu_peak = matmul_flops(dev, torch.float32, n=1024, repeats=5)
COPY_MIB = 64
cpu_bw = copy_bandwidth(dev, nbytes=COPY_MIB * 2**20, repeats=5)
print(
    f"this CPU, one thread: {cpu_peak / 1e9:.1f} GFLOP/s (square matmul), {cpu_bw / 1e9:.1f} GB/s (copy); "
    f"ridge {cpu_peak / cpu_bw:.1f} FLOP/B"
)
CL = 128
batches = (1, 4, 16)
model = DecoderLM(ccfg, max_slots=sum(batches))
groups, first = {}, 0
for b in batches:  # one group of slots per batch size, all prefilled to about CL positions
    groups[b] = list(range(first, first + b))
    first += b
    for s in groups[b]:
        model.prefill(s, [(7 * s + k) % ccfg.vocab for k in range(CL - 10)])
# Round-robin over the batch sizes, so that load from other processes hits all of them alike;
# the shortest of 15 steps is the least disturbed.
times = {b: [] for b in batches}
for rep in range(17):
    for b in batches:
        t0 = time.perf_counter()
        model.decode_step(groups[b])
        if rep >= 2:
            times[b].append(time.perf_counter() - t0)
rows, measured = [], {}
for b in batches:
    t = measured[b] = min(times[b])
    bound = step_time_bound(decode_cost(ccfg, "fp32", batch=b, context=CL), cpu_peak, cpu_bw)
    rows.append((f"B={b:<2} measured", t * 1e3))
    rows.append((f"B={b:<2} roofline", bound * 1e3))
    print(f"B={b:>2}: step {t * 1e3:.2f} ms, roofline bound {bound * 1e3:.2f} ms, {b / t:,.0f} tok/s")
    value(f"cpu_ratio_{b}", t / bound, measured="a decode step timed on this machine over its measured ceilings")
print(bars(rows, unit=" ms"))
crit_cpu = critical_decode_batch(ccfg, "fp32", context=CL, peak_flops=cpu_peak, bandwidth=cpu_bw)
print(f"smallest compute-bound decode batch on this CPU at L={CL}: {crit_cpu}")
big = value("cpu_batch_big", batches[-1], fixed="the largest batch the CPU measurement tabulates")
gain = value("cpu_gain_16", (big / measured[big]) / (1 / measured[1]), measured="decode steps timed on this machine")
value("cpu_crit", crit_cpu if crit_cpu is not None else 10**6, measured="from the ceilings measured on this machine")
value("cpu_weights_mb", weight_bytes(ccfg, "fp32") / 1e6,
      fixed="the weights of the harness's cpu preset, the model the CPU section measures")
value("cpu_copy_mib", COPY_MIB, fixed="the size of the copy that measures the bandwidth ceiling")
print(f"B={big} delivers {gain:.1f}x the tokens/s of B=1")
