"""III.2.A04 — The bytes a decode step reads: weights once, the cache of every sequence.

Part 1 uses the model of 8.1.2 (servebench preset "gpu", bf16): servebench.roofline.decode_cost
gives a decode step's FLOPs and bytes, and the check rebuilds both from the real model, built
on the meta device: the .nbytes of every weight the step streams, the .nbytes of one position
of the real KVCache, and the FLOPs of the real decode step (DecoderLM._decode) counted by
torch's FlopCounterMode. Part 2 applies the same accounting to Llama 3 8B (meta-device modules,
a meta decode step under FlopCounterMode) against the H100 and H200 datasheet bandwidths: the
bandwidth bound on a step's time, the bytes per generated token, and the batch from which the
cache's bytes exceed the weights'.
"""

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from numbook.check import fact, given, sanity, value
from servebench import (
    DecoderLM,
    ModelConfig,
    critical_decode_batch,
    decode_cost,
    kv_bytes_per_token,
    preset,
    ridge_point,
)

GB, MB = 10**9, 10**6
META = torch.device("meta")
DT, BF16 = "bf16", torch.bfloat16


def row(label, *cells, w=44, cw=15):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


# ================================ Part 1: 8.1.2's model =====================================
GPU_MODEL = preset("gpu").model
LAYOUT = "the attention layout of the harness's gpu preset (heads and KV heads), kept as the preset has it"
cfg = dataclasses.replace(
    GPU_MODEL,
    layers=given("layers", GPU_MODEL.layers),
    d_model=given("d_model", GPU_MODEL.d_model, nudge=GPU_MODEL.heads),   # stays a multiple of the heads
    vocab=given("vocab", GPU_MODEL.vocab),
    max_seq=given("max_seq", GPU_MODEL.max_seq),
)
value("heads", cfg.heads, fixed=LAYOUT)
value("kv_heads", cfg.n_kv_heads, fixed=LAYOUT)
value("head_dim", cfg.head_dim)
B = given("B", 8)
CTX = given("context", 512)
BW_H100 = fact("h100_sxm_hbm_tbs", "bw_h100_tbs") * 1e12

# the real model, on the meta device: every tensor has its shape and dtype, none has storage
with torch.device("meta"):
    model = DecoderLM(cfg, dtype=DT, device="meta", max_slots=B)
tables = [model.tok_emb, model.pos_emb]
streamed = sum(t.nbytes for t in model.weights()) - sum(t.nbytes for t in tables)
kvb = model.cache.k[:, 0, :, 0].nbytes + model.cache.v[:, 0, :, 0].nbytes   # one position, all layers
rows = model.tok_emb[0].nbytes + model.pos_emb[0].nbytes                      # the rows a token gathers
closed = streamed + B * (CTX * kvb + rows)
cost = decode_cost(cfg, DT, batch=B, context=CTX)
one = decode_cost(cfg, DT, batch=1, context=CTX)
with FlopCounterMode(display=False) as fc:      # the real decode step: each slot at CTX - 1 cached tokens
    model._decode(list(range(B)), [CTX - 1] * B)
counted = fc.get_total_flops()

value("weights_read_mb", streamed / MB)
value("tables_mb", sum(t.nbytes for t in tables) / MB)
value("kvb_bytes", kvb)
value("rows_bytes", rows)
value("dec_bytes", cost.bytes)
value("dec_mb", cost.bytes / MB)
value("closed_mb", closed / MB)
value("dec_flops", cost.flops)
value("counted_flops", counted)
value("dec_mflops", cost.flops / 1e6)
intensity = value("dec_intensity", cost.intensity, unit="FLOP/B")
value("dec_kv_share", B * CTX * kvb / cost.bytes)
value("dec_cache_mb", B * CTX * kvb / MB)
value("per_token_mb", cost.bytes / B / MB)
value("per_token_b1_mb", one.bytes / MB)
value("dec_bound_us", cost.bytes / BW_H100 * 1e6)
print(f"Part 1: servebench preset 'gpu' in bf16: {cfg.layers} layers, d = {cfg.d_model}, {cfg.heads} heads "
      f"({cfg.n_kv_heads} KV), vocab {cfg.vocab:,}")
print(f"  a decode step of B = {B} sequences at context {CTX}")
row("", "decode_cost", "real model")
row("weights streamed per step, bytes", "", f"{streamed:,}")
row("KV bytes per position (KVCache)", f"{kv_bytes_per_token(cfg, DT):,}", f"{kvb:,}")
row("embedding rows per sequence, bytes", "", f"{rows:,}")
row("bytes of the step", f"{cost.bytes:,}", f"{closed:,}")
row("FLOPs of the step (FlopCounterMode)", f"{cost.flops:,}", f"{counted:,}")
row("intensity, FLOP/B", f"{intensity:.2f}")
row("KV share of the bytes", f"{B * CTX * kvb / cost.bytes:.1%}")
row("bytes per generated token, MB", f"{cost.bytes / B / MB:.1f}")
row("the same at a batch of one, MB", f"{one.bytes / MB:.1f}")
row("bandwidth bound on the step at H100, us", f"{cost.bytes / BW_H100 * 1e6:.1f}")
sanity("bytes_two_routes", cost.bytes == closed,
       "decode_cost's bytes equal the streamed weights' .nbytes plus B x (context x KV position + rows)",
       operands=(cost.bytes, closed), relation="equal")
sanity("flops_two_routes", cost.flops == counted,
       "decode_cost's FLOPs equal FlopCounterMode's count of the real decode step", operands=(cost.flops, counted),
       relation="not")
sanity("kvb_two_routes", kvb == kv_bytes_per_token(cfg, DT),
       "one position of the real KVCache, over all layers, is kv_bytes_per_token",
       operands=(kvb, kv_bytes_per_token(cfg, DT)))
sanity("batching_cuts_per_token", cost.bytes / B < one.bytes,
       "the bytes per generated token at B are below those of a batch of one", operands=(cost.bytes / B, one.bytes),
       relation=("smaller", "larger"))

# ================================ Part 2: Llama 3 8B ============================================
L = fact("llama3_8b_layers", "l3_layers")
H = fact("llama3_8b_heads", "l3_heads", nudge=-16)       # halved: it must divide d and be a multiple of kv_heads
D = fact("llama3_8b_hidden", "l3_d", nudge=H)             # one head count: d stays a multiple of H
HKV = fact("llama3_8b_kv_heads", "l3_kv_heads", nudge=8)  # doubled: it must divide the heads
V = fact("llama3_8b_vocab", "l3_vocab")
INTER = fact("llama3_8b_intermediate", "l3_intermediate", nudge=2)  # even: servebench's stand-in MLP is 3I/2
T = fact("llama3_8b_context", "T")
B2 = given("B2", 32)
BW_H200 = fact("h200_sxm_hbm_tbs", "bw_h200_tbs") * 1e12
PEAK = fact("h100_sxm_bf16_dense_tflops", "peak_tflops", unit="TFLOP/s") * 1e12
DH = D // H


def llama_meta(dtype=BF16):
    """Llama 3's modules on the meta device: embedding, per layer q, k, v, o, gate, up, down and two
    RMSNorms, a final RMSNorm and an untied LM head, no biases."""
    kw = dict(device=META, dtype=dtype)

    def block():
        return nn.ModuleDict({
            "q_proj": nn.Linear(D, H * DH, bias=False, **kw), "k_proj": nn.Linear(D, HKV * DH, bias=False, **kw),
            "v_proj": nn.Linear(D, HKV * DH, bias=False, **kw), "o_proj": nn.Linear(H * DH, D, bias=False, **kw),
            "gate_proj": nn.Linear(D, INTER, bias=False, **kw), "up_proj": nn.Linear(D, INTER, bias=False, **kw),
            "down_proj": nn.Linear(INTER, D, bias=False, **kw),
            "input_layernorm": nn.RMSNorm(D, **kw), "post_attention_layernorm": nn.RMSNorm(D, **kw),
        })

    return nn.ModuleDict({
        "embed_tokens": nn.Embedding(V, D, **kw), "layers": nn.ModuleList(block() for _ in range(L)),
        "norm": nn.RMSNorm(D, **kw), "lm_head": nn.Linear(D, V, bias=False, **kw),
    })


def llama_decode_flops(m, batch, ctx):
    """FLOPs of one decode step on the meta modules: batch tokens, each attending ctx cached positions."""
    ids = torch.zeros(batch, 1, dtype=torch.long, device=META)
    g = H // HKV
    with FlopCounterMode(display=False) as counter:
        h = m["embed_tokens"](ids)                                          # (B, 1, d): a gathered row
        for blk in m["layers"]:
            a = blk["input_layernorm"](h)
            q = blk["q_proj"](a).view(batch, HKV, g, 1, DH)
            blk["k_proj"](a), blk["v_proj"](a)                              # the new token's K and V
            k = torch.empty(batch, HKV, 1, ctx, DH, dtype=BF16, device=META)  # the cache, new token included
            v = torch.empty(batch, HKV, 1, ctx, DH, dtype=BF16, device=META)
            p = (q @ k.transpose(-1, -2) * DH**-0.5).softmax(-1)            # (B, H_kv, g, 1, ctx)
            h = h + blk["o_proj"]((p @ v).reshape(batch, 1, H * DH))
            n = blk["post_attention_layernorm"](h)
            h = h + blk["down_proj"](F.silu(blk["gate_proj"](n)) * blk["up_proj"](n))
        m["lm_head"](m["norm"](h))
    return counter.get_total_flops()


llama = llama_meta()
w_total = sum(p.nbytes for p in llama.parameters())
w_emb = llama["embed_tokens"].weight.nbytes
w_read = w_total - w_emb                      # the embedding is gathered, one row per token; the rest is streamed
row_bytes = llama["embed_tokens"].weight[0].nbytes
cfg8 = ModelConfig(layers=L, d_model=D, heads=H, kv_heads=HKV, vocab=V, max_seq=T, ff_dim=3 * INTER // 2)
kvb8 = kv_bytes_per_token(cfg8, DT)
step = w_read + B2 * (T * kvb8 + row_bytes)   # the closed form: weights once, each sequence's cache and row
cost8 = decode_cost(cfg8, DT, batch=B2, context=T)
flops8 = llama_decode_flops(llama, B2, T)
value("l3_weights_gb", w_total / GB)
value("l3_read_gb", w_read / GB)
value("l3_emb_gb", w_emb / GB)
value("l3_kvb_bytes", kvb8)
value("l3_seq_cache_gb", T * kvb8 / GB)
value("l3_cache_gb", B2 * T * kvb8 / GB)
value("l3_row_bytes", row_bytes)
value("l3_step_gb", step / GB)
value("l3_sb_step_gb", cost8.bytes / GB)
value("l3_sb_extra_bytes", cost8.bytes - step)
per_tok = value("l3_per_token_gb", step / B2 / GB)
per_tok_1 = value("l3_per_token_b1_gb", (w_read + T * kvb8 + row_bytes) / GB)
value("l3_per_token_floor_gb", (T * kvb8 + row_bytes) / GB)
value("l3_gflops", flops8 / 1e9)
value("l3_kv_share", B2 * T * kvb8 / step)
i8 = value("l3_intensity", flops8 / step, unit="FLOP/B")
ridge = value("ridge", ridge_point(PEAK, BW_H100), unit="FLOP/B")
t100 = value("t_h100_ms", step / BW_H100 * 1e3)
t200 = value("t_h200_ms", step / BW_H200 * 1e3)
t_compute = value("t_compute_ms", flops8 / PEAK * 1e3)
value("h200_speedup", t100 / t200)
value("tok_s_h100", round(B2 / (t100 / 1e3)))
value("tok_s_h200", round(B2 / (t200 / 1e3)))
print(f"\nPart 2: Llama 3 8B in bf16, B = {B2} sequences at context {T:,}")
w2 = dict(w=48, cw=14)
row("", "meta / closed", "decode_cost", **w2)
row("weights, all, GB", f"{w_total / GB:.2f}", **w2)
row("weights read per step (no embedding), GB", f"{w_read / GB:.2f}", **w2)
row("KV cache per sequence, GB", f"{T * kvb8 / GB:.3f}", **w2)
row("KV cache of the batch, GB", f"{B2 * T * kvb8 / GB:.2f}", **w2)
row("bytes of the step, GB", f"{step / GB:.2f}", f"{cost8.bytes / GB:.2f}", **w2)
row("FLOPs of the step (FlopCounterMode), GFLOP", f"{flops8 / 1e9:.1f}", f"{cost8.flops / 1e9:.1f}", **w2)
row("intensity, FLOP/B", f"{i8:.1f}", f"{cost8.intensity:.1f}", **w2)
row("ridge of the H100, FLOP/B", f"{ridge:.1f}", **w2)
row("bytes per generated token, GB", f"{per_tok:.2f}", **w2)
row("the same at a batch of one, GB", f"{per_tok_1:.2f}", **w2)
row("bandwidth bound on the step, H100, ms", f"{t100:.2f}", **w2)
row("bandwidth bound on the step, H200, ms", f"{t200:.2f}", **w2)
row("compute bound on the step, H100, ms", f"{t_compute:.3f}", **w2)
sanity("l3_sb_extra_is_position_rows", cost8.bytes - step == B2 * D * torch.empty(0, dtype=BF16).element_size(),
       "decode_cost on the stand-in reads one more row per sequence (its position table) and nothing else",
       operands=(cost8.bytes - step, B2 * D * 2), relation=("not", "larger"))
sanity("l3_flops_two_routes", flops8 == cost8.flops,
       "FlopCounterMode on the meta Llama step counts the FLOPs decode_cost gives", operands=(flops8, cost8.flops),
       relation="equal")
sanity("l3_memory_bound", i8 < ridge and t_compute < t100,
       "the step's intensity is below the ridge: the bytes, not the FLOPs, bound its time", operands=(i8, ridge),
       relation=("smaller", "at least", "not"))
asym = value("l3_asymptote", (cost8.flops / B2) / (T * kvb8 + row_bytes), unit="FLOP/B")
crit = critical_decode_batch(cfg8, DT, context=T, peak_flops=PEAK, bandwidth=BW_H100)
value("l3_no_compute_bound_batch", crit is None)
sanity("l3_never_compute_bound", crit is None and asym < ridge,
       "each sequence adds fewer FLOPs per byte than the ridge: no batch is compute bound at this context",
       operands=(asym, ridge), relation="not")
sanity("h200_faster_by_bandwidth", abs(t100 / t200 - BW_H200 / BW_H100) < 1e-12 and t200 < t100,
       "the H200's bound is shorter by the ratio of the bandwidths", operands=(t100 / t200, BW_H200 / BW_H100),
       relation=("smaller", "equal"))
sanity("l3_per_token_falls", per_tok < per_tok_1,
       "batching cuts the bytes per generated token", operands=(per_tok, per_tok_1))
floor_tok = (T * kvb8 + row_bytes) / GB
sanity("l3_per_token_above_floor",
       per_tok > floor_tok and math.isclose(per_tok - floor_tok, w_read / B2 / GB, rel_tol=1e-12),
       "the bytes per generated token stay above one sequence's cache and row by the weights' share W / B",
       operands=(per_tok, floor_tok), relation=("larger", "falls", "not"))

# -- the batch from which the cache's bytes exceed the weights' ---------------------------------------
b_cross = 1
while torch.empty(L, 2, b_cross, HKV, T, DH, dtype=BF16, device=META).nbytes <= w_read:
    b_cross += 1
b_closed = w_read // (T * kvb8) + 1
value("b_cross", b_cross)
value("b_cross_closed", b_closed)
value("b_cross_below", b_cross - 1)
value("kv_pair", 2, fixed="keys and values: two tensors per position, by definition")
value("cross_tokens", w_read // kvb8)
value("cache_at_cross_gb", b_cross * T * kvb8 / GB)
value("cache_below_cross_gb", (b_cross - 1) * T * kvb8 / GB)
row("batch from which the cache outweighs the weights", b_cross, **w2)
row("tokens of cache that weigh as much as the weights", f"{w_read // kvb8:,}", **w2)
sanity("cross_two_routes", b_cross == b_closed and (b_cross - 1) * T * kvb8 <= w_read < b_cross * T * kvb8,
       "the meta-allocation search and floor(weights / (T kv_bytes_per_token)) + 1 agree", operands=(b_cross, b_closed),
       relation="equal")

# -- Variation: an fp8 cache ------------------------------------------------------------------------------
kvb8_fp8 = kv_bytes_per_token(cfg8, "fp8")
step_fp8 = w_read + B2 * (T * kvb8_fp8 + row_bytes)
value("var_fp8_step_gb", step_fp8 / GB)
value("var_fp8_t_h100_ms", step_fp8 / BW_H100 * 1e3)
value("var_fp8_per_token_gb", step_fp8 / B2 / GB)
fp8_cache = torch.empty(L, 2, B2, HKV, T, DH, dtype=torch.float8_e4m3fn, device=META).nbytes
sanity("var_fp8_cache_half", 2 * fp8_cache == B2 * T * kvb8 and step_fp8 == w_read + B2 * row_bytes + fp8_cache,
       "the fp8 cache of the batch (a meta tensor) is half the bf16 cache term; the rest of the step is unchanged",
       operands=(fp8_cache, B2 * T * kvb8 / 2), relation="half")
b_cross_fp8 = 1
while torch.empty(L, 2, b_cross_fp8, HKV, T, DH, dtype=torch.float8_e4m3fn, device=META).nbytes <= w_read:
    b_cross_fp8 += 1
value("var_fp8_b_cross", b_cross_fp8)
print(f"\nVariation, fp8 cache: step {step_fp8 / GB:.2f} GB, bound {step_fp8 / BW_H100 * 1e3:.2f} ms at H100;"
      f" the cache outweighs the weights from B = {b_cross_fp8}")
sanity("var_fp8_cross", b_cross_fp8 == w_read // (T * kvb8_fp8) + 1,
       "the fp8 crossover by meta allocations agrees with the closed form",
       operands=(b_cross_fp8, w_read // (T * kvb8_fp8) + 1))
