"""I.1.A02 — Strides, views and copies.

The attention block of Llama 3 8B on a real bf16 batch: a fused QKV projection output is split
into q, k, v (views with a storage offset), split into heads with view, transposed to
(B, H, T, Dh) with transpose and permute (new strides, same storage), run through
F.scaled_dot_product_attention, and merged back: view raises, reshape copies. Storage sharing is
read from data_ptr() and untyped_storage().data_ptr(); the bytes of each copy from the new
storage and, a second route, from torch's profiler. The same layout at the model's full context
uses meta tensors.
"""

import math

import torch
import torch.nn.functional as F
from _memory import peak_alloc

from numbook.check import fact, given, sanity, value

MB, GB = 10**6, 10**9


def row(label, *cells, w=34, cw=22):
    print(f"  {label:<{w}}" + "".join(f"{c!s:>{cw}}" for c in cells))


def contiguous_strides(shape):
    """Row-major strides from the shape alone: the product of the lengths to the right."""
    return tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))


def storage_ptr(t):
    return t.untyped_storage().data_ptr()


B = given("B", 2)
T = given("T", 512)
d = fact("llama3_8b_hidden", "d", nudge=32)          # nudged by a head count so that H still divides d
H = fact("llama3_8b_heads", "H", nudge=32)           # nudged to 64 heads: still a multiple of Hkv
Hkv = fact("llama3_8b_kv_heads", "Hkv", nudge=8)     # nudged to 16: still divides H
L = fact("llama3_8b_layers", "L")
T_ctx = fact("llama3_8b_context", "T_ctx")
sanity("heads_divide", d % H == 0 and H % Hkv == 0, "H divides d and Hkv divides H", operands=(d % H, H % Hkv))
Dh = value("Dh", d // H)
W = value("W", (H + 2 * Hkv) * Dh)                   # width of the fused q, k, v projection
dt = torch.bfloat16

# -- Step 1: the fused projection output --------------------------------------------------------
g = torch.Generator().manual_seed(0)
qkv = torch.randn(B, T, W, generator=g).to(dt)
elem = value("elem", qkv.element_size(), unit="B", fixed="bytes of a bf16 element: a property of the dtype")
value("qkv_shape", qkv.shape)
value("qkv_stride", qkv.stride())
value("qkv_mb", qkv.nbytes / MB)
sanity("qkv_strides_closed_form", qkv.stride() == contiguous_strides(qkv.shape) and qkv.is_contiguous(),
       "a fresh tensor's strides are the products of the lengths to the right",
       operands=(qkv.stride(), contiguous_strides(qkv.shape)))


def show(name, t):
    shares = storage_ptr(t) == storage_ptr(qkv)
    row(name, f"{tuple(t.shape)!s:>19}{t.stride()!s:>25}", t.storage_offset(), t.is_contiguous(), shares, w=24, cw=8)


print(f"Llama 3 8B attention, B={B}, T={T}: d={d}, H={H}, Hkv={Hkv}, Dh={Dh}; bf16")
print("(shared: the tensor's untyped_storage() is qkv's)")
row("tensor", f"{'shape':>19}{'stride':>25}", "offset", "contig", "shared", w=24, cw=8)
show("qkv = fused projection", qkv)

# -- Step 2: q, k, v are slices of it: views with an offset ----------------------------------------
q, k, v = qkv.split([H * Dh, Hkv * Dh, Hkv * Dh], dim=-1)
for name, t in (("q", q), ("k", k), ("v", v)):
    show(f"{name} = split of qkv", t)
value("q_shape", q.shape)
value("k_shape", k.shape)
value("k_stride", k.stride())
value("k_offset", k.storage_offset())
value("v_offset", v.storage_offset())
k_gap = value("k_ptr_gap_bytes", k.data_ptr() - storage_ptr(k))
sanity("split_are_views", all(storage_ptr(t) == storage_ptr(qkv) for t in (q, k, v))
       and q.data_ptr() == qkv.data_ptr() and k.data_ptr() != qkv.data_ptr(),
       "q, k and v share qkv's storage; only q starts where it starts", relation="not")
sanity("offset_in_bytes", k_gap == k.storage_offset() * elem == H * Dh * elem
       and v.data_ptr() - storage_ptr(v) == (H + Hkv) * Dh * elem,
       "data_ptr() - untyped_storage().data_ptr() = storage_offset() x element_size()",
       operands=(k_gap, k.storage_offset() * elem), relation="differs")
sanity("slices_not_contiguous", not any(t.is_contiguous() for t in (q, k, v))
       and q.stride() == k.stride() == v.stride() == qkv.stride(),
       "a slice of the last axis keeps the parent's strides and is not contiguous", relation="not")

# -- Step 3: split the heads with view ------------------------------------------------------------
q4 = q.view(B, T, H, Dh)
k4 = k.view(B, T, Hkv, Dh)
v4 = v.view(B, T, Hkv, Dh)
show("q.view(B, T, H, Dh)", q4)
value("q4_shape", q4.shape)
value("q4_stride", q4.stride())
sanity("head_split_is_view", storage_ptr(q4) == storage_ptr(qkv) and q4.data_ptr() == q.data_ptr()
       and q4.stride() == (T * W, W, Dh, 1), "splitting the last axis is a view: strides (T*W, W, Dh, 1)",
       operands=(q4.stride(), (T * W, W, Dh, 1)))

# -- Step 4: transpose and permute swap strides, nothing moves -------------------------------------
qh = q4.transpose(1, 2)                       # (B, H, T, Dh)
qp = q4.permute(0, 2, 1, 3)
kh, vh = k4.transpose(1, 2), v4.transpose(1, 2)
show("q4.transpose(1, 2)", qh)
show("q4.permute(0, 2, 1, 3)", qp)
value("qh_shape", qh.shape)
value("qh_stride", qh.stride())
value("qh_contig_stride", contiguous_strides(qh.shape))
sanity("transpose_swaps_strides", qh.stride() == (q4.stride()[0], q4.stride()[2], q4.stride()[1], q4.stride()[3])
       and qh.data_ptr() == q4.data_ptr() and not qh.is_contiguous(),
       "transpose(1, 2) swaps the strides of axes 1 and 2 and moves no data",
       operands=(qh.stride(), q4.stride()), relation="not")
sanity("permute_equals_transpose", qp.shape == qh.shape and qp.stride() == qh.stride()
       and qp.data_ptr() == qh.data_ptr(), "permute(0, 2, 1, 3) gives the same view as transpose(1, 2)",
       relation=("equal", "not"))

# -- Step 5: attention, then merge the heads: does view work? It depends on the strides -----------
def merge(o):
    """Merge the heads of a (B, H, T, Dh) output back to (B, T, d): try view, fall back to reshape."""
    ot = o.transpose(1, 2)                                                      # (B, T, H, Dh)
    try:
        return ot.view(B, T, H * Dh), ""
    except RuntimeError as exc:
        return ot.reshape(B, T, H * Dh), str(exc).split(" (")[0]


# (a) the strided views go straight in
o1 = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True, enable_gqa=True)
# (b) contiguous copies go in
o2 = F.scaled_dot_product_attention(qh.contiguous(), kh.contiguous(), vh.contiguous(), is_causal=True,
                                    enable_gqa=True)
m1, err1 = merge(o1)
m2, err2 = merge(o2)
print()
row("tensor", f"{'shape':>19}{'stride':>25}", "contig", w=24, cw=8)
for name, o in (("o1 = sdpa(views)", o1), ("o2 = sdpa(contiguous)", o2)):
    for label, t in ((name, o), ("  .transpose(1, 2)", o.transpose(1, 2))):
        row(label, f"{tuple(t.shape)!s:>19}{t.stride()!s:>25}", t.is_contiguous(), w=24, cw=8)
TR = "transpose(1, 2)"     # the code being run, named once
print(f"  o1.{TR}.view(B, T, d): {'raises RuntimeError:' if err1 else 'a view, no copy'}")
if err1:
    print(f"    {err1}")
print(f"  o2.{TR}.view(B, T, d): {'raises RuntimeError:' if err2 else 'a view, no copy'}")
if err2:
    print(f"    {err2}")
print(f"  o2.{TR}.reshape(B, T, d): {'new storage (a copy)' if storage_ptr(m2) != storage_ptr(o2) else 'a view'}")
value("o_shape", o1.shape)
value("o1_stride", o1.stride())
value("o2_stride", o2.stride())
bthd = contiguous_strides((B, T, H, Dh))          # a (B, T, H, Dh) row-major layout, seen as (B, H, T, Dh)
sanity("sdpa_layout_follows_query", o1.stride() == (bthd[0], bthd[2], bthd[1], bthd[3])
       and o2.stride() == contiguous_strides(o2.shape),
       "on this build, SDPA's output took the memory order of its query: (B, T, H, Dh) for the "
       "transposed view, (B, H, T, Dh) for the contiguous copy", operands=(o1.stride(), o2.stride()))
sanity("same_attention", torch.allclose(o1.float(), o2.float(), atol=1e-2),
       "the two calls compute the same attention; only the layout differs", relation="differs")
sanity("view_depends_on_strides", not err1 and storage_ptr(m1) == storage_ptr(o1)
       and bool(err2) and storage_ptr(m2) != storage_ptr(o2) and torch.equal(m2, o2.transpose(1, 2).contiguous()
                                                                             .view(B, T, H * Dh)),
       "view merges o1's heads in place; for o2 it raises, and reshape copies (= contiguous().view)")
value("view_raises", bool(err2))
# reshape returns a view whenever a view exists
again = q.reshape(B, T, H, Dh)
undo = qh.transpose(1, 2).reshape(B, T, H * Dh)
sanity("reshape_views_when_it_can", storage_ptr(again) == storage_ptr(qkv) and storage_ptr(undo) == storage_ptr(qkv),
       "reshape of a viewable layout shares storage: it copies only when view would fail",
       relation=("differs", "larger", "not"))

# -- Step 6: what contiguous() allocates -----------------------------------------------------------
q_copy, q_peak = peak_alloc(lambda: qh.contiguous())
k_copy, k_peak = peak_alloc(lambda: kh.contiguous())
same, same_peak = peak_alloc(lambda: o2.contiguous())         # already contiguous: returns o2 itself
q_bytes = value("q_copy_bytes", q_copy.untyped_storage().nbytes())
k_bytes = value("k_copy_bytes", k_copy.untyped_storage().nbytes())
value("q_copy_mb", q_bytes / MB)
value("k_copy_mb", k_bytes / MB)
value("q_copy_stride", q_copy.stride())
value("noop_copy_bytes", same_peak, fixed="contiguous() of a contiguous tensor returns it: nothing is allocated")
print("\ncontiguous(): bytes of the new storage and peak allocation seen by torch's profiler")
row("", "storage bytes", "profiler peak", "B*heads*T*Dh*elem", cw=20)
row("qh.contiguous()", f"{q_bytes:,}", f"{q_peak:,}", f"{B * H * T * Dh * elem:,}", cw=20)
row("kh.contiguous()", f"{k_bytes:,}", f"{k_peak:,}", f"{B * Hkv * T * Dh * elem:,}", cw=20)
row("o2.contiguous() (already)", f"{same.untyped_storage().nbytes():,}", f"{same_peak:,}", "", cw=20)
sanity("copy_bytes_three_routes", q_bytes == q_peak == B * H * T * Dh * elem == q_copy.nbytes
       and k_bytes == k_peak == B * Hkv * T * Dh * elem,
       "the copy's storage, the profiler's peak and B*H*T*Dh*elem agree", operands=(q_peak, B * H * T * Dh * elem))
sanity("copy_is_contiguous", q_copy.is_contiguous() and q_copy.stride() == contiguous_strides(qh.shape)
       and storage_ptr(q_copy) != storage_ptr(qkv) and torch.equal(q_copy, qh),
       "the copy has row-major strides for (B, H, T, Dh), its own storage and the same values")
sanity("noop_contiguous", same is o2 and same_peak == 0, "contiguous() of a contiguous tensor returns it, allocating 0")

# -- at the model's full context: meta tensors ------------------------------------------------------
big = torch.empty(B, T_ctx, W, dtype=dt, device="meta")
bq, bk, bv = big.split([H * Dh, Hkv * Dh, Hkv * Dh], dim=-1)
copies = [t.view(B, T_ctx, -1, Dh).transpose(1, 2).contiguous() for t in (bq, bk, bv)]
ctx_q = value("ctx_q_mb", copies[0].nbytes / MB)
ctx_kv = value("ctx_kv_mb", (copies[1].nbytes + copies[2].nbytes) / MB)
layer = value("ctx_layer_mb", sum(c.nbytes for c in copies) / MB)
value("ctx_all_layers_gb", L * sum(c.nbytes for c in copies) / GB)
value("ctx_qkv_mb", big.nbytes / MB)
print(f"\nAt the full context T={T_ctx} (meta tensors), bytes of the three contiguous() copies")
row("q copy", f"{ctx_q:.1f} MB")
row("k and v copies", f"{ctx_kv:.1f} MB")
row("one layer", f"{layer:.1f} MB")
row(f"all {L} layers", f"{L * layer / 1000:.2f} GB")
sanity("ctx_copy_equals_qkv", math.isclose(layer, big.nbytes / MB),
       "the three copies together are exactly the bytes of the fused projection output",
       operands=(layer, big.nbytes / MB), relation="equal")

# -- variation: separate projections, and the q copy in fp32 at the full context ---------------------
q_sep = torch.randn(B, T, H * Dh, generator=g).to(dt)          # the output of its own q_proj
qh_sep = q_sep.view(B, T, H, Dh).transpose(1, 2)
value("sep_qh_stride", qh_sep.stride())
sep_copy = qh_sep.contiguous()
value("sep_copy_mb", sep_copy.nbytes / MB)
sanity("sep_same_copy", q_sep.is_contiguous() and not qh_sep.is_contiguous() and sep_copy.nbytes == q_copy.nbytes
       and qh_sep.stride() == (T * H * Dh, Dh, H * Dh, 1),
       "a separate q projection is contiguous, its head view is not, and its copy costs the same bytes",
       operands=(sep_copy.nbytes, q_copy.nbytes), relation="not")
value("var_q_fp32_mb", torch.empty(B, H, T_ctx, Dh, device="meta").nbytes / MB)
print(f"\nVariation: separate q projection, qh strides {qh_sep.stride()}, copy {sep_copy.nbytes / MB:.1f} MB")
