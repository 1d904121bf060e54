"""III.2.A03 — The largest batch a GPU's memory allows after the weights.

Llama 3 8B's weights are counted on meta-device torch modules (embedding, 32 layers of
q, k, v, o and the three-matrix SwiGLU MLP, RMSNorms, an untied LM head). An H100's memory as the
device reports it (81,559 MiB), less a reserve fraction, less the weights, leaves the bytes for the
KV cache; the datasheet's 80 GB, taken as written, plans a smaller batch. The largest batch of
sequences at full context is found twice: by a search over B that allocates the cache
(layers, 2, B, H_kv, T, D_h) on the meta device, and by the closed form
floor(free / (T * kv_bytes_per_token)). servebench's max_sequences is run on the servebench
stand-in of the model to show what its own weight count changes.
"""

import torch
from _driver import driver_range
from torch import nn

from numbook.check import fact, given, sanity, value
from servebench import ModelConfig, kv_bytes_per_token, kv_cache_bytes, max_sequences, param_count, weight_bytes

GB, GiB, MiB = 10**9, 2**30, 2**20
META = torch.device("meta")
DTYPES = {"bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}


def row(label, *cells, w=40, cw=16):
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


def numel(module):
    return sum(p.numel() for p in module.parameters())


def largest_batch(free_bytes, seq_len, kv_per_token):
    """The closed form with the free bytes passed in: floor(free / (seq_len * kv_per_token)).

    servebench's max_sequences computes the free bytes itself from ITS model's weight count (with a
    learned position table Llama does not have); this takes the free bytes of the real model."""
    return max(0, free_bytes // (seq_len * kv_per_token))


def search(budget, weights, layers, kv_heads, seq_len, head_dim, dtype):
    """The largest B whose meta-allocated cache (layers, 2, B, kv_heads, T, D_h) fits beside the weights."""
    b = 0
    def cache(n):
        return torch.empty(layers, 2, n, kv_heads, seq_len, head_dim, dtype=dtype, device=META).nbytes

    while weights + cache(b + 1) <= budget:
        b += 1
    return b


# -- the model ------------------------------------------------------------------------------------
L = fact("llama3_8b_layers", "layers")
H = fact("llama3_8b_heads", "heads", nudge=-16)       # halved: it must divide d and be a multiple of kv_heads
D = fact("llama3_8b_hidden", "d_model", nudge=H)        # one head count: d stays a multiple of H
HKV = fact("llama3_8b_kv_heads", "kv_heads", nudge=8)   # doubled: it must divide the heads
V = fact("llama3_8b_vocab", "vocab")
INTER = fact("llama3_8b_intermediate", "intermediate", nudge=2)  # even: servebench's stand-in MLP is 3I/2 wide
T = fact("llama3_8b_context", "T")
MEM_MIB = fact("h100_sxm_memory_reported_mib", "memory_mib")   # what the device reports (nvidia-smi)
MEM_CUDA_MIB = fact("h100_sxm_memory_cuda_total_mib", "memory_cuda_mib")   # the CUDA runtime's total
value("smi_minus_cuda_mib", MEM_MIB - MEM_CUDA_MIB)
MEM = MEM_CUDA_MIB * MiB     # a program allocates from the CUDA runtime's total, not from nvidia-smi's
# the CUDA runtime's total moves by some MiB between machines: the lowest and highest found
MEM_LO_MIB = fact("h100_sxm_memory_cuda_total_low_mib", "memory_cuda_mib_low", unit="MiB")
MEM_HI_MIB = fact("h100_sxm_memory_cuda_total_high_mib", "memory_cuda_mib_high", unit="MiB")
MEM_GB = fact("h100_sxm_memory_gb", "memory_gb")                # the datasheet's figure
RESERVE = given("reserve", 0.10)
DH = D // H

model = llama_meta(L, D, H, HKV, INTER, V, torch.bfloat16)
blk = model["layers"][0]
parts = {
    "embedding": numel(model["embed_tokens"]),
    "attention q, k, v, o (per layer)": sum(numel(blk[n]) for n in ("q_proj", "k_proj", "v_proj", "o_proj")),
    "MLP gate, up, down (per layer)": sum(numel(blk[n]) for n in ("gate_proj", "up_proj", "down_proj")),
    "RMSNorms (per layer)": numel(blk["input_layernorm"]) + numel(blk["post_attention_layernorm"]),
    "final RMSNorm": numel(model["norm"]),
    "LM head (untied)": numel(model["lm_head"]),
}
value("emb_params", parts["embedding"])
value("attn_params", parts["attention q, k, v, o (per layer)"])
value("mlp_params", parts["MLP gate, up, down (per layer)"])
value("layer_params", numel(blk))
value("head_params", parts["LM head (untied)"])
n_params = value("params", numel(model))
W = value("weights_bytes", sum(p.nbytes for p in model.parameters()))
value("weights_gb", W / GB)
value("weights_gib", W / GiB)
value("params_b", n_params / 1e9)
print(f"Llama 3 8B on the meta device, bf16: {L} layers, d = {D}, {H} heads, {HKV} KV heads, I = {INTER:,}")
row("part", "parameters")
for name, n in parts.items():
    row(name, f"{n:,}")
row(f"all ({L} layers)", f"{n_params:,}")
row("bytes in bf16 (.nbytes)", f"{W:,}")
row("GB / GiB", f"{W / GB:.2f} / {W / GiB:.2f}")
closed_params = 2 * V * D + L * (2 * D * H * DH + 2 * D * HKV * DH + 3 * D * INTER + 2 * D) + D
sanity("weights_closed_form", n_params == closed_params and 2 * n_params == W,
       "the modules hold 2|V|d + L(2dHD_h + 2dH_kvD_h + 3dI + 2d) + d parameters, two bytes each",
       operands=(n_params, closed_params), relation="equal")

# -- the budget -------------------------------------------------------------------------------------
budget = int(MEM * (1 - RESERVE))
free = budget - W
value("reported_gb", MEM / GB)
value("budget_gb", budget / GB)
value("reserve_gb", MEM * RESERVE / GB)
value("free_gb", free / GB)
print(f"\nmemory {MEM_CUDA_MIB:,} MiB = {MEM / GB:.2f} GB, reserve {RESERVE:.0%}: budget {budget / GB:.2f} GB; "
      f"after the weights {free / GB:.2f} GB for the cache")

cfg = ModelConfig(layers=L, d_model=D, heads=H, kv_heads=HKV, vocab=V, max_seq=T, ff_dim=3 * INTER // 2)
value("sb_ff_dim", cfg.d_ff)
value("kv_pair", 2, fixed="keys and values: two tensors per position, by definition")
res = {}
row("", "bf16 cache", "fp8 cache")
for name, dt in DTYPES.items():
    kvb = kv_bytes_per_token(cfg, name)
    per_seq = kv_cache_bytes(cfg, name, slots=1, tokens=T)
    closed = largest_batch(free, T, kvb)
    found = search(budget, W, L, HKV, T, DH, dt)
    at = W + torch.empty(L, 2, found, HKV, T, DH, dtype=dt, device=META).nbytes
    over = W + torch.empty(L, 2, found + 1, HKV, T, DH, dtype=dt, device=META).nbytes
    sb = max_sequences(cfg, name, memory_bytes=budget, seq_len=T)
    no_res = largest_batch(MEM - W, T, kvb)
    ds_read = largest_batch(int(MEM_GB * GB * (1 - RESERVE)) - W, T, kvb)   # the datasheet's GB as written
    res[name] = dict(kvb=kvb, per_seq=per_seq, closed=closed, found=found, at=at, over=over, sb=sb,
                     no_res=no_res, ds_read=ds_read)
    value(f"per_seq_{name}_gb", per_seq / GB)
    value(f"b_max_{name}", found)
    value(f"b_closed_{name}", closed)
    value(f"used_at_max_{name}_gb", at / GB)
    value(f"used_over_{name}_gb", over / GB)
    value(f"cache_share_{name}", (at - W) / budget)
    value(f"b_sb_{name}", sb)
    value(f"b_no_reserve_{name}", no_res)
    value(f"b_ds_read_{name}", ds_read)
    sanity(f"search_matches_closed_{name}", found == closed and at <= budget < over,
           f"the meta-allocation search and floor(free / (T kv_bytes_per_token)) agree in {name}",
           operands=(found, closed), relation=("largest", "not") if name == "bf16" else None)
for label, key, fmt in [("bytes per token", "kvb", "{:,}"), ("one sequence of T tokens, GB", "per_seq", "{:.3f}"),
                        ("largest B, search over meta allocations", "found", "{}"),
                        ("largest B, closed form", "closed", "{}"),
                        ("largest B, servebench max_sequences", "sb", "{}"),
                        ("largest B, no reserve", "no_res", "{}"),
                        ("largest B, datasheet GB as written", "ds_read", "{}")]:
    row(label, *(fmt.format(res[n][key] / GB if key == "per_seq" else res[n][key]) for n in DTYPES))
row("weights + cache at largest B, GB", *(f"{res[n]['at'] / GB:.2f}" for n in DTYPES))
row("weights + cache at one more, GB", *(f"{res[n]['over'] / GB:.2f}" for n in DTYPES))

b16, b8 = res["bf16"]["found"], res["fp8"]["found"]
value("fp8_over_bf16", b8 / b16)
sanity("fp8_doubles", 2 * b16 <= b8 <= 2 * b16 + 1,
       "halving the bytes per token gives floor(2x) sequences: twice the bf16 batch, or one more",
       operands=(b8, 2 * b16), relation="twice")

# -- servebench's max_sequences counts its own model ----------------------------------------------------
sb_params = param_count(cfg)
extra = value("sb_extra_params", sb_params - n_params)
value("sb_extra_mb", (weight_bytes(cfg, "bf16") - W) / 1e6)
value("sb_params", sb_params)
print(f"\nservebench's stand-in ({cfg.d_ff:,}-wide two-matrix MLP, a learned position table):")
print(f"  {sb_params:,} parameters, {extra:,} more than the meta modules;"
      f" in fp8 it counts {weight_bytes(cfg, 'fp8') / GB:.2f} GB of weights")
sanity("sb_extra_is_positions", extra == T * D,
       "servebench's count exceeds Llama's by its learned position table, max_seq x d", operands=(extra, T * D),
       relation=("larger", "not"))
sanity("sb_within_one", 0 <= res["bf16"]["found"] - res["bf16"]["sb"] <= 1,
       "in bf16, counting a table smaller than one sequence's cache moves the answer by at most one",
       operands=(res["bf16"]["found"], res["bf16"]["sb"]), relation=("at most", "smaller"))
# max_sequences counts the weights in the dtype it is given: asked for fp8, it takes an fp8 model
sb_fp8_weights = value("sb_fp8_weights_gb", weight_bytes(cfg, "fp8") / GB)
fp8_model = largest_batch(budget - sb_params * torch.empty(0, dtype=torch.float8_e4m3fn).element_size(), T,
                          res["fp8"]["kvb"])
sanity("sb_fp8_is_fp8_weights", res["fp8"]["sb"] == fp8_model and res["fp8"]["sb"] >= res["fp8"]["found"],
       "servebench's fp8 answer is what one-byte weights of its own model would leave",
       operands=(res["fp8"]["sb"], fp8_model), relation="not")
sanity("table_below_one_sequence", extra * 2 < res["fp8"]["per_seq"],
       "the position table's bf16 bytes are less than one sequence's fp8 cache",
       operands=(extra * 2, res["fp8"]["per_seq"]), relation="smaller")

# -- Variation: half the context ------------------------------------------------------------------------
T2 = given("T_half", 4096)
per_seq2 = kv_cache_bytes(cfg, "bf16", slots=1, tokens=T2)
b_half = value("b_max_half_bf16", search(budget, W, L, HKV, T2, DH, torch.bfloat16))
value("per_seq_half_bf16_gb", per_seq2 / GB)
sanity("search_matches_closed_half", b_half == largest_batch(free, T2, res["bf16"]["kvb"]),
       "the search agrees with the closed form at the shorter context",
       operands=(b_half, largest_batch(free, T2, res["bf16"]["kvb"])))
value("tokens_full", b16 * T)
value("tokens_half", b_half * T2)
cap_tokens = free // res["bf16"]["kvb"]              # the free bytes as a number of tokens
sanity("tokens_one_budget", cap_tokens - T < b16 * T <= cap_tokens and cap_tokens - T2 < b_half * T2 <= cap_tokens,
       "both batches hold the free bytes' tokens, less what rounding down to whole sequences leaves: under one "
       "sequence of each length", operands=(b_half * T2, b16 * T), relation=("differs", "smaller"))
print(f"\nVariation, T = {T2:,} in bf16: largest B = {b_half} ({b_half * T2:,} tokens held,"
      f" against {b16 * T:,} at T = {T:,})")


# -- the captures' range of CUDA totals: every batch above at the lowest and the highest CUDA total found
def batches(mib):
    m = mib * MiB
    f = int(m * (1 - RESERVE)) - W
    return (tuple(largest_batch(f, T, res[n]["kvb"]) for n in DTYPES), largest_batch(f, T2, res["bf16"]["kvb"]),
            tuple(largest_batch(m - W, T, res[n]["kvb"]) for n in DTYPES))


ends = driver_range(batches, MEM_CUDA_MIB, MEM_LO_MIB, MEM_HI_MIB,
                    ((b16, b8), b_half, (res["bf16"]["no_res"], res["fp8"]["no_res"])),
                    "at the lowest and the highest CUDA total found, every largest batch is the same")
print(f"At {MEM_LO_MIB:,} and {MEM_HI_MIB:,} MiB: {ends[0]}, {ends[1]} (bf16, fp8; half context; no reserve)")
