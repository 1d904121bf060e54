"""I.1.A03 — The memory of a model's weights at each precision.

Builds Llama 3 8B from torch.nn modules on the meta device (shapes and dtypes, no storage), sums
p.numel() over its parameters and compares the sum with the closed form from the config. Then the
bytes of the weights in fp32, bf16, fp8 (one fp32 scale per matrix) and int4 (two codes per byte,
one fp16 scale per group of weights along each row), from .nbytes of meta tensors of each layout.
One real k_proj matrix is quantized to int4 with group scales, packed and dequantized, to check the
byte formula and the rounding error on real data.
"""

import math

import torch
import torch.nn as nn

from numbook.check import fact, given, sanity, value

GB, MB = 10**9, 10**6
BITS = 4                                   # int4: a 4-bit two's-complement code
QMIN, QMAX, MASK = -(2 ** (BITS - 1)), 2 ** (BITS - 1) - 1, 2**BITS - 1


def row(label, *cells, w=36, cw=18):
    print(f"  {label:<{w}}" + "".join(f"{c!s:>{cw}}" for c in cells))


class Block(nn.Module):
    """One Llama decoder layer: attention with grouped K/V heads, SwiGLU MLP, two RMSNorms (no biases)."""

    def __init__(self, d, H, Hkv, f):
        super().__init__()
        Dh = d // H
        self.input_layernorm = nn.RMSNorm(d)
        self.q_proj = nn.Linear(d, H * Dh, bias=False)
        self.k_proj = nn.Linear(d, Hkv * Dh, bias=False)
        self.v_proj = nn.Linear(d, Hkv * Dh, bias=False)
        self.o_proj = nn.Linear(H * Dh, d, bias=False)
        self.post_attention_layernorm = nn.RMSNorm(d)
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)


class Llama(nn.Module):
    def __init__(self, V, d, L, H, Hkv, f):
        super().__init__()
        self.embed_tokens = nn.Embedding(V, d)
        self.layers = nn.ModuleList(Block(d, H, Hkv, f) for _ in range(L))
        self.norm = nn.RMSNorm(d)
        self.lm_head = nn.Linear(d, V, bias=False)     # untied: its own (V, d) matrix


def closed_form(V, d, L, H, Hkv, f):
    """Parameters from the config: embedding and head, then per layer q, k, v, o, the MLP and two norms."""
    Dh = d // H
    per_layer = d * H * Dh + 2 * d * Hkv * Dh + H * Dh * d + 3 * d * f + 2 * d
    return 2 * V * d + L * per_layer + d, per_layer


def count(model):
    return sum(p.numel() for p in model.parameters())


def int4_bytes(p, g):
    """Packed int4 codes (two per byte along each row) plus one fp16 scale per group of g weights of a row."""
    rows, cols = p.shape
    codes = torch.empty(rows, math.ceil(cols / 2), dtype=torch.uint8, device="meta")
    scales = torch.empty(rows, math.ceil(cols / g), dtype=torch.float16, device="meta")
    return codes.nbytes, scales.nbytes


V = fact("llama3_8b_vocab", "V")
d = fact("llama3_8b_hidden", "d", nudge=32)            # nudged by a head count: H still divides d
L = fact("llama3_8b_layers", "L")
H = fact("llama3_8b_heads", "H", nudge=32)             # nudged to 64: still a multiple of Hkv
Hkv = fact("llama3_8b_kv_heads", "Hkv", nudge=8)       # nudged to 16: still divides H
f = fact("llama3_8b_intermediate", "f")
g = given("g", 128)                                    # weights per int4 scale, along a row

with torch.device("meta"):
    model = Llama(V, d, L, H, Hkv, f)

# -- Step 1: count ---------------------------------------------------------------------------------
N = value("n_params", count(model))
N_closed, per_layer_closed = closed_form(V, d, L, H, Hkv, f)
value("n_params_b", N / 1e9)
blk = model.layers[0]
parts = {
    "embed_tokens (V, d)": model.embed_tokens.weight.numel(),
    "q_proj + o_proj": blk.q_proj.weight.numel() + blk.o_proj.weight.numel(),
    "k_proj + v_proj": blk.k_proj.weight.numel() + blk.v_proj.weight.numel(),
    "gate, up, down (MLP)": sum(m.weight.numel() for m in (blk.gate_proj, blk.up_proj, blk.down_proj)),
    "two RMSNorms": blk.input_layernorm.weight.numel() + blk.post_attention_layernorm.weight.numel(),
}
value("embed_params", parts["embed_tokens (V, d)"])
value("qo_params", parts["q_proj + o_proj"])
value("kv_params", parts["k_proj + v_proj"])
value("mlp_params", parts["gate, up, down (MLP)"])
value("norm_params", parts["two RMSNorms"])
layer_n = value("layer_params", count(blk))
value("layers_params", L * layer_n)
value("head_params", model.lm_head.weight.numel())
value("final_norm_params", model.norm.weight.numel())
value("mlp_share_of_layer", parts["gate, up, down (MLP)"] / layer_n)
eh_share = value("embed_head_share", (model.embed_tokens.weight.numel() + model.lm_head.weight.numel()) / N)
print(f"Llama 3 8B on the meta device: V={V}, d={d}, L={L}, H={H}, Hkv={Hkv}, f={f}")
row("parameters", "count")
for k, n in parts.items():
    row(f"  {k}", f"{n:,}")
row("one layer", f"{layer_n:,}")
row(f"{L} layers", f"{L * layer_n:,}")
row("final norm", f"{model.norm.weight.numel():,}")
row("lm_head (V, d), untied", f"{model.lm_head.weight.numel():,}")
row("total: sum of p.numel()", f"{N:,}")
row("total: closed form", f"{N_closed:,}")
sanity("meta_matches_closed_form", N_closed == N and layer_n == per_layer_closed,
       "the nn.Module count equals the closed form from the config", operands=(N, N_closed), relation="equal")
sanity("mlp_dominates_layer", parts["gate, up, down (MLP)"] > layer_n / 2,
       "the three MLP matrices hold most of a layer's parameters",
       operands=(parts["gate, up, down (MLP)"], layer_n / 2), relation="larger")

# tying the head to the embedding: nn.Module.parameters() yields a shared tensor once
with torch.device("meta"):
    tied = Llama(V, d, L, H, Hkv, f)
tied.lm_head.weight = tied.embed_tokens.weight
n_tied = value("n_params_tied", count(tied))
sanity("tying_saves_V_d", N - n_tied == V * d, "tying the head would remove V*d parameters",
       operands=(N - n_tied, V * d), relation=("falls", "smaller"))

# -- Step 2: bytes per precision ------------------------------------------------------------------
mats = [p for p in model.parameters() if p.dim() == 2]
vecs = [p for p in model.parameters() if p.dim() == 1]
n_mat = value("n_matrices", len(mats))
n_vec = value("n_norm_vectors", len(vecs))
mat_params = sum(p.numel() for p in mats)
vec_params = value("norm_vector_params", sum(p.numel() for p in vecs))
bf16_vec_bytes = sum(torch.empty_like(p, dtype=torch.bfloat16).nbytes for p in vecs)
value("norm_bf16_bytes", bf16_vec_bytes)

fp32_bytes = sum(p.nbytes for p in model.to(torch.float32).parameters())
bf16_bytes = sum(p.nbytes for p in model.to(torch.bfloat16).parameters())
fp8_codes = sum(torch.empty_like(p, dtype=torch.float8_e4m3fn).nbytes for p in mats)
fp8_scales = value("fp8_scale_bytes", n_mat * torch.empty((), dtype=torch.float32).nbytes)
fp8_bytes = fp8_codes + fp8_scales + bf16_vec_bytes
i4 = [int4_bytes(p, g) for p in mats]
i4_codes = sum(c for c, _ in i4)
i4_scales = value("int4_scale_bytes", sum(s for _, s in i4))
int4_bytes_all = i4_codes + i4_scales + bf16_vec_bytes
# a common variant: int4 only inside the layers; embedding and head stay bf16
layer_mats = [p for blk_ in model.layers for p in blk_.parameters() if p.dim() == 2]
i4l = [int4_bytes(p, g) for p in layer_mats]
eh_bf16 = sum(torch.empty_like(p, dtype=torch.bfloat16).nbytes
              for p in (model.embed_tokens.weight, model.lm_head.weight))
int4_layers_bytes = sum(c + s for c, s in i4l) + eh_bf16 + bf16_vec_bytes

table = [("fp32", fp32_bytes), ("bf16", bf16_bytes), ("fp8 e4m3 (+ per-matrix scale)", fp8_bytes),
         ("int4, group scales", int4_bytes_all), ("int4 layers, bf16 embed and head", int4_layers_bytes)]
keys = ["fp32", "bf16", "fp8", "int4", "int4_layers"]
print(f"\nWeights of Llama 3 8B ({N:,} parameters) at each precision")
row("format", "bytes", "GB", "bits per param")
for key, (label, b) in zip(keys, table, strict=True):
    value(f"{key}_bytes", b)
    value(f"{key}_gb", b / GB)
    value(f"{key}_bits", 8 * b / N,
          fixed="eight bits per byte of the element: a property of the dtype" if key in ("fp32", "bf16") else None)
    row(label, f"{b:,}", f"{b / GB:.3f}", f"{8 * b / N:.3f}")
value("int4_code_bytes", i4_codes)
value("int4_scale_mb", i4_scales / MB)
bits_mat = value("int4_bits_per_weight", 8 * (i4_codes + i4_scales) / mat_params)
value("int4_code_bits", BITS, fixed="int4 is by definition a 4-bit code")
scale_bits = 8 * torch.empty((), dtype=torch.float16).nbytes
value("scale_bits", scale_bits, fixed="bits of an fp16 scale: a property of the dtype")
sanity("bytes_two_routes", fp32_bytes == 4 * N and bf16_bytes == 2 * N and fp8_codes == mat_params,
       "sum of .nbytes equals N x bytes per element", operands=(fp32_bytes, 4 * N), relation=("half", "smaller"))
# with every row length a multiple of g and even, the codes are half a byte per weight and each
# scale adds scale_bits / g bits; ceil() only adds when a row does not divide
exact = all(p.shape[1] % g == 0 and p.shape[1] % 2 == 0 for p in mats)
pred_bits = BITS + scale_bits / g
sanity("int4_bits_closed_form", math.isclose(bits_mat, pred_bits) if exact else bits_mat >= pred_bits,
       "packed codes and group scales cost 4 + 16/g bits per weight", operands=(bits_mat, pred_bits), relation="not")
sanity("each_format_smaller", fp32_bytes > bf16_bytes > fp8_bytes > int4_layers_bytes > int4_bytes_all,
       "fp32 > bf16 > fp8 > int4 with bf16 embedding and head > int4 everywhere",
       operands=(fp8_bytes, int4_bytes_all), relation="larger")
sanity("fp8_about_half_bf16", abs(fp8_bytes - bf16_bytes / 2) < n_mat * 4 + bf16_vec_bytes,
       "fp8 is half of bf16 up to its scales and the bf16 norm vectors", operands=(fp8_bytes, bf16_bytes / 2),
       relation="half")
value("int4_over_bf16", int4_bytes_all / bf16_bytes)
value("eh_bf16_gb", eh_bf16 / GB)
value("int4_layers_extra_gb", (int4_layers_bytes - int4_bytes_all) / GB)

# -- Step 3: one real matrix, quantized with group scales --------------------------------------------
torch.manual_seed(0)
real = nn.Linear(d, Hkv * (d // H), bias=False)           # a real k_proj, nn.Linear's default init
w = real.weight.detach()
rows, cols = w.shape
pad = (-cols) % g
wg = torch.nn.functional.pad(w, (0, pad)).view(rows, -1, g)             # (rows, groups, g)
scale = (wg.abs().amax(-1, keepdim=True) / QMAX).to(torch.float16)     # one fp16 scale per group
codes = torch.round(wg / scale.float()).clamp(QMIN, QMAX).to(torch.int8).view(rows, -1)[:, :cols]
nib = torch.nn.functional.pad(codes, (0, cols % 2)).to(torch.int16) & MASK
packed = (nib[:, 0::2] | (nib[:, 1::2] << BITS)).to(torch.uint8)
unp = torch.stack([packed.to(torch.int16) & MASK, packed.to(torch.int16) >> BITS], -1).view(rows, -1)[:, :cols]
unp = torch.where(unp > QMAX, unp - 2**BITS, unp).to(torch.int8)
deq = (torch.nn.functional.pad(unp.float(), (0, pad)).view(rows, -1, g) * scale.float()).view(rows, -1)[:, :cols]
err = (w - deq).abs()
half_step = (scale.float() / 2).expand(-1, -1, g).reshape(rows, -1)[:, :cols]
meta_codes, meta_scales = int4_bytes(w, g)
value("kproj_shape", w.shape)
value("kproj_fp32_mb", w.nbytes / MB)
value("kproj_int4_bytes", packed.nbytes + scale.nbytes)
value("kproj_int4_mb", (packed.nbytes + scale.nbytes) / MB)
value("kproj_scale_shape", scale.squeeze(-1).shape)
rel_err = value("kproj_rel_err", (err.norm() / w.norm()).item())
# weights spread uniformly over [-m, m], a step of m / QMAX, the error uniform over one step:
# rms error / rms weight = (m / QMAX / sqrt(12)) / (m / sqrt(3)) = 1 / (2 QMAX)
pred = value("uniform_rel_err", 1 / (2 * QMAX), fixed="the rounding error of int4 on uniform weights, from the format")
print(f"\nOne real k_proj {tuple(w.shape)} quantized to int4, group size {g}")
row("fp32 weights", f"{w.nbytes:,} bytes")
row("packed codes (uint8)", f"{packed.nbytes:,} bytes", str(tuple(packed.shape)))
row("scales (fp16)", f"{scale.nbytes:,} bytes", str(tuple(scale.squeeze(-1).shape)))
row("relative error |w - deq| / |w|", f"{(err.norm() / w.norm()).item():.4f}")
sanity("real_matches_meta", packed.nbytes == meta_codes and scale.nbytes == meta_scales,
       "the real packed codes and scales have the bytes the meta layout counts",
       operands=(packed.nbytes + scale.nbytes, meta_codes + meta_scales))
sanity("real_codes_roundtrip", torch.equal(unp, codes), "unpacking returns every code")
sanity("rel_err_as_predicted", abs(rel_err - pred) < 0.1 * pred,
       "the measured relative error is within 10% of 1 / (2 QMAX) for nn.Linear's uniform init",
       operands=(rel_err, pred), relation=("twice", "largest", "larger", "not"))
sanity("real_error_half_step", bool((err <= half_step * 1.001 + 1e-8).all()),
       "every dequantized weight is within half a step of its group's scale")

# -- variation: Llama 2 7B ------------------------------------------------------------------------
V2 = fact("llama2_7b_vocab", "V2")
d2 = fact("llama2_7b_hidden", "d2", nudge=32)
L2 = fact("llama2_7b_layers", "L2")
H2 = fact("llama2_7b_heads", "H2", nudge=32)
Hkv2 = fact("llama2_7b_kv_heads", "Hkv2", nudge=-16)     # nudged to 16: still divides H2
f2 = fact("llama2_7b_intermediate", "f2")
with torch.device("meta"):
    m2 = Llama(V2, d2, L2, H2, Hkv2, f2)
N2 = value("v_n_params", count(m2))
value("v_bf16_gb", sum(p.nbytes for p in m2.to(torch.bfloat16).parameters()) / GB)
v_i4 = sum(sum(int4_bytes(p, g)) for p in m2.parameters() if p.dim() == 2)
v_i4 += sum(torch.empty_like(p, dtype=torch.bfloat16).nbytes for p in m2.parameters() if p.dim() == 1)
value("v_int4_gb", v_i4 / GB)
value("v_kv_params", m2.layers[0].k_proj.weight.numel() + m2.layers[0].v_proj.weight.numel())
N2_closed = closed_form(V2, d2, L2, H2, Hkv2, f2)[0]
# where the two counts differ: the vocabulary (embedding and head), the MLP width, the K/V heads
m3b, m2b = model.layers[0], m2.layers[0]
gap_vocab = value("v_gap_vocab", count(model.embed_tokens) + count(model.lm_head) - count(m2.embed_tokens)
                  - count(m2.lm_head))
gap_mlp = value("v_gap_mlp", L * sum(count(getattr(m3b, k)) for k in ("gate_proj", "up_proj", "down_proj"))
                - L2 * sum(count(getattr(m2b, k)) for k in ("gate_proj", "up_proj", "down_proj")))
gap_kv = value("v_gap_kv", L2 * (count(m2b.k_proj) + count(m2b.v_proj)) - L * (count(m3b.k_proj) + count(m3b.v_proj)))
value("v_gap_total", N - N2)
sanity("v_gap_decomposes", gap_vocab == 2 * (V * d - V2 * d2) and gap_mlp == 3 * (L * d * f - L2 * d2 * f2)
       and gap_vocab + gap_mlp > gap_kv > 0,
       "Llama 3 8B's larger vocabulary and wider MLP outweigh Llama 2 7B's extra K/V parameters",
       operands=(gap_vocab + gap_mlp, gap_kv), relation="larger")
sanity("v_closed_form", N2_closed == N2, "Llama 2 7B: module count = closed form", operands=(N2, N2_closed),
       relation="equal")
print(f"\nVariation: Llama 2 7B, {N2:,} parameters; bf16 {2 * N2 / GB:.2f} GB, int4 {v_i4 / GB:.2f} GB")
