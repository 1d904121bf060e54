"""III.2.A02 — The cache of a batch at full context, in bf16 and in fp8.

Llama 3 8B's configuration from the facts file goes into a servebench ModelConfig, and
servebench.memory.kv_cache_bytes gives the cache of B sequences of T tokens in bf16 and in fp8.
Two more routes measure the same bytes: one meta-device tensor in the layout
(layers, 2, B, H_kv, T, D_h), and servebench's own KVCache (the model's K and V tensors) built
on the meta device. The fp8 element size comes from torch.float8_e4m3fn. The weights the cache
is compared with are counted on a meta-device copy of Llama 3 8B's modules.
"""

import torch
from torch import nn

from numbook.check import fact, given, sanity, value
from servebench import KVCache, ModelConfig, dtype_bytes, kv_bytes_per_token, kv_cache_bytes

GB, GiB = 10**9, 2**30
META = torch.device("meta")
DTYPES = {"bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}


def row(label, *cells, w=32, cw=16):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


def llama_meta(layers, d, heads, kv_heads, inter, vocab, dtype):
    """Llama 3's modules on the meta device: embedding, per layer q, k, v, o, gate, up, down and two
    RMSNorms, a final RMSNorm and an untied LM head, no biases. Only shapes: no memory is used."""
    dh = d // heads
    kw = dict(device=META, dtype=dtype)

    def block():
        return nn.ModuleDict({
            "q_proj": nn.Linear(d, heads * dh, bias=False, **kw),
            "k_proj": nn.Linear(d, kv_heads * dh, bias=False, **kw),
            "v_proj": nn.Linear(d, kv_heads * dh, bias=False, **kw),
            "o_proj": nn.Linear(heads * dh, d, bias=False, **kw),
            "gate_proj": nn.Linear(d, inter, bias=False, **kw), "up_proj": nn.Linear(d, inter, bias=False, **kw),
            "down_proj": nn.Linear(inter, d, bias=False, **kw),
            "input_layernorm": nn.RMSNorm(d, **kw), "post_attention_layernorm": nn.RMSNorm(d, **kw),
        })

    return nn.ModuleDict({
        "embed_tokens": nn.Embedding(vocab, d, **kw), "layers": nn.ModuleList(block() for _ in range(layers)),
        "norm": nn.RMSNorm(d, **kw), "lm_head": nn.Linear(d, vocab, bias=False, **kw),
    })


# -- the model and the batch ------------------------------------------------------------------
L = fact("llama3_8b_layers", "layers")
H = fact("llama3_8b_heads", "heads", nudge=-16)      # halved: it must divide d and be a multiple of kv_heads
D = fact("llama3_8b_hidden", "d_model", nudge=H)       # one head count: d stays a multiple of H
HKV = fact("llama3_8b_kv_heads", "kv_heads", nudge=8)  # doubled: it must divide the heads
V = fact("llama3_8b_vocab", "vocab")
INTER = fact("llama3_8b_intermediate", "intermediate")
T = fact("llama3_8b_context", "T")
B = given("B", 32)
cfg = ModelConfig(layers=L, d_model=D, heads=H, kv_heads=HKV, vocab=V, max_seq=T)
value("head_dim", cfg.head_dim)
print(f"Llama 3 8B: {L} layers, d = {D}, {H} heads, {HKV} KV heads of {cfg.head_dim}; B = {B} sequences of T = {T:,}")

# -- bytes per element ------------------------------------------------------------------------------
ELEM = "bytes of one element of the dtype: a property of the format"
elem = {name: torch.empty(0, dtype=dt).element_size() for name, dt in DTYPES.items()}
value("bf16_bytes", elem["bf16"], fixed=ELEM)
value("fp8_bytes", elem["fp8"], fixed=ELEM)
e5m2 = torch.empty(0, dtype=torch.float8_e5m2).element_size()
sanity("elem_two_routes", all(dtype_bytes(n) == e for n, e in elem.items()) and e5m2 == elem["fp8"],
       "servebench's bytes per element equal torch's element_size for bf16 and both fp8 formats",
       operands=([dtype_bytes(n) for n in DTYPES], list(elem.values())), relation="equal")

# -- three routes to the cache's bytes --------------------------------------------------------------
layout = (L, 2, B, HKV, T, cfg.head_dim)     # (layers, K and V, batch, KV heads, tokens, head width)
res = {}
for name, dt in DTYPES.items():
    sb = kv_cache_bytes(cfg, name, slots=B, tokens=T)                  # servebench's formula
    one = torch.empty(layout, dtype=dt, device=META)                   # one tensor in the layout
    cache = KVCache(cfg, B, dt, META)                                  # the model's K and V tensors
    res[name] = dict(sb=sb, one=one.nbytes, kvcache=cache.nbytes, kvb=kv_bytes_per_token(cfg, name),
                     numel=one.numel(), k_shape=tuple(cache.k.shape))
    value(f"kvb_{name}_bytes", res[name]["kvb"])
    value(f"kvb_{name}_kib", res[name]["kvb"] / 2**10)
    value(f"cache_{name}_bytes", sb)
    value(f"cache_{name}_gb", sb / GB)
    value(f"cache_{name}_gib", sb / GiB)
    value(f"layout_{name}_bytes", one.nbytes)
    value(f"kvcache_{name}_bytes", cache.nbytes)
    value(f"per_seq_{name}_gib", T * res[name]["kvb"] / GiB)
    value(f"per_seq_{name}_gb", T * res[name]["kvb"] / GB)
value("layout_shape", layout)
value("kv_pair", layout[1], fixed="keys and values: two tensors per position, by definition")
value("layout_numel", res["bf16"]["numel"])
value("kvcache_k_shape", res["bf16"]["k_shape"])
value("hf_k_shape", (B, HKV, T, cfg.head_dim))

print("\nThe cache of the batch, three routes (bytes)")
row("route", "bf16", "fp8")
row("servebench kv_cache_bytes", f"{res['bf16']['sb']:,}", f"{res['fp8']['sb']:,}")
row("one meta tensor, .nbytes", f"{res['bf16']['one']:,}", f"{res['fp8']['one']:,}")
row("servebench KVCache, .nbytes", f"{res['bf16']['kvcache']:,}", f"{res['fp8']['kvcache']:,}")
print(f"  the one tensor: {layout}, {res['bf16']['numel']:,} elements")
print(f"  KVCache: a K and a V tensor, each {res['bf16']['k_shape']}")
print()
row("", "bf16", "fp8")
row("cache, GB", f"{res['bf16']['sb'] / GB:.2f}", f"{res['fp8']['sb'] / GB:.2f}")
row("cache, GiB", f"{res['bf16']['sb'] / GiB:.2f}", f"{res['fp8']['sb'] / GiB:.2f}")
row("bytes per token", f"{res['bf16']['kvb']:,}", f"{res['fp8']['kvb']:,}")
row("one sequence of T tokens, GiB", f"{T * res['bf16']['kvb'] / GiB:.3f}", f"{T * res['fp8']['kvb'] / GiB:.3f}")

for name in DTYPES:
    r = res[name]
    sanity(f"three_routes_{name}", r["sb"] == r["one"] == r["kvcache"],
           f"kv_cache_bytes, the layout tensor's .nbytes and KVCache.nbytes agree in {name}",
           operands=(r["sb"], r["one"]))
sanity("fp8_half", 2 * res["fp8"]["sb"] == res["bf16"]["sb"] and 2 * res["fp8"]["one"] == res["bf16"]["one"],
       "the fp8 cache is half the bf16 cache, by servebench and by the meta tensors",
       operands=(res["fp8"]["one"], res["bf16"]["one"] / 2), relation="half")
per_seq = torch.empty(L, 2, 1, HKV, T, cfg.head_dim, dtype=torch.bfloat16, device=META).nbytes
sanity("batch_linear", res["bf16"]["sb"] == B * per_seq, "the batch's cache is B times one sequence's",
       operands=(res["bf16"]["sb"], B * per_seq), relation="equal")

# -- GB against GiB -------------------------------------------------------------------------------------
value("gib_in_gb", GiB / GB, fixed="the size of a GiB in GB, 2^30 / 10^9: a definition")
# the same cache read with the wrong unit: its GiB figure taken as GB
gap_gb = value("unit_gap_gb", res["bf16"]["sb"] / GB - res["bf16"]["sb"] / GiB)
gap_seqs = value("unit_gap_seqs", gap_gb * GB / (T * res["bf16"]["kvb"]))
sanity("unit_gap", gap_gb > 0 and abs(gap_gb * GB - res["bf16"]["one"] * (1 - GB / GiB)) < 1e-3 * GB,
       "the GiB figure read as GB understates the bytes by a share 1 - 10^9/2^30, measured on the meta tensor",
       operands=(gap_gb, res["bf16"]["one"] * (1 - GB / GiB) / GB), relation="smaller")
fp8_max = value("fp8_max", torch.finfo(torch.float8_e4m3fn).max,
                fixed="the largest finite float8_e4m3fn: a property of the format")
every = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).float()   # all 256 bit patterns
sanity("fp8_max_two_routes", every[torch.isfinite(every)].max().item() == fp8_max,
       "torch.finfo's max is the largest finite value among all 256 float8_e4m3fn bit patterns",
       operands=(every[torch.isfinite(every)].max().item(), fp8_max), relation=("largest", "not"))

# -- the weights, counted on meta-device modules ----------------------------------------------------------
model = llama_meta(L, D, H, HKV, INTER, V, torch.bfloat16)
n_params = value("params", sum(p.numel() for p in model.parameters()))
w_bytes = value("weights_bytes", sum(p.nbytes for p in model.parameters()))
value("params_b", n_params / 1e9)
value("weights_gb", w_bytes / GB)
dh = cfg.head_dim
closed = 2 * V * D + L * (2 * D * H * dh + 2 * D * HKV * dh + 3 * D * INTER + 2 * D) + D
sanity("weights_closed_form", n_params == closed,
       "the meta modules hold 2Vd + L(2dHD_h + 2dH_kvD_h + 3dI + 2d) + d parameters", operands=(n_params, closed),
       relation="equal")
r_bf16 = value("cache_bf16_over_weights", res["bf16"]["sb"] / w_bytes)
r_fp8 = value("cache_fp8_over_weights", res["fp8"]["sb"] / w_bytes)
print()
row("weights, bf16 (meta modules), GB", f"{w_bytes / GB:.2f}", f"{w_bytes / GB:.2f}")
row("cache / weights", f"{r_bf16:.2f}", f"{r_fp8:.2f}")
row("cache + weights, GB", f"{(res['bf16']['sb'] + w_bytes) / GB:.2f}", f"{(res['fp8']['sb'] + w_bytes) / GB:.2f}")
value("total_bf16_gb", (res["bf16"]["sb"] + w_bytes) / GB)
value("total_fp8_gb", (res["fp8"]["sb"] + w_bytes) / GB)
sanity("bf16_cache_exceeds_weights", res["bf16"]["one"] > w_bytes,
       "the bf16 cache of the batch is larger than the weights", operands=(res["bf16"]["one"], w_bytes),
       relation="larger")
sanity("fp8_cache_exceeds_weights", res["fp8"]["one"] > w_bytes,
       "even in fp8 the cache of the batch is larger than the weights", operands=(res["fp8"]["one"], w_bytes),
       relation=("larger", "smaller"))

# -- Variation: the same batch with one KV head per query head (the multi-head layout of Llama 2 7B) -------
# The cache is set against the weights of the model it belongs to: with H_kv = H the k and v projections
# are d x d, so the weights grow too.
cfg_mha = ModelConfig(layers=L, d_model=D, heads=H, kv_heads=H, vocab=V, max_seq=T)
var = {name: KVCache(cfg_mha, B, dt, META).nbytes for name, dt in DTYPES.items()}
value("var_bf16_gb", var["bf16"] / GB)
value("var_fp8_gb", var["fp8"] / GB)
var_ratio = value("var_ratio", var["bf16"] / res["bf16"]["sb"])
model_mha = llama_meta(L, D, H, H, INTER, V, torch.bfloat16)
w_mha = value("var_weights_bytes", sum(p.nbytes for p in model_mha.parameters()))
value("var_weights_gb", w_mha / GB)
value("var_weights_growth_gb", (w_mha - w_bytes) / GB)
value("var_fp8_over_weights", var["fp8"] / w_mha)
value("var_bf16_over_weights", var["bf16"] / w_mha)
print(f"\nVariation: {H} KV heads: KVCache {var['bf16'] / GB:.2f} GB in bf16, {var['fp8'] / GB:.2f} GB in fp8,"
      f" {var_ratio:g} times the grouped-query cache")
print(f"  the multi-head model's weights: {w_mha / GB:.2f} GB in bf16; its fp8 cache is {var['fp8'] / w_mha:.2f} times"
      " them")
sanity("var_ratio_is_group", var_ratio == H / HKV and var["bf16"] == kv_cache_bytes(cfg_mha, "bf16", slots=B, tokens=T),
       "the cache grows by H / H_kv; KVCache agrees with kv_cache_bytes", operands=(var_ratio, H / HKV),
       relation="grows")
n_mha = sum(p.numel() for p in model_mha.parameters())
sanity("var_weights_grow", w_mha > w_bytes and n_mha - n_params == 2 * L * D * (H - HKV) * dh,
       "with H_kv = H the k and v projections widen: the weights grow by 2 L d (H - H_kv) D_h parameters",
       operands=(w_mha, w_bytes), relation="grows")
