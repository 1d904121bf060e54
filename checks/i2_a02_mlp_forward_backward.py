"""I.2.A02 — A linear stack forward and backward: the FLOPs of a SwiGLU MLP block.

Builds Llama 3 8B's MLP block (gate_proj, up_proj, down_proj, SiLU) on meta tensors, counts the
forward pass and the backward pass separately with FlopCounterMode on real autograd, once with an
input that needs a gradient (a block inside a model) and once without (a first layer fed by data),
and a single layer both ways. The same block at a small width runs on real tensors to show which
gradients autograd produced and that the counts match the meta run. The variation freezes the
weights, as adapter fine-tuning does.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from numbook.check import fact, given, sanity, value


def row(label, *cells, w=30, cw=19):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


class SwiGLU(nn.Module):
    """The MLP of a Llama block: down(silu(gate(x)) * up(x)), no biases."""

    def __init__(self, d, f, **kw):
        super().__init__()
        self.gate_proj = nn.Linear(d, f, bias=False, **kw)
        self.up_proj = nn.Linear(d, f, bias=False, **kw)
        self.down_proj = nn.Linear(f, d, bias=False, **kw)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def fwd_bwd(module, x):
    """FLOPs of the forward and of the backward pass, counted apart, and the ops each used."""
    with FlopCounterMode(display=False) as f1:
        y = module(x)
    with FlopCounterMode(display=False) as f2:
        y.sum().backward()
    ops = {str(op).split(".")[-1] for fc in (f1, f2) for op in fc.get_flop_counts()["Global"]}
    return f1.get_total_flops(), f2.get_total_flops(), ops


d = fact("llama3_8b_hidden", "d")
f = fact("llama3_8b_intermediate", "f")
B = given("B", 4)
T = given("T", 512)
m = value("m", B * T)
BF16 = torch.bfloat16
META = {"device": "meta", "dtype": BF16}

# -- the block and its shapes -------------------------------------------------------------------
mlp = SwiGLU(d, f, **META)
n_params = value("n_params", sum(p.numel() for p in mlp.parameters()))
value("n_params_m", n_params / 1e6)
value("n_matrices", sum(isinstance(mod, nn.Linear) for mod in mlp.modules()),
      fixed="a SwiGLU block has three weight matrices (gate, up, down) by its definition")
x = torch.empty(B, T, d, **META)
with torch.no_grad():
    g = mlp.gate_proj(x)
    h = F.silu(g) * mlp.up_proj(x)
    y = mlp.down_proj(h)
value("x_shape", x.shape)
value("gate_shape", g.shape)
value("h_shape", h.shape)
value("y_shape", y.shape)
value("w_gate_shape", mlp.gate_proj.weight.shape)
value("w_down_shape", mlp.down_proj.weight.shape)
print(f"Llama 3 8B MLP block, d = {d:,}, f = {f:,}, on {B} x {T} tokens (meta, bf16)")
row("tensor", "shape")
for name, t in (("x", x), ("gate_proj(x), up_proj(x)", g), ("silu(gate) * up", h), ("down_proj(...)", y)):
    row(name, str(tuple(t.shape)))
row("parameters", f"{n_params:,}")
sanity("params_closed", n_params == 3 * d * f, "three matrices of d x f weights", operands=(n_params, 3 * d * f))

# -- one layer, input with and without a gradient -------------------------------------------------
one = 2 * m * d * f                                 # the forward count of one d x f layer (I.2.A01)
value("one_layer", one)
value("one_layer_g", one / 1e9, unit="GFLOP")
x_g = torch.empty(B, T, d, requires_grad=True, **META)
lf, lb, _ = fwd_bwd(nn.Linear(d, f, bias=False, **META), x_g)
lf0, lb0, _ = fwd_bwd(nn.Linear(d, f, bias=False, **META), x)
GRADS = "set by which gradients autograd computes (dX, dW or both), not by the sizes d, f, B, T"
r1 = value("layer_ratio_grad", lb / lf, fixed=GRADS)
r0 = value("layer_ratio_nograd", lb0 / lf0, fixed=GRADS)
value("flops_per_mac", lf / (m * d * f), fixed="FlopCounterMode counts a multiply-add as two FLOPs: its convention")
value("layer_bwd_g", lb / 1e9)
value("layer_bwd0_g", lb0 / 1e9)
print("\nOne layer nn.Linear(d, f): forward and backward FLOPs (FlopCounterMode)")
row("input", "forward", "backward", "backward/forward")
row("needs grad (dX and dW)", f"{lf:,}", f"{lb:,}", f"{r1:g}")
row("needs no grad (dW only)", f"{lf0:,}", f"{lb0:,}", f"{r0:g}")
# closed forms: dX = dY @ W is (m, f) @ (f, d); dW = dY^T @ X is (f, m) @ (m, d): each 2 m d f
sanity("layer_grad_two_products", lf == one and lb == 2 * one,
       "backward = dX (2 m f d) + dW (2 f m d) = twice the forward", operands=(lb, 2 * lf), relation=("equal", "not"))
sanity("layer_nograd_one_product", lf0 == one and lb0 == one,
       "without an input gradient only dW = dY^T X is computed: backward = forward", operands=(lb0, lf0))

# -- the whole block, input with and without a gradient -------------------------------------------
fwd, bwd, ops = fwd_bwd(mlp, x_g)
mlp0 = SwiGLU(d, f, **META)
fwd0, bwd0, ops0 = fwd_bwd(mlp0, x)
value("fwd", fwd, unit="FLOP")
value("fwd_g", fwd / 1e9, unit="GFLOP")
value("bwd_g", bwd / 1e9, unit="GFLOP")
value("bwd0_g", bwd0 / 1e9, unit="GFLOP")
value("step_g", (fwd + bwd) / 1e9, unit="GFLOP")
ratio = value("block_ratio_grad", bwd / fwd, fixed=GRADS)
ratio0 = value("block_ratio_nograd", bwd0 / fwd0, fixed=GRADS)
value("saved_g", (bwd - bwd0) / 1e9, unit="GFLOP")
per_tok = value("step_per_token", (fwd + bwd) / m, unit="FLOP")
value("step_per_token_m", per_tok / 1e6)
value("step_per_param", per_tok / n_params, unit="FLOP", fixed=GRADS)
value("fwd_per_param", fwd / m / n_params, fixed=GRADS)
value("bwd_per_param", bwd / m / n_params, fixed=GRADS)
print("\nThe block (three layers): forward and backward FLOPs")
row("input", "forward", "backward", "backward/forward")
row("needs grad (inside a model)", f"{fwd:,}", f"{bwd:,}", f"{ratio:g}")
row("needs no grad (fed by data)", f"{fwd0:,}", f"{bwd0:,}", f"{ratio0:.4f}")
row("ops the counter saw", ", ".join(sorted(ops)))
row("forward + backward per token", f"{per_tok:,.0f}", f"{per_tok / n_params:g} per weight")
sanity("block_fwd_closed", fwd == fwd0 == 3 * one, "forward = three products of 2 m d f", operands=(fwd, 3 * one))
sanity("block_grad_twice", bwd == 2 * fwd, "every layer computes dX and dW: backward = 2 x forward",
       operands=(bwd, 2 * fwd), relation=("not", "twice"))
# without dX at the input, gate_proj and up_proj skip their dX; down_proj still needs dX (its input h
# depends on the weights of gate and up): 3 dW + 1 dX = 4 products against 3 in the forward
sanity("block_nograd_four_thirds", bwd0 == 4 * one and bwd - bwd0 == 2 * one,
       "first-layer block: 3 weight grads + 1 input grad (down_proj) = 4/3 of the forward",
       operands=(bwd0, 4 * one), relation="not")
sanity("six_per_param", fwd + bwd == 6 * m * n_params,
       "forward + backward = 6 FLOPs per weight per token when every gradient is needed",
       operands=(per_tok, 6 * n_params), relation="equal")
sanity("only_products_counted", ops == ops0 == {"mm"},
       "the counter sees only mm: SiLU, the product and their gradients add nothing to its count",
       operands=(sorted(ops), ["mm"]), relation="not")

# -- the same block on real tensors at a small width -------------------------------------------------
d_s = given("d_small", 64)
f_s = given("f_small", 224)
m_s = given("m_small", 32)
torch.manual_seed(0)
small = SwiGLU(d_s, f_s)
xs = torch.randn(m_s, d_s, requires_grad=True)
sf, sb, _ = fwd_bwd(small, xs)
got = {n: p.grad is not None for n, p in small.named_parameters()}
xs_grad = xs.grad is not None
small0 = SwiGLU(d_s, f_s)
xs0 = torch.randn(m_s, d_s)
sf0, sb0, _ = fwd_bwd(small0, xs0)
got0 = {n: p.grad is not None for n, p in small0.named_parameters()}
value("small_fwd", sf, unit="FLOP")
value("small_bwd", sb)
value("small_bwd0", sb0)
value("small_x_grad", xs_grad)
value("small_x0_grad", xs0.grad is not None)
print(f"\nThe block on real fp32 tensors, d = {d_s}, f = {f_s}, {m_s} tokens")
row("input", "forward", "backward", "x.grad exists")
row("needs grad", f"{sf:,}", f"{sb:,}", str(xs_grad))
row("needs no grad", f"{sf0:,}", f"{sb0:,}", str(xs0.grad is not None))
row("weight grads, no-grad input", ", ".join(n.split("_")[0] for n, ok in got0.items() if ok), cw=0)
sanity("small_real_ratios", sf == sf0 == 6 * m_s * d_s * f_s and sb == 2 * sf and 3 * sb0 == 4 * sf0,
       "on real tensors the same ratios hold: 2 with an input gradient, 4/3 without", operands=(sb / sf, sb0 / sf0))
sanity("small_real_grads", xs_grad and xs0.grad is None and all(got.values()) and all(got0.values()),
       "autograd filled every weight gradient both times, and x.grad only when x required it",
       operands=(xs_grad, xs0.grad is not None), relation="not")

# -- variation: frozen weights (adapter fine-tuning), input with a gradient -----------------------------
frozen = SwiGLU(d, f, **META).requires_grad_(False)
ff, fb, _ = fwd_bwd(frozen, x_g)
value("frozen_ratio", fb / ff, fixed=GRADS)
value("frozen_bwd_g", fb / 1e9, unit="GFLOP")
value("frozen_step_g", (ff + fb) / 1e9, unit="GFLOP")
value("frozen_vs_full", (ff + fb) / (fwd + bwd), fixed=GRADS)
print("\nVariation: weights frozen, input needs grad")
row("forward, backward", f"{ff:,}", f"{fb:,}", f"{fb / ff:g}")
sanity("frozen_one_x", fb == ff == 3 * one, "frozen weights: only the three dX products, backward = forward",
       operands=(fb, ff), relation="not")
