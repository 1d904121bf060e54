# numbook: processes=8, timeout=240
"""IV.1.A02 — All-gather and reduce-scatter on a ring: (N-1)/N of S each, and all-reduce as the two in a row.

One process group of 8 real processes (gloo over loopback), with subgroups of the first 2 and the first 4 ranks.
In each group of N ranks every rank runs, with isend/irecv to its neighbours on the ring, an all-gather (each
rank contributes m elements; every rank ends with all N*m) and a reduce-scatter (each rank holds N*m elements;
rank r ends with the sum of the r-th block of m), counting the bytes of every tensor handed to isend and irecv.
Both are compared element for element with gloo's dist.all_gather and dist.reduce_scatter (which gloo on CPU
supports in the installed torch), on integer-valued fp32 inputs so every sum is exact. Then an all-reduce built as
the ring reduce-scatter followed by the ring all-gather, compared with dist.all_reduce, its bytes the sum of the two.
"""

import torch
import torch.distributed as dist

from numbook.check import given, run_group, sanity, value


def inputs(rank, size, seed, salt):
    """Integer values in [-1000, 1000) stored as fp32: every sum of a few of them is exact in any order."""
    g = torch.Generator().manual_seed(seed * 1000 + 100 * salt + rank)
    return torch.randint(-1000, 1000, (size,), generator=g).float()


class Counted:
    """isend/irecv in one group, counting every byte of every tensor handed to them."""

    def __init__(self, group):
        self.group, self.sent, self.recv, self.steps = group, 0, 0, 0

    def exchange(self, out, right, into, left):
        """One step of the ring: send `out` to the right neighbour while receiving `into` from the left."""
        self.sent += out.numel() * out.element_size()
        self.recv += into.numel() * into.element_size()
        self.steps += 1
        for req in (dist.isend(out, dst=right, group=self.group), dist.irecv(into, src=left, group=self.group)):
            req.wait()


def ring_all_gather(y, rank, N, comm):
    """Every rank contributes y (m elements); returns the N blocks in rank order, N*m elements."""
    out = torch.empty(N * y.numel(), dtype=y.dtype)
    blocks = list(out.chunk(N))
    blocks[rank].copy_(y)
    right, left = (rank + 1) % N, (rank - 1) % N
    for s in range(N - 1):                       # pass on the block received last step (first: its own)
        comm.exchange(blocks[(rank - s) % N], right, blocks[(rank - s - 1) % N], left)
    return out


def ring_reduce_scatter(x, rank, N, comm):
    """Every rank holds x (N blocks of m); rank r returns block r summed over the ranks."""
    acc = x.clone()
    blocks = list(acc.chunk(N))
    right, left = (rank + 1) % N, (rank - 1) % N
    for s in range(N - 1):                       # block r - s - 1 goes right; block r - s - 2 comes from the left
        into = blocks[(rank - s - 2) % N]
        buf = torch.empty_like(into)
        comm.exchange(blocks[(rank - s - 1) % N], right, buf, left)
        into += buf
    return blocks[rank].clone()


def worker(rank, world, m, seed, sizes):
    groups = {N: dist.new_group(list(range(N))) for N in sizes}
    out = {}
    for N in sizes:
        if rank >= N:
            continue
        g, res = groups[N], {}
        # all-gather
        y = inputs(rank, m, seed, 1)
        ag = Counted(g)
        mine = ring_all_gather(y, rank, N, ag)
        theirs = [torch.empty(m) for _ in range(N)]
        dist.all_gather(theirs, y, group=g)
        res.update(ag_equal=bool(torch.equal(mine, torch.cat(theirs))), ag_sent=ag.sent, ag_recv=ag.recv,
                   ag_steps=ag.steps, ag_in=y.numel() * y.element_size(), ag_out=mine.numel() * mine.element_size())
        # reduce-scatter
        x = inputs(rank, N * m, seed, 2)
        rs = Counted(g)
        mine = ring_reduce_scatter(x, rank, N, rs)
        theirs = torch.empty(m)
        dist.reduce_scatter(theirs, list(x.chunk(N)), group=g)
        res.update(rs_equal=bool(torch.equal(mine, theirs)), rs_sent=rs.sent, rs_recv=rs.recv, rs_steps=rs.steps,
                   rs_in=x.numel() * x.element_size(), rs_out=mine.numel() * mine.element_size())
        # all-reduce = reduce-scatter, then all-gather of the reduced blocks
        z = inputs(rank, N * m, seed, 3)
        ar = Counted(g)
        mine = ring_all_gather(ring_reduce_scatter(z, rank, N, ar), rank, N, ar)
        theirs = z.clone()
        dist.all_reduce(theirs, group=g)
        res.update(ar_equal=bool(torch.equal(mine, theirs)), ar_sent=ar.sent, ar_recv=ar.recv, ar_steps=ar.steps)
        out[N] = res
        dist.barrier(group=g)
    return out


if __name__ == "__main__":
    m = given("m", 2_048)
    seed = given("seed", 0, nudge=0)
    # the world sizes: subgroups of the first 2 and 4 ranks of one group of 8 (not nudged: a ninth process
    # would need another group, and the sizes are the cases the page compares)
    sizes = (given("N_a", 2, nudge=0), given("N_b", 4, nudge=0), given("N_c", 8, nudge=0))

    outs = run_group(worker, max(sizes), m, seed, sizes, timeout_s=200)
    fp32 = torch.tensor(0.0).element_size()
    value("fp32_bytes", fp32, fixed="bytes of an fp32 element: a property of the dtype")
    value("block_bytes", m * fp32, unit="B")
    print(f"Each rank's block: m = {m:,} fp32 elements, {m * fp32:,} bytes. S = N m x {fp32} bytes, the full array.")
    print(f"{'N':>3} {'S B':>8} {'AG in':>7} {'AG out':>7} {'AG sent':>8} {'RS in':>7} {'RS out':>7} "
          f"{'RS sent':>8} {'factor':>7} {'AR sent':>8} {'AR steps':>9}")
    for N in sizes:
        per = [outs[r][N] for r in range(N)]
        p0 = per[0]
        S = value(f"S_{N}", N * m * fp32, unit="B")
        one = (N - 1) / N * S
        for op, name in (("ag", "all-gather"), ("rs", "reduce-scatter")):
            sent, recv = [p[f"{op}_sent"] for p in per], [p[f"{op}_recv"] for p in per]
            value(f"{op}_sent_{N}", sent[0], unit="B")
            value(f"{op}_recv_{N}", recv[0], unit="B")
            value(f"{op}_steps_{N}", p0[f"{op}_steps"], fixed="set by the world size N alone, which is not nudged")
            sanity(f"{op}_bytes_{N}", all(b == one for b in sent + recv),
                   f"every rank of the ring {name} sends and receives exactly (N-1)/N S bytes",
                   operands=(sent[0], one), relation="equal")
            sanity(f"{op}_equal_{N}", all(p[f"{op}_equal"] for p in per),
                   f"the ring {name} equals gloo's, element for element, on every rank", operands=(N, N),
                   relation="equal")
            sanity(f"{op}_steps_{N}", all(p[f"{op}_steps"] == N - 1 for p in per),
                   f"the ring {name} takes N-1 steps", operands=(p0[f"{op}_steps"], N - 1), relation="equal")
        value(f"ag_in_{N}", p0["ag_in"], unit="B")
        value(f"ag_out_{N}", p0["ag_out"], unit="B")
        value(f"rs_in_{N}", p0["rs_in"], unit="B")
        value(f"rs_out_{N}", p0["rs_out"], unit="B")
        sanity(f"conventions_{N}", p0["ag_out"] == S == p0["rs_in"] and p0["ag_in"] == S // N == p0["rs_out"],
               "S is all-gather's output and reduce-scatter's input; each rank's block, S/N, is the other end",
               operands=(p0["ag_out"], p0["rs_in"]), relation="equal")
        value(f"factor1_{N}", (N - 1) / N, fixed="set by the world size N alone, which is not nudged")
        value(f"factor2_{N}", 2 * (N - 1) / N, fixed="set by the world size N alone, which is not nudged")
        ar_sent = value(f"ar_sent_{N}", p0["ar_sent"], unit="B")
        value(f"ar_steps_{N}", p0["ar_steps"], fixed="set by the world size N alone, which is not nudged")
        sanity(f"ar_sum_{N}", all(p["ar_sent"] == p["rs_sent"] + p["ag_sent"] == p["ar_recv"] == 2 * one
                                  and p["ar_steps"] == 2 * (N - 1) for p in per),
               "reduce-scatter then all-gather sends the sum of the two, 2(N-1)/N S bytes, in 2(N-1) steps",
               operands=(ar_sent, 2 * one), relation="equal")
        sanity(f"ar_equal_{N}", all(p["ar_equal"] for p in per),
               "reduce-scatter followed by all-gather equals gloo's all_reduce, element for element, on every rank",
               operands=(N, N), relation="equal")
        # the misreading: S taken as all-gather's input (one rank's block) instead of its output
        value(f"misread_{N}", (N - 1) / N * p0["ag_in"], unit="B")
        value(f"misread_factor_{N}", p0["ag_sent"] / ((N - 1) / N * p0["ag_in"]),
              fixed="set by the world size N alone, which is not nudged")
        print(f"{N:>3} {S:>8,} {p0['ag_in']:>7,} {p0['ag_out']:>7,} {p0['ag_sent']:>8,} {p0['rs_in']:>7,} "
              f"{p0['rs_out']:>7,} {p0['rs_sent']:>8,} {(N - 1) / N:>7.3f} {ar_sent:>8,} {p0['ar_steps']:>9}")
    print("Every ring result equals gloo's all_gather, reduce_scatter and all_reduce on every rank, element for "
          "element.")
