"""III.2.A01 — KV bytes per token: multi-head, grouped-query and multi-query attention.

Four real configurations, read from the facts file (Llama 2 7B, Llama 3 8B, Llama 3 70B,
Falcon-7B), go into servebench ModelConfigs; servebench.memory.kv_bytes_per_token gives each
one's bf16 cache bytes per token of context. A second route builds each model's k_proj and
v_proj as meta-device torch layers, projects one token's hidden state through them, reshapes
the outputs to the (batch, kv_heads, tokens, head_dim) layout a cache stores, and sums the
.nbytes of K and V over the layers. The saving of grouped-query attention is measured against
the same model with one KV head per query head.
"""

import dataclasses

import torch
from torch import nn

from numbook.check import fact, sanity, value
from servebench import ModelConfig, dtype_bytes, kv_bytes_per_token

KiB, GiB = 2**10, 2**30
DT, TORCH_DT = "bf16", torch.bfloat16
META = torch.device("meta")


def row(label, *cells, w=12, cw=11):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


# Each model: (its name, the prefix of its facts, the prefix of its inputs, the kind of attention,
# nudges for --perturb). A nudge must leave a valid shape: the width stays a multiple of the head
# count (nudged by one head count), the head count is doubled (the KV heads still divide it), and
# the KV heads move to another divisor of the head count.
MODELS = [
    ("Llama 2 7B", "llama2_7b", "l2", "multi-head", dict(heads=32, kv=-16)),
    ("Llama 3 8B", "llama3_8b", "l3", "grouped-query", dict(heads=32, kv=8)),
    ("Llama 3 70B", "llama3_70b", "l70", "grouped-query", dict(heads=64, kv=8)),
    ("Falcon-7B", "falcon_7b", "f7", "multi-query", dict(heads=71, kv=70)),
    ("Qwen2-7B", "qwen2_7b", "q7", "grouped-query", dict(heads=28, kv=3)),   # the Variation
]


def meta_kv_bytes(cfg: ModelConfig):
    """Second route: one token through each layer's k_proj and v_proj on the meta device.

    Returns the summed .nbytes of K and V over the layers and the shapes of one layer's trace.
    """
    x = torch.empty(1, 1, cfg.d_model, dtype=TORCH_DT, device=META)      # (batch, tokens, d)
    total, trace = 0, None
    for _ in range(cfg.layers):
        k_proj = nn.Linear(cfg.d_model, cfg.n_kv_heads * cfg.head_dim, bias=False, device=META, dtype=TORCH_DT)
        v_proj = nn.Linear(cfg.d_model, cfg.n_kv_heads * cfg.head_dim, bias=False, device=META, dtype=TORCH_DT)
        q_proj = nn.Linear(cfg.d_model, cfg.heads * cfg.head_dim, bias=False, device=META, dtype=TORCH_DT)
        k_flat = k_proj(x)                                                   # (1, 1, H_kv * D_h)
        k = k_flat.view(1, 1, cfg.n_kv_heads, cfg.head_dim).transpose(1, 2)  # (1, H_kv, 1, D_h)
        v = v_proj(x).view(1, 1, cfg.n_kv_heads, cfg.head_dim).transpose(1, 2)
        q = q_proj(x).view(1, 1, cfg.heads, cfg.head_dim).transpose(1, 2)    # (1, H, 1, D_h): not cached
        total += k.nbytes + v.nbytes
        trace = (tuple(x.shape), tuple(k_flat.shape), tuple(k.shape), tuple(q.shape), k.nbytes + v.nbytes)
    return total, trace


bf16_elem = value("bf16_bytes", torch.empty(0, dtype=TORCH_DT).element_size(),
                  fixed="bytes of a bf16 element: a property of the dtype")
sanity("bf16_two_routes", dtype_bytes(DT) == bf16_elem, "servebench's bf16 is torch's bfloat16 element size",
       operands=(dtype_bytes(DT), bf16_elem), relation="equal")

res = {}
print("Configurations (config.json fields, from checks/facts.yml)")
row("model", "layers L", "width d", "heads H", "KV heads", "head dim", cw=10)
for name, fkey, k, kind, nudge in MODELS:
    layers = fact(f"{fkey}_layers", f"{k}_layers")
    heads = fact(f"{fkey}_heads", f"{k}_heads", nudge=nudge["heads"])
    d = fact(f"{fkey}_hidden", f"{k}_d", nudge=heads)         # one head count: d stays a multiple of H
    kv_heads = fact(f"{fkey}_kv_heads", f"{k}_kv_heads", nudge=nudge["kv"])
    # vocab and max_seq do not enter the cache per token: servebench's defaults stand in for them
    cfg = ModelConfig(layers=layers, d_model=d, heads=heads, kv_heads=kv_heads)
    value(f"{k}_head_dim", cfg.head_dim)
    value(f"{k}_group", cfg.heads // cfg.n_kv_heads)
    row(name, layers, f"{d:,}", heads, kv_heads, cfg.head_dim, cw=10)
    print(f"  {'':<12}{kind} attention; query heads per KV head: {cfg.heads // cfg.n_kv_heads}")

    kvb = value(f"{k}_kv_bytes", kv_bytes_per_token(cfg, DT))          # route 1: servebench
    meta_total, trace = meta_kv_bytes(cfg)                             # route 2: real layers on meta
    value(f"{k}_meta_bytes", meta_total)
    value(f"{k}_layer_bytes", trace[4])
    value(f"{k}_kv_kib", kvb / KiB)
    value(f"{k}_gib_tokens", GiB // kvb)
    mha = value(f"{k}_mha_bytes", kv_bytes_per_token(dataclasses.replace(cfg, kv_heads=cfg.heads), DT))
    value(f"{k}_mha_kib", mha / KiB)
    value(f"{k}_saving", mha / kvb)
    res[k] = dict(name=name, cfg=cfg, kvb=kvb, meta=meta_total, trace=trace, mha=mha)

print("\nKV cache per token of context, bf16")
row("model", "servebench", "meta nbytes", "KiB", "per layer", "MHA KiB", "saving", "tokens/GiB", cw=12)
for r in res.values():
    row(r["name"], f"{r['kvb']:,}", f"{r['meta']:,}", f"{r['kvb'] / KiB:g}", f"{r['trace'][4]:,}",
        f"{r['mha'] / KiB:g}", f"{r['mha'] / r['kvb']:g}x", f"{GiB // r['kvb']:,}", cw=12)
print("  (MHA: the same model with one KV head per query head; saving = MHA bytes / bytes)")

sanity("two_routes", all(r["kvb"] == r["meta"] for r in res.values()),
       "servebench's kv_bytes_per_token equals the summed .nbytes of one token's K and V over the layers",
       operands=([r["kvb"] for r in res.values()], [r["meta"] for r in res.values()]), relation="equal")
sanity("saving_is_group", all(r["mha"] * r["cfg"].n_kv_heads == r["kvb"] * r["cfg"].heads for r in res.values()),
       "one KV head per query head costs H / H_kv times the bytes",
       operands=([r["mha"] / r["kvb"] for r in res.values()], [r["cfg"].heads / r["cfg"].n_kv_heads
                                                                 for r in res.values()]),
       relation=("smaller", "not", "equal"))
sanity("per_layer_times_layers", all(r["trace"][4] * r["cfg"].layers == r["kvb"] for r in res.values()),
       "every layer stores the same K and V, so the per-layer bytes times L give the total",
       operands=([r["trace"][4] * r["cfg"].layers for r in res.values()], [r["kvb"] for r in res.values()]))

# -- the shape trace of one token, for Llama 3 8B -------------------------------------------------
x_shape, kflat_shape, k_shape, q_shape, _ = res["l3"]["trace"]
value("l3_x_shape", x_shape)
value("l3_kflat_shape", kflat_shape)
value("l3_k_shape", k_shape)
value("l3_q_shape", q_shape)
print("\nOne token through one layer of Llama 3 8B (meta tensors)")
row("hidden x", str(x_shape), w=22, cw=20)
row("k_proj(x)", str(kflat_shape), w=22, cw=20)
row("K = view, transpose", str(k_shape), w=22, cw=20)
row("Q (not cached)", str(q_shape), w=22, cw=20)


# -- comparisons between models, each against the closed form 2 L H_kv D_h b --------------------
def closed(c: ModelConfig) -> int:
    return 2 * c.layers * c.n_kv_heads * c.head_dim * bf16_elem


l2, l3, l70, f7 = (res[k] for k in ("l2", "l3", "l70", "f7"))
r_l2_l3 = value("ratio_l2_over_l3", l2["kvb"] / l3["kvb"])
r_70_l2 = value("ratio_70_over_l2", l70["kvb"] / l2["kvb"])
r_70_l3 = value("ratio_70_over_l3", l70["kvb"] / l3["kvb"])
r_l2_f7 = value("ratio_l2_over_f7", l2["kvb"] / f7["kvb"])
print("\nRatios of bytes per token")
row("Llama 2 7B / Llama 3 8B", f"{r_l2_l3:g}", w=28)
row("Llama 3 70B / Llama 2 7B", f"{r_70_l2:g}", w=28)
row("Llama 3 70B / Llama 3 8B", f"{r_70_l3:g}", w=28)
row("Llama 2 7B / Falcon-7B", f"{r_l2_f7:g}", w=28)
sanity("l3_smaller_than_l2", l3["kvb"] < l2["kvb"] and r_l2_l3 == closed(l2["cfg"]) / closed(l3["cfg"]),
       "Llama 3 8B stores fewer bytes per token than Llama 2 7B, by the ratio of 2 L H_kv D_h b",
       operands=(l3["kvb"], l2["kvb"]), relation=("smaller", "equal"))
sanity("ratios_closed_form", r_70_l2 == closed(l70["cfg"]) / closed(l2["cfg"])
       and r_70_l3 == closed(l70["cfg"]) / closed(l3["cfg"]) and r_l2_f7 == closed(l2["cfg"]) / closed(f7["cfg"]),
       "each ratio equals the ratio of the closed forms 2 L H_kv D_h b",
       operands=((r_70_l2, r_70_l3, r_l2_f7), (closed(l70["cfg"]) / closed(l2["cfg"]),
                                               closed(l70["cfg"]) / closed(l3["cfg"]),
                                               closed(l2["cfg"]) / closed(f7["cfg"]))), relation="equal")
