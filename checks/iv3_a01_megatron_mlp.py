# numbook: processes=6, timeout=300
"""IV.3.A01 — A Megatron-style MLP split across ranks.

The MLP Y = GeLU(X A) B of Shoeybi et al. (2019), section 3, split over t gloo workers: A by columns (each
rank holds d x 4d/t), GeLU on each rank's own columns, B by rows (4d/t x d), and two operators written as
torch.autograd.Function: f (identity forward, all-reduce of the input gradient backward) and g (all-reduce of
the output forward, identity backward). Real autograd on t = 2 and t = 4 ranks, compared with the unsharded
MLP in one process, in fp32 and fp64; every collective the workers call is counted with its bytes. Then the
split the other way round (A by rows, B by columns), whose collectives are counted the same way.
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F

from numbook.check import given, run_group, sanity, value

# -- the workers: every collective goes through these two wrappers, which count it -------------------------
LOG = []            # (kind, phase, bytes of the full result)
PHASE = ["forward"]


def all_reduce(x):
    LOG.append(("all_reduce", PHASE[0], x.numel() * x.element_size()))
    dist.all_reduce(x)
    return x


def all_gather_last(x, world):
    """Concatenate each rank's x along the last dimension (what a column-split output needs)."""
    parts = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(parts, x.contiguous())
    out = torch.cat(parts, dim=-1)
    LOG.append(("all_gather", PHASE[0], out.numel() * out.element_size()))
    return out


class F_op(torch.autograd.Function):
    """Megatron's f: identity forward, all-reduce of the gradient backward."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return all_reduce(g.clone())


class G_op(torch.autograd.Function):
    """Megatron's g: all-reduce forward, identity backward."""

    @staticmethod
    def forward(ctx, x):
        return all_reduce(x.clone())

    @staticmethod
    def backward(ctx, g):
        return g


class Split(torch.autograd.Function):
    """Take this rank's slice of the last dimension forward; all-gather the gradient backward."""

    @staticmethod
    def forward(ctx, x, rank, world):
        ctx.world = world
        n = x.shape[-1] // world
        return x[..., rank * n:(rank + 1) * n].clone()

    @staticmethod
    def backward(ctx, g):
        return all_gather_last(g, ctx.world), None, None


class Gather(torch.autograd.Function):
    """All-gather along the last dimension forward; take this rank's slice of the gradient backward."""

    @staticmethod
    def forward(ctx, x, rank, world):
        ctx.rank, ctx.world, ctx.n = rank, world, x.shape[-1]
        return all_gather_last(x, world)

    @staticmethod
    def backward(ctx, g):
        return g[..., ctx.rank * ctx.n:(ctx.rank + 1) * ctx.n].clone(), None, None


def tensors(b, s, d, seed, dtype):
    """The full weights, the input and the output gradient, drawn alike in every process."""
    gen = torch.Generator().manual_seed(seed)
    A = torch.randn(d, 4 * d, generator=gen) / d ** 0.5
    B = torch.randn(4 * d, d, generator=gen) / (4 * d) ** 0.5
    X = torch.randn(b, s, d, generator=gen)
    dY = torch.randn(b, s, d, generator=gen)
    return (u.to(dtype) for u in (A, B, X, dY))


def run_mlp(rank, world, b, s, d, seed, dtype, order):
    A, B, X, dY = tensors(b, s, d, seed, dtype)
    n = 4 * d // world
    if order == "megatron":                      # A by columns, B by rows
        A_i = A[:, rank * n:(rank + 1) * n].clone().requires_grad_()
        B_i = B[rank * n:(rank + 1) * n, :].clone().requires_grad_()
    else:                                        # reversed: A by rows, B by columns
        m = d // world
        A_i = A[rank * m:(rank + 1) * m, :].clone().requires_grad_()
        B_i = B[:, rank * m:(rank + 1) * m].clone().requires_grad_()
    x = X.clone().requires_grad_()
    LOG.clear()
    PHASE[0] = "forward"
    if order == "megatron":
        y = G_op.apply(F.gelu(F_op.apply(x) @ A_i) @ B_i)
    else:
        z = G_op.apply(Split.apply(x, rank, world) @ A_i)     # partial sums of X A: summed before the GeLU
        y = Gather.apply(F_op.apply(F.gelu(z)) @ B_i, rank, world)
    PHASE[0] = "backward"
    y.backward(dY)
    # plain numpy arrays go back to the main process (a tensor would travel as shared memory)
    return {"y": y.detach().numpy(), "dx": x.grad.numpy(), "dA": A_i.grad.numpy(), "dB": B_i.grad.numpy(),
            "log": list(LOG),
            "weight_bytes": A_i.nbytes + B_i.nbytes}


def worker(rank, world, b, s, d, seed):
    out = {}
    for order in ("megatron", "reversed"):
        for dtype in (torch.float32, torch.float64):
            out[(order, str(dtype))] = run_mlp(rank, world, b, s, d, seed, dtype, order)
    return out


def reference(b, s, d, seed, dtype):
    A, B, X, dY = tensors(b, s, d, seed, dtype)
    A.requires_grad_()
    B.requires_grad_()
    X.requires_grad_()
    Y = F.gelu(X @ A) @ B
    Y.backward(dY)
    return {"y": Y.detach(), "dx": X.grad, "dA": A.grad, "dB": B.grad, "weight_bytes": A.nbytes + B.nbytes}


def counts(log, kind, phase):
    return [nb for k, p, nb in log if k == kind and p == phase]


if __name__ == "__main__":
    b = given("b", 2)
    s = given("s", 16)
    d = given("d", 64, nudge=8)   # by 8: the 4d hidden columns split evenly over t
    seed = given("seed", 0, nudge=0)
    t_small = given("t_small", 2, nudge=0)   # world sizes: 4d/t must be whole, and the header caps the workers
    t_large = given("t_large", 4, nudge=0)

    ref = {dt: reference(b, s, d, seed, dt) for dt in (torch.float32, torch.float64)}
    results = {t: run_group(worker, t, b, s, d, seed, timeout_s=200) for t in (t_small, t_large)}
    elem = torch.finfo(torch.float32).bits // 8
    act_bytes = value("act_bytes", b * s * d * elem, unit="B")
    value("bsd", b * s * d)
    value("hidden", 4 * d)
    value("hidden_per_rank", 4 * d // t_large)
    value("hidden_per_rank_t2", 4 * d // t_small)
    value("elem_bytes", elem, unit="B", fixed="bytes of an fp32 element: a property of the dtype")

    print(f"MLP d = {d} -> {4 * d} -> {d}, X of {b} x {s} x {d}; fp32 and fp64; t = {t_small} and {t_large} "
          "gloo workers")
    print(f"{'t':>2} {'order':<9} {'dtype':<8} {'max|dy|':>9} {'max|dx|':>9} {'max|dA|':>9} {'max|dB|':>9}")
    diffs = {}
    for t, outs in results.items():
        for order in ("megatron", "reversed"):
            for dt in (torch.float32, torch.float64):
                r = ref[dt]
                o = [{k: torch.from_numpy(v) if k in ("y", "dx", "dA", "dB") else v
                      for k, v in out[(order, str(dt))].items()} for out in outs]
                if order == "megatron":
                    dA = torch.cat([x["dA"] for x in o], dim=1)
                    dB = torch.cat([x["dB"] for x in o], dim=0)
                else:
                    dA = torch.cat([x["dA"] for x in o], dim=0)
                    dB = torch.cat([x["dB"] for x in o], dim=1)
                dd = {"y": max((x["y"] - r["y"]).abs().max().item() for x in o),
                      "dx": max((x["dx"] - r["dx"]).abs().max().item() for x in o),
                      "dA": (dA - r["dA"]).abs().max().item(),
                      "dB": (dB - r["dB"]).abs().max().item()}
                # every rank holds the same y and the same dx, bit for bit
                dd["ranks_agree"] = all(torch.equal(x["y"], o[0]["y"]) and torch.equal(x["dx"], o[0]["dx"])
                                        for x in o)
                diffs[(t, order, dt)] = dd
                print(f"{t:>2} {order:<9} {str(dt)[6:]:<8} {dd['y']:9.2e} {dd['dx']:9.2e} {dd['dA']:9.2e} "
                      f"{dd['dB']:9.2e}")

    f32, f64 = torch.float32, torch.float64
    for t in (t_small, t_large):
        m32, m64 = diffs[(t, "megatron", f32)], diffs[(t, "megatron", f64)]
        worst32 = value(f"max32_t{t}", max(m32[k] for k in ("y", "dx", "dA", "dB")),
                        fixed=("zero on this CPU's kernels at t = 2, as the page says it can be: a kernel that splits "
                               "its sum where the two ranks do gives the same fp32 number") if t == 2 else None)
        worst64 = value(f"max64_t{t}", max(m64[k] for k in ("y", "dx", "dA", "dB")))
        value(f"y32_t{t}", m32["y"])
        value(f"dx32_t{t}", m32["dx"])
        sanity(f"close_t{t}", worst32 < 1e-5 and m32["ranks_agree"],
               f"on t = {t} the output, input gradient and weight gradients lie within 1e-5 of the unsharded MLP's "
               "in fp32, and every rank holds the same output and input gradient", operands=(worst32, 1e-5))
        sanity(f"fp64_t{t}", worst64 < 1e-13, f"on t = {t} the fp64 differences lie within 1e-13",
               operands=(worst64, 1e-13))
        rv32 = diffs[(t, "reversed", f32)]
        sanity(f"reversed_close_t{t}", max(rv32[k] for k in ("y", "dx", "dA", "dB")) < 1e-5,
               "the reversed split computes the same MLP", operands=(rv32["y"], 1e-5))
    y32_large = diffs[(t_large, "megatron", f32)]["y"]
    sanity("differs_large", y32_large > 0 and max(diffs[(t, "megatron", f64)]["y"] for t in (t_small, t_large)) > 0,
           "on t = 4 the fp32 output is not the unsharded one bit for bit, and in fp64 neither t gives it",
           operands=(y32_large, 0), relation="differs")
    # the cause, in one process: the full product against the sum of t partial products (what g computes)
    A, B, X, _ = tensors(b, s, d, seed, f32)
    H = F.gelu(X @ A)
    full = H @ B
    n = 4 * d // t_large
    parts = [H[..., i * n:(i + 1) * n] @ B[i * n:(i + 1) * n] for i in range(t_large)]
    summed = parts[0]
    for p in parts[1:]:
        summed = summed + p
    order_diff = value("order_diff", (summed - full).abs().max().item())
    y_dist = torch.from_numpy(results[t_large][0][("megatron", str(f32))]["y"])
    value("dist_vs_rank_order", (y_dist - summed).abs().max().item())
    value("y_max", full.abs().max().item())
    sanity("order_cause", 0 < order_diff < 1e-5,
           "the full product and the sum of its t partial products differ in fp32: the same numbers added in "
           "another order", operands=(order_diff, 0), relation="differs")

    # -- the collectives, counted -------------------------------------------------------------------------
    print("\nCollectives per forward + backward (bytes of each collective's full result):")
    for t in (t_small, t_large):
        for order in ("megatron", "reversed"):
            log = results[t][0][(order, str(f32))]["log"]
            logs_same = all(out[(order, str(f32))]["log"] == log for out in results[t])
            sanity(f"logs_same_{order}_t{t}", logs_same, "every rank calls the same collectives")
            desc = ", ".join(f"{k} {p} {nb:,} B" for k, p, nb in log)
            print(f"  t = {t}, {order}: {desc}")
    log = results[t_large][0][("megatron", str(f32))]["log"]
    FIX = "counted on the real group; the structure of the split, the same for every b, s, d and t"
    ar_fwd, ar_bwd = counts(log, "all_reduce", "forward"), counts(log, "all_reduce", "backward")
    value("ar_fwd", len(ar_fwd), fixed=FIX)
    value("ar_bwd", len(ar_bwd), fixed=FIX)
    value("ar_total", len(log), fixed=FIX)
    ar_bytes = value("ar_bytes", ar_fwd[0], unit="B")
    value("step_bytes", sum(nb for _, _, nb in log), unit="B")
    log2 = results[t_small][0][("megatron", str(f32))]["log"]
    sanity("megatron_two", len(ar_fwd) == 1 and len(ar_bwd) == 1 and len(log) == 2 and log2 == log,
           "the Megatron split calls one all-reduce forward and one backward, and nothing else, on t = 2 and 4",
           operands=(len(log), 2))
    sanity("ar_bytes_formula", all(nb == act_bytes for _, _, nb in log),
           "each all-reduce carries b s d fp32 elements", operands=(ar_bytes, act_bytes), relation="equal")

    rlog = results[t_large][0][("reversed", str(f32))]["log"]
    rv_ar = [nb for k, _, nb in rlog if k == "all_reduce"]
    rv_ag = [nb for k, _, nb in rlog if k == "all_gather"]
    value("rv_total", len(rlog), fixed=FIX)
    value("rv_ar", len(rv_ar), fixed=FIX)
    value("rv_ag", len(rv_ag), fixed=FIX)
    value("rv_ar_bytes", rv_ar[0], unit="B")
    value("rv_ag_bytes", rv_ag[0], unit="B")
    rv_bytes = value("rv_step_bytes", sum(nb for _, _, nb in rlog), unit="B")
    value("rv_over_megatron", rv_bytes / sum(nb for _, _, nb in log),
          fixed="(2 x 4 + 2) b s d over 2 b s d: a ratio of the two splits' structures, whatever b, s, d and t")
    value("rv_extra", len(rlog) - len(log), fixed=FIX)
    # what one rank sends on a ring: 2(t-1)/t of an all-reduce's size, (t-1)/t of an all-gather's full result
    def ring_sent(lg, t):
        return sum((2 if k == "all_reduce" else 1) * (t - 1) / t * nb for k, _, nb in lg)
    ring_ratio = {t: ring_sent(results[t][0][("reversed", str(f32))]["log"], t)
                  / ring_sent(results[t][0][("megatron", str(f32))]["log"], t) for t in (t_small, t_large)}
    value("ring_meg_t4", ring_sent(log, t_large), unit="B")
    value("ring_rv_t4", ring_sent(rlog, t_large), unit="B")
    value("ring_ag_factor_t4", (t_large - 1) / t_large,
          fixed="(t-1)/t at the stated t: the ring all-gather's factor, moved only by t")
    value("ring_ar_factor_t4", 2 * (t_large - 1) / t_large,
          fixed="2(t-1)/t at the stated t: the ring all-reduce's factor, moved only by t")
    rr = value("rv_ring_over_megatron", ring_ratio[t_large],
               fixed="(2 x 2 x 4 + 2) over 2 x 2: a ratio of the two splits' structures on a ring, whatever b, s, d, t")
    sanity("ring_ratio_any_t", abs(ring_ratio[t_small] - rr) < 1e-12 and rr < rv_bytes / sum(nb for _, _, nb in log),
           "on a ring the reversed split sends the same multiple of the Megatron split's bytes per rank on t = 2 and "
           "t = 4, less than the ratio of the result bytes (an all-gather moves half of what an all-reduce moves)",
           operands=(ring_ratio[t_small], rr), relation="equal")
    print(f"Sent per rank on a ring at t = {t_large}: Megatron {ring_sent(log, t_large):,.0f} B, reversed "
          f"{ring_sent(rlog, t_large):,.0f} B ({rr:.2f}x; result bytes {rv_bytes / sum(nb for _, _, nb in log):.2f}x)")
    sanity("reversed_more", len(rlog) > len(log) and rv_ar[0] == 4 * act_bytes and rv_ag[0] == act_bytes
           and len(rv_ar) == 2 and len(rv_ag) == 2,
           "the reversed split calls more collectives: two all-reduces of b s 4d elements (the partial sums before "
           "the GeLU, and the gradient of the replicated GeLU output) and two all-gathers of b s d",
           operands=(len(rlog), len(log)), relation="more")

    # -- the weights each rank holds -------------------------------------------------------------------------
    full_w = ref[f32]["weight_bytes"]
    value("full_weight_bytes", full_w, unit="B")
    for t in (t_small, t_large):
        wb = value(f"rank_weight_bytes_t{t}", results[t][0][("megatron", str(f32))]["weight_bytes"], unit="B")
        sanity(f"weights_split_t{t}", wb * t == full_w and
               all(out[("megatron", str(f32))]["weight_bytes"] == wb for out in results[t]),
               f"each of t = {t} ranks holds exactly 1/t of the weight bytes", operands=(wb * t, full_w),
               relation="equal")
    print(f"\nWeights: unsharded {full_w:,} B; per rank {full_w // t_small:,} B on t = {t_small}, "
          f"{full_w // t_large:,} B on t = {t_large}")
    print(f"The fp32 sum of {t_large} partial products in rank order against one product, in one process: "
          f"{order_diff:.2e}; the group's output against that sum: {float(y_dist.sub(summed).abs().max()):.2e}")

    # -- the Variation: twice the width on t_large --------------------------------------------------------------
    d_var = value("d_var", 2 * d)
    var_ar = value("var_ar_bytes", b * s * d_var * elem, unit="B")
    var_w = value("var_rank_weight_bytes", 2 * 4 * d_var * d_var * elem // t_large, unit="B")
    sanity("var_twice", var_ar == 2 * act_bytes, "at twice the width each all-reduce carries twice the bytes",
           operands=(var_ar, act_bytes), relation="twice")
    value("var_weight_ratio", var_w / results[t_large][0][("megatron", str(f32))]["weight_bytes"],
          fixed="(2d)^2 over d^2: the weights grow with the square of the width, whatever b, s, d and t")
