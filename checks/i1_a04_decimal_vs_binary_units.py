"""I.1.A04 — MB versus MiB, GB versus GiB, where the difference decides a fit.

The gap between each decimal prefix (10^3k bytes) and its binary twin (2^10k bytes), two ways:
the ratio of the definitions and the compounding of the first gap. Then a fit: Llama 3 70B's
weights in fp8 (meta tensors of every matrix, counted from its config) and a bf16 KV cache of
full-context sequences, against an H100's memory: the capacity the device reports to software
(81,559 MiB, as nvidia-smi prints it), which decides the fit, and the datasheet's "80 GB". Each
figure is read in its own unit and misread in the other. The number of sequences that fit is found
by probing meta tensors of growing batch size.
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
mem_gb = fact("h100_sxm_memory_gb", "mem_gb")               # the datasheet's figure, in GB
mem_mib = fact("h100_sxm_memory_reported_mib", "mem_mib")   # what the device reports, in MiB (nvidia-smi)
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
# why the weights' GiB figure is not round: the matrices alone are not, and the vocabulary is why
Q = GiB // 4                                          # a quarter GiB: a GiB figure with at most two decimals
mat_bytes = value("matrix_bytes", sum(torch.empty(s, dtype=fp8, **meta).nbytes for s in matrices))
value("matrix_gib", mat_bytes / GiB)
eh_bytes = torch.empty(V, d, dtype=fp8, **meta).nbytes + torch.empty(V, d, dtype=fp8, **meta).nbytes
value("embed_head_mib", eh_bytes / MiB)
layer_bytes = sum(torch.empty(s, dtype=fp8, **meta).nbytes for s in per_layer) * L
value("layers_gib", layer_bytes / GiB)
v_two = 0
while V % 2 ** (v_two + 1) == 0:
    v_two += 1
v_odd = value("vocab_odd_part", V // 2**v_two)
value("vocab_two_power", v_two)
sanity("vocab_breaks_round", mat_bytes % Q != 0 and eh_bytes % Q != 0 and v_odd % 5 != 0 and v_odd > 1
       and mat_bytes == eh_bytes + layer_bytes,
       "the matrices' bytes are no whole number of quarter GiB, nor are the embedding and head's 2 V d bytes,"
       " whose vocabulary factor has an odd part other than a power of five",
       operands=(mat_bytes / GiB, eh_bytes / GiB), relation="not")
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

# -- Step 4: the GPU, each figure read in its unit and in the other, and what fits ---------------------------
cap_rep = value("cap_bytes", mem_mib * MiB)           # what the device reports: MiB, 2^20 bytes
cap_rep_mb = value("cap_misread_mb_bytes", mem_mib * MB)   # the same figure misread as MB
cap_ds = value("cap_ds_bytes", mem_gb * GB)           # the datasheet's GB: 10^9 bytes
cap_ds_gib = value("cap_misread_bytes", mem_gb * GiB)  # the datasheet's figure misread as GiB
value("cap_gb", cap_rep / GB)
value("cap_gib", cap_rep / GiB)
value("cap_ds_gib", cap_ds / GiB)
value("cap_misread_gb", cap_ds_gib / GB)
value("cap_misread_mb_gb", cap_rep_mb / GB)
free_rep = value("free_gb", (cap_rep - w_bytes) / GB)
free_mb = value("free_misread_mb_gb", (cap_rep_mb - w_bytes) / GB)
free_ds = value("free_ds_gb", (cap_ds - w_bytes) / GB)
free_gib = value("free_misread_gb", (cap_ds_gib - w_bytes) / GB)
value("cap_full_share", w_bytes / cap_rep)
ds_short = value("ds_under_reported", 1 - cap_ds / cap_rep)          # the datasheet's GB against the bytes reported
gib_over = value("gib_over_reported_mib", (cap_ds_gib - cap_rep) / MiB)  # 80 GiB against the MiB reported
sanity("ds_below_reported", cap_ds < cap_rep < cap_ds_gib,
       "the device reports more than the datasheet's GB read as written, and less than the figure read as GiB",
       operands=(cap_ds, cap_rep), relation=("smaller", "larger"))
# the MiB figure misread as MB: the capacity falls by the MB/MiB gap, and all of it comes off the free memory
free_err = value("free_understated", 1 - (cap_rep_mb - w_bytes) / (cap_rep - w_bytes))
under_m = 1 - MB / MiB
# second route: the capacity error (under_mb x capacity) spread over the free part alone
sanity("free_error_amplified", math.isclose(free_err, under_m * cap_rep / (cap_rep - w_bytes)) and free_err > under_m,
       "misreading MiB as MB understates the free memory by gap x capacity / free: far more than the gap itself",
       operands=(free_err, under_m), relation="equal")


def most_sequences(capacity):
    """Probe meta KV caches of growing batch size: the largest B whose weights + cache fit."""
    b = 0
    while w_bytes + torch.empty(b + 1, L, 2, Hkv, T, Dh, dtype=bf16, **meta).nbytes <= capacity:
        b += 1
    return b


b_rep = value("seqs_fit", most_sequences(cap_rep))
b_mb = value("seqs_fit_misread_mb", most_sequences(cap_rep_mb))
b_ds = value("seqs_fit_ds", most_sequences(cap_ds))
b_gib = value("seqs_fit_misread", most_sequences(cap_ds_gib))
used_rep = value("used_at_fit_gb", (w_bytes + b_rep * seq) / GB)
over_rep = value("used_one_more_gb", (w_bytes + (b_rep + 1) * seq) / GB)
value("seqs_lost_ds", b_rep - b_ds)
value("seqs_lost_mb", b_rep - b_mb)

print(f"\nAn H100 reports {mem_mib:,} MiB; its datasheet says {mem_gb} GB. Each read two ways")
row("", "capacity bytes", "free", "sequences", w=36, cw=18)
row(f"{mem_mib:,} MiB (as reported)", f"{cap_rep:,}", f"{free_rep:.2f} GB", b_rep, w=36, cw=18)
row(f"{mem_mib:,} MB (MiB misread)", f"{cap_rep_mb:,}", f"{free_mb:.2f} GB", b_mb, w=36, cw=18)
row(f"{mem_gb} GB (datasheet, as written)", f"{cap_ds:,}", f"{free_ds:.2f} GB", b_ds, w=36, cw=18)
row(f"{mem_gb} GiB (datasheet misread)", f"{cap_ds_gib:,}", f"{free_gib:.2f} GB", b_gib, w=36, cw=18)
row(f"weights + cache at B = {b_rep}, {b_rep + 1}", f"{used_rep:.2f} GB", f"{over_rep:.2f} GB", w=36, cw=18)
probed = (b_rep, b_mb, b_ds, b_gib)
closed_fit = tuple(math.floor((c - w_bytes) / seq) for c in (cap_rep, cap_rep_mb, cap_ds, cap_ds_gib))
sanity("fit_closed_form", probed == closed_fit,
       "the meta-tensor probe agrees with floor(free bytes / bytes per sequence) for every reading",
       operands=(probed, closed_fit), relation="equal")
sanity("reported_decides", w_bytes + b_rep * seq <= cap_rep < w_bytes + (b_rep + 1) * seq,
       "the sequences found fit the reported capacity, and one more does not", operands=(used_rep, over_rep),
       relation=("smaller", "larger"))
sanity("readings_disagree", b_ds < b_rep and b_mb < b_rep,
       "the datasheet's GB read as written, and the reported MiB misread as MB, plan fewer sequences than fit",
       operands=((b_ds, b_mb), b_rep), relation="smaller")
sanity("weights_fit_both", w_bytes < min(cap_rep_mb, cap_ds), "the weights alone fit under every reading",
       operands=(w_bytes, min(cap_rep_mb, cap_ds)))

# -- variation: a batch of shorter sequences ----------------------------------------------------------------
T2 = given("T2", 4096)
seq2 = torch.empty(1, L, 2, Hkv, T2, Dh, dtype=bf16, **meta).nbytes
value("v_seq_gb", seq2 / GB)
v_rep = value("v_seqs_fit", math.floor((cap_rep - w_bytes) / seq2))
v_ds = value("v_seqs_fit_ds", math.floor((cap_ds - w_bytes) / seq2))
v_mb = value("v_seqs_fit_misread_mb", math.floor((cap_rep_mb - w_bytes) / seq2))
sanity("v_more_short", v_rep >= 2 * b_rep and v_ds < v_rep and v_mb < v_rep,
       "halving T at least doubles the sequences that fit; the datasheet's GB and the misread MiB still plan fewer",
       operands=(v_rep, 2 * b_rep), relation=("at least", "twice", "smaller"))
print(f"\nVariation: T = {T2:,}: {seq2 / GB:.3f} GB per sequence; fit {v_rep} (reported),"
      f" {v_mb} (MiB misread as MB), {v_ds} (datasheet GB)")
