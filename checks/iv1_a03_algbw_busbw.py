# numbook: processes=4, timeout=300
"""IV.1.A03 — Algorithm bandwidth against bus bandwidth.

nccl-tests (doc/PERFORMANCE.md, src/all_reduce.cu, src/all_gather.cu) reports algbw = S / t and
busbw = algbw * factor, with factor 2(n-1)/n for all-reduce and (n-1)/n for all-gather, S being the
all-gather's whole output. The factors are derived here from bytes counted on a real ring: a ring
all-reduce and a ring all-gather written with dist.send/recv in a gloo group of 4 workers (and a group of
2 made with dist.new_group), their results equal to gloo's all_reduce and all_gather, and the bytes
each rank sends read off the tensors it sends. Then gloo's own all_reduce and all_gather are timed over
loopback at three sizes, N = 2 and 4, and algbw and busbw computed as nccl-tests computes them. Each timed
figure is rank 0's shortest of a few calls after a barrier (a best case, not nccl-tests' mean over
iterations), one per repeat; the value is the mean over 12 repeats with a percentile-bootstrap interval,
which lies inside the range of the repeats and cannot go negative under a skewed, loaded machine.
"""

import math
import time

import torch
import torch.distributed as dist

from numbook.check import estimate, given, run_group, sanity, value


def ring_all_reduce(x, ranks, group):
    """Reduce-scatter then all-gather on a ring, in place; returns the bytes this rank sent."""
    n, me = len(ranks), ranks.index(dist.get_rank())
    right, left = ranks[(me + 1) % n], ranks[(me - 1) % n]
    chunks = list(x.chunk(n))
    sent = 0
    for step in range(n - 1):                      # reduce-scatter: chunk (me - step) goes right
        out, into = chunks[(me - step) % n], chunks[(me - step - 1) % n]
        buf = torch.empty_like(into)
        req = dist.isend(out.contiguous(), right, group=group)
        dist.recv(buf, left, group=group)
        req.wait()
        into += buf
        sent += out.numel() * out.element_size()
    for step in range(n - 1):                      # all-gather: the finished chunk (me + 1 - step) goes right
        out, into = chunks[(me + 1 - step) % n], chunks[(me - step) % n]
        buf = torch.empty_like(into)
        req = dist.isend(out.contiguous(), right, group=group)
        dist.recv(buf, left, group=group)
        req.wait()
        into.copy_(buf)
        sent += out.numel() * out.element_size()
    return sent


def ring_all_gather(piece, ranks, group):
    """Each rank's piece passed around the ring; returns (the gathered output, the bytes this rank sent)."""
    n, me = len(ranks), ranks.index(dist.get_rank())
    right, left = ranks[(me + 1) % n], ranks[(me - 1) % n]
    parts = [None] * n
    parts[me] = piece.clone()
    sent = 0
    for step in range(n - 1):
        out = parts[(me - step) % n]
        buf = torch.empty_like(piece)
        req = dist.isend(out, right, group=group)
        dist.recv(buf, left, group=group)
        req.wait()
        parts[(me - step - 1) % n] = buf
        sent += out.numel() * out.element_size()
    return torch.cat(parts), sent


def worker(rank, world, count_bytes, sizes, inner, repeats):
    g2 = dist.new_group([0, 1])
    out = {}
    for n, group in ((2, g2), (world, None)):
        ranks = list(range(n))
        if rank >= n:
            dist.barrier()
            continue
        # -- exact: the bytes on the ring, and the result equal to gloo's -----------------------------------
        numel = count_bytes // 8                                     # int64 elements: sums are exact
        x = torch.arange(numel, dtype=torch.int64) * (rank + 1)
        mine, ref = x.clone(), x.clone()
        ar_sent = ring_all_reduce(mine, ranks, group)
        dist.all_reduce(ref, group=group)
        piece = torch.arange(numel // n, dtype=torch.int64) + rank * numel
        gathered, ag_sent = ring_all_gather(piece, ranks, group)
        lst = [torch.empty_like(piece) for _ in range(n)]
        dist.all_gather(lst, piece, group=group)
        res = {"ar_sent": ar_sent, "ar_equal": bool(torch.equal(mine, ref)), "ag_sent": ag_sent,
               "ag_out_bytes": gathered.numel() * gathered.element_size(),
               "ag_equal": bool(torch.equal(gathered, torch.cat(lst)))}
        # -- timed: gloo's all_reduce and all_gather, S bytes each (all_gather: S is the whole output) ------
        times = {"ar": [], "ag": []}
        for _ in range(repeats):
            for op in ("ar", "ag"):
                row = []
                for S in sizes:
                    t = torch.ones(S // 4)                                # all_reduce: S bytes in and out
                    p = torch.ones(S // 4 // n)                           # all_gather: S / n in, S out
                    lst = [torch.empty_like(p) for _ in range(n)]
                    best = math.inf
                    for _ in range(inner):
                        dist.barrier(group=group)
                        t0 = time.perf_counter()
                        if op == "ar":
                            dist.all_reduce(t, group=group)
                        else:
                            dist.all_gather(lst, p, group=group)
                        best = min(best, time.perf_counter() - t0)
                    row.append(best)
                times[op].append(row)
        res["times"] = times
        out[n] = res
        dist.barrier()
    return out


if __name__ == "__main__":
    count_bytes = given("count_bytes", 1048576, unit="B", nudge=1024)   # a nudge that keeps N | elements
    sizes = given("sizes", [65536, 1048576, 16777216], unit="B")
    inner = given("inner", 3)
    repeats = given("repeats", 12)   # at least 10 also when nudged: the bootstrap needs 10
    outs = run_group(worker, 4, count_bytes, sizes, inner, repeats, timeout_s=240)

    # -- 1. the factors, from bytes counted on the ring ------------------------------------------------------
    print(f"Bytes each rank sends on a ring, counted on send/recv ({count_bytes:,} B per rank):")
    print(f"  {'N':>3} {'all-reduce sent':>16} {'/ S':>7} {'2(N-1)/N':>9} {'all-gather sent':>16} "
          f"{'/ S_out':>8} {'(N-1)/N':>8}")
    for n in (2, 4):
        rs = [outs[r][n] for r in range(n)]
        ar_sent, ag_sent, ag_out = rs[0]["ar_sent"], rs[0]["ag_sent"], rs[0]["ag_out_bytes"]
        sanity(f"ring_equal_gloo_n{n}", all(r["ar_equal"] and r["ag_equal"] for r in rs),
               f"the ring written with send/recv gives gloo's all_reduce and all_gather, element for element, "
               f"at N = {n}",
               operands=(rs[0]["ar_equal"], True), relation="equal")
        sanity(f"same_bytes_every_rank_n{n}", all(r["ar_sent"] == ar_sent and r["ag_sent"] == ag_sent for r in rs),
               "every rank of the ring sends the same bytes", operands=(rs[-1]["ar_sent"], ar_sent), relation="equal")
        f_ar = value(f"factor_ar_n{n}", ar_sent / count_bytes,
                     fixed="bytes a rank sends per byte of S on a ring: a function of N alone, whatever S")
        f_ag = value(f"factor_ag_n{n}", ag_sent / ag_out,
                     fixed="bytes a rank sends per byte of output on a ring: a function of N alone, whatever S")
        value(f"ar_sent_n{n}", ar_sent, unit="B")
        value(f"ag_sent_n{n}", ag_sent, unit="B")
        value(f"ag_out_n{n}", ag_out, unit="B")
        sanity(f"factor_ar_doc_n{n}", f_ar == 2 * (n - 1) / n,
               "bytes a rank sends over S equal nccl-tests' all-reduce factor 2(n-1)/n",
               operands=(f_ar, 2 * (n - 1) / n), relation="equal")
        sanity(f"factor_ag_doc_n{n}", f_ag == (n - 1) / n,
               "bytes a rank sends over the whole output equal nccl-tests' all-gather factor (n-1)/n",
               operands=(f_ag, (n - 1) / n), relation="equal")
        print(f"  {n:>3} {ar_sent:>14,} B {f_ar:>7.3f} {2 * (n - 1) / n:>9.3f} {ag_sent:>14,} B {f_ag:>8.3f} "
              f"{(n - 1) / n:>8.3f}")
    value("N2", 2, fixed="the group of ranks 0 and 1 made with dist.new_group")
    value("N4", len(outs), fixed="the world size of the process group, 4 as the header's processes=4 allows")
    value("N8", 8, fixed="the rank count of the worked example")
    value("factor_ar_n8", 2 * 7 / 8, fixed="nccl-tests' all-reduce factor 2(n-1)/n at n = 8, the worked example")

    # -- 2. measured: algbw and busbw of gloo over loopback --------------------------------------------------
    print(f"\ngloo over loopback, rank 0's shortest of {inner} calls per repeat, {repeats} repeats "
          "(mean and its bootstrap interval over the repeats; min to max of the repeats after it):")
    print(f"  {'op':<10} {'N':>2} {'S':>11} {'time ms':>8} {'algbw GB/s':>18} {'busbw GB/s':>18} {'busbw min-max':>14}")
    for op, name, fac in (("ar", "all_reduce", lambda n: 2 * (n - 1) / n), ("ag", "all_gather", lambda n: (n - 1) / n)):
        for n in (2, 4):
            rows = outs[0][n]["times"][op]
            for j, S in enumerate(sizes):
                ts = [row[j] for row in rows]
                what = (f"gloo {name} of {S} bytes{' (the whole output)' if op == 'ag' else ''} on {n} workers over "
                        f"loopback, rank 0's shortest of {inner} calls per repeat")
                tag = f"{op}_n{n}_{S // 1024}k"
                e_t = estimate(f"t_{tag}_ms", [t * 1e3 for t in ts], unit="ms", n=repeats * inner, repeated="repeats",
                               method="bootstrap", measured="time of " + what)
                e_alg = estimate(f"algbw_{tag}_gbs", [S / t / 1e9 for t in ts], unit="GB/s", n=repeats * inner,
                                 repeated="repeats", method="bootstrap", measured="algbw = S / t of " + what)
                e_bus = estimate(f"busbw_{tag}_gbs", [S / t / 1e9 * fac(n) for t in ts], unit="GB/s",
                                 n=repeats * inner, repeated="repeats", method="bootstrap",
                                 measured="busbw = algbw x factor of " + what)
                bus = [S / t / 1e9 * fac(n) for t in ts]
                print(f"  {name:<10} {n:>2} {S:>9,} B {e_t:>8.2f} {e_alg:>6.2f} ({e_alg.lo:.2f}-{e_alg.hi:.2f}) "
                      f"{e_bus:>6.2f} ({e_bus.lo:.2f}-{e_bus.hi:.2f}) {min(bus):>6.3f}-{max(bus):.3f}")
    value("S_big_mib", sizes[-1] / 2**20, unit="MiB",
          fixed="the largest size of Given, a list the perturbation does not nudge")
    value("ar_bytes_ratio_n4_n2", outs[0][4]["ar_sent"] / outs[0][2]["ar_sent"],
          fixed="bytes rank 0 sent on the ring all-reduce of the same S at N = 4 over N = 2: counted, not timed")
