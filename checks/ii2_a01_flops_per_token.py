"""II.2.A01 — FLOPs per token of a training step: 6N plus the attention term, counted.

Builds a small Llama-style model (RMSNorm, SwiGLU, no biases, an untied output head, attention through
F.scaled_dot_product_attention with is_causal=True) and counts the FLOPs of one forward pass and of its
backward pass separately with torch.utils.flop_counter.FlopCounterMode: once on real CPU tensors with
torch's default attention kernel, once with the math backend of SDPA (explicit Q K^T and P V products),
and once with every block wrapped in torch.utils.checkpoint (use_reentrant=False). Each count is set
against its closed form: 2 N_w + 4 L T d forward, twice that backward, with N_w the weights that enter a
matrix product. The counts are then compared with PaLM's 6N + 12 L H Q T (Chowdhery et al., 2022,
appendix B), and the same counts are run on Llama 2 7B at its 4,096-token context on the meta device.
"""

import torch
from _train_flops import Llama, block_weights, count, matrix_weights
from torch.utils.checkpoint import set_checkpoint_early_stop
from torch.utils.flop_counter import flop_registry

from numbook.check import fact, given, sanity, value

torch.set_num_threads(1)


def row(label, *cells, w=34, cw=16):
    print(f"  {label:<{w}}" + "".join(f"{c!s:>{cw}}" for c in cells))


# -- the small model, real tensors --------------------------------------------------------------------
V_s = given("V_s", 256)
H_s = given("H_s", 4, nudge=4)          # 8 heads still divide the width
d_s = given("d_s", 64, nudge=8)         # a nudge must keep d divisible by the heads
L_s = given("L_s", 2)
f_s = given("f_s", 172)
B_s = given("B_s", 2)
T_s = given("T_s", 64)
seed = given("seed", 0, nudge=0)

torch.manual_seed(seed)
small = Llama(V_s, d_s, L_s, H_s, f_s)
tokens = torch.randint(0, V_s, (B_s, T_s), generator=torch.Generator().manual_seed(seed))
n_tok = value("n_tok_s", B_s * T_s)
N_s = value("N_s", sum(p.numel() for p in small.parameters()))
Nw_s = value("Nw_s", matrix_weights(small))
value("Q_s", d_s // H_s)
value("emb_s", small.embed_tokens.weight.numel())
value("norm_s", sum(p.numel() for n, p in small.named_parameters() if "norm" in n))
sanity("small_params_split", N_s == Nw_s + V_s * d_s + (2 * L_s + 1) * d_s,
       "N is the matrix weights plus the embedding table plus the norm gains",
       operands=(N_s, Nw_s + V_s * d_s + (2 * L_s + 1) * d_s), relation="equal")

fwd_fused, bwd_fused, ops_fused = count(small, tokens)
fwd_math, bwd_math, ops_math = count(small, tokens, math=True)
attn_fwd = 4 * L_s * T_s * d_s                      # Q K^T and P V, full T x T, 2 FLOPs a multiply-add, per token
per = {k: value(k, x / n_tok, unit="FLOP") for k, x in (
    ("fwd_fused_s", fwd_fused), ("bwd_fused_s", bwd_fused), ("fwd_math_s", fwd_math), ("bwd_math_s", bwd_math))}
value("two_nw_s", 2 * Nw_s)
value("attn_fwd_s", attn_fwd)
value("attn_train_s", 3 * attn_fwd)
print(f"Small model: V={V_s}, d={d_s}, L={L_s}, H={H_s}, f={f_s}; {N_s:,} parameters, N_w = {Nw_s:,}")
print(f"One batch of {B_s} x {T_s} tokens; FLOPs per token (FlopCounterMode)\n")
row("", "forward", "backward", "closed form fwd")
row("default SDPA kernel (CPU)", f"{per['fwd_fused_s']:,.0f}", f"{per['bwd_fused_s']:,.0f}", f"{2 * Nw_s:,}")
row("SDPA math backend", f"{per['fwd_math_s']:,.0f}", f"{per['bwd_math_s']:,.0f}", f"{2 * Nw_s + attn_fwd:,}")
print("  ops counted:", sorted(ops_fused), sorted(ops_math))
cpu_op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
sanity("fused_counts_no_attention", fwd_fused == 2 * Nw_s * n_tok and bwd_fused == 4 * Nw_s * n_tok
       and cpu_op not in flop_registry and cpu_op.default not in flop_registry
       and torch.ops.aten._scaled_dot_product_flash_attention in flop_registry
       and torch.ops.aten._scaled_dot_product_efficient_attention in flop_registry,
       "with the CPU's fused SDPA kernel the counter records no attention FLOPs: that op has no formula in its "
       "registry (the GPU's flash and memory-efficient kernels have), so forward is 2 N_w and backward 4 N_w per token",
       operands=(per["fwd_fused_s"], 2 * Nw_s), relation="not")

# what the counter would record on a GPU: the formulas registered for the flash and memory-efficient kernels,
# called on this model's query, key and value shapes (the backward formula recomputes Q K^T: five products)
aten = torch.ops.aten
qkv = (B_s, H_s, T_s, d_s // H_s)
gpu_f = [flop_registry[op](qkv, qkv, qkv) for op in (aten._scaled_dot_product_flash_attention,
                                                      aten._scaled_dot_product_efficient_attention)]
gpu_b = [flop_registry[op](qkv, qkv, qkv, qkv) for op in (aten._scaled_dot_product_flash_attention_backward,
                                                           aten._scaled_dot_product_efficient_attention_backward)]
one_product = 2 * B_s * H_s * T_s * T_s * (d_s // H_s)   # one T x T x Q product over all heads, 2 FLOPs a multiply-add
gpu_fwd_s = value("attn_gpu_fwd_s", L_s * gpu_f[0] / n_tok, unit="FLOP")
gpu_bwd_s = value("attn_gpu_bwd_s", L_s * gpu_b[0] / n_tok, unit="FLOP")
value("attn_gpu_fwd_coeff", gpu_f[0] / n_tok / (T_s * d_s),
      fixed="Q K^T and P V: two products of 2 FLOPs a multiply-add")
value("attn_gpu_bwd_coeff", gpu_b[0] / n_tok / (T_s * d_s),
      fixed="the registered backward formula: Q K^T recomputed and four gradient products, 2 FLOPs a multiply-add")
value("attn_gpu_coeff", (gpu_f[0] + gpu_b[0]) / n_tok / (T_s * d_s), fixed="the sum of the two registered formulas")
value("gpu_total_s", 6 * Nw_s + gpu_fwd_s + gpu_bwd_s, unit="FLOP")
print(f"  GPU kernels' registered formulas, attention per token: forward {gpu_fwd_s:,.0f}, backward {gpu_bwd_s:,.0f}")
sanity("gpu_bwd_recomputes", len(set(gpu_f)) == 1 and len(set(gpu_b)) == 1 and gpu_f[0] == 2 * one_product
       and gpu_b[0] == 5 * one_product and gpu_fwd_s == attn_fwd and gpu_b[0] > 2 * gpu_f[0],
       "the GPU kernels' backward formula counts five T x T products (Q K^T recomputed, four gradients): more than "
       "twice the forward's two", operands=(gpu_b[0], 2 * gpu_f[0]), relation="larger")
sanity("math_counts_attention", fwd_math == (2 * Nw_s + attn_fwd) * n_tok and bwd_math == 2 * fwd_math,
       "with the math backend the counter records Q K^T and P V over the full T x T: 2 N_w + 4 L T d forward, "
       "twice that backward", operands=(per["fwd_math_s"], 2 * Nw_s + attn_fwd), relation="equal")
sanity("bwd_twice_fwd", bwd_math == 2 * fwd_math and bwd_fused == 2 * fwd_fused,
       "the backward pass counts twice the forward pass", operands=(per["bwd_math_s"], 2 * per["fwd_math_s"]),
       relation="twice")
sanity("only_products", ops_fused <= ops_math == {"aten.mm", "aten.bmm"},
       "the counter records only matrix products: norms, SiLU, softmax and the loss add nothing to it",
       operands=(len(ops_math), 2), relation="not")
value("n_ops_counted", len(ops_math),
      fixed="the counter's registry holds formulas for matrix products and convolutions only")
ARCH = "a property of the arithmetic of training (forward, dX, dW), not of the sizes"
value("fwd_per_weight", fwd_fused / n_tok / Nw_s, unit="FLOP", fixed="one multiply-add per weight per token: 2 FLOPs")
value("bwd_per_weight", bwd_fused / n_tok / Nw_s, unit="FLOP",
      fixed="two multiply-adds per weight per token: dX and dW")
value("bwd_over_fwd", bwd_math / fwd_math, fixed=ARCH)
value("train_per_weight", (fwd_fused + bwd_fused) / n_tok / Nw_s, unit="FLOP", fixed=ARCH)
value("attn_fwd_coeff", (fwd_math - fwd_fused) / n_tok / (L_s * T_s * d_s),
      fixed="two T x T x d products of 2 FLOPs a multiply-add")
value("attn_coeff", (fwd_math + bwd_math - fwd_fused - bwd_fused) / n_tok / (L_s * T_s * d_s), fixed=ARCH)
total_s = value("total_s", per["fwd_math_s"] + per["bwd_math_s"], unit="FLOP")
six_nw_attn = 6 * Nw_s + 12 * L_s * T_s * d_s
palm_s = value("palm_s", 6 * N_s + 12 * L_s * H_s * (d_s // H_s) * T_s, unit="FLOP")
value("palm_minus_counted_s", palm_s - total_s, unit="FLOP")
value("six_emb_norm_s", 6 * (V_s * d_s + (2 * L_s + 1) * d_s), unit="FLOP")
value("palm_over_counted_s", palm_s / total_s - 1)
sanity("palm_gap_is_lookup_and_norms", palm_s - total_s == 6 * (N_s - Nw_s) and total_s == six_nw_attn,
       "6N + 12LHQT exceeds the count by exactly 6 (V d + norm gains): the embedding lookup and the norms do no "
       "counted products", operands=(palm_s - total_s, 6 * (V_s * d_s + (2 * L_s + 1) * d_s)),
       relation=("larger", "equal"))

# the meta device takes the math path: the same counts without running anything
meta = Llama(V_s, d_s, L_s, H_s, f_s).to("meta")
fwd_meta, bwd_meta, _ = count(meta, tokens.to("meta"))
sanity("meta_is_math", (fwd_meta, bwd_meta) == (fwd_math, bwd_math),
       "on the meta device the default SDPA counts as the math backend does", operands=(fwd_meta, fwd_math),
       relation="equal")

# -- activation checkpointing: the backward pass runs each block's forward again -----------------------
torch.manual_seed(seed)
ck = Llama(V_s, d_s, L_s, H_s, f_s, ckpt=True)
fwd_ck, bwd_ck, _ = count(ck, tokens, math=True)
with set_checkpoint_early_stop(False):             # recompute the whole block, not only up to its last saved tensor
    fwd_full, bwd_full, _ = count(ck, tokens, math=True)
Nb_s = value("Nb_s", block_weights(ck))
value("head_s", V_s * d_s)
value("down_s", d_s * f_s)
per_ck = {k: value(k, x / n_tok, unit="FLOP") for k, x in (
    ("fwd_ck_s", fwd_ck), ("bwd_ck_s", bwd_ck), ("bwd_full_s", bwd_full))}
extra = value("extra_ck_s", (fwd_ck + bwd_ck - fwd_math - bwd_math) / n_tok, unit="FLOP")
extra_full = value("extra_full_s", (fwd_full + bwd_full - fwd_math - bwd_math) / n_tok, unit="FLOP")
value("blocks_fwd_s", 2 * Nb_s + attn_fwd, unit="FLOP")
value("down_fwd_s", 2 * L_s * d_s * f_s, unit="FLOP")
value("head_fwd_s", 2 * V_s * d_s, unit="FLOP")
hw_s = value("hw_s", (fwd_ck + bwd_ck) / n_tok, unit="FLOP")
hw_full = value("hw_full_s", (fwd_full + bwd_full) / n_tok, unit="FLOP")
value("hw_over_model_s", hw_s / total_s)
value("ck_per_weight", (6 * Nb_s + extra_full - attn_fwd) / Nb_s, unit="FLOP", fixed=ARCH + ", plus one forward")
value("ck_attn_coeff", (12 * L_s * T_s * d_s + attn_fwd) / (L_s * T_s * d_s), fixed=ARCH + ", plus one forward")
value("hw_full_over_model_s", hw_full / total_s)
print("\nWith every block checkpointed (use_reentrant=False), math backend, FLOPs per token")
row("", "forward", "backward", "total")
row("without checkpointing", f"{per['fwd_math_s']:,.0f}", f"{per['bwd_math_s']:,.0f}", f"{total_s:,.0f}")
row("checkpointed (early stop, default)", f"{per_ck['fwd_ck_s']:,.0f}", f"{per_ck['bwd_ck_s']:,.0f}", f"{hw_s:,.0f}")
row("checkpointed, early stop off", f"{fwd_full / n_tok:,.0f}", f"{bwd_full / n_tok:,.0f}", f"{hw_full:,.0f}")
row("extra, default / early stop off", f"{extra:,.0f}", f"{extra_full:,.0f}")
row("blocks' forward 2 N_b + 4 L T d", f"{2 * Nb_s + attn_fwd:,}", "less down_proj",
    f"{2 * Nb_s + attn_fwd - 2 * L_s * d_s * f_s:,}")
sanity("ckpt_bwd_grows", bwd_ck > bwd_math and fwd_ck == fwd_math,
       "checkpointing leaves the forward count and grows the backward count", operands=(bwd_ck, bwd_math),
       relation="grows")
sanity("ckpt_full_is_forward", fwd_full == fwd_math and extra_full == 2 * Nb_s + attn_fwd,
       "with early stop off, checkpointing leaves the forward count alone and adds one whole forward of the blocks",
       operands=(extra_full, 2 * Nb_s + attn_fwd), relation="equal")
sanity("ckpt_early_stop", fwd_ck == fwd_math and extra == 2 * Nb_s + attn_fwd - 2 * L_s * d_s * f_s,
       "by default the recomputation stops at the last tensor the backward needs: down_proj's product, whose "
       "output nothing saves, is not run again", operands=(extra, 2 * Nb_s + attn_fwd - 2 * L_s * d_s * f_s),
       relation=("smaller", "not"))
sanity("ckpt_full_vs_fwd", extra_full == 2 * Nw_s + attn_fwd - 2 * V_s * d_s,
       "the extra with early stop off is the whole forward less the head's product: it equals the step's forward "
       "without attention (2 N_w) only where 2 V d = 4 L T d",
       operands=(extra_full, 2 * Nw_s + attn_fwd - 2 * V_s * d_s), relation="equal")
sanity("ckpt_eight", hw_full == 8 * Nb_s + 16 * L_s * T_s * d_s + 6 * V_s * d_s,
       "the checkpointed blocks cost 8 N_b + 16 L T d a token, the head (not checkpointed) 6 d V",
       operands=(hw_full, 8 * Nb_s + 16 * L_s * T_s * d_s + 6 * V_s * d_s), relation="equal")

# -- Llama 2 7B at its context, on the meta device ------------------------------------------------------
V = fact("llama2_7b_vocab", "V")
d = fact("llama2_7b_hidden", "d", nudge=128)       # a nudge must keep d divisible by the heads
L = fact("llama2_7b_layers", "L")
H = fact("llama2_7b_heads", "H", nudge=32)          # 64 heads still divide d
f = fact("llama2_7b_intermediate", "f")
T = fact("llama2_7b_max_positions", "T")
with torch.device("meta"):
    big = Llama(V, d, L, H, f)
seq = torch.zeros(1, T, dtype=torch.long, device="meta")
fwd7, bwd7, _ = count(big, seq)
N7 = value("N_7b", sum(p.numel() for p in big.parameters()))
Nw7 = value("Nw_7b", matrix_weights(big))
value("Q_7b", d // H)
total7 = value("total_7b", (fwd7 + bwd7) / T, unit="FLOP")
value("total_7b_g", total7 / 1e9, unit="GFLOP")
attn7 = value("attn_7b_g", 12 * L * T * d / 1e9, unit="GFLOP")
value("six_nw_7b_g", 6 * Nw7 / 1e9, unit="GFLOP")
value("fwd_7b_g", fwd7 / T / 1e9, unit="GFLOP")
value("bwd_7b_g", bwd7 / T / 1e9, unit="GFLOP")
share7 = value("attn_share_7b", 12 * L * T * d / total7)
palm7 = value("palm_7b_g", (6 * N7 + 12 * L * H * (d // H) * T) / 1e9, unit="GFLOP")
value("six_n_7b_g", 6 * N7 / 1e9, unit="GFLOP")
value("palm_minus_counted_7b_g", palm7 - total7 / 1e9, unit="GFLOP")
qkv7 = (1, H, T, d // H)
gpu7 = value("gpu_7b_g", (fwd7 + bwd7 - 12 * L * T * d * T + L * (
    flop_registry[aten._scaled_dot_product_flash_attention](qkv7, qkv7, qkv7)
    + flop_registry[aten._scaled_dot_product_flash_attention_backward](qkv7, qkv7, qkv7, qkv7))) / T / 1e9,
    unit="GFLOP")
sanity("gpu_above_palm_7b", gpu7 > palm7 and round(gpu7 * 1e9) == 6 * Nw7 + 14 * L * T * d,
       "with the GPU kernels' formulas Llama 2 7B's count is 6 N_w + 14 L T d, larger than PaLM's 6N + 12LHQT",
       operands=(gpu7, palm7), relation="larger")
value("palm_over_7b", palm7 * 1e9 / total7 - 1)
with torch.device("meta"):
    ck7 = Llama(V, d, L, H, f, ckpt=True)
fwd7c, bwd7c, _ = count(ck7, seq)
with set_checkpoint_early_stop(False):
    fwd7f, bwd7f, _ = count(ck7, seq)
hw7 = value("hw_7b_g", (fwd7c + bwd7c) / T / 1e9, unit="GFLOP")
hw7f = value("hw_full_7b_g", (fwd7f + bwd7f) / T / 1e9, unit="GFLOP")
value("hw_full_over_model_7b", hw7f * 1e9 / total7)
value("hw_over_model_7b", hw7 * 1e9 / total7)
print(f"\nLlama 2 7B at T = {T:,} (meta device): N = {N7:,}, N_w = {Nw7:,}")
row("forward, backward per token", f"{fwd7 / T / 1e9:.3f} G", f"{bwd7 / T / 1e9:.3f} G")
row("counted total per token", f"{total7 / 1e9:.3f} G")
row("6 N_w + 12 L T d", f"{(6 * Nw7 + 12 * L * T * d) / 1e9:.3f} G")
row("PaLM: 6N + 12 L H Q T", f"{palm7:.3f} G", f"{palm7 * 1e9 / total7 - 1:+.2%}")
row("attention share of the count", f"{share7:.2%}")
row("checkpointed, default per token", f"{hw7:.3f} G", f"x {hw7 * 1e9 / total7:.3f}")
row("checkpointed, early stop off", f"{hw7f:.3f} G", f"x {hw7f * 1e9 / total7:.3f}")
sanity("count_7b_closed", fwd7 + bwd7 == (6 * Nw7 + 12 * L * T * d) * T and bwd7 == 2 * fwd7,
       "Llama 2 7B's count equals 6 N_w + 12 L T d per token, backward twice forward",
       operands=(total7, 6 * Nw7 + 12 * L * T * d), relation=("equal", "twice"))
sanity("palm_overstates_7b", palm7 * 1e9 - total7 == 6 * (V * d + (2 * L + 1) * d),
       "PaLM's formula with N counting the embedding overstates Llama 2 7B's count by 6 (V d + norm gains)",
       operands=(palm7 * 1e9, total7), relation="overstates")
sanity("attn_minor_7b", share7 < 0.5 and share7 > 0.05,
       "at 4,096 tokens the attention term is a minor share of Llama 2 7B's count, but more than 5%",
       operands=(share7, 0.5), relation=("smaller", "larger"))
Nb7 = Nw7 - V * d
sanity("ckpt_7b", fwd7f + bwd7f == (8 * Nb7 + 16 * L * T * d + 6 * V * d) * T
       and fwd7c + bwd7c == fwd7f + bwd7f - 2 * L * d * f * T,
       "checkpointing every block of Llama 2 7B adds one forward of the blocks: 8 N_b + 16 L T d + 6 d V",
       operands=(hw7f * 1e9, 8 * Nb7 + 16 * L * T * d + 6 * V * d), relation="equal")

# -- variation: the context at which the attention term reaches a quarter of the count ---------------------
def share_at(t):
    """The attention share of Llama 2 7B's counted step at context t: counted with and without the math SDPA."""
    s = torch.zeros(1, t, dtype=torch.long, device="meta")
    fw, bw, _ = count(big, s)
    return 12 * L * t * d / ((fw + bw) / t)


T_q = value("T_quarter_7b", -(-Nw7 // (6 * L * d)))     # 12 L T d >= (6 N_w + 12 L T d) / 4  <=>  T >= N_w / (6 L d)
s_at, s_below = share_at(T_q), share_at(T_q - 1)
print(f"\nVariation: attention share {s_below:.4%} at T = {T_q - 1:,}, {s_at:.4%} at T = {T_q:,}")
sanity("quarter_share_7b", s_below < 0.25 <= s_at and T_q > 2 * T,
       "the counted share first reaches 1/4 at T = ceil(N_w / (6 L d)), longer than twice the trained context",
       operands=(T_q, 2 * T), relation="larger")
