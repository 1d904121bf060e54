"""II.1.A04 — The largest micro-batch of GPT-2 XL that one H100 holds, with and without activation checkpointing.

Builds a small GPT-2 (token and position embeddings with dropout, L blocks as in II.1.A02 with the fused
one-byte-mask dropout a GPU runs, a final LayerNorm, a head tied to the token embedding, a cross-entropy
loss computed in fp32 on the bf16 logits) as a bf16 model on the CPU (not under autocast: only the loss is cast
to fp32), and counts with
torch.autograd.graph.saved_tensors_hooks, by storage, every byte autograd keeps for the backward pass:
per block, and outside the blocks (embeddings, final LayerNorm, head, loss). It reads the bytes of the
logits and of their fp32 copy from the real tensors, and repeats the count with every block under
torch.utils.checkpoint.checkpoint(use_reentrant=False). The closed forms it verifies, with II.1.A01's sixteen
bytes per parameter, give the memory of a training step of GPT-2 XL as a function of the micro-batch b;
the largest b that fits the CUDA runtime's total of one H100 is found by search on that function.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from numbook.check import fact, given, sanity, value

torch.set_num_threads(1)
MB, GB, MiB, GiB = 10**6, 10**9, 2**20, 2**30
WHERE = ["outside"]
LOGITS = {}


class Block(nn.Module):
    """One GPT-2 layer, II.1.A02's fused-dropout path."""

    def __init__(self, h, a, p):
        super().__init__()
        self.a, self.p = a, p
        self.ln_1, self.ln_2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.c_attn, self.c_proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
        self.c_fc, self.mlp_proj = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

    def drop(self, x):
        return torch.native_dropout(x, self.p, True)[0]       # the kernel F.dropout calls on a GPU: bool masks

    def forward(self, x):
        WHERE[0] = "block"
        b, s, h = x.shape
        a, dh = self.a, h // self.a
        q, k, v = self.c_attn(self.ln_1(x)).split(h, dim=-1)
        q, k, v = (t.view(b, s, a, dh).transpose(1, 2) for t in (q, k, v))
        sc = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(dh))
        sc = sc.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
        o = self.drop(torch.softmax(sc, dim=-1)) @ v
        x = x + self.drop(self.c_proj(o.transpose(1, 2).reshape(b, s, h)))
        x = x + self.drop(self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)))))
        WHERE[0] = "outside"
        return x


class GPT2(nn.Module):
    def __init__(self, V, C, h, a, L, p):
        super().__init__()
        self.p = p
        self.wte, self.wpe = nn.Embedding(V, h), nn.Embedding(C, h)
        self.blocks = nn.ModuleList(Block(h, a, p) for _ in range(L))
        self.ln_f = nn.LayerNorm(h)

    def forward(self, idx, targets, ckpt=False):
        x = torch.native_dropout(self.wte(idx) + self.wpe(torch.arange(idx.shape[1])), self.p, True)[0]
        for blk in self.blocks:
            x = checkpoint(blk, x, use_reentrant=False) if ckpt else blk(x)
        logits = self.ln_f(x) @ self.wte.weight.t()            # the head, tied to the token embedding: bf16
        logits32 = logits.float()                              # the loss in fp32: the only cast of the bf16 model
        LOGITS["bf16"], LOGITS["fp32"] = logits.nbytes, logits32.nbytes
        # cross_entropy is nll_loss(log_softmax(x)): written as the two, so that hooks can read the gradients
        # the backward pass makes of the log-probabilities and of the fp32 logits
        logp = F.log_softmax(logits32, dim=-1)
        if logp.requires_grad:
            logp.register_hook(lambda gr: LOGITS.__setitem__("grad_logp", gr.nbytes))
            logits32.register_hook(lambda gr: LOGITS.__setitem__("grad_fp32", gr.nbytes))
        return F.nll_loss(logp.flatten(0, 1), targets.flatten())


def saved(model, idx, targets, ckpt):
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen, by = set(), {"block": 0, "outside": 0}

    def pack(t):
        key = t.untyped_storage().data_ptr()
        if key not in params and key not in seen:
            seen.add(key)
            by[WHERE[0]] += t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(idx, targets, ckpt)
    loss.backward()
    return by, loss.item()


def n_params(V, C, h, L):
    """GPT-2's parameter count, head tied (I.1.A05)."""
    return V * h + C * h + L * (12 * h * h + 13 * h) + 2 * h


def layer_bytes(s, h, a):
    """II.1.A02's count for one bf16 block with fused dropout, per sequence: the paper's formula and the two
    LayerNorms' statistics. The causal mask, s^2 bool bytes, is one per block for the whole micro-batch."""
    return 34 * s * h + 5 * a * s * s + 8 * s


def outside_bytes(s, h, V):
    """Per sequence, outside the blocks: token ids and targets (int64), the embedding dropout's mask, the final
    LayerNorm's input and statistics, the head's input, and the fp32 log-softmax output cross_entropy keeps."""
    return 8 * s + 8 * s + s * h + 2 * s * h + 4 * s + 2 * s * h + 4 * s * V


# -- the small model: the closed forms against real tensors --------------------------------------------------
V_s = given("V_s", 2048)
h_s = given("h_s", 64, nudge=8)        # the heads must divide the width
a_s = given("a_s", 4, nudge=4)       # 8 heads still divide the width
L_s = given("L_s", 2)
s_s = given("s_s", 96, nudge=8)
b_s = given("b_s", 2)
p = 0.1                                # the dropout probability: the masks' bytes do not depend on it
seed = given("seed", 0, nudge=0)

torch.manual_seed(seed)
small = GPT2(V_s, s_s, h_s, a_s, L_s, p).to(torch.bfloat16)
g = torch.Generator().manual_seed(seed)
idx = torch.randint(0, V_s, (b_s, s_s), generator=g)
targets = torch.randint(0, V_s, (b_s, s_s), generator=g)
torch.manual_seed(seed)
plain, loss_p = saved(small, idx, targets, False)
torch.manual_seed(seed)
ck, loss_c = saved(small, idx, targets, True)

blk_count = plain["block"] / L_s
blk_formula = b_s * layer_bytes(s_s, h_s, a_s) + s_s * s_s                    # + the causal mask, once
out_formula = b_s * outside_bytes(s_s, h_s, V_s) + 8 * s_s + 4   # + the position ids and cross_entropy's total weight
trans = LOGITS["bf16"] + LOGITS["fp32"]                   # forward: the logits and their fp32 copy
trans_bw = LOGITS["grad_logp"] + LOGITS["grad_fp32"]       # backward: the two gradients log_softmax's backward holds
print(f"Small GPT-2 in bf16: V={V_s}, h={h_s}, a={a_s}, L={L_s}, s={s_s}, b={b_s}, dropout p={p}")
print(f"  {'bytes autograd saves':<36}{'counted':>14}{'closed form':>14}")
print(f"  {'one block':<36}{blk_count:>14,.0f}{blk_formula:>14,.0f}")
print(f"  {'outside the blocks':<36}{plain['outside']:>14,}{out_formula:>14,}")
print(f"  {'checkpointed: all kept':<36}{ck['block'] + ck['outside']:>14,}"
      f"{L_s * 2 * s_s * b_s * h_s + out_formula:>14,}")
print(f"  logits in flight, forward: bf16 {LOGITS['bf16']:,} B + fp32 copy {LOGITS['fp32']:,} B = {trans:,} B")
print(f"  logits in flight, backward: gradient of the log-probabilities {LOGITS['grad_logp']:,} B + of the fp32 "
      f"logits {LOGITS['grad_fp32']:,} B = {trans_bw:,} B")
value("small_block_bytes", blk_count, unit="B")
value("small_ckpt_kept", ck["block"] + ck["outside"], unit="B")
value("small_outside_bytes", plain["outside"], unit="B")
value("small_logsoftmax_share", 4 * s_s * b_s * V_s / plain["outside"])
sanity("block_formula", blk_count == blk_formula,
       "each block saves sbh(34 + 5as/h) plus the causal mask and LayerNorm statistics (II.1.A02)",
       operands=(blk_count, blk_formula), relation="equal")
sanity("outside_formula", plain["outside"] == out_formula,
       "outside the blocks: ids, targets, embedding mask, final LayerNorm, head input and 4sbV of log-softmax",
       operands=(plain["outside"], out_formula), relation="equal")
sanity("ckpt_formula", ck["block"] == 0 and ck["outside"] == L_s * 2 * s_s * b_s * h_s + out_formula,
       "with checkpointing the blocks keep only their bf16 inputs, 2sbh bytes each", relation="equal",
       operands=(ck["outside"] - out_formula, L_s * 2 * s_s * b_s * h_s))
sanity("logits_in_flight", trans == 6 * s_s * b_s * V_s and trans_bw == 8 * s_s * b_s * V_s,
       "the bf16 logits and their fp32 copy are 6 sbV bytes; the two fp32 gradients of the loss's backward 8 sbV",
       operands=(trans_bw, 8 * s_s * b_s * V_s), relation=("equal", "larger"))
# the causal mask: each plain block keeps one (s^2 bool bytes, the last term of blk_formula); checkpointed, the
# blocks keep their inputs alone, so no mask outlives the forward pass (it is rebuilt in the block's recompute)
sanity("ckpt_keeps_no_mask", blk_count - b_s * layer_bytes(s_s, h_s, a_s) == s_s * s_s
       and ck["block"] + ck["outside"] - out_formula - L_s * 2 * s_s * b_s * h_s == 0,
       "the plain run keeps an s^2-byte mask per block; the checkpointed run keeps no mask",
       operands=(ck["block"] + ck["outside"] - out_formula - L_s * 2 * s_s * b_s * h_s, 0), relation="not")
value("small_fwd_in_flight", trans, unit="B")
value("small_bwd_in_flight", trans_bw, unit="B")
sanity("same_loss", loss_p == loss_c, "the checkpointed forward computes the same loss", relation="equal",
       operands=(loss_c, loss_p))

# -- GPT-2 XL -------------------------------------------------------------------------------------------------
V = fact("gpt2_xl_vocab", "V")
C = fact("gpt2_xl_context", "C")
h = fact("gpt2_xl_hidden", "h", nudge=25)
a = fact("gpt2_xl_heads", "a")
L = fact("gpt2_xl_layers", "L")
s = given("s", 1024, nudge=16)
per_param = given("per_param", 16, unit="B")         # II.1.A01: bf16 weights and gradients, fp32 master, m, v
N = value("N", n_params(V, C, h, L))
with torch.device("meta"):
    meta = GPT2(V, C, h, a, L, p)
sanity("N_meta", sum(q.numel() for q in meta.parameters()) == N, "the meta-device model's count equals the formula",
       operands=(sum(q.numel() for q in meta.parameters()), N), relation="equal")
state = per_param * N
A = layer_bytes(s, h, a)
OUT = outside_bytes(s, h, V)
T = max(6 * s * V, 8 * s * V)                         # the larger of the two, per sequence: the backward's
inp = 2 * s * h
# under checkpointing the step holds the kept inputs and the larger of two moments: the loss's backward (the outside
# part and the logits in flight) and a layer's recompute (that layer's tensors less its input, whose storage is the
# kept one, and of the outside part only the token ids: the rest is freed before the first recompute, II.1.A03)
RECOMP = A - inp + 8 * s
value("state_gb", state / GB)
value("layer_mb", A / MB)
value("layers_gb", L * A / GB)
value("outside_mb", OUT / MB)
value("logsoftmax_mb", 4 * s * V / MB)
value("logits_mb", T / MB)
value("logits_fwd_mb", 6 * s * V / MB)
value("inputs_mb", L * inp / MB)
per_seq_plain = L * A + OUT + T
per_seq_ck = L * inp + max(OUT + T, RECOMP)
# per micro-batch: without checkpointing the L causal masks autograd keeps, the position ids, the loss's total
# weight; with checkpointing no mask is kept (each is built again in its block's recompute, and held only with that
# block's activations: the small model's count, ckpt_formula), so at the loss's peak only the ids and the weight
const_plain = L * s * s + 8 * s + 4
const_ck = 8 * s + 4
value("const_plain_mb", const_plain / MB)
value("const_ck_bytes", const_ck, unit="B")
value("per_seq_plain_gb", per_seq_plain / GB)
value("per_seq_ckpt_mb", per_seq_ck / MB)
value("ckpt_saving", per_seq_plain / per_seq_ck)
sanity("logits_exceed_layer", T > A and OUT + T > RECOMP and per_seq_ck == L * inp + OUT + T,
       "the logits in flight exceed one layer's activations, so the loss's backward, not a recompute, sets the "
       "checkpointed peak", operands=(T, A), relation="larger")


def need(b, ckpt):
    """Bytes of a step at micro-batch b: the training state, what autograd keeps, and the larger of the two
    things that come and go (the logits in flight at the loss; one block's activations while it is recomputed)."""
    if ckpt:
        return state + b * L * inp + max(b * (OUT + T), b * RECOMP + s * s) + const_ck
    return state + b * (L * A + OUT + T) + const_plain


def largest(cap, ckpt):
    """The largest b with need(b) <= cap, by search upward from b = 0."""
    b = 0
    while need(b + 1, ckpt) <= cap:
        b += 1
    return b


cap_mib = fact("h100_sxm_memory_cuda_total_mib", "cap_mib")
lo_mib = fact("h100_sxm_memory_cuda_total_low_mib", "cap_lo_mib")
hi_mib = fact("h100_sxm_memory_cuda_total_high_mib", "cap_hi_mib")
reserve_mib = given("reserve_mib", 1024, nudge=512)   # a rough figure: 1% of it moves no whole sequence
cap = cap_mib * MiB
value("cap_gb", cap / GB)
value("room_gb", (cap - state) / GB)
print(f"\nGPT-2 XL: N = {N:,}; state {state / GB:.2f} GB; per sequence at s = {s}: one layer {A / MB:.1f} MB, "
      f"outside {OUT / MB:.1f} MB, logits in flight {T / MB:.1f} MB")
print(f"  per sequence: plain {per_seq_plain / GB:.3f} GB, checkpointed {per_seq_ck / MB:.1f} MB")
print(f"  {'capacity':<40}{'plain b':>10}{'checkpointed b':>16}")
res = {}
for key, c in (("cuda", cap), ("low", lo_mib * MiB), ("high", hi_mib * MiB), ("reserve", cap - reserve_mib * MiB)):
    bp, bc = largest(c, False), largest(c, True)
    res[key] = (bp, bc)
    print(f"  {key + f' ({c / MiB:,.0f} MiB)':<40}{bp:>10}{bc:>16}")
    for ckpt, bb in ((False, bp), (True, bc)):
        per = per_seq_ck if ckpt else per_seq_plain
        assert bb == (c - state - (const_ck if ckpt else const_plain)) // per   # the search against the closed form
bp, bc = res["cuda"]
WHOLE = ("a whole number of sequences: a 1% nudge of any input moves the room by less than one of GPT-2 XL's "
         "sequences, which the margins slack_plain_mib and to_next_plain_mib show")
value("b_plain", bp, fixed=WHOLE)
value("b_ckpt", bc)
bpx = value("b_plain_exact", (cap - state - const_plain) / per_seq_plain)
bcx = value("b_ckpt_exact", (cap - state - const_ck) / per_seq_ck)
value("b_exact_ratio", bcx / bpx)
# the exact figures' ratio exceeds the per-sequence ratio only through the per-batch constants: with the same
# constant in both budgets it would equal it
same_const = ((cap - state - const_ck) / per_seq_ck) / ((cap - state - const_ck) / per_seq_plain)
sanity("exact_ratio_masks", bcx / bpx > per_seq_plain / per_seq_ck and const_plain - const_ck == L * s * s
       and math.isclose(same_const, per_seq_plain / per_seq_ck, rel_tol=1e-12),
       "the exact figures' ratio is larger than the per-sequence ratio because only the plain budget holds the L masks",
       operands=(bcx / bpx, per_seq_plain / per_seq_ck), relation="larger")
sanity("ratios_differ", bc / bp != per_seq_plain / per_seq_ck and bc / bp != bcx / bpx and bp < bpx and bc < bcx
       and (bpx - bp) / bpx > (bcx - bc) / bcx,
       "the ratio of the answers differs from both ratios: each answer rounds down, the plain one by a larger share",
       operands=((bpx - bp) / bpx, (bcx - bc) / bcx), relation=("differs", "larger"))
value("b_plain_next", bp + 1, fixed=WHOLE)
value("b_ckpt_next", bc + 1)
value("need_plain_gb", need(bp, False) / GB)
value("need_plain_next_gb", need(bp + 1, False) / GB)
value("need_ckpt_gb", need(bc, True) / GB)
value("need_ckpt_next_gb", need(bc + 1, True) / GB)
value("b_gain", bc / bp)
sanity("plain_fits", need(bp, False) <= cap < need(bp + 1, False)
       and bp == (cap - state - const_plain) // per_seq_plain,
       "without checkpointing b fits and b + 1 does not", operands=(need(bp, False), cap), relation="smaller")
sanity("plain_next_does_not_fit", need(bp + 1, False) > cap, "b + 1 does not fit", operands=(need(bp + 1, False), cap),
       relation="larger")
sanity("ckpt_fits", need(bc, True) <= cap < need(bc + 1, True) and bc == (cap - state - const_ck) // per_seq_ck,
       "with checkpointing b fits and b + 1 does not", operands=(need(bc, True), cap), relation="smaller")
sanity("ckpt_next_does_not_fit", need(bc + 1, True) > cap, "b + 1 does not fit", operands=(need(bc + 1, True), cap),
       relation="larger")
value("b_plain_low", res["low"][0], fixed=WHOLE)
value("b_plain_high", res["high"][0], fixed=WHOLE)
value("b_ckpt_low", res["low"][1])
value("b_ckpt_high", res["high"][1])
value("range_mib", hi_mib - lo_mib)
sanity("range_insensitive", res["low"] == res["high"] == res["cuda"],
       "the same b at both ends of the CUDA totals' range", operands=(res["low"], res["high"]), relation="equal")
# how far the totals are from moving b: the capacity at which b would change, below and above
for key, bb in (("plain", bp), ("ckpt", bc)):
    value(f"slack_{key}_mib", round((cap - need(bb, key == "ckpt")) / MiB))      # whole MiB
    value(f"to_next_{key}_mib", round((need(bb + 1, key == "ckpt") - cap) / MiB))
sanity("ckpt_slack_smaller", cap - need(bc, True) < cap - need(bp, False),
       "the checkpointed answer leaves less room under the total than the plain one",
       operands=(cap - need(bc, True), cap - need(bp, False)), relation="smaller")
value("b_plain_reserve", res["reserve"][0])
value("b_ckpt_reserve", res["reserve"][1])
sanity("reserve_effect", res["reserve"][0] <= bp and res["reserve"][1] < bc,
       "a reserve lowers the checkpointed b", operands=(res["reserve"][1], bc), relation="smaller")

# on CUDA the LayerNorm keeps its mean and rstd in fp32 (8 bytes a token each LayerNorm pair more than bf16 on
# this CPU): 8 sb bytes more per layer; and a model that keeps the causal mask as a buffer holds it anyway, so it
# need not count as activation memory. Neither moves an answer.
gpu_stats = L * 8 * s                                 # per sequence, over the L layers
value("gpu_stats_mb", gpu_stats / MB)
value("masks_mb", L * s * s / MB)
b_gpu = ((cap - state - const_plain) // (per_seq_plain + gpu_stats),
         (cap - state - const_ck) // per_seq_ck)   # the checkpointed peak is the loss's, larger than a recompute's
b_nomask = (cap - state - const_plain + L * s * s) // per_seq_plain
sanity("stats_masks_no_effect", b_gpu == (bp, bc) and b_nomask == bp and RECOMP + 8 * s < OUT + T,
       "fp32 LayerNorm statistics, or the masks left out of the plain budget, leave both answers the same",
       operands=(b_gpu, (bp, bc)), relation="equal")
