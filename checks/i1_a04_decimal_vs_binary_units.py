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
from _driver import driver_range

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
# what a program can allocate from: the total the CUDA runtime reports (cudaMemGetInfo, torch.cuda.mem_get_info)
mem_mib = fact("h100_sxm_memory_cuda_total_mib", "mem_mib")
smi_mib = fact("h100_sxm_memory_reported_mib", "smi_mib")   # nvidia-smi's (NVML's) total, which is larger
# the CUDA runtime's total moves by some MiB between machines: the lowest and highest found
mem_lo = fact("h100_sxm_memory_cuda_total_low_mib", "mem_mib_low", unit="MiB")
mem_hi = fact("h100_sxm_memory_cuda_total_high_mib", "mem_mib_high", unit="MiB")
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
# why the weights' GiB figure is not round: the matrices alone are not, and the vocabulary is why.
# A byte count is a whole number of quarter GiB when 2^28 divides it, whatever its odd factor.
Q = GiB // 4                                          # a quarter GiB: a GiB figure with at most two decimals


def two_power(x):
    """The exponent of the largest power of two that divides x, and the odd factor left."""
    k = 0
    while x % 2 ** (k + 1) == 0:
        k += 1
    return k, x // 2**k


mat_bytes = value("matrix_bytes", sum(torch.empty(s, dtype=fp8, **meta).nbytes for s in matrices))
value("matrix_gib", mat_bytes / GiB)
eh_bytes = torch.empty(V, d, dtype=fp8, **meta).nbytes + torch.empty(V, d, dtype=fp8, **meta).nbytes
value("embed_head_mib", eh_bytes / MiB)
layer_bytes = sum(torch.empty(s, dtype=fp8, **meta).nbytes for s in per_layer) * L
value("layers_gib", layer_bytes / GiB)
v_two, v_odd = two_power(V)
value("vocab_odd_part", v_odd)
value("vocab_two_power", v_two)
l_two, l_odd = two_power(layer_bytes)
e_two, e_odd = two_power(eh_bytes)
value("layers_two_power", l_two)
value("layers_odd_part", l_odd)
value("embed_head_two_power", e_two)
value("embed_head_odd_part", e_odd)
value("quarter_gib_two_power", two_power(Q)[0], fixed="a quarter GiB is 2^28 bytes by definition")
q_two = two_power(Q)[0]
sanity("vocab_breaks_round", mat_bytes % Q != 0 and eh_bytes % Q != 0 and e_two < q_two
       and (layer_bytes % Q == 0) == (l_two >= q_two) and e_two == v_two + two_power(2 * d)[0]
       and mat_bytes == eh_bytes + layer_bytes,
       "whole quarter GiB is a matter of the power of two (2^28 divides the bytes); the embedding and head's"
       " 2 V d bytes carry fewer twos than that, because V does, and are not whole quarter GiB",
       operands=(e_two, l_two), relation=("not", "smaller"))
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

print(f"\nAn H100's CUDA runtime reports {mem_mib:,} MiB; its datasheet says {mem_gb} GB. Each read two ways")
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
# nvidia-smi's larger total, read as MiB: more than a program can allocate
cap_smi = smi_mib * MiB
b_smi = value("seqs_fit_smi", most_sequences(cap_smi))
value("smi_minus_cuda_mib", smi_mib - mem_mib)
value("free_smi_gb", (cap_smi - w_bytes) / GB)
sanity("smi_above_cuda", cap_smi > cap_rep and b_smi >= b_rep,
       "nvidia-smi's total is larger than the CUDA runtime's and plans at least as many sequences",
       operands=(cap_smi, cap_rep), relation=("larger", "at least"))
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


# -- the captures' range of CUDA totals: every count above at the lowest and the highest CUDA total found
def counts(mib):
    c, c_mb = mib * MiB, mib * MB
    return (math.floor((c - w_bytes) / seq), math.floor((c_mb - w_bytes) / seq),
            math.floor((c - w_bytes) / seq2), math.floor((c_mb - w_bytes) / seq2))


ends = driver_range(counts, mem_mib, mem_lo, mem_hi, (b_rep, b_mb, v_rep, v_mb),
                    "at the lowest and the highest CUDA total found, every count of sequences is the same")
print(f"At {mem_lo:,} and {mem_hi:,} MiB: {ends[0]}, {ends[1]} (fit, MiB misread as MB; the same at T2)")

# -- how far the runtime's total may move before the answer does: the totals, in whole MiB, at which the same
# number of sequences fits (weights + b sequences fit, one more does not)
fit_lo = value("fit_total_lo_mib", math.ceil((w_bytes + b_rep * seq) / MiB), unit="MiB")
fit_hi = value("fit_total_hi_mib", math.ceil((w_bytes + (b_rep + 1) * seq) / MiB) - 1, unit="MiB")
value("fit_margin_below_mib", mem_mib - fit_lo, unit="MiB")
value("fit_margin_above_mib", fit_hi - mem_mib, unit="MiB")
sanity("fit_range_holds", most_sequences(fit_lo * MiB) == b_rep == most_sequences(fit_hi * MiB)
       and most_sequences((fit_lo - 1) * MiB) < b_rep < most_sequences((fit_hi + 1) * MiB),
       "the same count fits at both ends of the range, and a MiB outside it changes the count",
       operands=(fit_lo, fit_hi))
# the Variation under the two readings that plan more than a program can allocate
v_gib = value("v_seqs_fit_gib", math.floor((cap_ds_gib - w_bytes) / seq2))
v_smi = value("v_seqs_fit_smi", math.floor((cap_smi - w_bytes) / seq2))
sanity("v_overpromise", v_gib >= v_rep and v_smi >= v_rep,
       "at T2 the 80 GiB reading and nvidia-smi's total plan at least as many sequences as the runtime's total holds",
       operands=((v_gib, v_smi), v_rep), relation="at least")
# fp8 checkpoints commonly keep the embedding (not a Linear layer) and the LM head in bf16: twice their fp8 bytes
w_eh_bf16 = w_bytes + eh_bytes
value("weights_eh_bf16_gb", w_eh_bf16 / GB)
b_eh = value("seqs_fit_eh_bf16", math.floor((cap_rep - w_eh_bf16) / seq))
sanity("eh_bf16_fewer", b_eh <= b_rep, "with the embedding and the head in bf16, at most as many sequences fit",
       operands=(b_eh, b_rep), relation="at most")
