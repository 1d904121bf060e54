# numbook: processes=4, timeout=300
"""IV.1.A04 — An alpha-beta model of a collective, fitted.

One process group of four gloo workers over loopback. Ranks 0 and 1 time ping-pong round trips of
messages from a few bytes to several MiB with dist.send/recv; per repeat, the shortest round trip of
each size over `inner` tries, halved, is the one-way time t(m), and t(m) = alpha + m / beta is fitted by
least squares on the relative residuals (numpy). Each measured figure is the median over 12 repeats with
its order-statistic interval (the 3rd smallest to the 3rd largest of 12: 96%), which a stall caught by one
or two repeats does not move. The same repeat times gloo's
all_reduce on a group of
two (ranks 0 and 1, dist.new_group) and on all four, at a small and a large size, against the ring's
prediction 2(N-1)(alpha + S/(N beta)). Then the latency terms as N grows, by simulating the schedules
(a ring all-reduce: reduce-scatter then all-gather; a binomial tree: reduce to rank 0, then broadcast)
with each rank's contributions as bit masks, counting the steps exactly.
"""

import math
import time

import numpy as np
import torch
import torch.distributed as dist

from numbook.check import given, run_group, sanity, value


class Median(float):
    """A median over the repeats, with its order-statistic interval (.lo, .hi)."""


def estimate(name, xs, *, unit=None, n, repeated, measured, **_):
    """The median of the per-repeat figures, with a distribution-free interval for it: the k-th smallest and
    k-th largest figure, k the largest with 2 P(Binomial(r, 1/2) < k) <= 0.05. A stall that one or two repeats
    catch on a loaded machine moves neither the median nor the interval's ends."""
    xs, r = sorted(float(x) for x in xs), len(xs)
    tail = lambda k: sum(math.comb(r, i) for i in range(k)) / 2**r   # noqa: E731  P(X < k)
    k = max(k for k in range(1, r // 2 + 1) if 2 * tail(k) <= 0.05)
    level = math.floor(100 * (1 - 2 * tail(k)))
    med = float(np.median(xs))
    value(name, med, unit=unit, measured=measured + "; the median over the repeats", n=n, repeats=r,
          repeated=repeated, interval=(xs[k - 1], xs[r - k]),
          interval_kind=f"{level}% order-statistic interval for the median over {r} {repeated}")
    e = Median(med)
    e.lo, e.hi = xs[k - 1], xs[r - k]
    return e


def worker(rank, world, sizes, inner, repeats, ar_sizes):
    """Ranks 0 and 1: ping-pong; then all_reduce on {0, 1} and on all ranks. Rank 0's wall times, per repeat."""
    g2 = dist.new_group([0, 1])
    pp, ar2, ar4 = [], [], []
    bufs = {m: torch.zeros(m, dtype=torch.uint8) for m in sizes}
    xs = {S: torch.ones(S // 4) for S in ar_sizes}            # fp32: S bytes
    sent = {}
    for _ in range(repeats):
        row = []
        for m in sizes:
            best = math.inf
            for _ in range(inner):
                if rank < 2:
                    dist.barrier(group=g2)
                    t0 = time.perf_counter()
                    if rank == 0:
                        dist.send(bufs[m], 1)
                        dist.recv(bufs[m], 1)
                    else:
                        dist.recv(bufs[m], 0)
                        dist.send(bufs[m], 0)
                    best = min(best, time.perf_counter() - t0)
            sent[m] = bufs[m].numel() * bufs[m].element_size()   # bytes of one message, read off the tensor
            row.append(best / 2)                                  # one way: half the round trip
        pp.append(row)
        for group, n, out in ((g2, 2, ar2), (None, world, ar4)):
            times = []
            for S in ar_sizes:
                best = math.inf
                for _ in range(inner):
                    if group is None or rank < n:
                        dist.barrier(group=group)
                        t0 = time.perf_counter()
                        dist.all_reduce(xs[S], group=group)
                        best = min(best, time.perf_counter() - t0)
                    xs[S].fill_(1.0)
                times.append(best)
            out.append(times)
        dist.barrier()
    return {"pp": pp, "ar2": ar2, "ar4": ar4, "sent": [sent[m] for m in sizes]}


def fit(m, t):
    """t = alpha + m / beta, least squares on the relative residual (t_fit - t) / t: each size counts alike."""
    A = np.stack([np.ones_like(m), m], axis=1) / t[:, None]
    (alpha, inv_beta), *_ = np.linalg.lstsq(A, np.ones_like(t), rcond=None)
    return alpha, 1 / inv_beta, (alpha + m * inv_beta - t) / t


def ring_steps(N):
    """Ring all-reduce of N chunks on N ranks, simulated: reduce-scatter (each step every rank sends one
    partial chunk to its right neighbour, which adds its own), then all-gather (each step every rank
    forwards one finished chunk). A rank's holdings are bit masks of whose contributions a chunk contains."""
    full = (1 << N) - 1
    part = [[1 << r for _ in range(N)] for r in range(N)]      # part[r][c]: contributions in rank r's chunk c
    steps = 0
    while not all(part[r][(r + 1) % N] == full for r in range(N)):
        msgs = [(r, (r - steps) % N, part[r][(r - steps) % N]) for r in range(N)]
        for r, c, mask in msgs:
            part[(r + 1) % N][c] |= mask
        steps += 1
    done = [{(r + 1) % N} for r in range(N)]                     # chunks rank r holds fully reduced
    while not all(len(d) == N for d in done):
        msgs = [(r, (r + 1 - k) % N) for r in range(N) for k in [steps - (N - 1)]]
        for r, c in msgs:
            assert c in done[r]
            done[(r + 1) % N].add(c)
        steps += 1
    return steps


def tree_steps(N):
    """Binomial-tree all-reduce, simulated: in reduce round k a rank whose index has bit k set (and no lower
    bit) sends its partial sum to the rank 2^k below; then the broadcast runs the rounds in reverse."""
    full = (1 << N) - 1
    have = [1 << r for r in range(N)]
    k = steps = 0
    while have[0] != full:
        for r in range(N):
            if r % (2 << k) == (1 << k):
                have[r - (1 << k)] |= have[r]
        k += 1
        steps += 1
    got = [r == 0 for r in range(N)]
    while not all(got):
        k -= 1
        for r in range(N):
            if got[r] and r % (2 << k) == 0 and r + (1 << k) < N:
                got[r + (1 << k)] = True
        steps += 1
    return steps


if __name__ == "__main__":
    sizes = given("sizes", [8 * 8**k for k in range(8)], unit="B")
    inner = given("inner", 10)
    repeats = given("repeats", 12)   # at least 10 also when nudged: the bootstrap needs 10
    S_small = given("S_small", 65536, unit="B")
    S_large = given("S_large", 4194304, unit="B")
    F = given("F", 10, nudge=0.5)     # 11 or 9 leave no dip between the first crossing and the last
    N_big = given("N_big", 1024)
    outs = run_group(worker, 4, sizes, inner, repeats, [S_small, S_large], timeout_s=240)
    r0 = outs[0]
    m = np.array(r0["sent"], dtype=float)
    why = "read back from the tensors sent; the list of sizes of Given is not nudged"
    value("m_min", int(m[0]), unit="B", fixed=why)
    value("m_max_mib", m[-1] / 2**20, unit="MiB", fixed=why)
    value("n_sizes", len(m), fixed=why)
    value("N2", 2, fixed="the group of ranks 0 and 1 made with dist.new_group")
    value("N4", len(outs), fixed="the world size of the process group, 4 as the header's processes=4 allows")
    sanity("sizes_sent", [int(x) for x in m] == sizes, "each message's bytes, read off the tensor sent, are the "
           "sizes of Given", operands=(int(m[-1]), sizes[-1]), relation="equal")

    # -- 1. the fit, per repeat ----------------------------------------------------------------------------
    alphas, betas, worst, ab = [], [], [], []
    t_all = np.array(r0["pp"])                                   # repeats x sizes, seconds one way
    for t in t_all:
        a, b, res = fit(m, t)
        alphas.append(a * 1e6)
        betas.append(b / 1e9)
        worst.append(float(np.abs(res).max()))
        ab.append(a * b / 1e3)
    n_pp = repeats * inner * len(sizes)
    how = (f"one-way time of a ping-pong between two gloo workers over loopback (half the shortest of {inner} "
           f"round trips per size), {len(sizes)} sizes, fitted per repeat")
    e_alpha = estimate("alpha_us", alphas, unit="us", n=n_pp, repeated="repeats", method="bootstrap",
                       measured="alpha, " + how)
    e_beta = estimate("beta_gbs", betas, unit="GB/s", n=n_pp, repeated="repeats", method="bootstrap",
                      measured="beta, " + how)
    e_ab = estimate("alpha_beta_kb", ab, unit="kB", n=n_pp, repeated="repeats", method="bootstrap",
                    measured="alpha times beta, the message size whose transfer takes alpha; " + how)
    e_res = estimate("max_rel_resid", worst, n=n_pp, repeated="repeats", method="bootstrap",
                     measured="the largest relative residual of the fit over the sizes; " + how)
    t_med = np.median(t_all, axis=0)
    print(f"Ping-pong over loopback, ranks 0 and 1 of a gloo group of {len(outs)} ({repeats} repeats, "
          f"{inner} round trips per size):")
    print(f"  {'message':>10} {'one way (median of repeats)':>28} {'fit':>10} {'residual':>9}")
    a_mean, b_mean = float(np.median(alphas)) * 1e-6, float(np.median(betas)) * 1e9
    for mi, ti in zip(m, t_med, strict=True):
        tf = a_mean + mi / b_mean
        print(f"  {int(mi):>10,} B {ti * 1e6:>24.1f} us {tf * 1e6:>7.1f} us {(tf - ti) / ti:>+9.2f}")
    print(f"median alpha = {e_alpha:.1f} us ({e_alpha.lo:.1f} to {e_alpha.hi:.1f}), beta = {e_beta:.2f} GB/s "
          f"({e_beta.lo:.2f} to {e_beta.hi:.2f}); alpha*beta = {e_ab:.1f} kB; "
          f"largest relative residual {e_res:.2f} ({e_res.lo:.2f} to {e_res.hi:.2f})")
    print(f"over the repeats, min to max: alpha {min(alphas):.1f} to {max(alphas):.1f} us, beta {min(betas):.2f} to "
          f"{max(betas):.2f} GB/s, alpha*beta {min(ab):.1f} to {max(ab):.1f} kB, largest residual {min(worst):.2f} to "
          f"{max(worst):.2f}")

    # -- 2. the ring's prediction against gloo's all_reduce ------------------------------------------------
    print("\nall_reduce, gloo, against the ring model's time from each repeat's alpha and beta:")
    print(f"  {'N':>3} {'S':>12} {'measured':>12} {'predicted':>12} {'ratio':>7}")
    for N, key in ((2, "ar2"), (4, "ar4")):
        for j, (S, tag) in enumerate(((S_small, "small"), (S_large, "large"))):
            meas = [row[j] for row in r0[key]]
            pred = [2 * (N - 1) * (a * 1e-6 + S / (N * b * 1e9)) for a, b in zip(alphas, betas, strict=True)]
            ratio = estimate(f"ratio_{tag}_n{N}", [x / p for x, p in zip(meas, pred, strict=True)], n=repeats * inner,
                             repeated="repeats", method="bootstrap",
                             measured=f"gloo all_reduce of {S} bytes on {N} workers (rank 0's shortest of {inner}) "
                                      "over"
                                      " the ring model's time from the same repeat's alpha and beta")
            e_t = estimate(f"t_{tag}_n{N}_ms", [x * 1e3 for x in meas], unit="ms", n=repeats * inner,
                           repeated="repeats", method="bootstrap",
                           measured=f"gloo all_reduce of {S} bytes on {N} workers, rank 0's "
                                                        f"shortest of {inner}")
            value(f"ring_bytes_{tag}_n{N}", 2 * (N - 1) * S // N, unit="B")
            rs = [x / p for x, p in zip(meas, pred, strict=True)]
            print(f"  {N:>3} {S:>10,} B {e_t:>9.3f} ms {np.median(pred) * 1e3:>9.3f} ms {ratio:>7.2f} "
                  f"(repeats {min(rs):.2f} to {max(rs):.2f})")

    # -- 3. latency terms: ring against binomial tree, steps counted on simulated schedules -----------------
    def L(N):
        return math.ceil(math.log2(N))

    sim_N = sorted(set(list(range(2, 65)) + [2**k for k in range(7, 11)] + [96, 100, 127, 129, 1000, N_big]))
    ring = {N: ring_steps(N) for N in sim_N}
    tree = {N: tree_steps(N) for N in sim_N}
    sanity("ring_formula", all(ring[N] == 2 * (N - 1) for N in sim_N),
           "the simulated ring all-reduce takes exactly 2(N-1) steps at every N simulated",
           operands=(ring[N_big], 2 * (N_big - 1)), relation="equal")
    sanity("tree_formula", all(tree[N] == 2 * L(N) for N in sim_N),
           "the simulated binomial tree takes exactly 2 ceil(log2 N) steps at every N simulated",
           operands=(tree[N_big], 2 * L(N_big)), relation="equal")
    value("n_simulated", len(sim_N))
    value("ring_steps_big", ring[N_big])
    value("tree_steps_big", tree[N_big])
    value("step_ratio_big", ring[N_big] / tree[N_big])
    N8 = value("N8", 8, fixed="an example N of the text")
    value("ring_steps_8", ring[N8], fixed="the ring's steps at N = 8, an example N of the text")
    value("tree_steps_8", tree[N8], fixed="the tree's steps at N = 8, an example N of the text")
    sanity("small_n_short", tree[N8] < ring[N8] < F * tree[N8],
           "at N = 8 the tree takes fewer steps than the ring, but not F times fewer: short of F",
           operands=(ring[N8] / tree[N8], F), relation="smaller")
    # first N where the tree's latency term is F times smaller; then where it stays so
    def tree_f_fewer(N):                                          # the tree takes F times fewer steps
        return F * 2 * L(N) <= 2 * (N - 1)

    first = next(N for N in range(2, 1 << 20) if tree_f_fewer(N))
    stays = next(N for N in range(first, 1 << 20) if all(tree_f_fewer(M) for M in range(N, 4 * N)))
    dip = next(N for N in range(first, stays) if not tree_f_fewer(N))
    for N in (first - 1, first, dip, stays - 1, stays):            # the crossing points, simulated exactly
        ring[N], tree[N] = ring_steps(N), tree_steps(N)
    sanity("first_exact", ring[first] >= F * tree[first] and ring[first - 1] < F * tree[first - 1],
           f"at N = {first} the ring takes at least F times the tree's steps, at N = {first - 1} fewer",
           operands=(ring[first], F * tree[first]), relation=("at least", "smaller"))
    sanity("dip_exact", ring[dip] < F * tree[dip] and ring[stays - 1] < F * tree[stays - 1]
           and ring[stays] >= F * tree[stays],
           "past the first crossing the ratio falls below F again where ceil(log2 N) steps up",
           operands=(ring[dip], F * tree[dip]), relation="smaller")
    value("N_first", first)
    STEP_COUNT = ("a step count of the simulated schedules at an N read off the ratio's steps: an integer that "
                  "small changes of F leave where it is")
    value("N_dip", dip, fixed=STEP_COUNT)
    value("N_stays", stays)
    value("ring_first", ring[first])
    value("tree_first", tree[first], fixed=STEP_COUNT)
    value("ring_dip", ring[dip], fixed=STEP_COUNT)
    value("tree_dip", tree[dip], fixed=STEP_COUNT)
    print(f"\nSteps, simulated at {len(sim_N)} values of N ({sim_N[0]} to {sim_N[62]}, then {sim_N[63:]}): "
          "the ring's equal twice (N-1), "
          f"the binomial tree's twice ceil(log2 N), at every one. N = {N_big}: ring {ring[N_big]}, tree {tree[N_big]}.")
    print(f"The tree's step count is {F} times smaller first at N = {first} (ring {ring[first]}, tree {tree[first]}), "
          f"no longer at N = {dip} (ring {ring[dip]}, tree {tree[dip]}), and from N = {stays} on.")

    # -- 4. when bandwidth dominates ----------------------------------------------------------------------
    # ring: latency term 2(N-1) alpha equals bandwidth term 2(N-1) S/(N beta) at S = N alpha beta
    # ring against (unpipelined) binomial tree: 2(N-1)(a + S/(N b)) = 2L(a + S/b) at S* below
    Lb = L(N_big)
    n4 = len(outs)
    be4 = estimate("S_half_n4_kb", [n4 * x for x in ab], unit="kB", n=n_pp, repeated="repeats", method="bootstrap",
                   measured="N alpha beta at N = 4: the all-reduce size whose ring bandwidth term equals its latency "
                            "term, from each repeat's fit")
    cross = [x * 1e3 * (N_big - 1 - Lb) / (Lb - (N_big - 1) / N_big) / 1e6 for x in ab]
    e_cross = estimate("S_cross_mb", cross, unit="MB", n=n_pp, repeated="repeats", method="bootstrap",
                       measured=f"the all-reduce size above which the ring is faster than the binomial tree at N = "
                                f"{N_big}, from each repeat's alpha and beta")
    value("cross_factor", (N_big - 1 - Lb) / (Lb - (N_big - 1) / N_big))
    print(f"Ring bandwidth term equals its latency term at S = N alpha beta: {be4:.0f} kB at N = {n4} "
          f"({be4.lo:.0f} to {be4.hi:.0f}). At N = {N_big} the ring beats the binomial tree above "
          f"{e_cross:.1f} MB ({e_cross.lo:.1f} to {e_cross.hi:.1f}).")
