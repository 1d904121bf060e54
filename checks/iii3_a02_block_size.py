"""III.3.A02 — Block size: the slots left empty in the last block against the length of the block table.

On the lengths of III.3.A01 (same seeded lognormal), for each block size b: the mean empty slots per
sequence against (b - 1) / 2, the mean block-table entries against mean(n) / b + 1/2, both computed
from ceil(n / b) and counted again on a real padded int32 block-table tensor as vLLM keeps it. Then
the block size that minimises empty slots + c x table entries for a stated cost c per entry, the
values of c at which the answer moves, and the same in bytes alone (Llama 3 8B, bf16).
"""

import itertools
import math
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

import numpy as np
import torch

from numbook.check import fact, given, sanity, value
from servebench import ModelConfig, kv_bytes_per_token

MB, KiB = 10**6, 2**10
torch.set_num_threads(1)


def row(label, *cells, w=10, cw=11):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


# -- the model: Llama 3 8B (only the cache's shape matters here) ---------------------------------
layers = fact("llama3_8b_layers", "layers")
d = fact("llama3_8b_hidden", "d", nudge=32)            # a nudge that keeps d a multiple of the heads
heads = fact("llama3_8b_heads", "heads", nudge=-16)    # 32 -> 16 still divides d and is a multiple of 8
kv_heads = fact("llama3_8b_kv_heads", "kv_heads", nudge=8)
max_seq = fact("llama3_8b_context", "max_seq")
cfg = ModelConfig(layers=layers, d_model=d, heads=heads, kv_heads=kv_heads, max_seq=max_seq)
kvpt = value("kv_bytes_per_token", kv_bytes_per_token(cfg, "bf16"))
value("kv_kib_per_token", kvpt / KiB)

# -- the lengths of III.3.A01 --------------------------------------------------------------------
n_req = given("n_requests", 1000)
median = given("median", 512.0)
sigma = given("sigma", 1.0)
seed = given("seed", 0, nudge=0)
rng = np.random.default_rng(seed)
n = np.clip(np.rint(rng.lognormal(np.log(median), sigma, n_req)), 1, max_seq).astype(np.int64)
n_mean = value("n_mean", float(n.mean()))

sizes = given("block_sizes", (1, 8, 16, 32, 64, 128, 256))
# c is a cost convention, and the answer it sets is a choice from a list: a 1% nudge could not cross a
# crossover, so perturbation moves c by 0.1 token, past the next one
c = given("c_entry", 0.25, nudge=0.1)
entry = torch.empty(0, dtype=torch.int32)
entry_bytes = value("entry_bytes", entry.element_size(), fixed="bytes of an int32 block id: a property of the dtype")

# -- Step 1 and Step 2: empty slots and table entries per block size ------------------------------
W, E, pad_bytes, identity = [], [], [], []
nt = torch.from_numpy(n)
print(f"Lengths: {n_req:,} sequences, mean {n_mean:.1f} tokens; KV bytes per token {kvpt:,}")
row("b", "empty", "(b-1)/2", "entries", "n/b+1/2", "table KiB", "empty MB", "filled")
for b in sizes:
    blocks = -(-n // b)                                   # closed form: ceil(n / b)
    waste = blocks * b - n
    # a second route: vLLM's block table, one int32 row per sequence, padded to max_seq / b entries
    width = -(-max_seq // b)
    col = torch.arange(width)
    nblk = (nt + b - 1) // b
    offsets = torch.cumsum(nblk, 0) - nblk
    table = torch.where(col[None, :] < nblk[:, None], offsets[:, None] + col[None, :], -1).to(torch.int32)
    counted = (table >= 0).sum(dim=1)
    sanity(f"table_b{b}", torch.equal(counted, torch.from_numpy(blocks))
           and int(table.max()) + 1 == int(blocks.sum()) and table.nbytes == n_req * width * entry_bytes,
           "the padded int32 block table holds ceil(n / b) ids per row, all distinct, in n x ceil(max_seq / b) x 4 B",
           operands=(int(counted.sum()), int(blocks.sum())), relation="not" if b == 16 else None)
    w_mean, e_mean = float(waste.mean()), float(blocks.mean())
    identity.append(abs(b * e_mean - (n_mean + w_mean)) < 1e-9)
    W.append(w_mean)
    E.append(e_mean)
    pad_bytes.append(table.nbytes / n_req)
    tag = f"b{b}"
    value(f"size_{tag}", b, fixed="a block size of the list in Given")
    value(f"waste_{tag}", w_mean, **({"fixed": "a block of one token is never partly empty"} if b == 1 else {}))
    value(f"approx_{tag}", (b - 1) / 2, fixed="(b - 1) / 2 of a listed block size: the list sets it")
    value(f"entries_{tag}", e_mean)
    value(f"entries_approx_{tag}", n_mean / b + 0.5)
    value(f"table_kib_{tag}", table.nbytes / n_req / KiB)
    value(f"waste_mb_{tag}", w_mean * kvpt / MB, unit="MB", **({"fixed": "a block of one token is never partly empty"}
                                                    if b == 1 else {}))
    value(f"filled_{tag}", float(n.sum() / (blocks * b).sum()),
          **({"fixed": "a block of one token is never partly empty"} if b == 1 else {}))
    row(str(b), f"{w_mean:.2f}", f"{(b - 1) / 2:.1f}", f"{e_mean:.2f}", f"{n_mean / b + 0.5:.2f}",
        f"{table.nbytes / n_req / KiB:.2f}", f"{w_mean * kvpt / MB:.2f}", f"{n.sum() / (blocks * b).sum():.2%}")
    # the uniform-remainder approximation: within four standard errors of a uniform remainder, b / sqrt(12 N)
    if b > 1:
        tol = 4 * b / math.sqrt(12 * n_req)
        sanity(f"approx_{tag}_ok", abs(w_mean - (b - 1) / 2) <= tol,
               "the mean empty slots are (b - 1) / 2 within four standard errors", operands=(w_mean, (b - 1) / 2),
               relation={"b256": "falls", "b8": "larger"}.get(tag))

sanity("entries_identity", all(identity), "b x mean entries = mean n + mean empty slots at every b")
sanity("waste_grows", all(a < b for a, b in itertools.pairwise(W)), "empty slots grow with b", operands=(W[0], W[-1]),
       relation=("grows", "falls"))
sanity("entries_fall", all(a > b for a, b in itertools.pairwise(E)), "table entries fall with b",
       operands=(E[0], E[-1]), relation="falls")
gap256 = value("approx_gap_b256", (sizes[-1] - 1) / 2 - W[-1])
# the gap to (b - 1) / 2 in slots, and in standard errors of a uniform remainder, b / sqrt(12 N)
gaps = {b: abs((b - 1) / 2 - w) for b, w in zip(sizes, W, strict=True) if b > 1}
gaps_se = {b: g / (b / math.sqrt(12 * n_req)) for b, g in gaps.items()}
value("approx_gap_se_b256", gaps_se[sizes[-1]])
widest_se = value("approx_widest_se_b", max(gaps_se, key=gaps_se.get),
                  fixed="an element of the list of block sizes in Given, the one the data pick; a small nudge of an"
                  " input does not change which")
value("approx_widest_se", gaps_se[widest_se])
sanity("widest_gap_slots", max(gaps, key=gaps.get) == sizes[-1] and max(gaps_se.values()) < 4,
       "in slots the gap is widest at the largest block; in standard errors every gap is under four",
       operands=(gaps[sizes[-1]], max(gaps.values())), relation="largest")
sanity("widest_gap_se", all(gaps_se[widest_se] >= g for g in gaps_se.values()),
       "measured in standard errors, the gap is largest at the block size found", operands=(gaps_se[widest_se],
       max(gaps_se.values())), relation="largest")
print("gap to (b - 1) / 2, slots and standard errors: "
      + ", ".join(f"b = {b}: {gaps[b]:.2f} ({gaps_se[b]:.2f} SE)" for b in gaps))

# -- Step 3: the best block size for a cost c per entry, and where it moves --------------------------
J = [w + c * e for w, e in zip(W, E, strict=True)]
best = value("best_b", sizes[int(np.argmin(J))])
value("best_cost", min(J))
# the same costs as exact fractions (c is a decimal input): the table prints them rounded half up from
# the exact value, not from the float, which can sit just below a tie (63.755 -> 63.754999...)
c_exact = Fraction(str(c))
J_exact = [Fraction(int((-(-n // b) * b - n).sum()), n_req) + c_exact * Fraction(int((-(-n // b)).sum()), n_req)
           for b in sizes]
sanity("cost_exact", all(abs(float(je) - j) < 1e-9 for je, j in zip(J_exact, J, strict=True)),
       "the float costs agree with the exact fractions", operands=(float(J_exact[-1]), J[-1]))


def half_up(q, places):
    return (Decimal(q.numerator) / Decimal(q.denominator)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


for b, j in zip(sizes, J, strict=True):
    value(f"cost_b{b}", j)
b_star = value("b_star", math.sqrt(2 * c * n_mean))         # minimum of (b - 1)/2 + c (mean n / b + 1/2)
below = max(b for b in sizes if b <= b_star)
above = min(b for b in sizes if b >= b_star)
sanity("best_brackets_bstar", best in (below, above),
       "the discrete best is a neighbour of sqrt(2 c mean(n)) in the list", operands=(best, b_star))

print(f"\nCost per sequence: empty slots + c x entries, c = {c:g} token per entry")
row("b", "cost", w=10)
for b, je in zip(sizes, J_exact, strict=True):
    row(str(b), f"{half_up(je, 3)}", w=10)
print(f"  best b = {best}; the smooth optimum b* = {b_star:.1f}")

# crossovers: the c at which the best moves from b_k to b_(k+1), two routes
CROSS_TOL = value("cross_tol", 0.1, fixed="the tolerance this check allows the smooth approximation of a crossing")
print("\nWhere the answer moves: c at which b_k and b_(k+1) cost the same")
row("from", "to", "c (data)", "b1 b2/(2 n)", w=10, cw=13)
cross, gaps = [], []
for k in range(len(sizes) - 1):
    b1, b2 = sizes[k], sizes[k + 1]
    ck = (W[k + 1] - W[k]) / (E[k] - E[k + 1])
    cross.append(ck)
    approx_ck = b1 * b2 / (2 * n_mean)
    value(f"cross_{b1}_{b2}", ck)
    value(f"cross_approx_{b1}_{b2}", approx_ck)
    row(str(b1), str(b2), f"{ck:.4f}", f"{approx_ck:.4f}", w=10, cw=13)
    gaps.append(abs(ck / approx_ck - 1))
    sanity(f"cross_approx_{b1}_{b2}_ok", gaps[-1] < CROSS_TOL,
           "the crossover is b1 b2 / (2 mean n) within 10%", operands=(ck, approx_ck),
           relation="differs" if (b1, b2) == (32, 64) else None)


value("cross_max_gap", max(gaps))


def argmin_at(cc):
    return sizes[int(np.argmin([w + cc * e for w, e in zip(W, E, strict=True)]))]


# the brute-force argmin just below and just above each crossover moves from b_k to b_(k+1)
sanity("crossovers_move", all(argmin_at(ck * (1 - 1e-6)) == sizes[k] and argmin_at(ck * (1 + 1e-6)) == sizes[k + 1]
                              for k, ck in enumerate(cross)),
       "the argmin of the costs switches at each crossover", operands=(cross[0], cross[-1]),
       relation=("smaller", "larger"))
k_best = sizes.index(best)
lo = value("c_low", cross[k_best - 1] if k_best > 0 else 0.0)
hi = value("c_high", cross[k_best] if k_best < len(cross) else math.inf)
sanity("c_in_range", lo < c < hi, "the stated c lies between the crossovers around the best b", operands=(lo, hi))

# vLLM's default block size (a fact): the range of c over which it is the best of the list on these lengths
vllm_b = fact("vllm_default_block_size", "vllm_block", nudge=16)   # nudged to 32, the next size of the list
k_v = sizes.index(vllm_b)
v_lo = value("vllm_c_low", cross[k_v - 1] if k_v > 0 else 0.0)
v_hi = value("vllm_c_high", cross[k_v] if k_v < len(cross) else math.inf)
sanity("vllm_range",
       all(argmin_at(cc) == vllm_b for cc in (v_lo * (1 + 1e-6), math.sqrt(v_lo * v_hi), v_hi * (1 - 1e-6))),
       "vLLM's default block is the best of the list for every c between the crossings around it",
       operands=(v_lo, v_hi))
print(f"\nvLLM's default block size, {vllm_b}, is the best of the list for c from {v_lo:.4f} to {v_hi:.4f}")

# -- Step 4: in bytes alone ----------------------------------------------------------------------
c_mem = value("c_mem", entry_bytes / kvpt)
best_mem = argmin_at(c_mem)
sanity("mem_best_is_smallest", best_mem == sizes[0] and c_mem < cross[0],
       "by bytes alone an entry costs less than the first crossover: the smallest block wins",
       operands=(c_mem, cross[0]), relation=("smaller", "smallest", "larger"))
print(f"\nIn bytes alone: an int32 entry is {entry_bytes} B against {kvpt:,} B per token slot:"
      f" c = {c_mem:.2e}, best b = {best_mem}")
# the padded table at b = 1 against one empty slot's keys and values at b = 16
value("table_b1_over_slot", pad_bytes[0] / kvpt)
value("table_b1_kib", pad_bytes[0] / KiB)

# -- Variation: longer sequences, a dearer entry ---------------------------------------------------
median2 = given("median2", 2048.0, nudge=2048.0)   # a nudge that crosses the next crossover
n2 = np.clip(np.rint(np.random.default_rng(seed).lognormal(np.log(median2), sigma, n_req)), 1, max_seq)
W2 = [float((-(-n2 // b) * b - n2).mean()) for b in sizes]
E2 = [float((-(-n2 // b)).mean()) for b in sizes]
best2 = value("best_b_long", sizes[int(np.argmin([w + c * e for w, e in zip(W2, E2, strict=True)]))])
value("n2_mean", float(n2.mean()))
value("b_star_long", math.sqrt(2 * c * float(n2.mean())))
value("n2_clipped", int((n2 == max_seq).sum()))
c2 = given("c_entry2", 1.0, nudge=0.5)             # a nudge that crosses the next crossover
best3 = value("best_b_dear", argmin_at(c2))
value("b_star_dear", math.sqrt(2 * c2 * n_mean))
b_star2 = math.sqrt(2 * c * float(n2.mean()))
b_star3 = math.sqrt(2 * c2 * n_mean)
sanity("longer_moves_up", b_star2 > b_star and best2 >= best
       and best2 in (max(b for b in sizes if b <= b_star2), min(b for b in sizes if b >= b_star2)),
       "longer sequences raise sqrt(2 c mean n), and the best b is its neighbour in the list, not below the old best",
       operands=(b_star2, b_star), relation="grows")
k3 = sizes.index(best3)
sanity("dearer_moves_up", b_star3 > b_star and best3 >= best
       and best3 in (max(b for b in sizes if b <= b_star3), min(b for b in sizes if b >= b_star3))
       and (cross[k3 - 1] if k3 > 0 else 0.0) < c2 < (cross[k3] if k3 < len(cross) else math.inf),
       "a dearer entry c2 raises sqrt(2 c mean n); the best b for c2, found by argmin, is its neighbour in the list,"
       " not below the old best, and c2 lies between the crossings around it",
       operands=(best3, best), relation="grows")
print(f"\nVariation: median {median2:g} -> best b = {best2}; c = {c2:g} -> best b = {best3}")
