"""III.1.A04 — Attention in a decode step: one query against a cache of L keys.

For Llama 3 8B on the meta device: the shapes of a decode step's attention, its FLOPs counted by
FlopCounterMode on F.scaled_dot_product_attention against servebench's rule (decode_cost: 4 d L
per layer), the bytes of the keys and values it reads (.nbytes of meta tensors) against
servebench's kv_bytes_per_token, and the intensity against an H100's ridge point. Then the same
rule on the harness's real CPU model (servebench DecoderLM): the counter on one real decode step
equals decode_cost exactly, its attention (the bmm ops) equals 4 d L per layer, and its real
KVCache has the bytes kv_bytes_per_token says. A batch of unequal contexts shows the padding the
real model computes beyond servebench's useful count.
"""

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from numbook.check import fact, given, sanity, value
from servebench.config import ModelConfig, preset
from servebench.memory import kv_bytes_per_token, matmul_params
from servebench.model import DecoderLM
from servebench.roofline import decode_cost, part_intensities, ridge_point, step_cost

MiB, GiB = 2**20, 2**30


def row(label, *cells, w=36, cw=18):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


d = fact("llama3_8b_hidden", "d", nudge=32)          # nudged by a head count: the heads must divide it
H = fact("llama3_8b_heads", "H", nudge=32)           # doubled: it must divide d, and H_kv must divide it
Hkv = fact("llama3_8b_kv_heads", "Hkv", nudge=8)     # doubled: it must divide H
layers = fact("llama3_8b_layers", "layers")
L = fact("llama3_8b_context", "L")
B = given("B", 1)
peak = fact("h100_sxm_bf16_dense_tflops", "peak_tflops", unit="TFLOP/s") * 1e12
bw = fact("h100_sxm_hbm_tbs", "bw_tbs") * 1e12
Dh = value("Dh", d // H)
g = value("group", H // Hkv)
# vocab=1 and the default MLP: only the attention terms and the cache are read from this config, and
# neither depends on the vocabulary or the MLP (the matmul terms are subtracted below).
cfg = ModelConfig(layers=layers, d_model=d, heads=H, kv_heads=Hkv, vocab=1, max_seq=L)

# -- Step 1: the shapes of one decode step's attention, per layer (meta, bf16) -----------------------------
bf16 = dict(device="meta", dtype=torch.bfloat16)
q = torch.empty(B, H, 1, Dh, **bf16)
k = torch.empty(B, Hkv, L, Dh, **bf16)
v = torch.empty(B, Hkv, L, Dh, **bf16)
scores = q @ k.repeat_interleave(g, dim=1).transpose(-2, -1)
with FlopCounterMode(display=False) as fc:
    out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
layer_flops = value("layer_attn_flops", fc.get_total_flops())
for name, t in (("q", q), ("k", k), ("scores", scores), ("out", out)):
    value(f"{name}_shape", t.shape)
print(f"Llama 3 8B, one decode step of B = {B} at L = {L:,}, one layer (meta, bf16)")
row("tensor", "shape", "bytes")
for name, t in (("query q", q), ("cached keys K", k), ("cached values V", v), ("scores", scores), ("output", out)):
    row(name, str(tuple(t.shape)), f"{t.nbytes:,}")

# -- Step 2: FLOPs, counter against servebench's rule ------------------------------------------------------
all_flops = value("attn_flops", layers * layer_flops)
dc = decode_cost(cfg, "bf16", batch=B, context=L)
sb_attn = value("sb_attn_flops", dc.flops - B * 2 * matmul_params(cfg))
sanity("counter_is_4dL", layer_flops == 4 * B * d * L, "the counter gives 4 d L FLOPs per layer and sequence",
       operands=(layer_flops, 4 * B * d * L), relation="equal")
sanity("counter_matches_servebench", all_flops == sb_attn,
       "FlopCounterMode over all layers equals servebench decode_cost's attention term",
       operands=(all_flops, sb_attn))
value("attn_gflops", all_flops / 1e9)

# -- Step 3: bytes read, meta .nbytes against kv_bytes_per_token ---------------------------------------------
layer_bytes = value("layer_kv_bytes", k.nbytes + v.nbytes)
value("layer_kv_mib", layer_bytes / MiB)
all_bytes = value("kv_read_bytes", layers * layer_bytes)
value("kv_read_gib", all_bytes / GiB)
kvt = value("kv_bytes_per_token", kv_bytes_per_token(cfg, "bf16"))
sanity("bytes_match_servebench", all_bytes == B * L * kvt,
       "the cache read per step (meta .nbytes) equals B L kv_bytes_per_token", operands=(all_bytes, B * L * kvt),
       relation="equal")
value("q_bytes", q.nbytes)
value("kv_over_q", layer_bytes / q.nbytes)

# -- Step 4: intensity against the ridge point ----------------------------------------------------------------
intensity = value("attn_intensity", all_flops / all_bytes, unit="FLOP/B")
sb_int = part_intensities(cfg, "bf16", batch=B, context=L)[1]
sb_int_64 = part_intensities(cfg, "bf16", batch=64 * B, context=L)[1]
sb_int_short = part_intensities(cfg, "bf16", batch=B, context=L // 64)[1]
sanity("intensity_is_group", intensity == sb_int == g,
       "measured FLOPs over measured bytes equals servebench's attention intensity, and equals H / H_kv",
       operands=(intensity, g), relation="equal")
sanity("intensity_flat", sb_int_64 == sb_int == sb_int_short,
       "the attention intensity does not change with the batch or the context", operands=(sb_int_64, sb_int_short),
       relation=("grows", "larger", "smaller", "not"))
ridge = value("ridge", ridge_point(peak, bw), unit="FLOP/B")
below = value("ridge_over_intensity", ridge / intensity)
sanity("memory_bound", intensity < ridge, "decode attention's intensity is below the H100's ridge point",
       operands=(intensity, ridge), relation=("smaller", "larger"))
t_mem = value("t_mem_us", all_bytes / bw * 1e6)
t_flop = value("t_flop_us", all_flops / peak * 1e6)
value("t_mem_over_flop", t_mem / t_flop)
sanity("bytes_bound_time", t_mem > t_flop, "reading the cache takes longer than the arithmetic",
       operands=(t_mem, t_flop), relation="at least")
print(f"\nAll {layers} layers: {all_flops:,} FLOPs (counter) = {sb_attn:,} (servebench)")
print(f"  {all_bytes:,} bytes of K and V")
row("intensity (FLOP/B)", f"{intensity:.2f}")
row("servebench part_intensities", f"{sb_int:.2f}")
row("  at batch x64, at context / 64", f"{sb_int_64:.2f}", f"{sb_int_short:.2f}")
row("H100 ridge point (FLOP/B)", f"{ridge:.1f}")
row("bytes / bandwidth (us)", f"{t_mem:.1f}")
row("FLOPs / peak (us)", f"{t_flop:.2f}")

# -- Step 5: the real model: one decode step of servebench's CPU DecoderLM, counted ---------------------------
small = preset("cpu").model
PRESET = "servebench's cpu preset, the harness's own model: a configuration of the harness, not an input here"
value("small_layers", small.layers, fixed=PRESET)
value("small_d", small.d_model, fixed=PRESET)
value("small_heads", small.heads, fixed=PRESET)
P = given("prompt_len", 40)
P2 = given("prompt_len2", 10)
model = DecoderLM(small, dtype="fp32", max_slots=2)
model.prefill(0, list(range(1, P + 1)))
model.prefill(1, list(range(1, P2 + 1)))
with FlopCounterMode(display=False) as fc:
    model.decode_logits([0])
counted = value("real_step_flops", fc.get_total_flops())
by_op = {str(op).split(".")[-1]: n for op, n in fc.get_flop_counts()["Global"].items()}
real_attn = value("real_attn_flops", by_op.get("bmm", 0))
ctx = value("real_context", P + 1)             # the step attends the prompt and the token it adds
real_dc = decode_cost(small, "fp32", batch=1, context=ctx)
value("real_decode_cost", real_dc.flops)
sanity("real_step_matches", counted == real_dc.flops, "the counter on a real decode step equals decode_cost",
       operands=(counted, real_dc.flops), relation="equal")
sanity("real_attn_is_4dL", real_attn == 4 * small.d_model * ctx * small.layers
       and by_op.get("mm", 0) == 2 * matmul_params(small),
       "the step's bmm FLOPs are 4 d L per layer and its mm FLOPs are 2 x matmul_params",
       operands=(real_attn, 4 * small.d_model * ctx * small.layers))
cache = model.cache
real_kvt = value("real_kv_bytes_per_token", kv_bytes_per_token(small, "fp32"), fixed=PRESET)
slots_positions = 2 * small.max_seq
sanity("real_cache_bytes", cache.nbytes == slots_positions * real_kvt == slots_positions * model.kv_bytes_per_token(),
       "the real KVCache of two slots holds kv_bytes_per_token for every position", operands=(cache.nbytes, real_kvt))
value("real_cache_shape", cache.k.shape, fixed=PRESET + "; two slots, as the check builds it")
print(f"\nservebench DecoderLM (preset cpu: {small.layers} layers, d = {small.d_model}, {small.heads} heads, fp32)")
row("one decode step at L", f"{ctx}")
row("counted (FlopCounterMode)", f"{counted:,}")
row("decode_cost", f"{real_dc.flops:,}")
row("  of which attention (bmm)", f"{real_attn:,}")

# two sequences of unequal context: the model gathers both caches up to the longer one and masks
with FlopCounterMode(display=False) as fc:
    model.decode_logits([0, 1])
counted2 = fc.get_total_flops()
attn2 = {str(op).split(".")[-1]: n for op, n in fc.get_flop_counts()["Global"].items()}.get("bmm", 0)
ctxs = value("mixed_contexts", [P + 2, P2 + 1])
useful2 = step_cost(small, "fp32", decode_contexts=ctxs).flops
padded2 = decode_cost(small, "fp32", batch=2, context=max(ctxs)).flops
value("mixed_counted", counted2, unit="FLOP")
value("mixed_useful", useful2)
waste = value("mixed_waste_frac", (counted2 - useful2) / counted2)
useful_attn2 = 4 * small.d_model * small.layers * sum(ctxs)
value("mixed_attn_counted", attn2, unit="FLOP")
value("mixed_attn_useful", useful_attn2)
attn_waste = value("mixed_attn_waste_frac", (attn2 - useful_attn2) / attn2)
sanity("attn_padding", attn2 == 4 * small.d_model * small.layers * len(ctxs) * max(ctxs) and attn2 > useful_attn2,
       "the counted attention is 4 d L_max per layer for each sequence, more than the useful 4 d L_i",
       operands=(attn2, useful_attn2), relation="differs")
sanity("padding_counted", counted2 == padded2 and counted2 > useful2,
       "with unequal contexts the real step computes attention over the longest context for every sequence",
       operands=(counted2, useful2))
row("contexts (2 sequences)", str(tuple(ctxs)))
row("counted", f"{counted2:,}")
row("useful (step_cost)", f"{useful2:,}")
row("padded work, share of the count", f"{waste:.2%}")
row("attention counted / useful", f"{attn2:,}", f"{useful_attn2:,}")
row("padded share of the attention", f"{attn_waste:.1%}")

# -- several query positions per step (speculative decoding): same cache, more FLOPs ------------------------
n_q = given("spec_queries", 4)
q_spec = torch.empty(B, H, n_q, Dh, **bf16)
with FlopCounterMode(display=False) as fc:
    F.scaled_dot_product_attention(q_spec, k, v, enable_gqa=True)
spec_intensity = value("spec_intensity", fc.get_total_flops() / layer_bytes, unit="FLOP/B")
sanity("spec_multiplies", spec_intensity == n_q * intensity,
       "n query positions against the same cache multiply the intensity by n", operands=(spec_intensity, intensity),
       relation="smaller")
print(f"\n{n_q} query positions per step: {spec_intensity:.1f} FLOP/B against the same cache")

# -- Variation: multi-head and multi-query attention, each at its own full context ------------------------
variants = {
    "llama2": (fact("llama2_7b_hidden", "d2", nudge=32), fact("llama2_7b_heads", "H2", nudge=32),
               fact("llama2_7b_kv_heads", "Hkv2", nudge=-16),      # halved: it must divide H2
               fact("llama2_7b_layers", "layers2"), fact("llama2_7b_max_positions", "L2")),
    "falcon": (fact("falcon_7b_hidden", "d_f", nudge=71), fact("falcon_7b_heads", "H_f", nudge=71),
               fact("falcon_7b_kv_heads", "Hkv_f", nudge=70),      # to 71: it must divide the heads
               fact("falcon_7b_layers", "layers_f"), fact("falcon_7b_context", "L_f")),
}
for tag, (dd, hh, kk, ll, ctx) in variants.items():
    Lv = ctx                                        # the cache at the model's full context
    c2 = ModelConfig(layers=ll, d_model=dd, heads=hh, kv_heads=kk, vocab=1, max_seq=ctx)
    i2 = value(f"{tag}_intensity", part_intensities(c2, "bf16", batch=B, context=Lv)[1], unit="FLOP/B")
    kv2 = torch.empty(B, kk, Lv, dd // hh, **bf16)
    sanity(f"{tag}_within_context", kv2.shape[2] <= ctx,
           "the cache holds no more positions than the model's context", operands=(kv2.shape[2], ctx),
           relation="at most")
    with FlopCounterMode(display=False) as fc:
        F.scaled_dot_product_attention(torch.empty(B, hh, 1, dd // hh, **bf16), kv2, kv2, enable_gqa=True)
    sanity(f"{tag}_intensity_two_routes", fc.get_total_flops() / (2 * kv2.nbytes) == i2 == hh // kk,
           "counter FLOPs over meta bytes equal servebench's intensity and H / H_kv", operands=(i2, hh // kk),
           relation="smaller")
    sanity(f"{tag}_memory_bound", i2 < ridge, "still below the ridge point", operands=(i2, ridge))
    value(f"{tag}_ridge_over", ridge / i2)
    read2 = value(f"{tag}_kv_read_mib", ll * 2 * kv2.nbytes / MiB)
    sanity(f"{tag}_bytes_two_routes", ll * 2 * kv2.nbytes == B * Lv * kv_bytes_per_token(c2, "bf16"),
           "meta .nbytes over all layers equal B L kv_bytes_per_token", operands=(ll * 2 * kv2.nbytes, read2),
           relation="at least")
    value(f"{tag}_t_mem_us", ll * 2 * kv2.nbytes / bw * 1e6)
    print(f"\nVariation {tag}: H = {hh}, H_kv = {kk}, intensity {i2:.1f} FLOP/B, {ridge / i2:.1f}x below the ridge")
    print(f"  reads {read2:,.0f} MiB of cache per step at its full context, L = {Lv:,}")
