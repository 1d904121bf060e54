"""I.1.A04 — MB versus MiB, GB versus GiB, where the difference decides a fit.

The gap between each decimal prefix (10^3k bytes) and its binary twin (2^10k bytes), two ways:
the ratio of the definitions and the compounding of the first gap. Then a fit: Llama 3 70B's
weights in fp8 (meta tensors of every matrix, counted from its config) and a bf16 KV cache of
full-context sequences, against the H100's 80 GB datasheet figure read as GB and misread as GiB.
The number of sequences that fit is found by probing meta tensors of growing batch size.
"""

import math

import torch

from numbook.check import fact, given, sanity, value

KB, MB, GB, TB = 10**3, 10**6, 10**9, 10**12
KiB, MiB, GiB, TiB = 2**10, 2**20, 2**30, 2**40
DEF = "a ratio of the unit definitions (2^10k against 10^3k bytes): no input of the problem moves it"


def row(label, *cells, w=40, cw=16):
    print(f"  {label:<{w}}" + "".join(f"{c!s:>{cw}}" for c in cells))


# -- Step 1: the gap at each prefix -----------------------------------------------------------------
value("kb_bytes", KB, fixed="the definition of the kilobyte")
value("kib_bytes", KiB, fixed="the definition of the kibibyte")
first = value("kib_over_kb", KiB / KB, fixed=DEF)
print("Decimal against binary prefixes")
row("prefix", "decimal bytes", "binary bytes", "binary/decimal", "gap", w=12, cw=19)
gaps = []
for k, (dec, bin_, dn, bn) in enumerate([(KB, KiB, "KB", "KiB"), (MB, MiB, "MB", "MiB"), (GB, GiB, "GB", "GiB"),
                                         (TB, TiB, "TB", "TiB")], start=1):
    ratio = bin_ / dec
    gap = value(f"gap_{dn.lower()}", ratio - 1, fixed=DEF)
    value(f"under_{dn.lower()}", 1 - dec / bin_, fixed=DEF)
    gaps.append(gap)
    row(f"{dn} / {bn}", f"{dec:,}", f"{bin_:,}", f"{ratio:.6f}", f"{100 * gap:.2f} %", w=12, cw=19)
    # second route: the first gap compounded k times, 1.024^k, with 1.024 = KiB / KB
    sanity(f"gap_{dn.lower()}_compounds", math.isclose(ratio, first**k),
           f"{bn}/{dn} = (KiB/KB)^{k}", operands=(ratio, first**k),
           relation={"gb": ("differs", "larger", "smaller"), "kb": ("equal", "grows")}.get(dn.lower()))
sanity("gap_grows", all(b > a for a, b in zip(gaps, gaps[1:], strict=False)),
       "the gap grows with every prefix step", operands=(gaps[0], gaps[-1]), relation=("grows", "larger"))

# -- Step 2: the model's weights in fp8 ---------------------------------------------------------------
V = fact("llama3_70b_vocab", "V")
d = fact("llama3_70b_hidden", "d", nudge=64)          # nudged by a head count: H still divides d
L = fact("llama3_70b_layers", "L")
H = fact("llama3_70b_heads", "H", nudge=64)           # nudged to 128: still a multiple of Hkv
Hkv = fact("llama3_70b_kv_heads", "Hkv", nudge=8)     # nudged to 16: still divides H
f = fact("llama3_70b_intermediate", "f")
mem_gb = fact("h100_sxm_memory_gb", "mem_gb")
T = given("T", 8192)                                  # tokens of context per sequence
Dh = d // H

meta = dict(device="meta")
fp8, bf16, f32 = torch.float8_e4m3fn, torch.bfloat16, torch.float32
per_layer = [(H * Dh, d), (Hkv * Dh, d), (Hkv * Dh, d), (d, H * Dh), (f, d), (f, d), (d, f)]   # (out, in)
matrices = [(V, d)] + per_layer * L + [(V, d)]        # embedding, L layers, untied head
vectors = [d] * (2 * L + 1)                           # two RMSNorms a layer and the final one
w_bytes = (sum(torch.empty(s, dtype=fp8, **meta).nbytes for s in matrices)            # fp8 codes
           + len(matrices) * torch.empty((), dtype=f32, **meta).nbytes               # one fp32 scale each
           + sum(torch.empty(n, dtype=bf16, **meta).nbytes for n in vectors))        # bf16 norms
n_params = value("n_params", sum(math.prod(s) for s in matrices) + sum(vectors))
closed = 2 * V * d + L * (2 * d * H * Dh + 2 * d * Hkv * Dh + 3 * d * f + 2 * d) + d
sanity("params_closed_form", closed == n_params, "the count from the matrix list equals the closed form",
       operands=(n_params, closed), relation="equal")
value("weights_bytes", w_bytes)
value("weights_gb", w_bytes / GB)
value("weights_gib", w_bytes / GiB)

# -- Step 3: the KV cache: bytes per token and per sequence --------------------------------------------
one_seq = torch.empty(L, 2, Hkv, T, Dh, dtype=bf16, **meta)      # K and V of every layer, one sequence
kv_tok = value("kv_bytes_per_token", one_seq.nbytes // T)
value("kv_kb_per_token", kv_tok / KB)
value("kv_kib_per_token", kv_tok / KiB)
seq = value("kv_seq_bytes", one_seq.nbytes)
value("kv_seq_gb", seq / GB)
value("kv_seq_gib", seq / GiB)
sanity("kv_closed_form", kv_tok == 2 * L * Hkv * Dh * torch.empty((), dtype=bf16).element_size()
       and seq == kv_tok * T, "KV bytes per token = 2 L Hkv Dh x 2 bytes", operands=(kv_tok, 2 * L * Hkv * Dh * 2))

print(f"\nLlama 3 70B: {n_params:,} parameters; fp8 weights, bf16 KV cache, T = {T:,}")
row("", "bytes", "decimal", "binary", w=34, cw=16)
row("weights (fp8, scales, bf16 norms)", f"{w_bytes:,}", f"{w_bytes / GB:.2f} GB", f"{w_bytes / GiB:.2f} GiB",
    w=34, cw=16)
row("KV cache per token", f"{kv_tok:,}", f"{kv_tok / KB:.2f} KB", f"{kv_tok / KiB:.2f} KiB", w=34, cw=16)
row("KV cache per sequence", f"{seq:,}", f"{seq / GB:.3f} GB", f"{seq / GiB:.3f} GiB", w=34, cw=16)

# -- Step 4: the GPU, read two ways, and what fits --------------------------------------------------------
cap_right = value("cap_bytes", mem_gb * GB)           # the datasheet's GB: 10^9 bytes
cap_wrong = value("cap_misread_bytes", mem_gb * GiB)  # the same figure misread as GiB
value("cap_gib", cap_right / GiB)
value("cap_misread_gb", cap_wrong / GB)
free_right = value("free_gb", (cap_right - w_bytes) / GB)
free_wrong = value("free_misread_gb", (cap_wrong - w_bytes) / GB)
free_err = value("free_overstated", (cap_wrong - w_bytes) / (cap_right - w_bytes) - 1)
gap_g = (GiB - GB) / GB
value("cap_full_share", w_bytes / cap_right)
# second route: the capacity error (gap_g x capacity) spread over the free part alone
sanity("free_error_amplified", math.isclose(free_err, gap_g * cap_right / (cap_right - w_bytes)) and free_err > gap_g,
       "misreading GB as GiB overstates the free memory by gap x capacity / free: far more than the gap itself",
       operands=(free_err, gap_g), relation="equal")


def most_sequences(capacity):
    """Probe meta KV caches of growing batch size: the largest B whose weights + cache fit."""
    b = 0
    while w_bytes + torch.empty(b + 1, L, 2, Hkv, T, Dh, dtype=bf16, **meta).nbytes <= capacity:
        b += 1
    return b


b_right = value("seqs_fit", most_sequences(cap_right))
b_wrong = value("seqs_fit_misread", most_sequences(cap_wrong))
used_right = value("used_at_fit_gb", (w_bytes + b_right * seq) / GB)
over_right = value("used_one_more_gb", (w_bytes + (b_right + 1) * seq) / GB)
value("used_misread_fit_gb", (w_bytes + b_wrong * seq) / GB)
value("seqs_shift", b_wrong - b_right)

print(f"\nThe datasheet's {mem_gb} GB, read two ways")
row("", "capacity bytes", "free", "sequences", w=36, cw=18)
row(f"{mem_gb} GB (as written)", f"{cap_right:,}", f"{free_right:.2f} GB", b_right, w=36, cw=18)
row(f"{mem_gb} GiB (misread)", f"{cap_wrong:,}", f"{free_wrong:.2f} GB", b_wrong, w=36, cw=18)
row(f"weights + cache at B = {b_right}, {b_right + 1}", f"{used_right:.2f} GB", f"{over_right:.2f} GB", w=36, cw=18)
closed_fit = (math.floor((cap_right - w_bytes) / seq), math.floor((cap_wrong - w_bytes) / seq))
sanity("fit_closed_form", (b_right, b_wrong) == closed_fit,
       "the meta-tensor probe agrees with floor(free bytes / bytes per sequence)",
       operands=((b_right, b_wrong), closed_fit), relation="equal")
sanity("readings_disagree", b_wrong > b_right and used_right <= mem_gb < over_right,
       "the misread capacity admits more sequences than the GPU holds", operands=(b_wrong, b_right), relation="not")
sanity("weights_fit_both", w_bytes < cap_right < cap_wrong, "the weights alone fit under either reading",
       operands=(w_bytes, cap_right))

# -- variation: a batch of shorter sequences ----------------------------------------------------------------
T2 = given("T2", 4096)
seq2 = torch.empty(1, L, 2, Hkv, T2, Dh, dtype=bf16, **meta).nbytes
value("v_seq_gb", seq2 / GB)
v_right = value("v_seqs_fit", math.floor((cap_right - w_bytes) / seq2))
v_wrong = value("v_seqs_fit_misread", math.floor((cap_wrong - w_bytes) / seq2))
sanity("v_more_short", v_right >= 2 * b_right and v_wrong > v_right,
       "halving T at least doubles the sequences that fit", operands=(v_right, 2 * b_right),
       relation=("at least", "twice"))
print(f"\nVariation: T = {T2:,}: {seq2 / GB:.3f} GB per sequence; fit {v_right} (GB) against {v_wrong} (misread)")
