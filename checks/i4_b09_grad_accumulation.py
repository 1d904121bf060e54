"""I.4.B09 — Gradient accumulation across micro-batches with different padding.

A real output layer and two micro-batches with very different numbers of valid tokens. Three
gradients, each from real autograd: the full batch in one pass (the reference), accumulation of
per-micro-batch means divided by the number of micro-batches (mean of means), and accumulation
of per-micro-batch sums divided by the total valid count (token-weighted).
"""

import math

import torch
import torch.nn.functional as F

from numbook.check import given, sanity, value


def row(label, *cells, w=44, cw=14):
    print(f"  {label:<{w}}" + "".join(f"{c:>{cw}}" for c in cells))


V = given("V", 32_000)
d = given("d", 256)
T = given("T", 512)
# valid tokens per sequence in each micro-batch: A holds a full sequence and a long one, B two short ones
micro = ((T, given("len_A2", 498)), (given("len_B1", 97), given("len_B2", 41)))
IGNORE = -100
k = value("k", len(micro), fixed="the problem has two micro-batches, A and B")
value("lengths_A", micro[0])
value("lengths_B", micro[1])

g = torch.Generator().manual_seed(0)
torch.manual_seed(0)
head = torch.nn.Linear(d, V, bias=False)


def make_micro(lengths):
    b = len(lengths)
    h = torch.randn(b * T, d, generator=g)
    y = torch.randint(0, V, (b, T), generator=g)
    mask = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]
    return h, y.masked_fill(~mask, IGNORE).view(-1)


batches = [make_micro(lengths) for lengths in micro]
counts = [int((y != IGNORE).sum()) for _, y in batches]
n_total = value("n_total", sum(counts))
value("n_A", counts[0])
value("n_B", counts[1])
value("positions_per_micro", len(micro[0]) * T)


def grad_of(step):
    head.zero_grad(set_to_none=True)
    reported = step()
    return head.weight.grad.detach().clone(), reported


def full_batch():
    h = torch.cat([b[0] for b in batches])
    y = torch.cat([b[1] for b in batches])
    loss = F.cross_entropy(head(h), y)            # mean over all valid tokens of the whole batch
    loss.backward()
    return loss.item()


def mean_of_means():
    reported = 0.0
    for h, y in batches:
        loss = F.cross_entropy(head(h), y) / k     # each micro-batch's mean, scaled by 1/k
        loss.backward()                            # .grad accumulates across micro-batches
        reported += loss.item()
    return reported


per_rank = []   # each micro-batch's own gradient of sum / n, as one data-parallel rank would hold it


def token_weighted():
    reported = 0.0
    for h, y in batches:
        before = head.weight.grad.clone() if head.weight.grad is not None else 0
        loss = F.cross_entropy(head(h), y, reduction="sum") / n_total
        loss.backward()
        per_rank.append(head.weight.grad - before)
        reported += loss.item()
    return reported


g_ref, l_ref = grad_of(full_batch)
g_mom, l_mom = grad_of(mean_of_means)
g_tw, l_tw = grad_of(token_weighted)

rel = lambda a, b: ((a - b).norm() / b.norm()).item()  # noqa: E731
cos = F.cosine_similarity(g_mom.flatten(), g_ref.flatten(), dim=0).item()
value("loss_ref", l_ref)
value("loss_mom", l_mom)
value("loss_tw", l_tw)
value("rel_err_mom", rel(g_mom, g_ref))
value("rel_err_tw", rel(g_tw, g_ref))
value("cos_mom", cos)
value("grad_norm_ratio_mom", (g_mom.norm() / g_ref.norm()).item())
value("n_params", g_ref.numel())
loss_gap = value("loss_gap", abs(l_mom - l_ref))
value("loss_gap_rel", loss_gap / l_ref)
diff_norm = (g_mom - g_ref).norm().item()
ratio_mom = (g_mom.norm() / g_ref.norm()).item()

# per-token weights: what each valid token contributes to the gradient, relative to the reference
w_ref = 1 / n_total
w_mom = [1 / (k * n) for n in counts]
value("weight_ratio_A", w_mom[0] / w_ref)
value("weight_ratio_B", w_mom[1] / w_ref)
value("weight_ratio_B_over_A", w_mom[1] / w_mom[0])

print(f"Output layer ({V:,} x {d}); {k} micro-batches of {len(micro[0])} sequences x {T} positions")
row("micro-batch", "lengths", "valid tokens", "weight / ref")
for name, lengths, n, w in zip("AB", micro, counts, w_mom, strict=True):
    row(name, str(lengths), f"{n:,}", f"{w / w_ref:.4f}")
row("total", "", f"{n_total:,}", "1")
print("\nGradient of the output weight, three ways")
row("method", "loss", "|g - g_ref| / |g_ref|", cw=22)
row("full batch, one pass (reference)", f"{l_ref:.4f}", "0", cw=22)
row("mean of per-micro-batch means / k", f"{l_mom:.4f}", f"{rel(g_mom, g_ref):.4f}", cw=22)
row("sum per micro-batch / total valid", f"{l_tw:.4f}", f"{rel(g_tw, g_ref):.2e}", cw=22)
row("cosine(mean of means, reference)", f"{cos:.4f}")

sanity("token_weighted_exact", rel(g_tw, g_ref) < 1e-5 and abs(l_tw - l_ref) < 1e-4,
       "sum / total valid reproduces the full-batch gradient and loss")
sanity("mom_differs", rel(g_mom, g_ref) > 0.1, "mean of means is a different gradient, not a rounding difference",
       operands=(rel(g_mom, g_ref), 0.1), relation=("equal", "differs", "not"))
# |g_mom - g_ref|^2 = |g_mom|^2 + |g_ref|^2 - 2 cos |g_mom| |g_ref|: the three measured figures agree
sanity("diff_longer_than_ref",
       diff_norm > g_ref.norm().item()
       and math.isclose(rel(g_mom, g_ref) ** 2, ratio_mom**2 + 1 - 2 * cos * ratio_mom, rel_tol=1e-3),
       "the difference from the reference is longer than the reference itself",
       operands=(diff_norm, g_ref.norm().item()), relation="larger")
# data parallelism: DDP's all-reduce averages the ranks' gradients; with sum / n per rank that average is
# the reference divided by k, and multiplying each rank's loss by k restores it
ddp_avg = sum(per_rank) / k
ddp_scaled = sum(k * g for g in per_rank) / k
value("rel_err_ddp_scaled", rel(ddp_scaled, g_ref))
sanity("ddp_needs_world_size",
       rel(ddp_scaled, g_ref) < 1e-5 and math.isclose((g_ref.norm() / ddp_avg.norm()).item(), k, rel_tol=1e-4),
       "averaging ranks divides the token-weighted gradient by k; multiplying each loss by k restores it",
       operands=((g_ref.norm() / ddp_avg.norm()).item(), k))
sanity("weights_closed_form", math.isclose(w_mom[0] * counts[0] + w_mom[1] * counts[1], 1.0),
       "mean-of-means weights still sum to one over the valid tokens")

# the same gradient, rebuilt from per-token weights: confirms the weights are the whole story
h_all = torch.cat([b[0] for b in batches])
y_all = torch.cat([b[1] for b in batches])
tok_w = torch.cat([torch.full((len(y),), w) for (_, y), w in zip(batches, w_mom, strict=True)])
head.zero_grad(set_to_none=True)
(F.cross_entropy(head(h_all), y_all, reduction="none") * tok_w).sum().backward()
value("rel_err_reweighted", rel(head.weight.grad, g_mom))
sanity("reweighting_explains", rel(head.weight.grad, g_mom) < 1e-5,
       "a single pass with per-token weights 1/(k n_j) gives exactly the mean-of-means gradient")
row("one pass with weights 1/(k n_j) vs mean of means", "", f"{rel(head.weight.grad, g_mom):.2e}")

# -- variation: eight micro-batches (or eight data-parallel ranks), one of them sparse ------------
k8 = given("k8", 8)
dense = value("dense_count", counts[0])
sparse = value("sparse_count", counts[1])
tot8 = (k8 - 1) * dense + sparse
value("tot8", tot8)
value("v_ratio_sparse", (1 / (k8 * sparse)) / (1 / tot8))
value("v_ratio_dense", (1 / (k8 * dense)) / (1 / tot8))
value("v_share_sparse_mom", 1 / k8)
value("v_share_sparse_tw", sparse / tot8)
row("DDP average of k ranks' sum / n, times k, vs reference", "", f"{rel(ddp_scaled, g_ref):.2e}")
row("reported loss: mean of means minus reference", f"{loss_gap:.4f}", f"{loss_gap / l_ref:.3%}")
print(f"\nVariation: {k8} micro-batches, {k8 - 1} with {dense:,} valid tokens and one with {sparse}")
row("weight of a sparse-batch token / reference", f"{(1 / (k8 * sparse)) * tot8:.2f}")
row("weight of a dense-batch token / reference", f"{(1 / (k8 * dense)) * tot8:.4f}")
row("share of the gradient from the sparse batch", f"{1 / k8:.4f}", f"{sparse / tot8:.4f}")
