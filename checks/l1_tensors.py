"""Lesson 1 — tensors, shapes and rank.

Builds one tensor of each rank from 0 to 3 and reads what torch reports for each: the shape,
the rank (``.dim()``), the element count (``.numel()``) and the memory (``.nbytes``). Then it
builds the logits of problem I.4.B07, shape (B, T, |V|) with the Llama 2 vocabulary, as a meta
tensor (a shape and a dtype, no storage) and reads the same four facts. Last, it computes the
answers of the two quick checks, which ask about shapes the text has not worked.
"""

import torch

from numbook.check import fact, given, sanity, value

RANK_FIXED = "the rank counts axes: a tensor built with this many axes keeps them whatever their lengths"

loss = torch.tensor(2.3)                    # one number: the loss of a batch
n_batches = given("n_batches", 2)           # batches
n_tickets = given("n_tickets", 4)           # tickets in a batch
n_features = given("n_features", 3)         # features of a ticket
ticket = torch.zeros(n_features)                         # one ticket: three features
tickets = torch.zeros(n_tickets, n_features)             # four tickets, three features each
batches = torch.zeros(n_batches, n_tickets, n_features)  # two batches of four tickets

print(f"{'tensor':<10}{'shape':>14}{'rank':>6}{'elements':>10}{'bytes':>8}")
for name, t in [("loss", loss), ("ticket", ticket), ("tickets", tickets), ("batches", batches)]:
    print(f"{name:<10}{str(tuple(t.shape)):>14}{t.dim():>6}{t.numel():>10}{t.nbytes:>8}")
    scalar = "a 0-d tensor: the empty shape, rank 0 and one element (the empty product) by definition"
    value(f"{name}_shape", t.shape, fixed=scalar if t.dim() == 0 else None)
    value(f"{name}_rank", t.dim(), fixed=scalar if t.dim() == 0 else RANK_FIXED)
    value(f"{name}_numel", t.numel(), fixed=scalar if t.dim() == 0 else None)
    value(f"{name}_bytes", t.nbytes, fixed=scalar if t.dim() == 0 else None)

fp32_bytes = value("fp32_elem", tickets.element_size(), unit="B",
                   fixed="bytes of an fp32 element: a property of the dtype")
print(f"\nan fp32 element takes {fp32_bytes} bytes; bytes = elements x {fp32_bytes}")
sanity("rank_is_len_shape", all(t.dim() == len(t.shape) for t in (loss, ticket, tickets, batches)),
       "the rank is the number of entries in the shape")
sanity("scalar_has_one_element", loss.numel() == 1 and tuple(loss.shape) == (),
       "a shape with no entries holds one element (the empty product is 1)")

n_exercise = given("n_exercise", 8)         # the batch of the exercise
eight = torch.zeros(n_exercise, n_features)
value("eight_shape", eight.shape)
value("eight_rank", eight.dim(), fixed=RANK_FIXED)
value("eight_numel", eight.numel())
value("eight_bytes", eight.nbytes)

lm_B = given("lm_B", 4)                     # sequences in I.4.B07's batch
lm_T = given("lm_T", 512)                   # positions per sequence
V = fact("llama2_7b_vocab", "V")            # Llama 2's vocabulary, the classes of I.4.B07
logits = torch.empty(lm_B, lm_T, V, device="meta")
value("logits_shape", logits.shape)
value("logits_rank", logits.dim(), fixed=RANK_FIXED)
value("logits_numel", logits.numel())
value("logits_mb", logits.numel() * logits.element_size() / 10**6, unit="MB")
print(f"\nI.4.B07 logits: shape {tuple(logits.shape)}, rank {logits.dim()}")
print(f"  {logits.numel():,} elements, {logits.numel() * logits.element_size() / 10**6:.1f} MB in fp32")

# -- the quick checks: shapes the text has not worked -------------------------------------------
q_batches = given("q_batches", 5)           # quick check 1: five batches of the exercise's eight tickets
q = torch.zeros(q_batches, n_exercise, n_features)
value("q_shape", q.shape)
value("q_numel", q.numel())
value("q_sum", sum(q.shape))                # the wrong option that adds the lengths
value("q_rank", q.dim(), fixed=RANK_FIXED)
sanity("q_options_differ", len({q.numel(), sum(q.shape), q.dim()}) == 3,
       "the three options of quick check 1 are three different numbers")
print(f"\nquick check on elements: shape {tuple(q.shape)} holds {q.numel()} numbers "
      f"(sum of the lengths {sum(q.shape)}, rank {q.dim()})")

q2_B = given("q2_B", 8)                     # quick check 2: Llama 3 8B logits for 8 sequences
q2_T = given("q2_T", 2048)                  # of 2,048 positions
V3 = fact("llama3_8b_vocab", "V3")
q2 = torch.empty(q2_B, q2_T, V3, device="meta")
value("q2_shape", q2.shape)
value("q2_rank", q2.dim(), fixed=RANK_FIXED)
value("q2_numel", q2.numel())
value("q2_last", q2.shape[-1])
sanity("q2_options_differ", len({q2.dim(), q2.numel(), q2.shape[-1]}) == 3,
       "the three options of quick check 2 are three different numbers")
print(f"quick check on rank: shape {tuple(q2.shape)} has rank {q2.dim()} ({q2.numel():,} elements)")
