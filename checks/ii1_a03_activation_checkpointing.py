"""II.1.A03 — Activation checkpointing: the memory it saves and the forward work it repeats, both measured.

Builds a small GPT-2-style stack (token and position embeddings, L blocks of LayerNorm, fused QKV, causal
softmax attention, output projection, LayerNorm, a 4h GeLU MLP; no dropout; a final LayerNorm, an untied
head and a cross-entropy loss) in fp32 on the CPU, and runs one training step twice: plain, and with every
block wrapped in torch.utils.checkpoint.checkpoint(use_reentrant=False). In each it counts the bytes autograd
saves for the backward pass with torch.autograd.graph.saved_tensors_hooks, by storage as II.1.A02 does (the
non-reentrant checkpoint saves each block's input through the same hooks, and nothing else of the block);
it counts the floating-point work of forward and backward with torch.utils.flop_counter.FlopCounterMode,
records which blocks run their forward pass again during the backward pass and in what order, compares the
gradients, and times both steps over repeats. The closed forms it verifies are then taken to GPT-2 XL.
"""

import math
import time
import weakref

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop
from torch.utils.flop_counter import FlopCounterMode

from numbook.check import estimate, fact, given, sanity, value

torch.set_num_threads(1)
MB, GB = 10**6, 10**9
WHERE = ["outside"]          # the part of the model running: "block" or "outside"
CALLS = []                   # (block index, in backward?) for every block forward
IN_BACKWARD = [False]
LIVE = []                    # weak references to the holders of every tensor autograd keeps, while it keeps it
AT_RECOMPUTE = []            # live kept bytes, by storage, at the start of each block's recompute


class Held:
    """What the pack hook hands autograd: it lives exactly as long as autograd keeps the tensor."""

    __slots__ = ("t", "__weakref__")

    def __init__(self, t):
        self.t = t


def live_bytes():
    """Bytes of the storages autograd still keeps (through the hooks), each once."""
    st = {}
    for r in LIVE:
        held = r()
        if held is not None:
            st[held.t.untyped_storage().data_ptr()] = held.t.untyped_storage().nbytes()
    return sum(st.values())


class Block(nn.Module):
    """One GPT-2 layer without dropout, attention written out as in II.1.A02."""

    def __init__(self, h, a, i):
        super().__init__()
        self.a, self.i = a, i
        self.ln_1, self.ln_2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.c_attn, self.c_proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
        self.c_fc, self.mlp_proj = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

    def forward(self, x):
        CALLS.append((self.i, IN_BACKWARD[0]))
        if IN_BACKWARD[0]:
            AT_RECOMPUTE.append(live_bytes())
        WHERE[0] = "block"
        b, s, h = x.shape
        a, dh = self.a, h // self.a
        q, k, v = self.c_attn(self.ln_1(x)).split(h, dim=-1)
        q, k, v = (t.view(b, s, a, dh).transpose(1, 2) for t in (q, k, v))
        sc = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(dh))
        sc = sc.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
        o = torch.softmax(sc, dim=-1) @ v
        x = x + self.c_proj(o.transpose(1, 2).reshape(b, s, h))
        x = x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))
        WHERE[0] = "outside"
        return x


class GPT(nn.Module):
    def __init__(self, V, C, h, a, L):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, h), nn.Embedding(C, h)
        self.blocks = nn.ModuleList(Block(h, a, i) for i in range(L))
        self.ln_f, self.head = nn.LayerNorm(h), nn.Linear(h, V, bias=False)

    def forward(self, idx, targets, ckpt, reentrant=False):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for blk in self.blocks:
            x = checkpoint(blk, x, use_reentrant=reentrant) if ckpt else blk(x)
        return F.cross_entropy(self.head(self.ln_f(x)).flatten(0, 1), targets.flatten())


def forward_saving(model, idx, targets, ckpt):
    """Forward under saved_tensors_hooks: bytes of the storages autograd keeps for backward, each once,
    parameters left out, split by where they were saved ("block" or "outside")."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen, by = set(), {"block": 0, "outside": 0}

    def pack(t):
        key = t.untyped_storage().data_ptr()
        if key in params:
            return t
        if key not in seen:
            seen.add(key)
            by[WHERE[0]] += t.untyped_storage().nbytes()
        held = Held(t)
        LIVE.append(weakref.ref(held))
        return held

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x.t if isinstance(x, Held) else x):
        loss = model(idx, targets, ckpt)
    return loss, by


V = given("V", 512)
h = given("h", 128, nudge=8)          # the heads must divide the width
a = given("a", 4, nudge=4)            # 8 heads still divide the width
L = given("L", 4)
s = given("s", 128, nudge=8)          # a whole number of positions within C
b = given("b", 4)
seed = given("seed", 0, nudge=0)

torch.manual_seed(seed)
model = GPT(V, s, h, a, L)                 # as many positions as tokens
g = torch.Generator().manual_seed(seed)
idx = torch.randint(0, V, (b, s), generator=g)
targets = torch.randint(0, V, (b, s), generator=g)
N_blocks = sum(p.numel() for blk in model.blocks for p in blk.parameters())
value("N_blocks", N_blocks)
sbh = s * b * h


def step(ckpt, count_flops=False, early_stop=True):
    """One forward and backward; returns saved bytes, FLOPs (forward, backward), gradients, recompute calls."""
    model.zero_grad(set_to_none=True)
    CALLS.clear()
    LIVE.clear()
    AT_RECOMPUTE.clear()
    IN_BACKWARD[0] = False
    if count_flops:
        with FlopCounterMode(display=False) as fc_f, set_checkpoint_early_stop(early_stop):
            loss, by = forward_saving(model, idx, targets, ckpt)
        IN_BACKWARD[0] = True
        with FlopCounterMode(display=False) as fc_b:
            loss.backward()
        flops = (fc_f.get_total_flops(), fc_b.get_total_flops())
    else:
        loss, by = forward_saving(model, idx, targets, ckpt)
        IN_BACKWARD[0] = True
        loss.backward()
        flops = None
    IN_BACKWARD[0] = False
    grads = [p.grad.clone() for p in model.parameters()]
    by["at_recompute"] = list(AT_RECOMPUTE)
    return by, flops, grads, list(CALLS), loss.item()


def reentrant_flops():
    """The reentrant checkpoint (use_reentrant=True), FLOPs of forward and backward; no saved-tensor hooks."""
    model.zero_grad(set_to_none=True)
    with FlopCounterMode(display=False) as fc_f:
        loss = model(idx, targets, True, reentrant=True)
    with FlopCounterMode(display=False) as fc_b:
        loss.backward()
    return fc_f.get_total_flops(), fc_b.get_total_flops()


plain, f_plain, g_plain, calls_plain, loss_plain = step(False, True)
ck, f_ck, g_ck, calls_ck, loss_ck = step(True, True)
_, f_full, g_full, _, _ = step(True, True, early_stop=False)
f_re = reentrant_flops()

# -- memory: what autograd keeps from the forward pass to the backward pass --------------------------------
# II.1.A02's block without dropout, with 4-byte elements: 64 sbh + 4 as^2 b, plus the causal mask (s^2 bool
# bytes) and the two LayerNorms' mean and rstd (2 x 2 x sb x 4 bytes)
block_formula = 64 * sbh + 4 * a * s * s * b + s * s + 16 * s * b
per_block = plain["block"] / L
print(f"Small GPT-2-style stack: V={V}, h={h}, a={a}, L={L}, s={s}, b={b}, fp32, no dropout")
print(f"  bytes autograd saves            {'plain':>14}{'checkpointed':>14}")
for k in ("block", "outside"):
    print(f"  {k:<32}{plain[k]:>14,}{ck[k]:>14,}")
tot_plain, tot_ck = plain["block"] + plain["outside"], ck["block"] + ck["outside"]
print(f"  {'total':<32}{tot_plain:>14,}{tot_ck:>14,}")
print(f"  one block, plain: {per_block:,.0f} B; II.1.A02's closed form in fp32: {block_formula:,} B")
value("block_bytes", per_block, unit="B")
value("block_formula_bytes", block_formula, unit="B")
sanity("block_formula_exact", per_block == block_formula,
       "each plain block saves 64 sbh + 4 as^2 b + s^2 + 16 sb bytes, II.1.A02's count in 4-byte elements",
       operands=(per_block, block_formula), relation="equal")
# with checkpointing the non-reentrant checkpoint saves each block's input (through the same hooks: its
# save_inputs makes a saved tensor) and nothing the block computes; the outside part is unchanged
value("input_bytes", 4 * sbh, unit="B")
sanity("ckpt_keeps_inputs", ck["block"] == 0 and tot_ck == plain["outside"] + L * 4 * sbh,
       "with checkpointing only the L block inputs (4 sbh bytes each) are kept of the blocks",
       operands=(tot_ck - plain["outside"], L * 4 * sbh), relation="equal")
value("blocks_plain_mb", plain["block"] / MB)
value("blocks_ckpt_mb", (tot_ck - plain["outside"]) / MB)
value("outside_mb", plain["outside"] / MB)
value("total_plain_mb", tot_plain / MB)
value("total_ckpt_mb", tot_ck / MB)
# the peak of the checkpointed backward pass: what autograd still keeps when a block's recompute starts, counted
# live through the hooks (the head's and the loss's tensors are already freed, and each block's input goes after
# its backward), plus what the recompute saves again: the block's own tensors, a plain block's count, less its
# input, whose storage is the kept input's
at_re = ck["at_recompute"]
idx_bytes = 8 * b * s + 8 * s                        # the token ids and the position ids the embeddings keep
print(f"  live kept bytes at each recompute (last block first): {at_re}")
value("live_first_bytes", at_re[0], unit="B")
value("live_last_bytes", at_re[-1], unit="B")
value("idx_bytes", idx_bytes, unit="B")
sanity("live_at_recompute", at_re == [(L - i) * 4 * sbh + idx_bytes for i in range(L)],
       "at block i's recompute autograd keeps the inputs of blocks 0..i and the embeddings' ids, nothing else; "
       "the outside part is freed before the first recompute",
       operands=(at_re[0], L * 4 * sbh + idx_bytes), relation="equal")
peak_ck = max(at_re) + per_block - 4 * sbh
value("peak_ckpt_mb", peak_ck / MB)
value("ckpt_over_plain", peak_ck / tot_plain)
sanity("ckpt_smaller", peak_ck < tot_plain and max(at_re) < tot_ck,
       "kept inputs plus one recomputed block are less than all blocks",
       operands=(peak_ck, tot_plain), relation="smaller")

# -- which blocks run again: each once, in the backward pass, last first ------------------------------------
fwd_plain = [i for i, bw in calls_plain if not bw]
re_ck = [i for i, bw in calls_ck if bw]
print(f"\n  block forwards in the backward pass: plain {[i for i, bw in calls_plain if bw]}, checkpointed {re_ck}")
value("n_recomputed", len(re_ck))
sanity("recompute_once_each_reverse", re_ck == list(range(L))[::-1] and fwd_plain == list(range(L))
       and not any(bw for _, bw in calls_plain),
       "checkpointing runs each block's forward once more, in the backward pass, last block first",
       operands=(len(re_ck), L), relation="equal")

# -- work: FlopCounterMode over forward and backward --------------------------------------------------------
fwd_block = 24 * sbh * h + 4 * b * s * s * h          # 2 x tokens x 12h^2 weights, plus QK^T and PV: 2 x 2bs^2h
fwd_head = 2 * s * b * h * V
re_block = 16 * sbh * h + 4 * b * s * s * h          # early stop: the block less its last matmul (below)
print(f"\n  FLOPs            {'forward':>16}{'backward':>16}{'total':>16}")
for name, f in (("plain", f_plain), ("checkpointed", f_ck)):
    print(f"  {name:<17}{f[0]:>16,}{f[1]:>16,}{sum(f):>16,}")
print(f"  closed form of the forward pass: {L * fwd_block + fwd_head:,}; of one block's recompute {re_block:,},"
      f" of its forward {fwd_block:,}")
value("fwd_gflop", f_plain[0] / 1e9)
value("fwd_block_mflop", fwd_block / 1e6)
value("attn_share", 4 * b * s * s * h / fwd_block)
# torch stops a block's recompute as soon as the last tensor its backward needs is saved again (early stop, the
# default): the block's last matmul (mlp_proj, 2 x tokens x 4h x h = 8 sbh^2) saves its input before it runs, so it
# is not repeated; with early stop off the whole block forward runs again
print(f"  early stop off   {f_full[0]:>16,}{f_full[1]:>16,}{sum(f_full):>16,}")
sanity("flops_closed_form", f_plain[0] == f_ck[0] == f_full[0] == L * fwd_block + fwd_head
       and f_plain[1] == 2 * f_plain[0] and f_ck[1] == 2 * f_plain[0] + L * re_block
       and f_full[1] == 2 * f_plain[0] + L * fwd_block,
       "forward = L(24sbh^2 + 4bs^2h) + 2sbhV; backward = 2 x forward, plus L(16sbh^2 + 4bs^2h) recomputed "
       "with early stop, L(24sbh^2 + 4bs^2h) without", operands=(f_ck[1] - f_plain[1], L * re_block),
       relation=("equal", "twice"))
# the reentrant checkpoint reruns each block's whole forward: no early stop
print(f"  reentrant        {f_re[0]:>16,}{f_re[1]:>16,}{sum(f_re):>16,}")
sanity("reentrant_whole", f_re[0] == f_plain[0] and f_re[1] == 2 * f_plain[0] + L * fwd_block,
       "the reentrant checkpoint recomputes each whole block forward, 24 sbh^2 + 4 bs^2 h",
       operands=(f_re[1] - f_plain[1], L * fwd_block), relation="equal")
value("re_block_mflop", re_block / 1e6)
value("re_share", re_block / fwd_block)
units_plain = value("units_plain", sum(f_plain) / f_plain[0],
                    fixed="a backward pass of matrix products is two of them per forward one: set by the "
                          "operations, not the sizes")
units_ck = value("units_ckpt", sum(f_ck) / f_plain[0])
units_full = value("units_full", sum(f_full) / f_plain[0])
value("flop_ratio", sum(f_ck) / sum(f_plain))
value("flop_ratio_full", sum(f_full) / sum(f_plain))
value("block_share", L * fwd_block / f_plain[0])
sanity("between_3_and_4", units_plain == 3 and 3 < units_ck < units_full < 4,
       "plain is 3 forward units; checkpointed more than 3 and less than 4: the head is never recomputed and "
       "early stop skips each block's last matmul", operands=(units_ck, units_full), relation=("smaller", "larger"))
sanity("full_blocks_four", (3 * L * fwd_block + (f_full[1] - f_plain[1])) / (L * fwd_block) == 4,
       "counted over the blocks alone, early stop off, forward plus backward is 4 forward units",
       operands=((3 * L * fwd_block + (f_full[1] - f_plain[1])) / (L * fwd_block), 4), relation="equal")

# -- gradients ---------------------------------------------------------------------------------------------
identical = all(torch.equal(x, y) and torch.equal(x, z) for x, y, z in zip(g_plain, g_ck, g_full, strict=True))
maxdiff = max((x - y).abs().max().item() for x, y in zip(g_plain, g_ck, strict=True))
print(f"\n  loss {loss_plain:.6f} / {loss_ck:.6f}; gradients bit-identical: {identical}; max |diff| {maxdiff:g}")
value("n_grad_tensors", len(g_plain))
sanity("grads_identical", identical and loss_plain == loss_ck,
       "the checkpointed step's loss and gradients equal the plain step's bit for bit",
       operands=(maxdiff, 0.0), relation="equal")

# -- time ---------------------------------------------------------------------------------------------------
REPEATS, ITERS = 5, 5


def timed_run():
    """One run: ITERS plain and ITERS checkpointed steps, alternated step by step, so that a busy neighbour
    hits both; the fastest of each, the least disturbed."""
    tp, tc = [], []
    for _ in range(ITERS):
        for ckpt, ts in ((False, tp), (True, tc)):
            t0 = time.thread_time()
            step(ckpt)
            ts.append(time.thread_time() - t0)
    return min(tp), min(tc)


step(False), step(True)                                  # warm-up: one step of each, not timed
t_plain, t_ck = [], []
for _ in range(REPEATS):
    tp_, tc_ = timed_run()
    t_plain.append(tp_)
    t_ck.append(tc_)
ratios = [c / p for c, p in zip(t_ck, t_plain, strict=True)]
what = (f"fastest of {ITERS} steps (forward and backward) per run, plain and checkpointed steps alternated, "
        "CPU time of the one thread that runs them")
tp = estimate("t_plain_ms", [1000 * t for t in t_plain], unit="ms", n=REPEATS * ITERS, measured=what)
tc = estimate("t_ckpt_ms", [1000 * t for t in t_ck], unit="ms", n=REPEATS * ITERS, measured=what)
rt = estimate("time_ratio", ratios, n=REPEATS * ITERS, measured="checkpointed over plain step time, " + what)
print(f"\n  step time: plain {tp:.1f} ms ({tp.lo:.1f}-{tp.hi:.1f}), checkpointed {tc:.1f} ms ({tc.lo:.1f}-{tc.hi:.1f});"
      f" ratio {rt:.3f} ({rt.lo:.3f}-{rt.hi:.3f}); FLOP ratio {sum(f_ck) / sum(f_plain):.3f}")
sanity("time_overhead_bounded", rt.lo > 1.0 and rt.hi < 2.0,
       "the checkpointed step takes longer, under twice as long", operands=(float(rt), 1.0), relation="larger")

# -- GPT-2 XL -----------------------------------------------------------------------------------------------
hX = fact("gpt2_xl_hidden", "hX", nudge=25)           # the heads must divide the width
aX = fact("gpt2_xl_heads", "aX")
LX = fact("gpt2_xl_layers", "LX")
sX = given("sX", 1024, nudge=25)
bX = given("bX", 1)
lin = fact("korthikanti2022_linear_bytes", "c_lin", unit="B", nudge=0)
quad = fact("korthikanti2022_quadratic_bytes", "c_quad", unit="B", nudge=0)
# II.1.A02's count for the bf16 block with fused (1-byte-mask) dropout: the paper's formula plus the causal
# mask and the LayerNorm statistics (mean and rstd of two LayerNorms, bf16 as this CPU keeps them: 8 sb bytes;
# a GPU keeps them in fp32, 16 sb), verified there to the byte
layer = sX * bX * hX * (lin + quad * aX * sX / hX) + sX * sX + 8 * sX * bX
inp = 2 * sX * bX * hX
value("xl_layer_mb", layer / MB)
value("xl_input_mb", inp / MB)
# II.1.A04 counts the same layer without its mask, which it takes once per micro-batch, not per sequence
a04_layer = bX * (34 * sX * hX + 5 * aX * sX * sX + 8 * sX)
value("xl_layer_a04_mb", a04_layer / MB)
sanity("xl_a04_layer", layer - a04_layer == sX * sX,
       "II.1.A04's layer is this one less the s^2-byte causal mask", operands=(layer - a04_layer, sX * sX),
       relation="equal")
# checkpointed, at a layer's recompute: the L kept inputs, and what the recompute saves again, the layer's own
# tensors less its input, whose storage is the kept one (as measured on the small stack: peak_ck above)
xl_re = LX * inp + layer - inp
xl_plain = value("xl_plain_gb", LX * layer / GB)
xl_ck = value("xl_ckpt_gb", xl_re / GB)
value("xl_saving", LX * layer / xl_re)
value("xl_layer_over_input", layer / inp)
value("xl_score_share", quad * aX * sX / hX / (lin + quad * aX * sX / hX))   # the score-sized part of the formula
print(f"\nGPT-2 XL (h={hX}, a={aX}, L={LX}) at s={sX}, b={bX}, bf16: one layer {layer / MB:.2f} MB, its input "
      f"{inp / MB:.2f} MB; plain {xl_plain:.3f} GB, checkpointed {xl_ck:.4f} GB")
sanity("xl_ckpt_smaller", xl_re < LX * layer and inp < layer and xl_re == (LX - 1) * inp + layer,
       "checkpointed: L inputs plus one layer less its input, less than L layers", operands=(xl_ck, xl_plain),
       relation="smaller")
# outside the blocks, by II.1.A04's closed forms (verified there on a real small GPT-2 in bf16): per sequence the
# ids, targets, embedding mask, final LayerNorm, head input and the fp32 log-softmax; the logits in flight at the
# loss's backward, 8 sbV. The loss's backward comes before the first recompute, while all of the outside part is
# kept; at a recompute the outside part is freed but for the ids (measured on the small stack: live_at_recompute)
VX = fact("gpt2_xl_vocab", "VX")
outX = bX * (8 * sX + 8 * sX + sX * hX + 2 * sX * hX + 4 * sX + 2 * sX * hX + 4 * sX * VX)
logitsX = 8 * sX * bX * VX
idsX = 8 * sX * bX + 8 * sX                          # token and position ids
value("xl_outside_mb", outX / MB)
value("xl_logits_mb", logitsX / MB)
whole_ck_b = LX * inp + max(outX + logitsX, layer - inp + idsX)
whole_plain_b = LX * layer + outX + logitsX
whole_ck = value("xl_ckpt_whole_gb", whole_ck_b / GB)
value("xl_plain_whole_gb", whole_plain_b / GB)
value("xl_mask_mb", sX * sX / MB)
whole_saving = value("xl_whole_saving", whole_plain_b / whole_ck_b)
# II.1.A04's figures leave the masks out of the per-sequence plain figure (it counts them per micro-batch)
a04_saving = value("xl_whole_saving_a04", (LX * a04_layer + outX + logitsX) / whole_ck_b)
sanity("xl_whole_larger", whole_ck > xl_ck and logitsX > layer and whole_saving < LX * layer / xl_re
       and a04_saving < whole_saving and (whole_plain_b - LX * sX * sX) / whole_ck_b == a04_saving,
       "with what lies outside the blocks and the logits in flight, which exceed one layer, the checkpointed "
       "figure is larger than the blocks', and the whole model's factor smaller; II.1.A04's factor is the same "
       "ratio with the L masks left out of the plain figure", operands=(whole_ck, xl_ck),
       relation=("larger", "smaller"))
# the work at GPT-2 XL, by the closed forms the counter verified: each block's forward is 24 sbh^2 + 4 bs^2 h;
# torch's early stop recomputes 16 sbh^2 + 4 bs^2 h of it
fX = 24 * sX * bX * hX * hX + 4 * bX * sX * sX * hX
rX = 16 * sX * bX * hX * hX + 4 * bX * sX * sX * hX
value("xl_re_share", rX / fX)
value("xl_units_blocks", 3 + rX / fX)
value("xl_attn_share", 4 * bX * sX * sX * hX / fX)
sanity("xl_below_four", 3 < 3 + rX / fX < 4 and rX / fX < re_block / fwd_block
       and 4 * bX * sX * sX * hX / fX < 4 * b * s * s * h / fwd_block,
       "GPT-2 XL's blocks do between 3 and 4 forward units with early stop; a smaller share is recomputed than in the "
       "small stack, whose attention share is larger", operands=(3 + rX / fX, 4), relation=("smaller", "larger"))
