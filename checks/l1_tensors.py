"""Lesson 1 — tensors, shapes and rank.

Builds one tensor of each rank from 0 to 3 and reads what torch reports for each: the shape,
the rank (``.dim()``), the element count (``.numel()``) and the memory (``.nbytes``). Then it
builds the logits of problem I.4.B07, shape (4, 512, 32000), as a meta tensor (a shape and a
dtype, no storage) and reads the same four facts.
"""

import torch

from numbook.check import given, sanity, value

loss = torch.tensor(2.3)                    # one number: the loss of a batch
ticket = torch.tensor([120.0, 2.0, 1.0])    # one ticket: three features
n_batches = given("n_batches", 2)           # batches
n_tickets = given("n_tickets", 4)           # tickets in a batch
n_features = given("n_features", 3)         # features of a ticket
tickets = torch.zeros(n_tickets, n_features)             # four tickets, three features each
batches = torch.zeros(n_batches, n_tickets, n_features)  # two batches of four tickets

print(f"{'tensor':<10}{'shape':>14}{'rank':>6}{'elements':>10}{'bytes':>8}")
for name, t in [("loss", loss), ("ticket", ticket), ("tickets", tickets), ("batches", batches)]:
    print(f"{name:<10}{str(tuple(t.shape)):>14}{t.dim():>6}{t.numel():>10}{t.nbytes:>8}")
    value(f"{name}_shape", t.shape)
    value(f"{name}_rank", t.dim())
    value(f"{name}_numel", t.numel())
    value(f"{name}_bytes", t.nbytes)

fp32_bytes = value("fp32_elem", tickets.element_size())
print(f"\nan fp32 element takes {fp32_bytes} bytes; bytes = elements x {fp32_bytes}")
sanity("rank_is_len_shape", all(t.dim() == len(t.shape) for t in (loss, ticket, tickets, batches)),
       "the rank is the number of entries in the shape")
sanity("scalar_has_one_element", loss.numel() == 1 and tuple(loss.shape) == (),
       "a shape with no entries holds one element (the empty product is 1)")

n_exercise = given("n_exercise", 8)         # the batch of the exercise
eight = torch.zeros(n_exercise, n_features)
value("eight_shape", eight.shape)
value("eight_rank", eight.dim())
value("eight_numel", eight.numel())
value("eight_bytes", eight.nbytes)

logits = torch.empty(4, 512, 32000, device="meta")
value("logits_shape", logits.shape)
value("logits_rank", logits.dim())
value("logits_numel", logits.numel())
value("logits_mb", logits.numel() * logits.element_size() / 10**6)
print(f"\nI.4.B07 logits: shape {tuple(logits.shape)}, rank {logits.dim()}")
print(f"  {logits.numel():,} elements, {logits.numel() * logits.element_size() / 10**6:.1f} MB in fp32")
