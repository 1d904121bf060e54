"""Lesson 6 — from logits to a loss: softmax, cross-entropy, the reduction.

Takes the (4, 5) logits of lesson 5, turns each row into probabilities, computes the
cross-entropy of each ticket three ways (from the probabilities, through log-sum-exp, and with
torch.nn.functional.cross_entropy), reduces the four losses to one scalar, and shows what
ignore_index does to the mean. Last, it shows why nobody computes softmax as exp / sum(exp).
"""

import torch
import torch.nn.functional as F

from numbook.check import given, sanity, value

W = torch.tensor([
    [1.5, -0.5, 0.0, -0.5, -0.2],
    [0.2, 1.2, 0.3, -0.4, -0.2],
    [-0.3, 0.1, 1.4, -0.2, -0.2],
])
b = torch.tensor([0.0, 0.0, 0.0, -0.5, 0.5])
X = torch.tensor([[2.0, 1.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]])
labels = torch.tensor([0, 1, 2, 4])
logits = X @ W + b

# -- softmax -----------------------------------------------------------------------------------
probs = torch.softmax(logits, dim=1)
torch.set_printoptions(precision=3, sci_mode=False)
print(f"logits {tuple(logits.shape)}\n{logits}\nsoftmax over the class axis {tuple(probs.shape)}\n{probs}")
print("row sums:", [round(s, 6) for s in probs.sum(dim=1).tolist()])
value("logits_shape", logits.shape)
value("probs_shape", probs.shape)
value("p_ticket0_billing", probs[0, 0])
value("p_ticket3_other", probs[3, 4])
sanity("rows_sum_to_one", torch.allclose(probs.sum(dim=1), torch.ones(4)), "each row of probabilities sums to 1")
sanity("order_kept", torch.equal(probs.argmax(dim=1), logits.argmax(dim=1)),
       "softmax keeps the order of the scores: the pick does not change")

# -- cross-entropy per ticket --------------------------------------------------------------------
picked = probs[torch.arange(4), labels]
from_probs = -torch.log(picked)
from_lse = torch.logsumexp(logits, dim=1) - logits[torch.arange(4), labels]
per_ticket = F.cross_entropy(logits, labels, reduction="none")
print(f"\nlabels {tuple(labels.shape)} = {labels.tolist()} (class indices, one per ticket)")
print(f"p[i, label_i]       = {[round(v, 4) for v in picked.tolist()]}")
print(f"-log p[i, label_i]  = {[round(v, 4) for v in from_probs.tolist()]}")
print(f"logsumexp - z_label = {[round(v, 4) for v in from_lse.tolist()]}")
print(f"F.cross_entropy(reduction='none') {tuple(per_ticket.shape)} = {[round(v, 4) for v in per_ticket.tolist()]}")
value("labels_shape", labels.shape)
value("per_ticket_shape", per_ticket.shape)
value("loss_ticket3", per_ticket[3])
value("onehot_shape", F.one_hot(labels, 5).shape)
value("onehot_numel", F.one_hot(labels, 5).numel())
vocab = given("vocab", 32_000)                        # the vocabulary of problem I.4.B07
value("onehot_row_numel_lm", F.one_hot(labels[:1], vocab).numel())  # one position's one-hot row
value("labels_numel", labels.numel())
sanity("three_ways_agree", torch.allclose(from_probs, per_ticket) and torch.allclose(from_lse, per_ticket, atol=1e-6),
       "-log p, logsumexp - z and F.cross_entropy give the same four losses")

# -- the reduction --------------------------------------------------------------------------------
loss = per_ticket.mean()
default = F.cross_entropy(logits, labels)
print(f"\nmean over the batch: {loss.item():.4f}, shape {tuple(loss.shape)}, rank {loss.dim()}")
value("loss", loss)
value("loss_shape", loss.shape)
value("loss_rank", loss.dim())
value("loss_sum", per_ticket.sum())
sanity("default_is_mean", torch.isclose(loss, default), "F.cross_entropy reduces with the mean by default")

ignore = value("ignore_index", torch.nn.CrossEntropyLoss().ignore_index)  # PyTorch's default
masked = labels.clone()
masked[3] = ignore                                    # ticket 3 is padding: ignore it
ignored = F.cross_entropy(logits, masked)             # mean over the 3 valid tickets
per_masked = F.cross_entropy(logits, masked, reduction="none")
over_all = per_masked.sum() / 4                       # the sum divided by every slot
print(f"\nticket 3 ignored (label -100): per-ticket {[round(v, 4) for v in per_masked.tolist()]}")
print(f"  mean over the 3 valid tickets: {ignored.item():.4f}")
print(f"  sum / 4 slots:                  {over_all.item():.4f}  (x{(over_all / ignored).item():.4f})")
value("n_valid", int((masked != ignore).sum()))
value("loss_valid_mean", ignored)
value("loss_over_all", over_all)
value("over_all_ratio", over_all / ignored)
sanity("valid_mean", torch.isclose(ignored, per_ticket[:3].mean()), "ignore_index divides by the valid count")

# -- why softmax is not exp / sum(exp) ------------------------------------------------------------
limit = value("exp_limit", torch.log(torch.tensor(torch.finfo(torch.float32).max)))
print(f"\nexp(z) overflows float32 above z = {limit.item():.2f}")
big = torch.tensor(given("big", [1000.0, 0.0]))
naive = torch.exp(big) / torch.exp(big).sum()
safe = torch.softmax(big, dim=0)
print(f"logits {big.tolist()}: exp gives {torch.exp(big).tolist()}")
print(f"  exp / sum(exp) = {naive.tolist()},  torch.softmax = {safe.tolist()}")
print(f"  cross-entropy for label 1: {F.cross_entropy(big[None], torch.tensor([1])).item():.1f}")
value("naive_is_nan", bool(torch.isnan(naive).any()))
value("big_ce", F.cross_entropy(big[None], torch.tensor([1])))
sanity("safe_is_finite", bool(torch.isfinite(safe).all()), "softmax subtracts the row maximum first")
