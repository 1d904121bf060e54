"""III.3.A01 — A contiguous KV cache per sequence against fixed-size blocks.

Draws sequence lengths (prompt + output) from a seeded lognormal clipped at Llama 3 8B's context,
measures what servebench's contiguous KVCache reserves (a real small DecoderLM, and the Llama 3 8B
shape on the meta device), counts the share of that reservation the tokens use, and fits the same
sequences into a pool of 16-token blocks with a small block allocator (a free list of block ids and
one block table per sequence), checked against the closed forms ceil(n / b).
"""

import dataclasses

import numpy as np
import torch
from torch import nn

from numbook.check import fact, given, sanity, value
from servebench import DecoderLM, KVCache, ModelConfig, kv_bytes_per_token, kv_cache_bytes, preset

GB, GiB, MB, MiB = 10**9, 2**30, 10**6, 2**20
torch.set_num_threads(1)


def row(label, *cells, w=38, cw=15):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


class BlockAllocator:
    """A pool of KV blocks of b token slots: a free list of block ids and a block table per sequence.

    Tokens are appended one at a time; a sequence takes a new block only when its last block is
    full, so the block count is found by filling, not by the formula ceil(n / b).
    """

    def __init__(self, num_blocks, b):
        self.b = b
        self.free = list(range(num_blocks - 1, -1, -1))   # pop() hands out block 0 first
        self.num_blocks = num_blocks
        self.tables = {}                                   # sequence id -> list of block ids
        self.held = {}                                     # sequence id -> tokens written

    @property
    def used(self):
        return self.num_blocks - len(self.free)

    def append(self, seq, tokens):
        """Write `tokens` more tokens for `seq`; False (and the sequence released) if the pool runs out."""
        table = self.tables.setdefault(seq, [])
        held = self.held.get(seq, 0)
        for _ in range(tokens):
            if held % self.b == 0:              # no block yet, or the last one is full
                if not self.free:
                    self.held[seq] = held
                    self.release(seq)
                    return False
                table.append(self.free.pop())
            held += 1
        self.held[seq] = held
        return True

    def release(self, seq):
        self.free.extend(reversed(self.tables.pop(seq)))
        self.held.pop(seq, None)


# -- the model: Llama 3 8B, from its config.json -------------------------------------------------
layers = fact("llama3_8b_layers", "layers")
d = fact("llama3_8b_hidden", "d", nudge=32)            # a nudge that keeps d a multiple of the heads
heads = fact("llama3_8b_heads", "heads", nudge=-16)    # 32 -> 16 still divides d and is a multiple of 8
kv_heads = fact("llama3_8b_kv_heads", "kv_heads", nudge=8)
vocab = fact("llama3_8b_vocab", "vocab")
d_ff = fact("llama3_8b_intermediate", "d_ff")
max_seq = fact("llama3_8b_context", "max_seq")
# vLLM's gpu_memory_utilization is a share of the total torch.cuda.mem_get_info() returns (cudaMemGetInfo,
# the CUDA runtime's figure), which is less than nvidia-smi's (NVML's) total for the same GPU
gpu_mib = fact("h100_sxm_memory_cuda_total_mib", "gpu_mib")
smi_mib = fact("h100_sxm_memory_reported_mib", "smi_mib")
util = fact("vllm_default_gpu_memory_utilization", "util")
# the CUDA runtime's total moves by some MiB between machines: the lowest and highest found
gpu_lo = fact("h100_sxm_memory_cuda_total_low_mib", "gpu_mib_low", unit="MiB")
gpu_hi = fact("h100_sxm_memory_cuda_total_high_mib", "gpu_mib_high", unit="MiB")
cfg = ModelConfig(layers=layers, d_model=d, heads=heads, kv_heads=kv_heads, vocab=vocab, max_seq=max_seq)
DT = "bf16"

# -- the lengths ---------------------------------------------------------------------------------
n_req = given("n_requests", 1000)
median = given("median", 512.0)
sigma = given("sigma", 1.0)
seed = given("seed", 0, nudge=0)
b = fact("vllm_default_block_size", "b")
slots = given("slots", 4)

rng = np.random.default_rng(seed)
n = np.clip(np.rint(rng.lognormal(np.log(median), sigma, n_req)), 1, max_seq).astype(np.int64)
value("n_mean", float(n.mean()))
value("n_median", float(np.median(n)))
value("n_max", int(n.max()))
value("n_clipped", int((n == max_seq).sum()))
p99 = value("n_p99", int(np.percentile(n, 99, method="inverted_cdf")))     # nearest rank
value("n_p99_linear", float(np.percentile(n, 99)))                          # numpy's default: linear
print(f"Lengths: {n_req:,} sequences, lognormal (median {median:g}, sigma {sigma:g}), clipped to [1, {max_seq:,}]")
row("", "mean", "median", "p99", "max")
row("tokens per sequence", f"{n.mean():.1f}", f"{np.median(n):.0f}", f"{p99:,}", f"{n.max():,}")

# -- Step 1: what the contiguous cache reserves, on a real small DecoderLM -------------------------
TINY = "servebench's tiny preset: a property of the harness, not of this problem"
tiny = dataclasses.replace(preset("tiny").model, max_seq=max_seq)
value("tiny_layers", tiny.layers, fixed=TINY)
value("tiny_kv_heads", tiny.n_kv_heads, fixed=TINY)
value("tiny_head_dim", tiny.head_dim, fixed=TINY)
TINY_DT = "fp32"                                   # the built-in model's fast dtype on a CPU
lm = DecoderLM(tiny, dtype=TINY_DT, max_slots=slots)
value("tiny_kv_bytes_per_token", kv_bytes_per_token(tiny, TINY_DT), fixed=TINY)
before = value("tiny_cache_bytes", lm.cache.nbytes)
formula = kv_cache_bytes(tiny, TINY_DT, slots=slots)
g = torch.Generator().manual_seed(seed)
fill = [int(x) for x in n[:slots]]
for s, m in enumerate(fill):
    lm.prefill(s, torch.randint(0, tiny.vocab, (m,), generator=g).tolist())
after = lm.cache.nbytes
# positions a slot actually wrote: any non-zero key or value entry, over layers, heads and head dims
written = [int(((lm.cache.k[:, s] != 0) | (lm.cache.v[:, s] != 0)).any(dim=(0, 1, 3)).sum()) for s in range(slots)]
value("tiny_fill", tuple(fill))
value("tiny_written", tuple(written))
tiny_share = value("tiny_used_share", sum(written) / (slots * max_seq))
print(f"\nservebench DecoderLM (tiny preset, max_seq = {max_seq:,}), {slots} slots, {TINY_DT}")
row("cache.nbytes before prefill", f"{before:,}")
row("slots x max_seq x kv_bytes_per_token", f"{slots * max_seq * lm.kv_bytes_per_token():,}")
row(f"kv_cache_bytes(cfg, {TINY_DT}, slots)", f"{formula:,}")
row("cache.nbytes after prefill", f"{after:,}")
row("tokens prefilled per slot", *[f"{m:,}" for m in fill], cw=8)
row("positions written per slot", *[f"{m:,}" for m in written], cw=8)
row("share of the reservation used", f"{tiny_share:.2%}")
sanity("tiny_reserves_all", before == after == formula == slots * max_seq * lm.kv_bytes_per_token(),
       "the cache holds slots x max_seq positions before and after prefill, as kv_cache_bytes says",
       operands=(after, formula), relation="equal")
sanity("tiny_writes_n", written == fill == lm.lengths(), "a slot writes exactly its n positions",
       operands=(written, fill))

# -- Step 2: Llama 3 8B per token and per sequence, on the meta device ---------------------------
kvpt = value("kv_bytes_per_token", kv_bytes_per_token(cfg, DT))
value("kv_kib_per_token", kvpt / 2**10)
reserve = value("reserve_bytes", kv_cache_bytes(cfg, DT, slots=1))
value("reserve_gib", reserve / GiB)
one = KVCache(cfg, 1, torch.bfloat16, torch.device("meta"))
value("bf16_elem", one.k.element_size(), fixed="bytes of a bf16 element: a property of the dtype")
value("head_dim", cfg.head_dim)
value("cache_shape", one.k.shape)
sanity("reserve_two_routes", one.nbytes == reserve and one.nbytes == max_seq * kvpt,
       "KVCache on meta with one slot = kv_cache_bytes(slots=1) = max_seq x kv_bytes_per_token",
       operands=(one.nbytes, reserve))

# -- Step 3: the memory: an H100 after the weights (counted on meta modules) ---------------------


def llama_meta(V, d, L, H, Hkv, ff):
    """Llama 3's modules on the meta device, bf16: untied embedding and head, SwiGLU MLP, RMSNorms."""
    hd = d // H
    kw = dict(bias=False, dtype=torch.bfloat16)
    with torch.device("meta"):
        return nn.ModuleDict(dict(
            # the embedding is handed its (uninitialised) meta weight: nothing is drawn
            embed=nn.Embedding(V, d, _weight=torch.empty(V, d, dtype=torch.bfloat16)),
            layers=nn.ModuleList(nn.ModuleDict(dict(
                q=nn.Linear(d, H * hd, **kw), k=nn.Linear(d, Hkv * hd, **kw), v=nn.Linear(d, Hkv * hd, **kw),
                o=nn.Linear(H * hd, d, **kw), gate=nn.Linear(d, ff, **kw), up=nn.Linear(d, ff, **kw),
                down=nn.Linear(ff, d, **kw), norm1=nn.RMSNorm(d, dtype=torch.bfloat16),
                norm2=nn.RMSNorm(d, dtype=torch.bfloat16))) for _ in range(L)),
            norm=nn.RMSNorm(d, dtype=torch.bfloat16), head=nn.Linear(d, V, **kw)))


model = llama_meta(vocab, d, layers, heads, kv_heads, d_ff)
params = value("params", sum(p.numel() for p in model.parameters()))
value("params_b", params / 1e9)
w_bytes = value("weights_bytes", sum(p.nbytes for p in model.parameters()))
w_gb = value("weights_gb", w_bytes / GB)
kvd = kv_heads * (d // heads)
closed = 2 * vocab * d + layers * (2 * d * d + 2 * d * kvd + 3 * d * d_ff + 2 * d) + d
sanity("params_two_routes", params == closed, "meta modules' parameters = the closed form of Llama's shapes",
       operands=(params, closed), relation="equal")
budget = value("budget_gb", util * gpu_mib * MiB / GB)   # gpu_memory_utilization is a share of the CUDA total
value("smi_minus_cuda_mib", smi_mib - gpu_mib)
value("budget_smi_gb", util * smi_mib * MiB / GB)       # the same share of nvidia-smi's figure, which vLLM does not use
pool = value("pool_bytes", int(util * gpu_mib * MiB) - w_bytes)
pool_gb = value("pool_gb", pool / GB)
print(f"\nLlama 3 8B, bf16: {layers} layers, {kv_heads} KV heads of {d // heads} dims")
row("KV bytes per token", f"{kvpt:,}")
row("reserved per sequence (max_seq tokens)", f"{reserve:,}", f"{reserve / GiB:.3f} GiB")
row("weights (meta modules, bf16)", f"{w_bytes:,}", f"{w_gb:.2f} GB")
row(f"{util:.0%} of {gpu_mib:,} MiB less the weights", f"{pool:,}", f"{pool_gb:.2f} GB")

# -- Step 4: contiguous reservation in that pool --------------------------------------------------
fits_contig = value("fits_contig", pool // reserve)
probe_in = KVCache(cfg, fits_contig, torch.bfloat16, torch.device("meta")).nbytes
probe_out = KVCache(cfg, fits_contig + 1, torch.bfloat16, torch.device("meta")).nbytes
sanity("contig_probe", probe_in <= pool < probe_out,
       "a meta KVCache of fits_contig slots fits the pool and one more slot does not", operands=(probe_in, pool),
       relation="not")
contig_share = value("contig_used_share", float(n.sum()) / (n_req * max_seq))
contig_waste_tok = value("contig_waste_tokens", float(max_seq - n.mean()))
value("contig_waste_gb", contig_waste_tok * kvpt / GB)
held_contig = n[:fits_contig]
value("contig_admitted_share", float(held_contig.sum()) / (fits_contig * max_seq))

# -- Step 5: the same sequences in blocks of b ---------------------------------------------------
block_bytes = value("block_bytes", kv_cache_bytes(cfg, DT, slots=1, tokens=b))
value("block_mib", block_bytes / 2**20)
num_blocks = value("num_blocks", pool // block_bytes)
vllm_pool = torch.empty(num_blocks, 2, layers, kv_heads, b, d // heads, dtype=torch.bfloat16, device="meta")
value("pool_shape", vllm_pool.shape)
sanity("pool_tensor_fits", vllm_pool.nbytes == num_blocks * block_bytes <= pool,
       "a (blocks, 2, layers, kv_heads, b, head_dim) bf16 pool tensor takes num_blocks x block bytes",
       operands=(vllm_pool.nbytes, pool))
need = -(-n // b)                                  # the closed form: ceil(n / b)
waste = need * b - n
value("blocks_mean", float(need.mean()))
paged_share = value("paged_used_share", float(n.sum()) / float((need * b).sum()))
waste_mean = value("waste_tokens", float(waste.mean()))
value("waste_mb", waste_mean * kvpt / MB)
value("waste_max", int(waste.max()))

# the allocator: admit the drawn sequences in order until the pool cannot hold the next one
alloc = BlockAllocator(num_blocks, b)
fits_paged = 0
for i, m in enumerate(n):
    if not alloc.append(i, int(m)):
        break
    fits_paged += 1
fits_paged = value("fits_paged", fits_paged)
sanity("pool_overflows", fits_paged < n_req, "the drawn sequences are more than the block pool holds",
       operands=(fits_paged, n_req))
alloc_blocks = [len(alloc.tables[i]) for i in range(fits_paged)]
alloc_waste = [len(alloc.tables[i]) * b - alloc.held[i] for i in range(fits_paged)]
closed_fits = int(np.searchsorted(np.cumsum(need), num_blocks, side="right"))
value("paged_blocks_used", alloc.used)
free_left = value("paged_free_left", len(alloc.free))
next_blocks = value("next_blocks", int(need[fits_paged]))
sanity("next_does_not_fit", next_blocks > free_left, "the first sequence left out needs more blocks than are free",
       operands=(next_blocks, free_left))
ids = [blk for i in range(fits_paged) for blk in alloc.tables[i]]
held_closed = int(need[:fits_paged].sum())
sanity("alloc_matches_ceil", alloc_blocks == need[:fits_paged].tolist() and alloc.used == held_closed,
       "the allocator's block tables have ceil(n / b) entries each", operands=(alloc.used, held_closed), relation="not")
sanity("alloc_ids_unique", len(ids) == len(set(ids)) == alloc.used, "no block id is handed out twice")
sanity("fits_two_routes", fits_paged == closed_fits,
       "the allocator admits as many as the cumulative ceil(n / b) allows", operands=(fits_paged, closed_fits))
sanity("waste_below_b", max(alloc_waste) <= b - 1 and int(waste.max()) <= b - 1,
       "no sequence wastes more than b - 1 slots", operands=(max(alloc_waste), b - 1), relation="at most")
gain = value("fits_ratio", fits_paged / fits_contig)
sanity("paged_fits_more", fits_paged > fits_contig, "blocks fit more sequences than the contiguous reservation",
       operands=(fits_paged, fits_contig), relation="larger")
sanity("shares", contig_share < paged_share, "the paged pool uses a larger share of what it holds",
       operands=(contig_share, paged_share))
# the gain is the ratio of the memory each scheme gives a sequence, up to the floors of the pool division:
# gain / approx = (blocks used x block bytes) / (fits_contig x reserve), and the pool division leaves
# at most one contiguous slot and one sequence's blocks (plus a partial block) over
approx = max_seq / float((need[:fits_paged] * b).mean())
value("gain_approx", approx)
slack = 1 / (fits_contig - 1) + (next_blocks + 1) / num_blocks
sanity("gain_is_reservation_ratio", abs(gain / approx - 1) <= slack,
       "fits_paged / fits_contig = max_seq / mean(b x ceil(n / b)) up to the slack of the two floors",
       operands=(gain, approx), relation="equal")

print(f"\nThe pool of {pool_gb:.2f} GB, two ways")
row("", "contiguous", f"blocks of {b}")
row("memory unit per sequence", f"{max_seq:,} tok", f"{b} tok")
row("units in the pool", f"{fits_contig:,}", f"{num_blocks:,}")
row("sequences admitted (drawn order)", f"{fits_contig:,}", f"{fits_paged:,}")
row("share of held slots with a token", f"{contig_share:.2%}", f"{paged_share:.2%}")
row("wasted slots per sequence (mean)", f"{contig_waste_tok:,.1f}", f"{waste_mean:.2f}")
row("wasted slots per sequence (max)", f"{max_seq - n.min():,}", f"{max(alloc_waste)}")
row("paged / contiguous sequences", f"{gain:.2f}x")
row("max_seq / mean(b x ceil(n/b))", f"{approx:.2f}x")

# the answers at both ends of the range of CUDA totals in the captures found. They are stated as counts, not as
# "the same": the block pool's count sits a few blocks from its next step, so another draw of lengths (a sigma of
# 1.01) moves it inside the range
def counts(mib):
    p = int(util * mib * MiB) - w_bytes
    nb = p // block_bytes
    return p // reserve, int(np.searchsorted(np.cumsum(need), nb, side="right"))


value("driver_below_mib", gpu_mib - gpu_lo, unit="MiB")
value("driver_above_mib", gpu_hi - gpu_mib, unit="MiB")
ends = [counts(m) for m in (gpu_lo, gpu_hi)]
for end, (c_, p_) in zip(("low", "high"), ends, strict=True):
    value(f"fits_contig_{end}", c_)
    value(f"fits_paged_{end}", p_)
inside = gpu_lo <= gpu_mib <= gpu_hi   # a perturbed figure used may lie outside the range
sanity("driver_range_brackets", all(ends[0][i] <= ends[1][i] for i in (0, 1)) and (not inside or all(
           ends[0][i] <= here <= ends[1][i] for i, here in enumerate((fits_contig, fits_paged)))),
       "both counts can only grow with the total: at the lowest total they are at most, and at the highest at least, "
       "the counts at the figure used", operands=(ends, (fits_contig, fits_paged)),
       relation=("at most", "at least", "grows", "smallest", "largest"))
print(f"\nAt {gpu_lo:,} and {gpu_hi:,} MiB: (contiguous, blocks) = {ends[0]}, {ends[1]}")

# -- Variation: a longer configured context; longer sequences -------------------------------------
max_seq2 = given("max_seq2", 32_768)
cfg2 = dataclasses.replace(cfg, max_seq=max_seq2)
reserve2 = value("reserve2_gib", kv_cache_bytes(cfg2, DT, slots=1) / GiB)
fits_contig2 = value("fits_contig2", pool // kv_cache_bytes(cfg2, DT, slots=1))
sanity("contig2_probe", KVCache(cfg2, fits_contig2, torch.bfloat16, torch.device("meta")).nbytes <= pool
       < KVCache(cfg2, fits_contig2 + 1, torch.bfloat16, torch.device("meta")).nbytes,
       "the meta KVCache probe agrees at the longer context")
value("fits_ratio2", fits_paged / fits_contig2)

median2 = given("median2", 2048.0)
n2 = np.clip(np.rint(np.random.default_rng(seed).lognormal(np.log(median2), sigma, n_req)), 1, max_seq).astype(np.int64)
alloc2 = BlockAllocator(num_blocks, b)
fits_paged2 = 0
for i, m in enumerate(n2):
    if not alloc2.append(i, int(m)):
        break
    fits_paged2 += 1
fits_paged2 = value("fits_paged2", fits_paged2)
need2 = -(-n2 // b)
sanity("fits2_two_routes", fits_paged2 == int(np.searchsorted(np.cumsum(need2), num_blocks, side="right")),
       "allocator and cumulative ceil(n / b) agree for the longer sequences")
value("n2_mean", float(n2.mean()))
value("n2_clipped", int((n2 == max_seq).sum()))
value("contig2_used_share", float(n2.sum()) / (n_req * max_seq))
value("fits_ratio_long", fits_paged2 / fits_contig)
print("\nVariation")
row(f"contiguous at max_seq = {max_seq2:,}", f"{fits_contig2:,} seq", f"{reserve2:.0f} GiB each")
row(f"paged, median {median2:g} tokens", f"{fits_paged2:,} seq", f"mean n {n2.mean():,.1f}")
