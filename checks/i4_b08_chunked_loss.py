"""I.4.B08 — Computing the loss in chunks over a large vocabulary.

The output layer of a Qwen2-0.5B-sized model (d = 896, |V| = 151,936) on one sequence. The loss
is computed naively (full logits, then F.cross_entropy) and in vocabulary chunks with a running
log-sum-exp, never holding more than one chunk of logits. Peak memory is measured, not computed:
torch.profiler with profile_memory=True records every allocation and free of torch's CPU
allocator, and the running sum of those events in time order gives the peak bytes a call
allocates on top of what exists before it.
"""

import math

import torch
import torch.nn.functional as F
from _memory import peak_alloc
from torch.utils.checkpoint import checkpoint

from numbook.check import fact, given, sanity, value

MB, GB = 10**6, 10**9


def row(label, *cells, w=46, cw=14):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


B = given("B", 1)
T = given("T", 256)
d = fact("qwen2_0_5b_hidden", "d")
V = fact("qwen2_0_5b_vocab", "V")
K = given("K", 8)
N = value("N", B * T)

g = torch.Generator().manual_seed(0)
h = torch.randn(N, d, generator=g)                        # final hidden states, flattened
W = torch.randn(V, d, generator=g).mul_(0.02)             # output weight (|V|, d)
y = torch.randint(0, V, (N,), generator=g)


def naive_loss(h, W, y):
    return F.cross_entropy(h @ W.T, y)


def chunk_stats(h, Wk, y, start):
    """Log-sum-exp of one vocabulary chunk per position, and the target logit if it lies in it."""
    zk = h @ Wk.T                                                 # (N, C): the only logit tensor
    lse_k = torch.logsumexp(zk, dim=-1)
    local = y - start
    inside = (local >= 0) & (local < Wk.shape[0])
    picked = zk.gather(1, local.clamp(0, Wk.shape[0] - 1)[:, None]).squeeze(1)
    return lse_k, torch.where(inside, picked, torch.zeros_like(picked))


def chunked_loss(h, W, y, k, recompute=False):
    lse = torch.full((h.shape[0],), -math.inf)
    tgt = torch.zeros(h.shape[0])
    start = 0
    for Wk in W.chunk(k):
        if recompute:   # keep only the chunk's inputs for backward; recompute its logits there
            lse_k, tgt_k = checkpoint(chunk_stats, h, Wk, y, start, use_reentrant=False)
        else:
            lse_k, tgt_k = chunk_stats(h, Wk, y, start)
        lse = torch.logaddexp(lse, lse_k)                          # merge: log(e^a + e^b), stably
        tgt = tgt + tgt_k
        start += Wk.shape[0]
    return (lse - tgt).mean()


def position_chunked_loss(h, W, y, k):
    """Split the N axis instead: each block of positions builds its full (N/K, |V|) logits."""
    total = torch.zeros(())
    for hb, yb in zip(h.chunk(k), y.chunk(k), strict=True):
        total = total + F.cross_entropy(hb @ W.T, yb, reduction="sum")
    return total / h.shape[0]


C = value("C", W.chunk(K)[0].shape[0])        # the largest chunk: ceil(|V| / K) rows
logits_bytes = N * V * 4
chunk_bytes = N * C * 4
value("logits_mb", logits_bytes / MB)
value("chunk_mb", chunk_bytes / MB)
value("weight_mb", W.nbytes / MB)
value("hidden_mb", h.nbytes / MB)

with torch.no_grad():
    l_naive, p_naive = peak_alloc(lambda: naive_loss(h, W, y))
    l_chunk, p_chunk = peak_alloc(lambda: chunked_loss(h, W, y, K))
    l_pos, p_pos = peak_alloc(lambda: position_chunked_loss(h, W, y, K))
W.requires_grad_(True)
l_grad, p_grad = peak_alloc(lambda: chunked_loss(h, W, y, K))
del l_grad
l_ckpt, p_ckpt = peak_alloc(lambda: chunked_loss(h, W, y, K, recompute=True))
W.requires_grad_(False)

value("loss_naive", l_naive.item())
value("loss_chunked", l_chunk.item())
value("loss_diff", abs(l_naive - l_chunk).item())
value("ln_V", math.log(V))
value("peak_naive_mb", p_naive / MB)
value("peak_chunk_mb", p_chunk / MB)
value("peak_grad_mb", p_grad / MB)
value("peak_ckpt_mb", p_ckpt / MB)
value("saving", p_naive / p_chunk)
# how many logit-sized tensors each peak holds, read off the measurement
n_naive = value("tensors_naive", round(p_naive / logits_bytes),
                fixed="the (N, |V|) tensors F.cross_entropy holds at once (logits, log-softmax): the implementation's")
n_chunk = value("tensors_chunk", round(p_chunk / chunk_bytes),
                fixed="the (N, C) tensors a chunk holds at once (logits, logsumexp's exp): the implementation's")
value("pred_naive_mb", n_naive * logits_bytes / MB)
value("pred_chunk_mb", n_chunk * chunk_bytes / MB)
block = h.chunk(K)[0].shape[0]                                  # positions per block
block_bytes = block * V * 4
value("pos_block", block)
value("pos_block_mb", block_bytes / MB)
value("peak_pos_mb", p_pos / MB)
value("loss_pos", l_pos.item())

print(f"Output layer d = {d}, |V| = {V:,}; N = {N} positions; {K} chunks of {C:,} columns")
row("tensor", "shape", "MB")
row("hidden h", str((N, d)), f"{h.nbytes / MB:.1f}")
row("weight W", str((V, d)), f"{W.nbytes / MB:.1f}")
row("full logits (never built by the chunked loss)", str((N, V)), f"{logits_bytes / MB:.1f}")
row("one chunk of logits", str((N, C)), f"{chunk_bytes / MB:.1f}")
print("\nPeak bytes allocated during the loss (torch.profiler, profile_memory=True)")
row("route", "loss", "peak MB", "predicted MB")
row("naive: logits + F.cross_entropy, no_grad", f"{l_naive.item():.5f}", f"{p_naive / MB:.1f}",
    f"{2 * logits_bytes / MB:.1f}")
row(f"chunked, K = {K}, no_grad", f"{l_chunk.item():.5f}", f"{p_chunk / MB:.1f}", f"{2 * chunk_bytes / MB:.1f}")
row("chunked, autograd on (W requires grad)", f"{l_chunk.item():.5f}", f"{p_grad / MB:.1f}")
row("chunked, autograd on, checkpoint per chunk", f"{l_ckpt.item():.5f}", f"{p_ckpt / MB:.1f}")
row(f"positions in {K} blocks of {block}, no_grad", f"{l_pos.item():.5f}", f"{p_pos / MB:.1f}",
    f"{2 * block_bytes / MB:.1f}")
row("naive / chunked (no_grad)", f"{p_naive / p_chunk:.2f}x")

sanity("same_loss", abs(l_naive - l_chunk).item() < 1e-4 and abs(l_naive - l_ckpt).item() < 1e-4,
       "chunked and naive losses agree", operands=(abs(l_naive - l_chunk).item(), 1e-4), relation="half")
sanity("saving_is_K", abs(p_naive / p_chunk - V / C) < 0.02 * V / C,
       "the measured saving is |V| / C, which is K for equal chunks", operands=(p_naive / p_chunk, V / C),
       relation="not")
var_z = value("logit_var", 0.02**2 * d)                        # Var(z) = 0.02^2 * d for these h and W
value("lnV_plus_half_var", math.log(V) + var_z / 2)
sanity("loss_near_lnV", abs(l_naive.item() - (math.log(V) + var_z / 2)) < 0.05,
       "random logits of variance s^2 give a loss near ln|V| + s^2/2")
sanity("naive_is_two_logits", abs(p_naive - 2 * logits_bytes) < 0.01 * logits_bytes,
       "naive peak = logits + log-softmax, two (N, |V|) fp32 tensors", operands=(p_naive, 2 * logits_bytes))
sanity("chunk_is_two_chunks", abs(p_chunk - 2 * chunk_bytes) < 0.05 * chunk_bytes,
       "chunked peak = one chunk of logits + the exp temporary inside logsumexp", operands=(p_chunk, 2 * chunk_bytes))
sanity("autograd_keeps_chunks", p_grad >= logits_bytes and p_grad > p_chunk,
       "with autograd on, every chunk is saved for backward: the peak rises past the full logits",
       operands=(p_grad, logits_bytes), relation=("grows", "larger", "at least"))
sanity("checkpoint_restores", p_ckpt < p_grad and abs(p_ckpt - p_chunk) < 0.05 * p_chunk,
       "checkpointing each chunk brings the forward peak back to one chunk's", operands=(p_ckpt, p_chunk),
       relation="falls")
sanity("positions_bound_logits",
       abs(p_pos - 2 * block_bytes) < 0.05 * block_bytes and abs(l_pos - l_naive).item() < 1e-4 and p_pos < p_naive,
       "blocks of positions of one sequence peak at two (N/K, |V|) tensors, with the same loss",
       operands=(p_pos, 2 * block_bytes), relation=("smaller", "not"))

# -- variation: Llama 3 8B at training scale (shapes only) ---------------------------------------
V3 = fact("llama3_8b_vocab", "V3")
d3 = fact("llama3_8b_hidden", "d3")
B3 = given("B3", 8)
T3 = given("T3", 8192)
budget = given("budget_gb", 1.0)             # GB, a continuous budget
N3 = value("N3", B3 * T3)
full3 = torch.empty(N3, V3, device="meta")
value("v3_logits_gb", full3.nbytes / GB)
value("v3_naive_gb", 2 * full3.nbytes / GB)
rows3 = torch.empty(V3, 1, device="meta")


def chunk_peak(k):
    """Two (N, C) fp32 tensors for the largest chunk torch.chunk makes of |V| rows into k pieces."""
    return 2 * torch.empty(N3, rows3.chunk(k)[0].shape[0], device="meta").nbytes


# probe: the smallest K whose chunk peak fits the budget
K3 = value("v3_K", next(k for k in range(1, V3 + 1) if chunk_peak(k) <= budget * GB))
sizes3 = [c.shape[0] for c in rows3.chunk(K3)]
value("v3_C", sizes3[0])
value("v3_C_last", sizes3[-1])
value("v3_n_chunks", len(sizes3))
peak3 = value("v3_chunk_peak_gb", chunk_peak(K3) / GB)
hidden3 = value("v3_hidden_gb", torch.empty(N3, d3, device="meta").nbytes / GB)
# closed form: C may hold at most budget / (2 * N * 4 bytes) columns, so K = ceil(|V| / that)
c_max = math.floor(budget * GB / (2 * N3 * 4))
K3_closed = -(-V3 // c_max)
print(f"\nVariation: |V| = {V3:,}, d = {d3}, B = {B3}, T = {T3:,} (meta tensors)")
row("full fp32 logits", f"{full3.nbytes / GB:.1f} GB")
row("naive peak (logits + log-softmax)", f"{2 * full3.nbytes / GB:.1f} GB")
row(f"smallest K with a chunk peak <= {budget:g} GB", f"{K3}", f"C = {sizes3[0]:,}", f"last {sizes3[-1]:,}")
row("closed form: ceil(|V| / C_max)", f"{K3_closed}", f"C_max = {c_max:,}")
row("hidden states h (B*T, d) fp32", f"{hidden3:.2f} GB")
sanity("v3_K_closed_form", K3_closed == K3 and chunk_peak(K3 - 1) > budget * GB,
       "the probed K agrees with ceil(|V| / floor(budget / (2 N 4)))", operands=(K3, K3_closed),
       relation=("smaller", "smallest", "equal"))
sanity("v3_peak_below_hidden", peak3 < hidden3, "at that K the chunk peak is smaller than the hidden states",
       operands=(peak3, hidden3), relation="smaller")
