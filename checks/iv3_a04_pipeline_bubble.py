# numbook: processes=4, timeout=360
"""IV.3.A04 — The pipeline bubble of GPipe and 1F1B, measured.

A real pipeline of p = 4 stages, one gloo worker per stage, each stage a few Linear + ReLU layers with real
autograd: activations go forward with dist.isend/recv, gradients come back the same way. Two schedules: GPipe
(all m forwards, then all m backwards) and 1F1B (PipeDream-Flush: p - 1 - rank warm-up forwards, then one
forward and one backward in turn, then the cool-down backwards). The gradients of both are compared with each
other and with the unpipelined model.

The bubble: an exact event simulation of both schedules gives the idle fraction (p - 1)/(m + p - 1). The
measured run gives each operation a fixed slot of wall time (a forward F ms, a backward 2F ms): the real matrix
products run inside it and the stage then waits out the slot, as a stage with a device of its own would be busy
for that time. Four stages share two cores here, so the raw compute time of an operation measures the CPU's
time slicing, not the schedule; the slot makes each stage's busy time a property of the stage again. The
timestamps (time.perf_counter, CLOCK_MONOTONIC, one clock for all processes on the machine) give each stage's
busy time and the run's span, first start to last end; the bubble is idle over span, averaged over stages.

Activation memory in flight: every tensor autograd saves is registered (saved_tensors_hooks) with a weak
reference; after every operation each stage sums the bytes of the saved storages still alive.
"""

import time
import weakref
from fractions import Fraction

import torch
import torch.distributed as dist
import torch.nn as nn

from numbook.check import estimate, given, run_group, sanity, value


def make_stage(rank, d, L, seed):
    torch.manual_seed(seed + rank)
    return nn.Sequential(*[m for _ in range(L) for m in (nn.Linear(d, d), nn.ReLU())])


def batch(j, b, d, seed):
    """Micro-batch j's input and the gradient the loss sends into the last stage's output (drawn on demand,
    as a data loader hands a micro-batch over: nothing keeps it once its backward pass is done)."""
    g = torch.Generator().manual_seed(1000 * seed + j)
    return torch.randn(b, d, generator=g), torch.randn(b, d, generator=g)


def schedule(kind, rank, p, m):
    """The ordered operations of one stage: ('F', j) or ('B', j)."""
    if kind == "gpipe":
        return [("F", j) for j in range(m)] + [("B", j) for j in range(m)]
    warm = min(p - 1 - rank, m)
    ops = [("F", j) for j in range(warm)]
    for i in range(m - warm):
        ops += [("F", warm + i), ("B", i)]
    return ops + [("B", j) for j in range(m - warm, m)]


def simulate(kind, p, m, tf, tb):
    """Exact event simulation: every stage runs its operations in order, each as soon as its stage is free and
    its input has arrived (no transfer time). Returns the span, each stage's busy time and its most
    micro-batches in flight."""
    ops = [schedule(kind, r, p, m) for r in range(p)]
    done, free, pos = {}, [Fraction(0)] * p, [0] * p
    inflight, peak = [0] * p, [0] * p
    while any(pos[r] < len(ops[r]) for r in range(p)):
        moved = False
        for r in range(p):
            if pos[r] == len(ops[r]):
                continue
            op, j = ops[r][pos[r]]
            dep = ((r - 1, "F", j) if r > 0 else None) if op == "F" else \
                ((r + 1, "B", j) if r < p - 1 else (r, "F", j))
            if dep is not None and dep not in done:
                continue
            start = max(free[r], done[dep] if dep else Fraction(0))
            free[r] = done[(r, op, j)] = start + (tf if op == "F" else tb)
            inflight[r] += 1 if op == "F" else -1
            peak[r] = max(peak[r], inflight[r])
            pos[r] += 1
            moved = True
        assert moved, "deadlock"
    span = max(free)
    return span, [m * (tf + tb)] * p, peak


def worker(rank, p, ms, b, d, L, seed, slot_f_ms, repeats):
    stage = make_stage(rank, d, L, seed)
    params = {q.untyped_storage().data_ptr() for q in stage.parameters()}
    slot = {"F": slot_f_ms / 1e3, "B": 2 * slot_f_ms / 1e3}
    out = {"runs": {}, "grads": {}, "peak": {}, "per_mb": {}, "compute_max_ms": 0.0}
    reg = []                                       # (weak reference to a saved tensor, its storage, bytes)

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in params:
            reg.append((weakref.ref(t), st.data_ptr(), st.nbytes()))
        return t

    def alive():
        reg[:] = [e for e in reg if e[0]() is not None]
        return sum({ptr: n for _, ptr, n in reg}.values())

    def run(kind, m, timed):
        stage.zero_grad(set_to_none=True)
        keep, sends, stamps, peak = {}, [], [], 0
        dist.barrier()
        for op, j in schedule(kind, rank, p, m):
            if op == "F":
                if rank == 0:
                    x = batch(j, b, d, seed)[0]
                else:
                    x = torch.empty(b, d)
                    dist.recv(x, rank - 1)
                    x.requires_grad_()
                t0, c0 = time.perf_counter(), time.thread_time()
                with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                    y = stage(x)
                keep[j] = (x, y)
            else:
                if rank == p - 1:
                    gy = batch(j, b, d, seed)[1]
                else:
                    gy = torch.empty(b, d)
                    dist.recv(gy, rank + 1)
                t0, c0 = time.perf_counter(), time.thread_time()
                x, y = keep.pop(j)
                y.backward(gy)
                gx = x.grad if rank > 0 else None
                del x, y
            out["compute_max_ms"] = max(out["compute_max_ms"], (time.thread_time() - c0) * 1e3)
            if timed:                                  # wait out the slot: the stage is busy for exactly that long
                while (left := t0 + slot[op] - time.perf_counter()) > 0:
                    time.sleep(left)
            stamps.append((op, t0, time.perf_counter()))
            if op == "F":
                peak = max(peak, alive())
                if rank < p - 1:
                    buf = keep[j][1].detach()          # the same storage; not the saved tensor object
                    sends.append((dist.isend(buf, rank + 1), buf))
            else:
                if rank > 0:
                    sends.append((dist.isend(gx, rank - 1), gx))
                    del gx
        for w, _ in sends:
            w.wait()
        return stamps, peak, alive()

    # the bytes one micro-batch saves, alone
    reg.clear()
    x = batch(0, b, d, seed)[0].requires_grad_(rank > 0)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = stage(x)
    out["per_mb"] = alive()
    y.backward(torch.zeros_like(y))   # frees the graph: y and its graph hold each other through the saved ReLU
    del x, y                          # output (y itself), a cycle the garbage collector does not see
    assert alive() == 0
    for kind in ("gpipe", "1f1b"):
        for m in ms:
            _, peak, left = run(kind, m, timed=False)    # untimed: gradients and memory
            out["grads"][(kind, m)] = [q.grad.numpy().copy() for q in stage.parameters()]
            out["peak"][(kind, m)] = (peak, left)
    for r in range(repeats):                               # timed, the schedules interleaved
        for m in ms:
            for kind in (("gpipe", "1f1b") if r % 2 == 0 else ("1f1b", "gpipe")):
                stamps, _, _ = run(kind, m, timed=True)
                out["runs"].setdefault((kind, m), []).append(stamps)
    return out


if __name__ == "__main__":
    p = given("p", 4, nudge=0)
    m1 = given("m1", 4)
    m2 = given("m2", 8)
    m3 = given("m3", 16)
    b = given("b", 8)
    d = given("d", 128)
    L = given("L", 2)
    seed = given("seed", 0, nudge=0)
    slot_f = given("slot_f_ms", 4.0, unit="ms")
    repeats = given("repeats", 10)
    ms = (m1, m2, m3)
    HELD = {}

    def holds(name, cond, message, operands, relation=None):
        """A property checked for every m and schedule: one sanity over all of them."""
        prev = HELD.get(name, (True,))
        HELD[name] = (prev[0] and bool(cond), message, prev[2] if len(prev) > 1 else operands, relation)
    print(f"Pipeline: p = {p} stages, each {L} x (Linear({d}, {d}) + ReLU); micro-batches of b = {b}; "
          f"m = {ms}. Slots: forward {slot_f} ms, backward {2 * slot_f} ms.")

    # ---- the backbone: the exact schedule simulation --------------------------------------------------
    tf, tb = Fraction(slot_f).limit_denominator(1000), 2 * Fraction(slot_f).limit_denominator(1000)
    print("\nExact simulation (no transfer time): bubble = idle / span, every stage alike")
    print(f"  {'m':>3} {'schedule':<8}{'span ms':>9}{'bubble':>9}{'(p-1)/(m+p-1)':>15}  peak in flight per stage")
    sim = {}
    for i, m in enumerate(ms, 1):      # values named by the place of m in Given
        theory = Fraction(p - 1, m + p - 1)
        value(f"theory_m{i}", float(theory))
        for kind in ("gpipe", "1f1b"):
            span, busy, peak = simulate(kind, p, m, tf, tb)
            bub = [1 - bz / span for bz in busy]
            print(f"  {m:>3} {kind:<8}{float(span):>9.1f}{float(bub[0]):>9.4f}{float(theory):>15.4f}  {peak}")
            value(f"sim_span_{kind}_m{i}", float(span), unit="ms")
            sim[(kind, m)] = float(span)
            holds("sim_bubble", all(x == theory for x in bub) and span == (m + p - 1) * (tf + tb),
                   "for both schedules and every m, the simulated bubble of every stage is exactly (p-1)/(m+p-1)",
                   operands=(float(bub[0]), float(theory)), relation="equal")
            want = [m] * p if kind == "gpipe" else [min(m, p - r) for r in range(p)]
            holds("sim_peak", peak == want,
                   "GPipe keeps m micro-batches in flight at every stage, 1F1B at most p - rank",
                   operands=(peak[0], want[0]), relation="equal")

    # the Variation: twice the largest m, simulated; the m that brings the bubble under 5%
    m_var = value("m_var", 2 * m3)
    span_v, busy_v, peak_v = simulate("1f1b", p, m_var, tf, tb)
    bub_v = value("sim_bubble_var", float(1 - busy_v[0] / span_v))
    value("sim_peak_var_r0", peak_v[0], fixed="p - rank at stage 0: depends on p alone, which is not nudged")
    sanity("var_formula", bub_v == (p - 1) / (m_var + p - 1) and peak_v == [min(m_var, p - r) for r in range(p)],
           "1F1B at twice the largest m: the bubble is (p-1)/(m+p-1) and stage 0 still holds p micro-batches",
           operands=(bub_v, (p - 1) / (m_var + p - 1)), relation="equal")
    target = Fraction(5, 100)
    m_5 = value("m_5pct", next(m for m in range(1, 10_000) if Fraction(p - 1, m + p - 1) < target),
                fixed="depends on p alone, the number of stages, which is not nudged")
    sanity("m_5pct_closed", Fraction(p - 1, m_5 + p - 1) < target <= Fraction(p - 1, m_5 + p - 2),
           "the first m whose bubble is below 5%", operands=(float(Fraction(p - 1, m_5 + p - 1)), float(target)),
           relation="smaller")

    outs = run_group(worker, p, ms, b, d, L, seed, slot_f, repeats, timeout_s=240)

    # ---- gradients: both schedules against each other and against the unpipelined model ----------------
    stages = [make_stage(r, d, L, seed) for r in range(p)]
    model = nn.Sequential(*stages)
    worst = 0.0
    for m in ms:
        model.zero_grad(set_to_none=True)
        for j in range(m):
            x, gy = batch(j, b, d, seed)
            model(x).backward(gy)
        ref = [q.grad for st in stages for q in st.parameters()]
        got = {k: [torch.from_numpy(g) for o in outs for g in o["grads"][(k, m)]] for k in ("gpipe", "1f1b")}
        same = all(torch.equal(a, c) for a, c in zip(got["gpipe"], got["1f1b"], strict=True))
        diff = max((a - c).abs().max().item() for a, c in zip(got["gpipe"], ref, strict=True))
        worst = max(worst, diff)
        holds("grads", same and diff < 1e-5,
               "for every m, GPipe and 1F1B give bit-identical gradients, equal to the unpipelined model's within 1e-5",
               operands=(diff, 1e-5), relation="equal")
    value("grad_maxdiff", worst)
    value("n_params", sum(q.numel() for q in model.parameters()))

    # ---- activation memory in flight -------------------------------------------------------------------
    per_mb = [o["per_mb"] for o in outs]
    value("per_mb_bytes", per_mb[0], unit="B")
    sanity("per_mb_formula", all(x == (L + 1) * b * d * 4 for x in per_mb),
           "each stage saves L + 1 tensors of b x d fp32 per micro-batch: its input and each ReLU's output",
           operands=(per_mb[0], (L + 1) * b * d * 4), relation="equal")
    print(f"\nSaved for backward per micro-batch and stage: {per_mb[0]:,} bytes. Peak alive, bytes (micro-batches):")
    for i, m in enumerate(ms, 1):      # values named by the place of m in Given
        for kind in ("gpipe", "1f1b"):
            peaks = [o["peak"][(kind, m)][0] for o in outs]
            left = [o["peak"][(kind, m)][1] for o in outs]
            want = [m] * p if kind == "gpipe" else [min(m, p - r) for r in range(p)]
            print(f"  m = {m:>2} {kind:<6}" + "".join(f"{x:>9,} ({x // per_mb[r]:>2})" for r, x in enumerate(peaks)))
            for r in range(p):
                value(f"peak_{kind}_m{i}_r{r}", peaks[r], unit="B")
                value(f"peakmb_{kind}_m{i}_r{r}", peaks[r] // per_mb[r],
                      fixed="p - rank: depends on p alone, which is not nudged" if kind == "1f1b" else None)
            holds("peak_alive", all(peaks[r] == want[r] * per_mb[r] for r in range(p)) and not any(left),
                   "the saved bytes alive at each stage's peak are exactly m micro-batches' worth under GPipe, "
                  "p - rank under 1F1B, "
                   "and none is left after the last backward", operands=(peaks[0], want[0] * per_mb[0]),
                   relation="equal")
        value(f"mem_ratio_r0_m{i}", outs[0]["peak"][("gpipe", m)][0] / outs[0]["peak"][("1f1b", m)][0])

    # ---- the measured bubble ---------------------------------------------------------------------------
    print(f"\nMeasured over {repeats} repeats (one repeat: one timed run of the schedule); bubble = mean over stages "
          "of 1 - busy / span")
    print(f"  {'m':>3} {'schedule':<8}{'span ms':>9}{'bubble':>9}   interval   {'(p-1)/(m+p-1)':>16}")
    value("compute_max_ms", max(o["compute_max_ms"] for o in outs), unit="ms", measured="thread CPU time")
    lo_runs, kinds_seen = [], []
    for i, m in enumerate(ms, 1):      # values named by the place of m in Given
        theory = (p - 1) / (m + p - 1)
        for kind in ("gpipe", "1f1b"):
            per_rep, spans = [], []
            for k in range(repeats):
                st = [o["runs"][(kind, m)][k] for o in outs]
                t_first = min(s[1] for stamps in st for s in stamps)
                t_last = max(s[2] for stamps in st for s in stamps)
                span = t_last - t_first
                busy = [sum(e - s0 for _, s0, e in stamps) for stamps in st]
                per_rep.append(sum(1 - bz / span for bz in busy) / p)
                spans.append(span * 1e3)
            e = estimate(f"bubble_{kind}_m{i}", per_rep, n=repeats * p, repeated="runs", method="bootstrap",
                         measured=f"{kind}, m = {m}: idle over span, averaged over the {p} stages, per timed run")
            es = estimate(f"span_{kind}_m{i}", spans, unit="ms", n=repeats, repeated="runs", method="bootstrap",
                          measured=f"{kind}, m = {m}: first start to last end of the timed run")
            print(f"  {m:>3} {kind:<8}{es:>9.1f}{e:>9.3f}   {e.lo:.3f}-{e.hi:.3f}{theory:>16.3f}")
            kinds_seen.append(e.kind)
            lo_runs.append(min(per_rep) - theory)
            holds("measured", float(e) >= theory - 0.02 and float(es) >= sim[(kind, m)] * 0.98,
                  "for both schedules and every m, the measured bubble is at least (p-1)/(m+p-1), to within 0.02, "
                  "and the measured span at least the simulated one, to within 2%", operands=(float(e), theory),
                  relation="at least")
    print(f"  (interval: {kinds_seen[0]})")
    value("lowest_run_excess", min(lo_runs), measured="the lowest single run's bubble minus (p-1)/(m+p-1)")
    for name, (ok, message, operands, relation) in HELD.items():
        sanity(name, ok, message, operands=operands, relation=relation)
