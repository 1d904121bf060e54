"""Lesson 6 — from logits to a loss: softmax, cross-entropy, the reduction.

Takes the (4, 5) logits of lesson 5, turns each row into probabilities, computes the
cross-entropy of each ticket three ways (from the probabilities, through log-sum-exp, and with
torch.nn.functional.cross_entropy), reduces the four losses to one scalar, and shows what
ignore_index does to the mean. Last, it shows why nobody computes softmax as exp / sum(exp).
"""

import torch
import torch.nn.functional as F
from _tickets import TICKETS, batch

from numbook.check import fact, given, sanity, value

W = torch.tensor([
    [1.5, -0.5, 0.0, -0.5, -0.2],
    [0.2, 1.2, 0.3, -0.4, -0.2],
    [-0.3, 0.1, 1.4, -0.2, -0.2],
])
# The bias of lesson 4: the zeros are structural, and a zero cannot be nudged by 1%.
b = torch.tensor([0.0, 0.0, 0.0, given("b_3", -0.5), given("b_4", 0.5)])
DESIGN = "the router's design: one column per named class (5 names)"
n_tickets = given("n_tickets", 4)
X, labels = batch(n_tickets)   # the four tickets of lessons 4 to 6 (checks/_tickets.py)
for i in range(len(TICKETS)):
    value(f"ticket_{i}", TICKETS[i].tolist(), fixed="the lesson's example data, stated on the page")
value("labels", labels.tolist())
logits = X @ W + b
B, C = logits.shape

# -- softmax -----------------------------------------------------------------------------------
probs = torch.softmax(logits, dim=1)
torch.set_printoptions(precision=3, sci_mode=False)
print(f"logits {tuple(logits.shape)}\n{logits}\nsoftmax over the class axis {tuple(probs.shape)}\n{probs}")
print("row sums:", [round(s, 6) for s in probs.sum(dim=1).tolist()])
value("logits_shape", logits.shape)
value("probs_shape", probs.shape)
value("p_ticket0_billing", probs[0, 0])
value("p_ticket3_other", probs[3, 4])
sanity("rows_sum_to_one", torch.allclose(probs.sum(dim=1), torch.ones(B)), "each row of probabilities sums to 1",
       relation="not")
sanity("order_kept", torch.equal(probs.argmax(dim=1), logits.argmax(dim=1)),
       "softmax keeps the order of the scores: the pick does not change")

# -- cross-entropy per ticket --------------------------------------------------------------------
picked = probs[torch.arange(B), labels]
from_probs = -torch.log(picked)
from_lse = torch.logsumexp(logits, dim=1) - logits[torch.arange(B), labels]
per_ticket = F.cross_entropy(logits, labels, reduction="none")
print(f"\nlabels {tuple(labels.shape)} = {labels.tolist()} (class indices, one per ticket)")
print(f"p[i, label_i]       = {[round(v, 4) for v in picked.tolist()]}")
print(f"-log p[i, label_i]  = {[round(v, 4) for v in from_probs.tolist()]}")
print(f"logsumexp - z_label = {[round(v, 4) for v in from_lse.tolist()]}")
print(f"F.cross_entropy(reduction='none') {tuple(per_ticket.shape)} = {[round(v, 4) for v in per_ticket.tolist()]}")
value("labels_shape", labels.shape)
value("per_ticket_shape", per_ticket.shape)
value("loss_ticket3", per_ticket[3])
value("onehot_shape", F.one_hot(labels, C).shape)
value("onehot_numel", F.one_hot(labels, C).numel())
vocab = fact("llama2_7b_vocab", "vocab")              # the vocabulary of problem I.4.B07
value("onehot_row_numel_lm", F.one_hot(labels[:1], vocab).numel())  # one position's one-hot row
value("labels_numel", labels.numel())
sanity("three_ways_agree", torch.allclose(from_probs, per_ticket) and torch.allclose(from_lse, per_ticket, atol=1e-6),
       "-log p, logsumexp - z and F.cross_entropy give the same four losses")

# -- the reduction --------------------------------------------------------------------------------
loss = per_ticket.mean()
default = F.cross_entropy(logits, labels)
print(f"\nmean over the batch: {loss.item():.4f}, shape {tuple(loss.shape)}, rank {loss.dim()}")
value("loss", loss)
SCALAR = "a mean reduction returns a 0-d tensor: shape () and rank 0 by definition"
value("loss_shape", loss.shape, fixed=SCALAR)
value("loss_rank", loss.dim(), fixed=SCALAR)
value("loss_sum", per_ticket.sum())
sanity("default_is_mean", torch.isclose(loss, default), "F.cross_entropy reduces with the mean by default",
       operands=(loss.item(), default.item()))

ignore = value("ignore_index", torch.nn.CrossEntropyLoss().ignore_index,
               fixed="PyTorch's default ignore_index, a setting of the library")
masked = labels.clone()
padding = X.sum(dim=1) == 0                           # the ticket with no signal words is padding
masked[padding] = ignore
ignored = F.cross_entropy(logits, masked)             # mean over the valid tickets
per_masked = F.cross_entropy(logits, masked, reduction="none")
n_valid = int((masked != ignore).sum())
over_all = per_masked.sum() / B                       # the sum divided by every slot
print(f"\npadding ignored (label {ignore}): per-ticket {[round(v, 4) for v in per_masked.tolist()]}")
print(f"  mean over the {n_valid} valid tickets: {ignored.item():.4f}")
print(f"  sum / {B} slots:                  {over_all.item():.4f}  (x{(over_all / ignored).item():.4f})")
value("n_valid", n_valid)
value("loss_valid_mean", ignored)
value("loss_over_all", over_all)
value("over_all_ratio", over_all / ignored)
sanity("valid_mean", torch.isclose(ignored, per_ticket[~padding].mean()), "ignore_index divides by the valid count")
sanity("over_all_is_valid_share", torch.isclose(over_all / ignored, torch.tensor(n_valid / B)),
       "dividing by every slot scales the valid mean by n_valid / B",
       operands=((over_all / ignored).item(), n_valid / B))

# -- the quick check on the per-example loss: a language model's sizes --------------------------------
q_positions = given("q_positions", 2048)              # B x T positions, merged into one axis
q_logits = torch.zeros(q_positions, vocab)
q_labels = torch.zeros(q_positions, dtype=torch.long)
q_per_pos = F.cross_entropy(q_logits, q_labels, reduction="none")
value("q_logits_shape", q_logits.shape)
value("q_labels_shape", q_labels.shape)
value("q_per_pos_shape", q_per_pos.shape)
sanity("q_options_differ", len({tuple(q_per_pos.shape), tuple(q_logits.shape), ()}) == 3,
       "the three options of the quick check are three different shapes")
print(f"\nquick check: logits {tuple(q_logits.shape)}, labels {tuple(q_labels.shape)} "
      f"-> per-position losses {tuple(q_per_pos.shape)}")
del q_logits

# -- why softmax is not exp / sum(exp) ------------------------------------------------------------
# The overflow threshold, found on torch itself: bisect for the largest float32 z with exp(z) finite.
lo, hi = torch.tensor(0.0), torch.tensor(1000.0)
for _ in range(200):
    mid = (lo + hi) / 2
    if mid in (lo, hi):
        break
    if torch.isfinite(torch.exp(mid)):
        lo = mid
    else:
        hi = mid
limit = value("exp_limit", lo, fixed="a property of float32: exp overflows where it passes the largest float32")
formula = torch.log(torch.tensor(torch.finfo(torch.float32).max))
print(f"\nexp(z) overflows float32 above z = {limit.item():.4f} (bisection on torch.exp); "
      f"ln(largest float32) = {formula.item():.4f}")
sanity("exp_overflows_past_limit", bool(torch.isfinite(torch.exp(lo))) and not bool(torch.isfinite(torch.exp(hi)))
       and abs(lo.item() - formula.item()) < 1e-4,
       "exp is finite up to the threshold found by bisection, infinite just past it, and the threshold is ln(max)",
       operands=(lo.item(), formula.item()), relation=("larger", "largest"))
big_z = given("big_z", 1000.0)                         # one huge logit
big = torch.tensor([big_z, 0.0])
value("big", big.tolist())
naive = torch.exp(big) / torch.exp(big).sum()
safe = torch.softmax(big, dim=0)
ce_big = F.cross_entropy(big[None], torch.tensor([1]))
print(f"logits {big.tolist()}: exp gives {torch.exp(big).tolist()}")
print(f"  exp / sum(exp) = {naive.tolist()},  torch.softmax = {safe.tolist()}")
print(f"  cross-entropy for the small logit's class: {ce_big.item():.1f}")
value("naive_is_nan", bool(torch.isnan(naive).any()))
value("big_ce", ce_big)
sanity("big_past_limit", big_z > limit.item(), "the huge logit is past the overflow threshold",
       operands=(big_z, limit.item()))
sanity("safe_is_finite", bool(torch.isfinite(safe).all()), "softmax subtracts the row maximum first")
