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

from numbook.check import given, sanity, value

MB, GB = 10**6, 10**9


def row(label, *cells, w=46, cw=14):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


B = given("B", 1)
T = given("T", 256)
d = given("d", 896)
V = given("V", 151_936)
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


C = value("C", W.chunk(K)[0].shape[0])
logits_bytes = N * V * 4
chunk_bytes = N * C * 4
value("logits_mb", logits_bytes / MB)
value("chunk_mb", chunk_bytes / MB)
value("weight_mb", W.nbytes / MB)
value("hidden_mb", h.nbytes / MB)

with torch.no_grad():
    l_naive, p_naive = peak_alloc(lambda: naive_loss(h, W, y))
    l_chunk, p_chunk = peak_alloc(lambda: chunked_loss(h, W, y, K))
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
value("tensors_naive", 2)       # logits + log-softmax
value("tensors_chunk", 2)       # chunk logits + the exp temporary of logsumexp
value("pred_naive_mb", 2 * logits_bytes / MB)
value("pred_chunk_mb", 2 * chunk_bytes / MB)

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
row("naive / chunked (no_grad)", f"{p_naive / p_chunk:.2f}x")

sanity("same_loss", abs(l_naive - l_chunk).item() < 1e-4 and abs(l_naive - l_ckpt).item() < 1e-4,
       "chunked and naive losses agree")
var_z = value("logit_var", 0.02**2 * d)                        # Var(z) = 0.02^2 * d for these h and W
value("lnV_plus_half_var", math.log(V) + var_z / 2)
sanity("loss_near_lnV", abs(l_naive.item() - (math.log(V) + var_z / 2)) < 0.05,
       "random logits of variance s^2 give a loss near ln|V| + s^2/2")
sanity("naive_is_two_logits", abs(p_naive - 2 * logits_bytes) < 0.01 * logits_bytes,
       "naive peak = logits + log-softmax, two (N, |V|) fp32 tensors")
sanity("chunk_is_two_chunks", abs(p_chunk - 2 * chunk_bytes) < 0.05 * chunk_bytes,
       "chunked peak = one chunk of logits + the exp temporary inside logsumexp")
sanity("autograd_keeps_chunks", p_grad >= logits_bytes,
       "with autograd on, every chunk is saved for backward: the peak is back to full logits")
sanity("checkpoint_restores", p_ckpt < 0.35 * logits_bytes,
       "checkpointing each chunk keeps the forward peak near one chunk")

# -- variation: Llama 3 8B at training scale (shapes only) ---------------------------------------
V3 = value("V3", 128_256)
d3 = value("d3", 4096)
B3 = value("B3", 8)
T3 = value("T3", 8192)
budget = value("budget_gb", 1)
N3 = value("N3", B3 * T3)
full3 = torch.empty(N3, V3, device="meta")
value("v3_logits_gb", full3.nbytes / GB)
value("v3_naive_gb", 2 * full3.nbytes / GB)
# smallest K for which two (N, ceil(|V|/K)) fp32 chunks fit in the budget
K3 = next(k for k in range(1, V3) if 2 * torch.empty(N3, -(-V3 // k), device="meta").nbytes <= budget * GB)
value("v3_K", K3)
value("v3_C", -(-V3 // K3))
value("v3_chunk_peak_gb", 2 * torch.empty(N3, -(-V3 // K3), device="meta").nbytes / GB)
value("v3_hidden_gb", torch.empty(N3, d3, device="meta").nbytes / GB)
print(f"\nVariation: |V| = {V3:,}, d = {d3}, B = {B3}, T = {T3:,} (meta tensors)")
row("full fp32 logits", f"{full3.nbytes / GB:.1f} GB")
row("naive peak (logits + log-softmax)", f"{2 * full3.nbytes / GB:.1f} GB")
row(f"smallest K with a chunk peak <= {budget} GB", f"{K3}", f"C = {-(-V3 // K3):,}")
row("hidden states h (B*T, d) fp32", f"{torch.empty(N3, d3, device='meta').nbytes / GB:.2f} GB")
