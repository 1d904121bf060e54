"""I.1.A01 — Element counts and bytes per dtype.

Llama 3 8B's embedding table, (|V|, d), as meta tensors (shape and dtype, no storage) in every
dtype a checkpoint uses: .nbytes and .element_size() give its memory. torch.finfo and torch.iinfo
give what each format can represent, and a second route checks them: every bit pattern of the
8- and 16-bit formats enumerated, fp32 probed with torch.nextafter. Last, a small real tensor is
quantized to int4 codes, packed two per byte into uint8 storage, and unpacked back.
"""

import math

import torch
import torch.nn.functional as F

from numbook.check import fact, given, sanity, value

MB, GB = 10**6, 10**9
ELEM = "bytes per element of the dtype: a property of the format"
RANGE = "a property of the number format, the same for every tensor of that dtype"


def row(label, *cells, w=14, cw=14):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


V = fact("llama3_8b_vocab", "V")
d = fact("llama3_8b_hidden", "d")
# values in the small tensor packed by hand; nudged down to an even count, so the bytes and the padding move
n_pack = given("n_pack", 9, nudge=-1)

# -- element count -------------------------------------------------------------------------------
table = torch.empty(V, d, device="meta")          # fp32 by default; a meta tensor holds no storage
numel = value("numel", table.numel())
sanity("numel_is_product", numel == V * d == math.prod(table.shape),
       "numel() is the product of the shape", operands=(numel, V * d))
value("table_shape", table.shape)

# -- bytes per dtype -----------------------------------------------------------------------------
FLOATS = [("fp32", torch.float32), ("bf16", torch.bfloat16), ("fp16", torch.float16),
          ("e4m3", torch.float8_e4m3fn), ("e5m2", torch.float8_e5m2)]
DTYPES = FLOATS + [("int8", torch.int8)]
nbytes = {}
print(f"Embedding table of Llama 3 8B, shape {tuple(table.shape)}: {numel:,} elements")
row("dtype", "torch dtype", "bytes/elem", "table bytes", "GB", cw=16)
for name, dt in DTYPES:
    small = torch.zeros(4, dtype=dt)                      # a real tensor: its element size
    big = torch.empty(V, d, dtype=dt, device="meta")      # the full table: its bytes
    elem = value(f"{name}_elem", small.element_size(), fixed=ELEM)
    nbytes[name] = value(f"{name}_bytes", big.nbytes)
    value(f"{name}_gb", big.nbytes / GB)
    sanity(f"{name}_bytes_two_routes", big.nbytes == numel * elem == numel * dt.itemsize,
           f"{name}: meta .nbytes equals numel times the element size of a real tensor",
           operands=(big.nbytes, numel * elem), relation="equal" if name == "fp32" else None)
    row(name, str(dt)[6:], elem, f"{big.nbytes:,}", f"{big.nbytes / GB:.3f}", cw=16)

# int4: torch has int4/uint4 dtypes, but a tensor of them spends a whole byte per element
int4_dt_elem = value("torch_int4_elem", torch.empty(n_pack, dtype=torch.int4).element_size(), unit="B",
                     fixed=ELEM)
uint4_dt_elem = value("torch_uint4_elem", torch.empty(n_pack, dtype=torch.uint4).element_size(), fixed=ELEM)
sanity("torch_int4_is_a_byte", int4_dt_elem == uint4_dt_elem == torch.int8.itemsize,
       "torch.int4 and torch.uint4 tensors take one byte per element: packing is by hand",
       operands=(int4_dt_elem, torch.int8.itemsize))
# packed two per byte: uint8 storage of ceil(n / 2) bytes
packed_table = torch.empty(math.ceil(numel / 2), dtype=torch.uint8, device="meta")
nbytes["int4"] = value("int4_bytes", packed_table.nbytes)
value("int4_gb", packed_table.nbytes / GB)
row("int4 packed", "uint8 x 1/2", "0.5", f"{packed_table.nbytes:,}", f"{packed_table.nbytes / GB:.3f}", cw=16)
sanity("halving_chain", nbytes["fp32"] == 2 * nbytes["bf16"] == 2 * nbytes["fp16"] == 4 * nbytes["e4m3"]
       == 4 * nbytes["e5m2"] == 4 * nbytes["int8"] and nbytes["int8"] == 2 * nbytes["int4"] - numel % 2,
       "each halving of the bits halves the bytes: fp32 = 2 bf16 = 4 fp8 = 4 int8 = 8 int4 (n even)",
       operands=(nbytes["fp32"], 8 * nbytes["int4"]), relation="half")
value("fp32_over_int4", nbytes["fp32"] / nbytes["int4"],
      fixed="four bytes against half a byte: a property of the formats")
value("int4_elem", packed_table.nbytes / numel, fixed="two codes share a byte: half a byte per element by the packing")

# -- what each format represents: torch.finfo against the bit patterns -----------------------------
print("\nRange of each float format: torch.finfo, and the same read off the bit patterns")
row("dtype", "max", "eps", "smallest normal", "NaN patterns", "inf patterns", cw=16)
agree, patterns, enum = {}, {}, {}
for name, dt in FLOATS:
    fi = torch.finfo(dt)
    value(f"{name}_max", fi.max, fixed=RANGE)
    value(f"{name}_eps", fi.eps, fixed=RANGE)
    value(f"{name}_normal", fi.smallest_normal, fixed=RANGE)
    if fi.bits <= 16:
        # every bit pattern of the format, as a value (read in fp64 so nothing is rounded)
        ints = torch.arange(-(2 ** (fi.bits - 1)), 2 ** (fi.bits - 1), dtype=torch.int32)
        allv = ints.to(torch.int16 if fi.bits == 16 else torch.int8).view(dt).double()
        fin = allv[allv.isfinite()]
        pos = torch.unique(fin[fin > 0])                          # sorted positive values
        gaps = pos[1:] - pos[:-1]
        mx = fin.max().item()
        eps2 = (pos[pos > 1][0] - 1).item()                       # the spacing just above 1
        # the smallest normal: the first positive value whose spacing to the next is eps times itself
        normal2 = pos[:-1][gaps == pos[:-1] * eps2][0].item()
        n_nan, n_inf = int(allv.isnan().sum()), int(allv.isinf().sum())
    else:
        one, inf = torch.tensor(1.0, dtype=dt), torch.tensor(math.inf, dtype=dt)
        mx = torch.nextafter(inf, one).item()                     # the largest finite value
        eps2 = (torch.nextafter(one, 2 * one) - one).item()
        m_bits = round(-math.log2(eps2))
        normal2 = torch.tensor(1 << m_bits, dtype=torch.int32).view(dt).item()   # exponent field 1, mantissa 0
        n_nan = n_inf = None
    agree[name] = (mx, eps2, normal2) == (fi.max, fi.eps, fi.smallest_normal)
    enum[name] = (mx, eps2, normal2)
    if n_nan is not None:
        patterns[name] = (n_nan, n_inf)
        value(f"{name}_nan_patterns", n_nan, fixed=RANGE)
        value(f"{name}_inf_patterns", n_inf, fixed=RANGE)
    row(name, f"{fi.max:.6g}", f"{fi.eps:.6g}", f"{fi.smallest_normal:.6g}",
        "" if n_nan is None else n_nan, "" if n_inf is None else n_inf, cw=16)
sanity("finfo_two_routes", all(agree.values()),
       "torch.finfo max, eps and smallest normal equal the values read off the bit patterns",
       operands=(str(agree), "all True"), relation=("largest", "smallest", "equal"))
value("fp8_patterns", 2 ** torch.finfo(torch.float8_e4m3fn).bits, fixed=RANGE)
# bf16 keeps fp32's exponent range and gives up mantissa; e4m3 gives up range for a finer step than e5m2
fi32, fi16 = torch.finfo(torch.float32), torch.finfo(torch.bfloat16)
r_eps = value("bf16_over_fp32_eps", fi16.eps / fi32.eps, fixed=RANGE)
# exponent bits = all bits - mantissa bits (log2 of 1/eps) - the sign bit
exp_bits = {n: value(f"{n}_exp_bits", fi.bits - round(-math.log2(fi.eps)) - 1, fixed=RANGE) for n, fi in
            (("fp32", fi32), ("bf16", fi16))}
sanity("bf16_range_not_precision", exp_bits["bf16"] == exp_bits["fp32"]
       and enum["bf16"][2] == enum["fp32"][2] and enum["bf16"][0] < enum["fp32"][0]
       and r_eps == enum["bf16"][1] / enum["fp32"][1] and r_eps > 1,
       "bf16 has fp32's smallest normal, a slightly smaller max, and an eps larger by this factor",
       operands=(r_eps, enum["bf16"][1] / enum["fp32"][1]),
       relation=("smallest", "largest", "larger", "half", "smaller"))
r_max = value("e5m2_over_e4m3_max", torch.finfo(torch.float8_e5m2).max / torch.finfo(torch.float8_e4m3fn).max,
              fixed=RANGE)
sanity("e4m3_precision_e5m2_range", enum["e4m3"][1] == enum["e5m2"][1] / 2
       and r_max == enum["e5m2"][0] / enum["e4m3"][0] and r_max > 1,
       "e4m3's eps is half of e5m2's; e5m2's largest value is this many times e4m3's",
       operands=(r_max, enum["e5m2"][0] / enum["e4m3"][0]), relation="half")
sanity("e4m3_has_no_inf", patterns["e4m3"][1] == 0 and patterns["e5m2"][1] == 2
       and patterns["e4m3"][0] < patterns["e5m2"][0],
       "float8_e4m3fn spends no bit pattern on infinity and fewer on NaN than e5m2, which has +inf and -inf",
       operands=(patterns["e4m3"], patterns["e5m2"]), relation=("largest", "not"))

# what a cast past the maximum does, in this torch: e4m3fn saturates, e5m2 and fp16 overflow to inf
big_x = torch.tensor([2 * torch.finfo(torch.float8_e5m2).max])
cast = {name: big_x.to(dt).float().item() for name, dt in FLOATS[1:]}
print(f"\n{big_x.item():,.0f} cast to each format: " + ", ".join(f"{k} {v:g}" for k, v in cast.items()))
value("overflow_probe", big_x.item(), fixed="twice the largest e5m2 value: a property of the format")
value("e4m3_cast_of_probe", cast["e4m3"], fixed=RANGE)
sanity("fp16_overflows", math.isinf(cast["fp16"]) and math.isfinite(cast["bf16"])
       and torch.finfo(torch.float16).max < big_x.item() and enum["fp16"][1] < enum["bf16"][1]
       and enum["fp16"][2] > enum["bf16"][2],
       "fp16 has the finer eps but the narrower range: a larger smallest normal, and a value past its "
       "maximum becomes inf in fp16 and stays finite in bf16",
       operands=(cast["fp16"], cast["bf16"]), relation=("largest", "smallest", "not"))
sanity("e4m3_saturates", big_x.item() > torch.finfo(torch.float8_e5m2).max
       and cast["e4m3"] == torch.finfo(torch.float8_e4m3fn).max and math.isinf(cast["e5m2"])
       and math.isinf(cast["fp16"]),
       "a value past the maximum becomes 448 in e4m3fn (saturation) but inf in e5m2 and fp16",
       operands=(cast["e4m3"], torch.finfo(torch.float8_e4m3fn).max), relation=("largest", "not"))

ii = torch.iinfo(torch.int8)
value("int8_min", ii.min, fixed=RANGE)
value("int8_max", ii.max, fixed=RANGE)
every_byte = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.int8)
sanity("int8_range_two_routes", (int(every_byte.min()), int(every_byte.max())) == (ii.min, ii.max),
       "iinfo(int8) equals the range of the 256 bit patterns read as int8",
       operands=((int(every_byte.min()), int(every_byte.max())), (ii.min, ii.max)), relation=("not", "equal"))
print("\nRange of each integer format: torch.iinfo, and the bit patterns read as integers")
row("dtype", "min", "max", cw=16)
row("int8", ii.min, ii.max, cw=16)

# -- int4 packed two per byte, on a real small tensor ------------------------------------------------
BITS = value("int4_bits", 4, fixed="int4 is by definition a 4-bit two's-complement integer")
lo, hi = value("int4_min", -(2 ** (BITS - 1)), fixed=RANGE), value("int4_max", 2 ** (BITS - 1) - 1, fixed=RANGE)
MASK = 2**BITS - 1
PER_BYTE = value("codes_per_byte", torch.uint8.itemsize * 8 // BITS, fixed="a byte holds two 4-bit codes")


def pack(codes):
    """int4 codes (int8 tensor, values in [lo, hi]) -> uint8, two per byte: even index low nibble."""
    nib = F.pad(codes, (0, codes.numel() % 2)).to(torch.int16) & MASK     # two's-complement nibbles
    return (nib[0::2] | (nib[1::2] << BITS)).to(torch.uint8)


def unpack(packed, n):
    p = packed.to(torch.int16)
    nib = torch.stack([p & MASK, p >> BITS], dim=1).flatten()[:n]
    return torch.where(nib > hi, nib - 2**BITS, nib).to(torch.int8)        # sign-extend


# every int4 code survives pack and unpack; one past the top wraps to the bottom
all_codes = torch.arange(lo, hi + 1, dtype=torch.int8)
over = torch.tensor([hi + 1], dtype=torch.int16)       # one past the top of the range
wrapped = int(unpack((over & MASK).to(torch.uint8), 1))
value("int4_code_count", all_codes.numel(), fixed=RANGE)
row("int4 (packed)", lo, hi, cw=16)
sanity("int4_range_exact", torch.equal(unpack(pack(all_codes), all_codes.numel()), all_codes) and wrapped == lo,
       "all 16 codes from -8 to 7 survive pack and unpack; 8 comes back as -8", operands=(wrapped, lo), relation="not")

g = torch.Generator().manual_seed(0)
w = torch.randn(n_pack, generator=g)                  # a small real fp32 tensor
scale = w.abs().max() / hi                            # symmetric: the largest |w| maps to code hi
codes = torch.round(w / scale).clamp(lo, hi).to(torch.int8)
packed = pack(codes)
back = unpack(packed, n_pack)
w_hat = back.float() * scale
value("pack_codes_bytes", codes.nbytes)
pack_bytes = value("pack_bytes", packed.nbytes)
value("pad_nibbles", 2 * packed.numel() - n_pack)
print(f"\nint4 packing of {n_pack} values (scale = max|w| / {hi} = {scale.item():.4f})")
row("w", *[f"{x:.3f}" for x in w.tolist()], w=8, cw=8)
row("code", *codes.tolist(), w=8, cw=8)
row("byte", *[f"0x{b:02x}" for b in packed.tolist()], w=8, cw=8)
row("unpacked", *back.tolist(), w=8, cw=8)
print(f"  as int8 codes: {codes.nbytes} bytes; packed two per byte: {packed.nbytes} bytes")
sanity("pack_roundtrip", torch.equal(back, codes) and pack_bytes == math.ceil(n_pack / PER_BYTE),
       "unpack(pack(codes)) gives the codes back, in ceil(n/2) bytes",
       operands=(pack_bytes, math.ceil(n_pack / PER_BYTE)))
sanity("pack_error_half_step", ((w - w_hat).abs().max() <= scale / 2 + 1e-6).item(),
       "every dequantized value is within half a step (scale/2) of the original",
       relation=("differs", "at most", "not"))

# -- variation: Qwen2-0.5B's embedding table --------------------------------------------------------
V2 = fact("qwen2_0_5b_vocab", "V2")
d2 = fact("qwen2_0_5b_hidden", "d2")
q = torch.empty(V2, d2, dtype=torch.bfloat16, device="meta")
value("v_numel", q.numel())
value("v_bf16_mb", q.nbytes / MB)
value("v_int4_mb", torch.empty(math.ceil(q.numel() / 2), dtype=torch.uint8, device="meta").nbytes / MB)
v_ratio = value("v_ratio", numel / q.numel())
sanity("v_ratio_two_routes", math.isclose(v_ratio, nbytes["bf16"] / q.nbytes) and v_ratio > 1,
       "the ratio of the element counts equals the ratio of the bf16 bytes: Qwen2-0.5B's table is smaller",
       operands=(v_ratio, nbytes["bf16"] / q.nbytes), relation="equal")
print(f"\nVariation: Qwen2-0.5B table {tuple(q.shape)}: {q.numel():,} elements, bf16 {q.nbytes / MB:.1f} MB")
