# numbook: processes=8, timeout=240
"""IV.1.A01 — Ring all-reduce written with send and recv: the bytes each rank moves, and gloo's all_reduce.

One process group of 8 real processes (gloo over loopback), with subgroups of the first 2 and the first 4 ranks.
In each group of N ranks, every rank runs the ring all-reduce by hand: N - 1 reduce-scatter steps then N - 1
all-gather steps, each step one isend of a chunk to the right neighbour and one irecv from the left, the chunks
being the N parts of the vector (tensor_split). Every tensor handed to isend or irecv is counted (its numel times
its element size). The result is compared element for element with gloo's dist.all_reduce of the same inputs:
integer-valued fp32 (every sum exact, so any order gives the same bits) and random fp32 (the order of the sums
shows in the last bits). The naive alternative, every rank sending its vector to rank 0 and rank 0 sending the
sum back, is run and counted too. Then the bytes per rank for the fp32 gradients of GPT-2 small at N ranks.
"""

import torch
import torch.distributed as dist

from numbook.check import fact, given, run_group, sanity, value


def inputs(rank, n, seed, kind):
    """The vector rank `rank` contributes: integers in [-1000, 1000) stored as fp32, or standard normal fp32."""
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    if kind == "int":
        return torch.randint(-1000, 1000, (n,), generator=g).float()
    return torch.randn(n, generator=g)


class Counted:
    """isend/irecv in a group of the first N ranks, counting every byte of every tensor handed to them."""

    def __init__(self, group):
        self.group, self.sent, self.recv, self.msgs_sent = group, 0, 0, 0

    def isend(self, t, dst):
        self.sent += t.numel() * t.element_size()
        self.msgs_sent += 1
        return dist.isend(t, dst=dst, group=self.group)

    def irecv(self, t, src):
        self.recv += t.numel() * t.element_size()
        return dist.irecv(t, src=src, group=self.group)


def ring_allreduce(x, rank, N, comm):
    """Sum x over the N ranks in place, on a ring; returns the number of steps (rounds of send and receive)."""
    chunks = list(x.tensor_split(N))              # N contiguous views of x
    right, left = (rank + 1) % N, (rank - 1) % N
    steps = 0
    for s in range(N - 1):                        # reduce-scatter: after it, rank r holds chunk r + 1 summed
        out, into = chunks[(rank - s) % N], chunks[(rank - s - 1) % N]
        buf = torch.empty_like(into)
        for req in (comm.isend(out, right), comm.irecv(buf, left)):
            req.wait()
        into += buf                               # this rank's own part plus what has come round so far
        steps += 1
    for s in range(N - 1):                        # all-gather: pass the summed chunks on round the ring
        out, into = chunks[(rank + 1 - s) % N], chunks[(rank - s) % N]
        for req in (comm.isend(out, right), comm.irecv(into, left)):
            req.wait()
        steps += 1
    return steps


def naive_allreduce(x, rank, N, comm):
    """Every rank sends its whole vector to rank 0, which sums and sends the sum back to each."""
    if rank == 0:
        buf = torch.empty_like(x)
        for src in range(1, N):
            comm.irecv(buf, src).wait()
            x += buf
        for dst in range(1, N):
            comm.isend(x, dst).wait()
    else:
        comm.isend(x, 0).wait()
        comm.irecv(x, 0).wait()


def worker(rank, world, n, seed, sizes):
    groups = {N: dist.new_group(list(range(N))) for N in sizes}   # every rank creates every group, in one order
    out = {}
    for N in sizes:
        if rank >= N:
            continue
        g, res = groups[N], {}
        for kind in ("int", "float"):
            x = inputs(rank, n, seed, kind)
            ring, comm = x.clone(), Counted(g)
            steps = ring_allreduce(ring, rank, N, comm)
            ref = x.clone()
            dist.all_reduce(ref, group=g)         # gloo's own all-reduce of the same inputs
            res[kind] = {"ring": ring.numpy(), "gloo": ref.numpy()}
            if kind == "int":
                res.update(sent=comm.sent, recv=comm.recv, steps=steps, msgs=comm.msgs_sent)
                naive, c2 = x.clone(), Counted(g)
                naive_allreduce(naive, rank, N, c2)
                res.update(naive_sent=c2.sent, naive_recv=c2.recv, naive_equal=bool(torch.equal(naive, ref)))
        out[N] = res
        dist.barrier(group=g)
    return out


def ring_order(xs, n, N):
    """The ring's sums computed in one process: chunk c starts at rank c and gathers ranks c+1, ..., c+N-1."""
    res = torch.empty(n)
    for c, idx in enumerate(torch.arange(n).tensor_split(N)):
        acc = xs[c][idx].clone()
        for j in range(1, N):
            acc = xs[(c + j) % N][idx] + acc
        res[idx] = acc
    return res


def in_eps(a, b, xs):
    """The largest |a - b| over eps * sum_i |x_i|, element by element: the scale of fp32 rounding in a sum of N
    terms (each of the N - 1 additions errs by at most eps/2 of a partial sum, which is at most sum_i |x_i|)."""
    scale = torch.finfo(torch.float32).eps * torch.stack(xs).abs().sum(0)
    return ((a - b).abs() / scale).max().item()


if __name__ == "__main__":
    n = given("n", 16_384)
    seed = given("seed", 0)       # nudged: another draw moves the fp32 rounding figures
    # the world sizes: subgroups of the first 2 and 4 ranks of one group of 8 (not nudged: a ninth process
    # would need another group, and the sizes are the cases the page compares)
    sizes = (given("N_a", 2, nudge=0), given("N_b", 4, nudge=0), given("N_c", 8, nudge=0))
    N_ex = given("N_ex", 8)
    d = fact("gpt2_hidden", "d")
    L = fact("gpt2_layers", "L")
    V = fact("gpt2_vocab", "V")
    ctx = fact("gpt2_context", "ctx")

    outs = run_group(worker, max(sizes), n, seed, sizes, timeout_s=200)
    fp32 = torch.tensor(0.0).element_size()
    S = value("S", n * fp32, unit="B")
    value("fp32_bytes", fp32, fixed="bytes of an fp32 element: a property of the dtype")
    print(f"Vector of n = {n:,} fp32 elements on every rank: S = {S:,} bytes. Ring all-reduce by isend/irecv.")
    print(f"{'N':>3} {'steps':>6} {'chunk B':>8} {'sent B':>9} {'recv B':>9} {'formula B':>11} "
          f"{'naive r0 recv':>14} {'int equal':>10}")
    for N in sizes:
        per = [outs[r][N] for r in range(N)]
        chunk_bytes = [c.numel() * fp32 for c in torch.empty(n).tensor_split(N)]
        formula = 2 * (N - 1) / N * S
        sent, recv = [p["sent"] for p in per], [p["recv"] for p in per]
        # the exact count for any n: rank r sends every chunk but chunk r+1 in the reduce-scatter and every
        # chunk but chunk r+2 in the all-gather
        general = [2 * S - chunk_bytes[(r + 1) % N] - chunk_bytes[(r + 2) % N] for r in range(N)]
        sanity(f"count_general_{N}", sent == general and recv == [general[(r - 1) % N] for r in range(N)],
               "each rank sends 2S less the two chunks it never sends, and receives what its left neighbour sends",
               operands=(sent, general), relation="equal")
        if n % N == 0:
            sanity(f"count_formula_{N}", all(s == formula for s in sent + recv),
                   "with N dividing n, every rank sends and receives exactly 2(N-1)/N S bytes",
                   operands=(sent[0], formula), relation="equal")
        value(f"sent_{N}", sent[0], unit="B")
        value(f"recv_{N}", recv[0], unit="B")
        value(f"sent_max_{N}", max(sent), unit="B")
        value(f"formula_{N}", formula, unit="B")
        value(f"factor_{N}", 2 * (N - 1) / N, fixed="set by the world size N alone, which is not nudged")
        value(f"chunk_{N}", chunk_bytes[0], unit="B")
        steps = value(f"steps_{N}", per[0]["steps"], fixed="set by the world size N alone, which is not nudged")
        value(f"msgs_{N}", per[0]["msgs"], fixed="set by the world size N alone, which is not nudged")
        sanity(f"steps_{N}", all(p["steps"] == 2 * (N - 1) and p["msgs"] == 2 * (N - 1) for p in per),
               "every rank takes 2(N-1) steps, one message sent in each", operands=(steps, 2 * (N - 1)),
               relation="equal")
        int_equal = all(torch.equal(torch.from_numpy(p["int"]["ring"]), torch.from_numpy(p["int"]["gloo"]))
                        for p in per)
        sanity(f"int_equal_{N}", int_equal, "integer-valued inputs: the ring's sum equals gloo's on every rank, "
               "element for element", operands=(N, N), relation="equal")
        n0_recv = value(f"naive_r0_recv_{N}", per[0]["naive_recv"], unit="B")
        value(f"naive_r0_sent_{N}", per[0]["naive_sent"], unit="B")
        value(f"naive_other_sent_{N}", per[-1]["naive_sent"], unit="B")
        value(f"naive_over_ring_{N}", n0_recv / recv[0], fixed="set by the world size N alone, which is not nudged")
        sanity(f"naive_{N}", all(p["naive_equal"] for p in per) and n0_recv == (N - 1) * S
               and per[0]["naive_sent"] == (N - 1) * S and per[-1]["naive_sent"] == S,
               "the naive all-reduce gives the same sum; rank 0 receives (N-1)S bytes and sends (N-1)S",
               operands=(n0_recv, (N - 1) * S), relation="equal")
        print(f"{N:>3} {steps:>6} {chunk_bytes[0]:>8,} {sent[0]:>9,} {recv[0]:>9,} {formula:>11,.0f} "
              f"{n0_recv:>14,} {str(int_equal):>10}")

    # fp32 random inputs: order of the sums
    print("\nRandom fp32 inputs (standard normal): the ring against gloo and against the ring's order done in one "
          "process.")
    print(f"{'N':>3} {'differ from gloo':>17} {'max |diff|':>11} {'in eps':>7} {'= ring order':>13} "
          f"{'gloo = seq':>11}")
    for N in sizes:
        per = [outs[r][N] for r in range(N)]
        xs = [inputs(r, n, seed, "float") for r in range(N)]
        ring = torch.from_numpy(per[0]["float"]["ring"])
        gloo = torch.from_numpy(per[0]["float"]["gloo"])
        same_ranks = all(torch.equal(torch.from_numpy(p["float"]["ring"]), ring)
                         and torch.equal(torch.from_numpy(p["float"]["gloo"]), gloo) for p in per)
        ordered = ring_order(xs, n, N)
        seq = xs[0].clone()
        for r in range(1, N):
            seq = seq + xs[r]
        exact = torch.stack([x.double() for x in xs]).sum(0)
        two = {"fixed": "with two ranks each element is one addition, and a + b = b + a exactly: zero for any draw"}
        two = two if N == 2 else {}
        n_diff = value(f"float_differ_{N}", int((ring != gloo).sum()), **two)
        value(f"float_differ_frac_{N}", n_diff / n)
        maxdiff = value(f"float_maxdiff_{N}", (ring - gloo).abs().max())
        eps_units = value(f"float_diff_eps_{N}", in_eps(ring, gloo, xs), dtype="float32", **two)
        ring_err = value(f"ring_err_{N}", (ring.double() - exact).abs().max().item(), dtype="float64")
        gloo_err = value(f"gloo_err_{N}", (gloo.double() - exact).abs().max().item(), dtype="float64")
        gloo_seq = value(f"gloo_seq_differ_{N}", int((gloo != seq).sum()))
        ring_is_order = bool(torch.equal(ring, ordered))
        sanity(f"ring_order_{N}", ring_is_order and same_ranks,
               "the ring's fp32 result equals, bit for bit on every rank, the sums taken in the ring's order in one "
               "process", operands=(int((ring != ordered).sum()), 0), relation="equal")
        if N == 2:
            sanity("two_ranks_same", n_diff == 0, "with two ranks each element is one addition, a + b = b + a: "
                   "no order to differ", operands=(n_diff, 0), relation="equal")
        else:
            sanity(f"float_differs_{N}", n_diff > 0 and eps_units <= N - 1,
                   "with more than two ranks the ring and gloo add in different orders: some elements differ, "
                   "by at most (N-1) eps sum|x_i|, the rounding of two orders of N terms",
                   operands=(eps_units, N - 1), relation=("differs", "at most"))
        print(f"{N:>3} {n_diff:>17,} {maxdiff:>11.2e} {eps_units:>7.3f} {str(ring_is_order):>13} "
              f"{n - gloo_seq:>11,}")
        print(f"      largest error against the exact (fp64) sum: ring {ring_err:.2e}, gloo {gloo_err:.2e}")

    # the named example: the fp32 gradients of GPT-2 small, built on the meta device from its config
    with torch.device("meta"):
        wte, wpe = torch.nn.Embedding(V, d), torch.nn.Embedding(ctx, d)
        blocks = [torch.nn.ModuleList([torch.nn.LayerNorm(d), torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d),
                                       torch.nn.LayerNorm(d), torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)])
                  for _ in range(L)]
        ln_f = torch.nn.LayerNorm(d)                                   # the head is tied to wte: no parameters
    P = value("P_gpt2", sum(p.numel() for m in [wte, wpe, ln_f, *blocks] for p in m.parameters()))
    S_g = value("S_gpt2_mb", P * fp32 / 1e6, unit="MB")
    ring_g = value("ring_gpt2_mb", 2 * (N_ex - 1) / N_ex * P * fp32 / 1e6, unit="MB")
    naive_g = value("naive_gpt2_gb", (N_ex - 1) * P * fp32 / 1e9, unit="GB")
    value("ring_gpt2_bytes", 2 * (N_ex - 1) * P * fp32 // N_ex, unit="B")
    value("naive_gpt2_over_ring", naive_g * 1e3 / ring_g)
    value("ring_steps_ex", 2 * (N_ex - 1))
    value("factor_ex", 2 * (N_ex - 1) / N_ex)
    Nv = sizes[1]                                                  # the Variation: the same model at N_b ranks
    value("var_ring_gpt2_mb", 2 * (Nv - 1) / Nv * P * fp32 / 1e6, unit="MB")
    value("var_naive_gpt2_gb", (Nv - 1) * P * fp32 / 1e9, unit="GB")
    value("ring_msg_gpt2_mb", P * fp32 / N_ex / 1e6, unit="MB")
    print(f"\nGPT-2 small (d={d}, L={L}, V={V:,}, context {ctx:,}; tied head): {P:,} parameters, "
          f"fp32 gradients {S_g:.1f} MB.")
    print(f"At N = {N_ex}: the ring sends and receives {ring_g:.1f} MB per rank per all-reduce; "
          f"the naive rank 0 receives {naive_g:.2f} GB.")
