# numbook: processes=4, timeout=360
"""IV.3.A03 — Sequence parallelism: an all-reduce becomes a reduce-scatter and an all-gather.

A Megatron MLP block with its LayerNorm and dropout (y = x + dropout(fc2(gelu(fc1(LN(x)))))), fc1 split by
columns and fc2 by rows over t tensor-parallel ranks, run on real gloo process groups of t = 2 and t = 4 with
real autograd, twice: plain tensor parallelism (an all-reduce after fc2 in the forward pass, one before the
LayerNorm's gradient in the backward pass) and sequence parallelism (Korthikanti et al. 2022, section 4.2.2:
the LayerNorm and dropout work on s/t positions; an all-gather along the sequence before fc1, a reduce-scatter
after fc2). The outputs and gradients are compared with each other and with the unsharded block; every
collective is wrapped and its tensor bytes counted; the activations each rank saves for backward are counted
with saved_tensors_hooks, by storage, parameters left out.
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F

from numbook.check import fact, given, run_group, sanity, value

F32 = 4


def draw(s, b, h, p, seed):
    """The full block's parameters, input, upstream gradient and dropout mask, the same in every process."""
    g = torch.Generator().manual_seed(seed)
    f = 4 * h
    P = {
        "ln_w": 1 + 0.1 * torch.randn(h, generator=g), "ln_b": 0.1 * torch.randn(h, generator=g),
        "w1": torch.randn(f, h, generator=g) / h**0.5, "b1": 0.1 * torch.randn(f, generator=g),
        "w2": torch.randn(h, f, generator=g) / f**0.5, "b2": 0.1 * torch.randn(h, generator=g),
    }
    x = torch.randn(s, b, h, generator=g)
    G = torch.randn(s, b, h, generator=g)
    mask = torch.rand(s, b, h, generator=g) >= p
    return P, x, G, mask


def reference(s, b, h, p, seed):
    """The unsharded block on one process: output and gradients."""
    P, x, G, mask = draw(s, b, h, p, seed)
    P = {k: v.clone().requires_grad_() for k, v in P.items()}
    x = x.clone().requires_grad_()
    u = F.layer_norm(x, (h,), P["ln_w"], P["ln_b"])
    z = F.linear(F.gelu(F.linear(u, P["w1"], P["b1"])), P["w2"], P["b2"])
    y = x + z * mask / (1 - p)
    y.backward(G)
    return y.detach(), x.grad, {k: v.grad for k, v in P.items()}


# ---- the collectives, each wrapped so that its tensor bytes are counted --------------------------------
LOG = []          # (collective, pass, bytes of the full tensor S): all-reduce: the tensor; all-gather: its output;
PASS = ["fwd"]    # reduce-scatter: its input


def all_reduce(x, grp):
    LOG.append(("all-reduce", PASS[0], x.nbytes))
    dist.all_reduce(x, group=grp)
    return x


def all_gather(x, grp, t):
    parts = [torch.empty_like(x) for _ in range(t)]
    dist.all_gather(parts, x.contiguous(), group=grp)
    out = torch.cat(parts, dim=0)
    LOG.append(("all-gather", PASS[0], out.nbytes))
    return out


def reduce_scatter(x, grp, t):
    LOG.append(("reduce-scatter", PASS[0], x.nbytes))
    out = torch.empty_like(x.chunk(t, dim=0)[0])
    dist.reduce_scatter(out, [c.contiguous() for c in x.chunk(t, dim=0)], group=grp)
    return out


class CopyToTP(torch.autograd.Function):
    """Megatron's f: identity forward, all-reduce of the gradient backward."""

    @staticmethod
    def forward(ctx, x, grp):
        ctx.grp = grp
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return all_reduce(g.clone(), ctx.grp), None


class ReduceFromTP(torch.autograd.Function):
    """Megatron's g: all-reduce forward, identity backward."""

    @staticmethod
    def forward(ctx, x, grp):
        return all_reduce(x.clone(), grp)

    @staticmethod
    def backward(ctx, g):
        return g, None


class ReduceScatterToSP(torch.autograd.Function):
    """Sequence parallelism's g-bar: reduce-scatter along the sequence forward, all-gather backward."""

    @staticmethod
    def forward(ctx, x, grp, t):
        ctx.grp, ctx.t = grp, t
        return reduce_scatter(x, grp, t)

    @staticmethod
    def backward(ctx, g):
        return all_gather(g, ctx.grp, ctx.t), None, None


class GatherLinear(torch.autograd.Function):
    """Sequence parallelism's g fused with the column-parallel fc1, as Megatron-LM writes it
    (LinearWithGradAccumulationAndAsyncCommunication, sequence_parallel=True): all-gather the input along the
    sequence, save only this rank's slice, gather it again in backward for the weight gradient, and
    reduce-scatter the input gradient."""

    @staticmethod
    def forward(ctx, x_shard, w, bias, grp, t):
        ctx.grp, ctx.t = grp, t
        ctx.save_for_backward(x_shard, w)
        return F.linear(all_gather(x_shard, grp, t), w, bias)

    @staticmethod
    def backward(ctx, g):
        x_shard, w = ctx.saved_tensors
        total = all_gather(x_shard, ctx.grp, ctx.t)          # the gather again: only the slice was kept
        gx = reduce_scatter(g @ w, ctx.grp, ctx.t)
        gw = g.flatten(0, 1).T @ total.flatten(0, 1)
        return gx, gw, g.sum((0, 1)), None, None, None


class GatherNaive(torch.autograd.Function):
    """The all-gather alone (reduce-scatter backward): an ordinary F.linear after it saves the gathered input."""

    @staticmethod
    def forward(ctx, x, grp, t):
        ctx.grp, ctx.t = grp, t
        return all_gather(x, grp, t)

    @staticmethod
    def backward(ctx, g):
        return reduce_scatter(g, ctx.grp, ctx.t), None, None


def run_block(mode, t, r, grp, s, b, h, p, seed):
    """One forward and backward of the block on tp rank r of t; returns output, gradients, saved bytes by kind."""
    P, x, G, mask = draw(s, b, h, p, seed)
    f = 4 * h
    cols = slice(r * f // t, (r + 1) * f // t)
    rows = slice(r * s // t, (r + 1) * s // t)
    W = {"ln_w": P["ln_w"], "ln_b": P["ln_b"], "w1": P["w1"][cols], "b1": P["b1"][cols],
         "w2": P["w2"][:, cols], "b2": P["b2"]}
    W = {k: v.clone().requires_grad_() for k, v in W.items()}
    sp = mode != "tp"
    # each rank holds what it would hold: the whole sequence under TP, its slice of it under SP
    xin = (x[rows] if sp else x).clone().requires_grad_()
    m = (mask[rows] if sp else mask).clone()
    Gin = (G[rows] if sp else G).clone()
    params = {v.untyped_storage().data_ptr() for v in W.values()}
    saved, kinds = {}, {}
    where = ["?"]

    def pack(tns):
        st = tns.untyped_storage()
        if st.data_ptr() not in params and st.data_ptr() not in saved:
            saved[st.data_ptr()] = st.nbytes()
            kinds[where[0]] = kinds.get(where[0], 0) + st.nbytes()
        return tns

    LOG.clear()
    PASS[0] = "fwd"
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t_: t_):
        where[0] = "LayerNorm input and statistics"
        u = F.layer_norm(xin, (h,), W["ln_w"], W["ln_b"])
        where[0] = "fc1 input"
        if mode == "tp":
            a = F.linear(CopyToTP.apply(u, grp), W["w1"], W["b1"])
        elif mode == "sp":
            a = GatherLinear.apply(u, W["w1"], W["b1"], grp, t)
        else:
            a = F.linear(GatherNaive.apply(u, grp, t), W["w1"], W["b1"])
        where[0] = "GeLU input"
        gl = F.gelu(a)
        where[0] = "fc2 input"
        z = F.linear(gl, W["w2"])
        where[0] = "dropout mask"
        z = ReduceFromTP.apply(z, grp) if mode == "tp" else ReduceScatterToSP.apply(z, grp, t)
        y = xin + (z + W["b2"]) * m / (1 - p)
    out = {"kinds": kinds, "saved": sum(saved.values())}
    if mode == "naive":
        return out
    PASS[0] = "bwd"
    y.backward(Gin)
    grads = {k: v.grad for k, v in W.items()}
    if sp:   # the LayerNorm's and b2's gradients are sums over this rank's positions only: add them up
        PASS[0] = "param grads"
        for k in ("ln_w", "ln_b", "b2"):
            grads[k] = all_reduce(grads[k], grp)
    # plain arrays back to the main process (a tensor would travel as shared memory the worker frees at exit)
    out.update(y=y.detach().numpy(), dx=xin.grad.numpy(), grads={k: v.numpy() for k, v in grads.items()},
               log=list(LOG))
    return out


def worker(rank, world, s, b, h, p, seed, t_small):
    """Every rank runs the t = t_small groups (two of them: ranks 0-1 and 2-3) and the t = world group."""
    torch.manual_seed(seed)
    groups = [dist.new_group(list(range(i, i + t_small))) for i in range(0, world, t_small)]
    res = {}
    for t, grp in ((t_small, groups[rank // t_small]), (world, dist.group.WORLD)):
        r = dist.get_rank(grp)
        res[t] = {mode: run_block(mode, t, r, grp, s, b, h, p, seed) for mode in ("tp", "sp", "naive")}
    return res


if __name__ == "__main__":
    s = given("s", 32, nudge=4)
    b = given("b", 2)
    h = given("h", 64)
    p = given("p", 0.1)
    seed = given("seed", 0, nudge=0)
    t_small = given("t_small", 2, nudge=0)
    world = given("t_large", 4, nudge=0)
    lin_tp_rep = fact("korthikanti2022_tp_replicated_bytes", "lin_tp_rep")
    lin_tp_shard = fact("korthikanti2022_tp_sharded_bytes", "lin_tp_shard")
    # the unsplit layer's 34 (section 4.1) is the sum of the two: computed, so that a nudged fact moves it
    lin_all = value("lin_all", lin_tp_rep + lin_tp_shard)

    outs = run_group(worker, world, s, b, h, p, seed, t_small, timeout_s=240)
    y_ref, dx_ref, g_ref = reference(s, b, h, p, seed)
    P, x, G, mask = draw(s, b, h, p, seed)
    value("kept_frac", mask.float().mean().item())
    f = 4 * h
    value("f", f)
    S = value("S_bytes", s * b * h * F32, unit="B")
    value("S_shape", [s, b, h])
    value("param_count", sum(v.numel() for v in P.values()))
    print(f"Block: s={s}, b={b}, h={h}, fc1 {h}->{f}, fc2 {f}->{h}, dropout p={p}; fp32. "
          f"The tensor between the blocks, [s, b, h], holds S = {S:,} bytes.")

    worst = {}
    HELD = {}

    def holds(name, cond, message, operands, relation=None):
        """A property checked at every t: one sanity over all of them, with the operands of the largest t."""
        prev = HELD.get(name, (True,))
        HELD[name] = (prev[0] and bool(cond), message, operands, relation)

    for t in (t_small, world):
        ranks = list(range(t))           # the group of ranks 0..t-1 (for t_small: the first of its groups)
        R = {mode: [outs[q][t][mode] for q in ranks] for mode in ("tp", "sp", "naive")}
        for o in R["tp"] + R["sp"]:
            o["y"], o["dx"] = torch.from_numpy(o["y"]), torch.from_numpy(o["dx"])
            o["grads"] = {k: torch.from_numpy(v) for k, v in o["grads"].items()}
        # assemble the sharded results into the full tensors
        y_tp, dx_tp = R["tp"][0]["y"], R["tp"][0]["dx"]
        y_sp = torch.cat([o["y"] for o in R["sp"]])
        dx_sp = torch.cat([o["dx"] for o in R["sp"]])

        def full(mode, k, R=R):
            if k == "w1" or k == "b1":
                return torch.cat([o["grads"][k] for o in R[mode]])
            if k == "w2":
                return torch.cat([o["grads"][k] for o in R[mode]], dim=1)
            return R[mode][0]["grads"][k]

        diffs = {"y tp-ref": (y_tp - y_ref).abs().max().item(), "y sp-ref": (y_sp - y_ref).abs().max().item(),
                 "y tp-sp": (y_tp - y_sp).abs().max().item(),
                 "dx tp-ref": (dx_tp - dx_ref).abs().max().item(), "dx sp-ref": (dx_sp - dx_ref).abs().max().item()}
        for k in g_ref:
            diffs[f"d{k} tp-ref"] = (full("tp", k) - g_ref[k]).abs().max().item()
            diffs[f"d{k} sp-ref"] = (full("sp", k) - g_ref[k]).abs().max().item()
            diffs[f"d{k} tp-sp"] = (full("tp", k) - full("sp", k)).abs().max().item()
        # every rank of a group holds the same replicated gradients (LayerNorm, b2) and, under TP, the same y
        same_rep = all(torch.equal(o["grads"][k], R[mode][0]["grads"][k]) for mode in ("tp", "sp")
                       for o in R[mode] for k in ("ln_w", "ln_b", "b2"))
        same_rep = same_rep and all(torch.equal(o["y"], y_tp) for o in R["tp"])
        worst[t] = max(diffs.values())
        value(f"maxdiff_t{t}", worst[t])
        print(f"\nt = {t}: largest |difference| over output, input gradient and parameter gradients")
        for k in ("y tp-ref", "y sp-ref", "y tp-sp", "dx tp-ref", "dx sp-ref", "dw1 tp-sp", "dw2 tp-sp",
                  "dln_w tp-sp", "db2 tp-sp"):
            print(f"  {k:<14}{diffs[k]:10.2e}")
        holds("equal", worst[t] < 1e-5 and same_rep,
               "at every t, TP and SP give the unsharded block's output and gradients, equal to within 1e-5",
               operands=(worst[t], 1e-5), relation=("equal", "largest"))

        # ---- the collectives, counted on the real calls -------------------------------------------------
        def tally(log, kind, pas):
            return [n for k, ps, n in log if k == kind and ps == pas]

        ring = {"all-reduce": 2 * (t - 1) / t, "all-gather": (t - 1) / t, "reduce-scatter": (t - 1) / t}
        for mode in ("tp", "sp"):
            logs = [o["log"] for o in R[mode]]
            holds(f"same_log_{mode}", all(lg == logs[0] for lg in logs),
                   f"at every t, every rank of the {mode.upper()} group makes the same collectives on the same sizes",
                   operands=(len(logs[0]), len(logs[-1])), relation="equal")
        lt, ls = R["tp"][0]["log"], R["sp"][0]["log"]
        print("  collectives per rank, (collective, pass, S in bytes), ring bytes sent = factor x S:")
        for name, lg in (("TP", lt), ("SP", ls)):
            for k, ps, n in lg:
                print(f"    {name}  {k:<15}{ps:<12}S = {n:>7,}  sends {ring[k] * n:>9,.0f}")
        ar_fwd, ar_bwd = tally(lt, "all-reduce", "fwd"), tally(lt, "all-reduce", "bwd")
        ag_fwd, rs_fwd = tally(ls, "all-gather", "fwd"), tally(ls, "reduce-scatter", "fwd")
        ag_bwd, rs_bwd = tally(ls, "all-gather", "bwd"), tally(ls, "reduce-scatter", "bwd")
        ar_par = tally(ls, "all-reduce", "param grads")
        holds("counts", (len(ar_fwd), len(ar_bwd), len(ag_fwd), len(rs_fwd), len(ag_bwd), len(rs_bwd),
                                len(ar_par)) == (1, 1, 1, 1, 2, 1, 3) and len(lt) == 2
               and set(ar_fwd + ar_bwd + ag_fwd + rs_fwd + ag_bwd + rs_bwd) == {S},
               "TP: one all-reduce forward and one backward; SP: an all-gather and a reduce-scatter forward, two "
               "all-gathers and a reduce-scatter backward, each on S bytes; three small all-reduces of parameter "
               "gradients", operands=(len(ls), len(lt)))
        tp_fwd = value(f"tp_fwd_t{t}", ring["all-reduce"] * ar_fwd[0], unit="B")
        sp_fwd = value(f"sp_fwd_t{t}", ring["all-gather"] * ag_fwd[0] + ring["reduce-scatter"] * rs_fwd[0], unit="B")
        value(f"ag_fwd_t{t}", ring["all-gather"] * ag_fwd[0], unit="B")
        value(f"rs_fwd_t{t}", ring["reduce-scatter"] * rs_fwd[0], unit="B")
        tp_bwd = value(f"tp_bwd_t{t}", ring["all-reduce"] * ar_bwd[0], unit="B")
        sp_bwd = value(f"sp_bwd_t{t}", sum(ring["all-gather"] * n for n in ag_bwd)
                       + ring["reduce-scatter"] * rs_bwd[0], unit="B")
        sp_par = value(f"sp_par_t{t}", sum(ring["all-reduce"] * n for n in ar_par), unit="B")
        value(f"par_elems_t{t}", sum(ar_par) // F32)
        value(f"ring_ar_t{t}", ring["all-reduce"], fixed="depends on t alone, a group size that is not nudged")
        value(f"ring_ag_t{t}", ring["all-gather"], fixed="depends on t alone, a group size that is not nudged")
        holds("fwd_same", sp_fwd == tp_fwd and ag_fwd[0] == rs_fwd[0] == ar_fwd[0],
               "the reduce-scatter and the all-gather send, together, the bytes of the all-reduce they replace",
               operands=(sp_fwd, tp_fwd), relation="equal")
        value(f"bwd_ratio_t{t}", sp_bwd / tp_bwd,
              fixed="three collectives of (t-1)/t S against one of 2(t-1)/t S: 3/2 whatever S and t")
        holds("bwd_more", sp_bwd == 1.5 * tp_bwd,
               "backward, SP sends half as much again as TP: the gather repeated for the weight gradient",
               operands=(sp_bwd, tp_bwd), relation="larger")

        # ---- activation bytes saved for backward -------------------------------------------------------
        sb = s * b
        sbh = sb * h
        kt, ks, kn = R["tp"][0]["kinds"], R["sp"][0]["kinds"], R["naive"][0]["kinds"]
        region = ("LayerNorm input and statistics", "fc1 input", "dropout mask")
        reg_tp = value(f"region_tp_t{t}", sum(kt[k] for k in region), unit="B")
        reg_sp = value(f"region_sp_t{t}", sum(ks[k] for k in region), unit="B")
        reg_nv = value(f"region_naive_t{t}", sum(kn[k] for k in region), unit="B")
        tot_tp = value(f"saved_tp_t{t}", R["tp"][0]["saved"], unit="B")
        tot_sp = value(f"saved_sp_t{t}", R["sp"][0]["saved"], unit="B")
        value(f"saved_ratio_t{t}", tot_sp / tot_tp)
        value(f"region_ratio_t{t}", reg_sp / reg_tp, fixed="1/t: depends on t alone, a group size that is not nudged")
        print("  bytes saved for backward, rank 0 (by storage; parameters left out):")
        print(f"    {'':<32}{'TP':>9}{'SP':>9}{'SP naive':>10}")
        for k in region + ("GeLU input", "fc2 input"):
            print(f"    {k:<32}{kt.get(k, 0):>9,}{ks.get(k, 0):>9,}{kn.get(k, 0):>10,}")
        print(f"    {'all':<32}{tot_tp:>9,}{tot_sp:>9,}{R['naive'][0]['saved']:>10,}")
        # the paper's terms, in fp32 (4-byte activations, 1-byte mask), plus the LayerNorm's mean and rstd
        ln_stats = 2 * sb * F32
        par = (2 * 4 * sbh * F32) // t                      # GeLU input and fc2 input: [s, b, 4h/t] each
        exp_tp_region = sbh * F32 + ln_stats + sbh * F32 + sbh
        holds("region_tp_formula", reg_tp == exp_tp_region,
               "TP: the region holds the LayerNorm input (4sbh), its mean and rstd (8sb), the fc1 input (4sbh) "
               "and the 1-byte mask (sbh), on every rank whatever t", operands=(reg_tp, exp_tp_region),
               relation="equal")
        holds("region_sp", reg_sp * t == reg_tp,
               "SP: the same region's bytes divided by t", operands=(reg_sp * t, reg_tp), relation="equal")
        holds("parallel_same", kt["GeLU input"] + kt["fc2 input"] == ks["GeLU input"] + ks["fc2 input"] == par,
               "the GeLU and fc2 inputs, already split by t, are the same under TP and SP",
               operands=(kt["GeLU input"] + kt["fc2 input"], par), relation="equal")
        holds("naive_keeps", kn["fc1 input"] == sbh * F32 and reg_nv > reg_sp,
               "an ordinary F.linear after the all-gather saves the whole gathered fc1 input",
               operands=(kn["fc1 input"], ks["fc1 input"]), relation="larger")
        # per sbh, in the paper's 16-bit units: activations 2 bytes, the mask 1 byte
        value(f"paper_mlp_tp_t{t}", 5 + 16 / t, fixed="depends on t alone, a group size that is not nudged")
        value(f"paper_mlp_sp_t{t}", 21 / t, fixed="depends on t alone, a group size that is not nudged")
        value(f"paper_layer_tp_t{t}", lin_tp_rep + lin_tp_shard / t)
        value(f"paper_layer_sp_t{t}", lin_all / t)
        value(f"paper_layer_ratio_t{t}", (lin_all / t) / (lin_tp_rep + lin_tp_shard / t))
        value(f"ours_mlp_tp_t{t}", (tot_tp - ln_stats) / sbh,
              fixed="9 + 32/t bytes per sbh in fp32: counted bytes over sbh, which depend on t alone")
        value(f"ours_mlp_sp_t{t}", (tot_sp - ln_stats / t) / sbh,
              fixed="41/t bytes per sbh in fp32: counted bytes over sbh, which depend on t alone")
        holds("ours_formula", tot_tp - ln_stats == (9 + 32 / t) * sbh
               and tot_sp * t == 41 * sbh + ln_stats,
               "in fp32 the block saves sbh(9 + 32/t) bytes under TP and sbh(41/t) under SP, besides the "
               "LayerNorm statistics: the paper's 5 + 16/t and 21/t with each 2-byte activation at 4 bytes",
               operands=(tot_tp - ln_stats, (9 + 32 / t) * sbh), relation="equal")
    for name, (ok, message, operands, relation) in HELD.items():
        sanity(name, ok, message, operands=operands, relation=relation)
    # the Variation: t = 8 from the same counts (no group of 8 is started)
    tv = value("t_var", 2 * world, fixed="twice the largest group size, which is not nudged")
    value("paper_layer_ratio_tvar", (lin_all / tv) / (lin_tp_rep + lin_tp_shard / tv))
    value("region_sp_tvar", reg_tp / tv, unit="B")            # reg_tp: the TP region at the last t, any t alike
    value("tp_fwd_tvar", 2 * (tv - 1) / tv * S, unit="B")
    value("ag_fwd_tvar", (tv - 1) / tv * S, unit="B")
    sanity("var_ratio_falls", (lin_all / tv) / (lin_tp_rep + lin_tp_shard / tv)
           < (lin_all / world) / (lin_tp_rep + lin_tp_shard / world),
           "the paper's SP-over-TP ratio of a layer's activations falls as t grows",
           operands=((lin_all / tv) / (lin_tp_rep + lin_tp_shard / tv),
                     (lin_all / world) / (lin_tp_rep + lin_tp_shard / world)), relation="falls")
