"""II.2.A03 — Compute-optimal tokens, and the days a named model takes.

Counts the FLOPs of one real training step (forward, backward, AdamW step) of a small Llama-style model
on real CPU tensors with FlopCounterMode, and checks that the count per token is exactly 6 N_w (N_w:
the weights that enter a matrix product) plus the attention products 12 L T d. It then takes C = 6 N D
to Llama 2 7B trained on the 2.0T tokens of its paper: Chinchilla's tokens per parameter for it, the
days on 1,024 A100s at a stated MFU, and the MFU implied by the GPU hours the paper reports.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from numbook.check import fact, given, sanity, value

torch.set_num_threads(1)


def row(label, *cells, w=40, cw=18):
    print(f"  {label:<{w}}" + "".join(f"{c!s:>{cw}}" for c in cells))


class Block(nn.Module):
    """A Llama layer: RMSNorm, q/k/v/o without biases, causal attention as two explicit products, SwiGLU."""

    def __init__(self, d, H, f):
        super().__init__()
        self.H = H
        self.n1, self.n2 = nn.RMSNorm(d), nn.RMSNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.gate, self.up = nn.Linear(d, f, bias=False), nn.Linear(d, f, bias=False)
        self.down = nn.Linear(f, d, bias=False)

    def forward(self, x):
        B, T, d = x.shape
        h = self.n1(x)
        q, k, v = (p(h).view(B, T, self.H, d // self.H).transpose(1, 2) for p in (self.q, self.k, self.v))
        s = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.H)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        a = s.masked_fill(~causal, float("-inf")).softmax(-1) @ v
        x = x + self.o(a.transpose(1, 2).reshape(B, T, d))
        h = self.n2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self, V, d, L, H, f):
        super().__init__()
        self.embed = nn.Embedding(V, d)
        self.layers = nn.ModuleList(Block(d, H, f) for _ in range(L))
        self.norm = nn.RMSNorm(d)
        self.head = nn.Linear(d, V, bias=False)          # untied, as in Llama 2

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten())


def counts(V, d, L, f):
    """All parameters; N_w, the weights of matrix products (every Linear, the head among them)."""
    n_mm = L * (4 * d * d + 3 * d * f) + d * V
    n_all = n_mm + V * d + (2 * L + 1) * d
    return n_all, n_mm


# -- the small model: one real training step, counted -------------------------------------------------
V_s = given("V_s", 256)
d_s = given("d_s", 128, nudge=4)          # must stay divisible by the heads
L_s = given("L_s", 4)
H_s = given("H_s", 4, nudge=4)
f_s = given("f_s", 344)
B_s = given("B_s", 4)
T_s = given("T_s", 64)
seed = given("seed", 0, nudge=0)

torch.manual_seed(seed)
model = Llama(V_s, d_s, L_s, H_s, f_s)
tokens = torch.randint(0, V_s, (B_s, T_s), generator=torch.Generator().manual_seed(seed))
opt = torch.optim.AdamW(model.parameters())
before = [p.detach().clone() for p in model.parameters()]

with FlopCounterMode(display=False) as fc:
    loss = model(tokens)
    fwd_flops = fc.get_total_flops()
    loss.backward()
    fb_flops = fc.get_total_flops()
    opt.step()
step_flops = fc.get_total_flops()
moved = all(not torch.equal(b, p.detach()) for b, p in zip(before, model.parameters(), strict=True))

N_s = value("N_s", sum(p.numel() for p in model.parameters()))
Nmm_s = value("Nmm_s", sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear)))
sanity("small_closed_form", (N_s, Nmm_s) == counts(V_s, d_s, L_s, f_s),
       "the small model's counts equal the closed form", operands=(N_s, counts(V_s, d_s, L_s, f_s)[0]),
       relation="equal")
D_s = value("D_s", B_s * T_s)
loss0 = value("loss0", loss.item())
value("ln_V_s", math.log(V_s))
sanity("loss_untrained", math.log(V_s) < loss0 < math.log(V_s) + 0.5,
       "the loss is a little above ln|V|: a real forward pass of an untrained model", operands=(loss0, math.log(V_s)),
       relation="larger")
sanity("step_real", moved, "the AdamW step changed every parameter tensor")

per_tok = value("per_tok", step_flops / D_s)
six_nmm = value("six_nmm", 6 * Nmm_s)
attn_s = value("attn_s", 12 * L_s * T_s * d_s)
six_n_s = value("six_n_s", 6 * N_s)
value("fwd_share", fwd_flops / fb_flops, fixed="a backward pass of a matrix product is two products of its size")
print(f"Small model: V={V_s}, d={d_s}, L={L_s}, H={H_s}, f={f_s}: N = {N_s:,} parameters, "
      f"N_w = {Nmm_s:,} in matrix products; loss {loss0:.4f} (ln V = {math.log(V_s):.4f})")
print(f"One real step on {B_s} x {T_s} = {D_s} tokens, FlopCounterMode")
row("FLOPs", "step", "per token")
row("forward", f"{fwd_flops:,}", f"{fwd_flops / D_s:,.0f}")
row("forward + backward", f"{fb_flops:,}", f"{fb_flops / D_s:,.0f}")
row("forward + backward + AdamW step", f"{step_flops:,}", f"{per_tok:,.0f}")
row("6 N_w", "", f"{six_nmm:,}")
row("12 L T d (Q K^T and P V)", "", f"{attn_s:,}")
row("6 N (all parameters)", "", f"{six_n_s:,}")
sanity("step_split", step_flops == (six_nmm + attn_s) * D_s,
       "the counted step is exactly (6 N_w + 12 L T d) FLOPs per token", operands=(per_tok, six_nmm + attn_s),
       relation="equal")
sanity("fwd_third", 3 * fwd_flops == fb_flops, "the backward pass counts twice the forward pass",
       operands=(fb_flops - fwd_flops, 2 * fwd_flops), relation="twice")
sanity("optimizer_uncounted", step_flops == fb_flops,
       "FlopCounterMode counts no FLOPs for AdamW's step: its registry lists matrix products, convolutions and "
       "some attention kernels, and the step's elementwise updates are none of them",
       operands=(step_flops, fb_flops), relation="not")
# the same attention through scaled_dot_product_attention on the CPU: the counter has no entry for its kernel
qkv = [torch.randn(B_s, H_s, T_s, d_s // H_s, requires_grad=True) for _ in range(3)]
with FlopCounterMode(display=False) as fc_sdpa:
    F.scaled_dot_product_attention(*qkv, is_causal=True).sum().backward()
sdpa_flops = fc_sdpa.get_total_flops()
with FlopCounterMode(display=False) as fc_explicit:
    s_ = (qkv[0] @ qkv[1].transpose(-2, -1)).masked_fill(~torch.ones(T_s, T_s, dtype=torch.bool).tril(), float("-inf"))
    (s_.softmax(-1) @ qkv[2]).sum().backward()
explicit_flops = fc_explicit.get_total_flops()
print(f"One layer's causal attention, forward and backward, counted: explicit products {explicit_flops:,} FLOPs, "
      f"scaled_dot_product_attention on the CPU {sdpa_flops:,}")
sanity("sdpa_uncounted", sdpa_flops == 0 and explicit_flops == 12 * T_s * d_s * D_s,
       "FlopCounterMode counts no FLOPs for the CPU kernel of scaled_dot_product_attention, and the full 12 T d "
       "per token for the same attention written as products", operands=(sdpa_flops, explicit_flops), relation="not")
attn_share_s = value("attn_share_s", attn_s / six_nmm)
value("attn_share_s_closed", 2 * L_s * T_s * d_s / Nmm_s)
value("per_tok_over_6n_s", per_tok / six_n_s)

# -- Chinchilla: tokens per parameter ----------------------------------------------------------------
N_ch = fact("chinchilla_params", "N_ch")
D_ch = fact("chinchilla_tokens", "D_ch")
D_1b = fact("chinchilla_table3_1b_tokens", "D_1b")
r_ch = value("r_ch", D_ch / N_ch)
r_1b = value("r_1b", D_1b / 1e9)
value("N_ch_b", N_ch / 1e9)
value("D_ch_t", D_ch / 1e12)
value("D_1b_b", D_1b / 1e9)
C_ch = value("C_ch", 6 * N_ch * D_ch, unit="FLOP")
C_gopher = fact("chinchilla_table3_67b_flops", "C_gopher", unit="FLOP")   # Table 3's 67B row: one Gopher budget
ch_over_budget = value("C_ch_over_gopher", C_ch / C_gopher)
sanity("ch_6nd_near_budget", C_ch > C_gopher and abs(ch_over_budget - 1) < 0.03,
       "6ND for Chinchilla's N and D is above the paper's Gopher budget, by less than 3%",
       operands=(C_ch, C_gopher), relation="larger")
print(f"\nChinchilla: {N_ch / 1e9:.0f}B parameters on {D_ch / 1e12:.1f}T tokens = {r_ch:.1f} tokens per parameter; "
      f"Table 3, 1B parameters: {D_1b / 1e9:.1f}B tokens = {r_1b:.1f} per parameter")

# -- Llama 2 7B -------------------------------------------------------------------------------------
V = fact("llama2_7b_vocab", "V")
d = fact("llama2_7b_hidden", "d")
L = fact("llama2_7b_layers", "L")
f = fact("llama2_7b_intermediate", "f")
T = fact("llama2_7b_max_positions", "T")
D = fact("llama2_7b_train_tokens", "D")
gpu_hours = fact("llama2_7b_gpu_hours", "gpu_hours")
peak = fact("a100_sxm_bf16_dense_tflops", "peak_tflops", unit="TFLOP/s")
power_w = fact("llama2_7b_power_w", "power_w", unit="W")   # Table 2's power column: its carbon estimate's figure
n_gpu = given("n_gpu", 1024)
value("n_gpu_2x", 2 * n_gpu)
mfu = given("mfu", 0.45)

N, Nmm = counts(V, d, L, f)
N = value("N_7b", N)
value("N_7b_b", N / 1e9)
value("Nmm_7b_b", Nmm / 1e9)
value("D_t", D / 1e12)
C = value("C_6nd", 6 * N * D, unit="FLOP")
per_tok_7b = 6 * Nmm + 12 * L * T * d
C_count = value("C_count", per_tok_7b * D, unit="FLOP")
attn_share = value("attn_share_7b", 12 * L * T * d / (6 * N))
value("count_over_6n", per_tok_7b / (6 * N))
value("attn_per_tok_g", 12 * L * T * d / 1e9)
value("six_n_per_tok_g", 6 * N / 1e9)
print(f"\nLlama 2 7B: N = {N:,} ({Nmm:,} in matrix products), D = {D:.2e} tokens, context T = {T}")
row("C = 6 N D", f"{C:.3e} FLOPs")
row("(6 N_w + 12 L T d) D", f"{C_count:.3e} FLOPs", f"{per_tok_7b / (6 * N):.3f} x 6ND")

D_opt = value("D_opt_b", r_ch * N / 1e9)
value("D_opt", r_ch * N)
over = value("over_chinchilla", D / (r_ch * N))
value("D_opt_1b_rule_b", r_1b * N / 1e9)
row("Chinchilla's tokens for 7B", f"{D_opt:.1f} B", f"trained on {over:.1f} x that")
sanity("past_chinchilla", 10 * r_ch * N < D,
       "Llama 2 7B was trained on more than ten times Chinchilla's tokens for its size", operands=(D, r_ch * N),
       relation="larger")

rate = n_gpu * peak * 1e12 * mfu                # FLOP/s the cluster delivers at that MFU
days = value("days", C / rate / 86400)
days_count = value("days_count", C_count / rate / 86400)
days_2048 = value("days_2048", C / (2 * rate) / 86400)
row(f"{n_gpu} A100s at MFU {mfu:.0%}", f"{days:.2f} days", f"{days_count:.2f} with attention")
sanity("days_halve", math.isclose(days_2048, days / 2), "twice the GPUs at the same MFU take half the days",
       operands=(days_2048, days), relation="half")

gpu_s = gpu_hours * 3600
mfu_paper = value("mfu_paper", C / (gpu_s * peak * 1e12))
hfu_count = value("mfu_paper_count", C_count / (gpu_s * peak * 1e12))
days_paper = value("days_paper", gpu_hours / n_gpu / 24)
value("energy_mwh", gpu_hours * power_w / 1e6, unit="MWh")   # GPU hours times Table 2's watts per GPU
value("gpu_hours_m", gpu_hours / 1e6)
row("MFU implied by 184,320 GPU hours", f"{mfu_paper:.1%}", f"{hfu_count:.1%} with attention")
row(f"the paper's hours on {n_gpu} GPUs", f"{days_paper:.2f} days")
sanity("paper_below_stated", mfu_paper < mfu, "the MFU implied by the paper's hours is below the stated MFU",
       operands=(mfu_paper, mfu), relation="smaller")
sanity("paper_days_longer", days_paper > days and math.isclose(days_paper / days, mfu / mfu_paper),
       "the paper's hours spread over the cluster take longer than the estimate, by the ratio of the MFUs",
       operands=(days_paper, days), relation="longer")
sanity("attn_lifts", hfu_count > mfu_paper, "counting the attention products gives a higher utilisation",
       operands=(hfu_count, mfu_paper), relation="higher")

# -- Variation -------------------------------------------------------------------------------------------
days_paper_2x = value("days_paper_2x", gpu_hours / (2 * n_gpu) / 24)
sanity("paper_2x_half", math.isclose(days_paper_2x, days_paper / 2),
       "the paper's GPU hours on twice the GPUs take half the days", operands=(days_paper_2x, days_paper),
       relation="half")
D_eq = value("D_eq", 6 * N_ch * D_ch / (6 * N))
r_eq = value("r_eq", D_eq / N)
print(f"\nVariation: paper's hours on {2 * n_gpu} GPUs: {days_paper_2x:.2f} days; 6ND for Chinchilla at 7B buys "
      f"{D_eq:.3e} tokens, {r_eq:.0f} per parameter")
sanity("eq_more_tokens", D_eq > D,
       "6ND for Chinchilla's N and D, at Llama 2 7B's size, buys more tokens than Llama 2 7B was trained on",
       operands=(D_eq, D), relation="more than")
