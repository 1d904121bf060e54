"""I.1.A05 — The memory of mixed-precision training with Adam: the 16-bytes-per-parameter rule.

Builds GPT-2 (124M) from torch.nn modules as real CPU tensors: fp32 master weights, a bf16 working
copy, bf16 gradients on the working copy, their fp32 copies on the master weights, and one real
torch.optim.Adam step, after which the bf16 weights are refreshed from the master. Every byte is
read from .nbytes of the real tensors and of Adam's state. The same recipe on Llama 3 8B runs on
the meta device (Adam steps on meta tensors too), and the total is set against one H100 and
against the number of GPUs that sharding needs: against the memory an H100 reports to software
(81,559 MiB), which decides what fits, and against its datasheet's 80 GB, which plans more GPUs.
"""

import math

import torch
import torch.nn as nn
from _driver import driver_range

from numbook.check import fact, sanity, value

GB, MB, MiB = 10**9, 10**6, 2**20


def row(label, *cells, w=30, cw=15):
    print(f"  {label:<{w}}" + "".join(f"{c!s:>{cw}}" for c in cells))


class GPT2Block(nn.Module):
    """GPT-2's layer, named as in its checkpoint: LayerNorms, fused QKV, output projection, 4d MLP."""

    def __init__(self, d):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)        # q, k and v in one matrix, with biases
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)          # GPT-2's MLP is four times as wide as the model
        self.mlp_proj = nn.Linear(4 * d, d)


class GPT2(nn.Module):
    def __init__(self, V, d, L, C):
        super().__init__()
        self.wte = nn.Embedding(V, d)            # also the output head: GPT-2 ties them
        self.wpe = nn.Embedding(C, d)
        self.h = nn.ModuleList(GPT2Block(d) for _ in range(L))
        self.ln_f = nn.LayerNorm(d)


class LlamaBlock(nn.Module):
    def __init__(self, d, H, Hkv, f):
        super().__init__()
        Dh = d // H
        self.input_layernorm, self.post_attention_layernorm = nn.RMSNorm(d), nn.RMSNorm(d)
        self.q_proj, self.o_proj = nn.Linear(d, H * Dh, bias=False), nn.Linear(H * Dh, d, bias=False)
        self.k_proj, self.v_proj = nn.Linear(d, Hkv * Dh, bias=False), nn.Linear(d, Hkv * Dh, bias=False)
        self.gate_proj, self.up_proj = nn.Linear(d, f, bias=False), nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)


class Llama(nn.Module):
    def __init__(self, V, d, L, H, Hkv, f):
        super().__init__()
        self.embed_tokens = nn.Embedding(V, d)
        self.layers = nn.ModuleList(LlamaBlock(d, H, Hkv, f) for _ in range(L))
        self.norm = nn.RMSNorm(d)
        self.lm_head = nn.Linear(d, V, bias=False)


def mixed_precision_step(master, make):
    """One step of the recipe: bf16 working copy and bf16 grads, fp32 grads on the master, Adam, copy back.

    ``make`` builds the same architecture on the meta device, to receive the bf16 copy without an fp32
    detour. Returns the tensors each role holds, measured while the fp32 gradients are alive (the peak)."""
    with torch.device("meta"):
        work = make()
    work.load_state_dict({k: v.to(torch.bfloat16) for k, v in master.state_dict().items()}, assign=True)
    for q in work.parameters():
        # the bf16 gradients a backward pass leaves; with no data, those of the loss ||w||^2 / 2, which is w
        q.grad = q.detach().clone()
    # fused=True on CPU: torch's single-kernel Adam; the state it keeps is the same as the default's. On meta
    # parameters fused=True raises, so the default runs: m and v come out as meta tensors, the step
    # counters as fp32 CPU scalars
    opt = torch.optim.Adam(master.parameters(), fused=next(master.parameters()).device.type == "cpu")
    for p, q in zip(master.parameters(), work.parameters(), strict=True):
        p.grad = q.grad.float()                   # fp32 copy for the update
    opt.step()
    roles = {
        "bf16 weights": [q for q in work.parameters()],
        "bf16 gradients": [q.grad for q in work.parameters()],
        "fp32 master weights": [p for p in master.parameters()],
        "Adam m (exp_avg)": [opt.state[p]["exp_avg"] for p in master.parameters()],
        "Adam v (exp_avg_sq)": [opt.state[p]["exp_avg_sq"] for p in master.parameters()],
        "Adam step counters": [opt.state[p]["step"] for p in master.parameters()],
        "fp32 gradients (transient)": [p.grad for p in master.parameters()],
    }
    with torch.no_grad():
        for p, q in zip(master.parameters(), work.parameters(), strict=True):
            q.copy_(p)                            # the bf16 weights follow the updated master
    return work, opt, roles


def nbytes(ts):
    return sum(t.nbytes for t in ts)


ROLES = ["bf16 weights", "bf16 gradients", "fp32 master weights", "Adam m (exp_avg)", "Adam v (exp_avg_sq)"]

# -- GPT-2 (124M), real tensors --------------------------------------------------------------------
V = fact("gpt2_vocab", "V")
d = fact("gpt2_hidden", "d")
L = fact("gpt2_layers", "L")
C = fact("gpt2_context", "C")
torch.manual_seed(0)
master = GPT2(V, d, L, C)
N = value("n_params", sum(p.numel() for p in master.parameters()))
n_tensors = value("n_tensors", len(list(master.parameters())))
closed = V * d + C * d + L * (12 * d * d + 13 * d) + 2 * d
sanity("gpt2_closed_form", closed == N, "GPT-2's count: Vd + Cd + L(12d^2 + 13d) + 2d", operands=(N, closed),
       relation="equal")
work, opt, roles = mixed_precision_step(master, lambda: GPT2(V, d, L, C))

by_role = {k: nbytes(v) for k, v in roles.items()}
persistent = sum(by_role[k] for k in ROLES) + by_role["Adam step counters"]
peak = persistent + by_role["fp32 gradients (transient)"]
print(f"GPT-2: V={V}, d={d}, L={L}, C={C}: {N:,} parameters in {n_tensors} tensors; one real Adam step")
row("role", "dtype", "bytes", "MB", "bytes/param")
for k, ts in roles.items():
    row(k, str(ts[0].dtype)[6:], f"{by_role[k]:,}", f"{by_role[k] / MB:.1f}", f"{by_role[k] / N:.4f}")
row("total kept between steps", "", f"{persistent:,}", f"{persistent / MB:.1f}", f"{persistent / N:.4f}")
row("peak, with the fp32 gradients", "", f"{peak:,}", f"{peak / MB:.1f}", f"{peak / N:.4f}")
for key, name in zip(ROLES, ["w_bf16", "g_bf16", "master", "adam_m", "adam_v"], strict=True):
    value(f"{name}_mb", by_role[key] / MB)
    value(f"{name}_per_param", by_role[key] / N,
          fixed="bytes per element of the role's dtype: a property of the recipe, not of the model")
value("step_bytes", by_role["Adam step counters"])
value("step_elem", roles["Adam step counters"][0].element_size(), fixed="bytes of an fp32 scalar")
value("fp32_grad_mb", by_role["fp32 gradients (transient)"] / MB)
value("total_mb", persistent / MB)
value("total_gb", persistent / GB)
per_param = value("bytes_per_param", persistent / N)
value("peak_gb", peak / GB)
value("peak_per_param", peak / N, unit="B")
value("opt_state_mb", (by_role["Adam m (exp_avg)"] + by_role["Adam v (exp_avg_sq)"]) / MB)
value("opt_over_weights", (by_role["Adam m (exp_avg)"] + by_role["Adam v (exp_avg_sq)"]) / by_role["bf16 weights"],
      fixed="two fp32 moments against one bf16 weight: a ratio of dtypes")

rule = 2 + 2 + 4 + 4 + 4                       # the rule: bf16 w + bf16 g + fp32 master + m + v
value("rule_bytes", rule, fixed="the rule of thumb: 2 + 2 + 4 + 4 + 4 bytes")
sanity("rule_holds", persistent == rule * N + 4 * n_tensors,
       "measured bytes = 16 N + one 4-byte step counter per parameter tensor", operands=(persistent, rule * N),
       relation="not")
sanity("peak_twenty", peak == (rule + 4) * N + 4 * n_tensors,
       "with the fp32 gradient copies alive, 20 bytes per parameter", operands=(peak, (rule + 4) * N))
ptrs = [t.untyped_storage().data_ptr() for k in ROLES + ["fp32 gradients (transient)"] for t in roles[k]]
sanity("no_sharing", len(set(ptrs)) == len(ptrs), "every role's tensor has its own storage: nothing is counted twice",
       relation="not")
sanity("weights_follow_master", all(torch.equal(q, p.to(torch.bfloat16))
                                    for p, q in zip(master.parameters(), work.parameters(), strict=True)),
       "after the step the bf16 weights are the updated master weights rounded to bf16", relation="equal")
del roles, work, opt, master

# -- Llama 3 8B, the same recipe on meta tensors -----------------------------------------------------
V3 = fact("llama3_8b_vocab", "V3")
d3 = fact("llama3_8b_hidden", "d3", nudge=32)         # nudged by a head count: H3 still divides d3
L3 = fact("llama3_8b_layers", "L3")
H3 = fact("llama3_8b_heads", "H3", nudge=32)          # nudged to 64: still a multiple of Hkv3
Hkv3 = fact("llama3_8b_kv_heads", "Hkv3", nudge=8)    # nudged to 16: still divides H3
f3 = fact("llama3_8b_intermediate", "f3")
# GPU counts are steps of the capacity: a 1 MiB nudge crosses no step of the fully sharded count, so the
# nudge is close to a third of the memory (81,089 -> 56,089 MiB, 58.8 GB), which moves both counts.
# The capacity is the total the CUDA runtime reports (torch.cuda.mem_get_info): what a program allocates from
mem_mib = fact("h100_sxm_memory_cuda_total_mib", "mem_mib", nudge=-25000)
# the CUDA runtime's total moves by some MiB between machines: the lowest and highest found
mem_lo = fact("h100_sxm_memory_cuda_total_low_mib", "mem_mib_low", unit="MiB")
mem_hi = fact("h100_sxm_memory_cuda_total_high_mib", "mem_mib_high", unit="MiB")
mem_gb = fact("h100_sxm_memory_gb", "mem_gb")                              # the datasheet's figure
cap = mem_mib * MiB
value("cap_gb", cap / GB)
with torch.device("meta"):
    big = Llama(V3, d3, L3, H3, Hkv3, f3)
N3 = value("l3_n_params", sum(p.numel() for p in big.parameters()))
t3 = len(list(big.parameters()))
_, _, roles3 = mixed_precision_step(big, lambda: Llama(V3, d3, L3, H3, Hkv3, f3))
by3 = {k: nbytes(v) for k, v in roles3.items()}
pers3 = sum(by3[k] for k in ROLES) + by3["Adam step counters"]
l3_gb = value("l3_total_gb", pers3 / GB)
value("l3_peak_gb", (pers3 + by3["fp32 gradients (transient)"]) / GB)
value("l3_weights_bf16_gb", by3["bf16 weights"] / GB)
value("l3_over_h100", pers3 / cap)
print(f"\nLlama 3 8B on meta tensors: {N3:,} parameters, the same step")
for k in ROLES:
    row(k, f"{by3[k] / GB:.2f} GB")
row("total kept between steps", f"{pers3 / GB:.2f} GB", f"{pers3 / N3:.4f} B/param", cw=18)
row(f"one H100: {mem_mib:,} MiB = {cap / GB:.2f} GB", "fits" if pers3 <= cap else "does not fit", cw=18)
sanity("l3_rule_holds", pers3 == rule * N3 + 4 * t3, "Llama 3 8B on meta: 16 bytes per parameter again",
       operands=(pers3, rule * N3), relation="not")
sanity("l3_does_not_fit", pers3 > cap and by3["bf16 weights"] < cap,
       "the training state exceeds one H100 though the bf16 weights alone fit", operands=(pers3, cap),
       relation=("not", "larger"))

# -- variation: shard across GPUs ------------------------------------------------------------------------
cap_ds = mem_gb * GB
replicated = by3["bf16 weights"] + by3["bf16 gradients"]
opt_state = sum(by3[k] for k in ("fp32 master weights", "Adam m (exp_avg)", "Adam v (exp_avg_sq)",
                                 "Adam step counters"))


def fewest_gpus(per_gpu, capacity=cap):
    k = 1
    while per_gpu(k) > capacity:
        k += 1
    return k


k1 = value("gpus_opt_sharded", fewest_gpus(lambda k: replicated + opt_state / k))
k3 = value("gpus_all_sharded", fewest_gpus(lambda k: (replicated + opt_state) / k))
value("per_gpu_opt_sharded_gb", (replicated + opt_state / k1) / GB)
one_fewer = value("per_gpu_opt_one_fewer_gb", (replicated + opt_state / (k1 - 1)) / GB) if k1 > 1 else None
value("per_gpu_all_sharded_gb", (replicated + opt_state) / k3 / GB)
# the same sharding planned with the datasheet's GB as the capacity
k1_ds = value("gpus_opt_sharded_ds", fewest_gpus(lambda k: replicated + opt_state / k, cap_ds))
print(f"\nVariation: GPUs needed, of {mem_mib:,} MiB (CUDA runtime) and of {mem_gb} GB (datasheet)")
row("optimizer state sharded, weights and grads replicated", k1, k1_ds, w=56, cw=6)
row("everything sharded", k3, fewest_gpus(lambda k: (replicated + opt_state) / k, cap_ds), w=56, cw=6)
sanity("shard_closed_form", k1 == math.ceil(opt_state / (cap - replicated)) and k3 == math.ceil((replicated + opt_state)
       / cap) and k1 >= k3 and (one_fewer is None or one_fewer > cap / GB),
       "the probes agree with the closed forms; sharding less never needs fewer GPUs; one GPU fewer "
       "would not fit",
       operands=((k1, k3), (math.ceil(opt_state / (cap - replicated)), math.ceil((replicated + opt_state) / cap))),
       relation=("smaller", "not", "larger"))


# -- the captures' range of CUDA totals: the answers at the lowest and the highest CUDA total found
def answers(mib):
    c = mib * MiB
    return (pers3 > c, math.ceil(opt_state / (c - replicated)), math.ceil((replicated + opt_state) / c))


here = answers(mem_mib)
value("l3_over_h100_low", pers3 / (mem_lo * MiB))         # the ratio at both ends, for the page to show
value("l3_over_h100_high", pers3 / (mem_hi * MiB))
ends = driver_range(answers, mem_mib, mem_lo, mem_hi, here,
                    "at the lowest and the highest CUDA total found, the state still does not fit one GPU, and the GPU"
                    " counts are the same", relation="not")
print(f"At {mem_lo:,} and {mem_hi:,} MiB: {ends[0]}, {ends[1]} (does not fit, ratio, GPUs opt-sharded, all sharded)")
