# numbook: processes=6, timeout=400
"""IV.2.A03 — ZeRO-3 communication against data parallelism, counted on real FSDP2 and DDP.

A stack of L Linear layers, each wrapped with FSDP2's fully_shard on a CPU DeviceMesh (gloo over loopback),
runs one training step (forward, backward, SGD) on N = 2 and N = 4 real processes. The collectives FSDP2
hands to torch.distributed (all_gather_single for the parameters, reduce_scatter_single for the gradients)
are wrapped in each worker to record the size of every call, in forward and in backward. The same model
under reshard_after_forward=False (ZeRO-2-like: the parameters stay gathered between forward and backward)
and under DDP (its all-reduces recorded by a comm hook) runs in the same group. Each run's parameters after
the step are compared with one unsharded process that steps on the whole batch.
"""

import torch
import torch.distributed as dist
import torch.nn as nn

from numbook.check import fact, given, run_group, sanity, value


def make_model(d, L, seed):
    torch.manual_seed(seed)
    layers = []
    for _ in range(L):
        layers += [nn.Linear(d, d), nn.ReLU()]
    return nn.Sequential(*layers[:-1])          # L Linear layers, a ReLU between two


def batch(world, b, d, seed):
    g = torch.Generator().manual_seed(seed + 1)
    return torch.randn(world * b, d, generator=g)  # the whole step's batch; rank r takes rows r*b .. r*b+b-1


def loss_fn(out):
    # a mean over the rank's rows: averaging over ranks gives the whole batch's mean
    return out.pow(2).mean()


def worker(rank, world, d, L, b, lr, seed):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel as DDP

    log, phase = [], [None]                      # (phase, op, elements of the full tensor, bytes of the full tensor)
    real_ag, real_rs, real_ar = dist.all_gather_single, dist.reduce_scatter_single, dist.all_reduce

    def ag(output_tensor, input_tensor, *a, **k):
        if phase[0]:
            log.append((phase[0], "all_gather", output_tensor.numel(), output_tensor.nbytes, input_tensor.numel()))
        return real_ag(output_tensor, input_tensor, *a, **k)

    def rs(output, input, *a, **k):
        if phase[0]:
            log.append((phase[0], "reduce_scatter", input.numel(), input.nbytes, output.numel()))
        return real_rs(output, input, *a, **k)

    def ar(tensor, *a, **k):
        if phase[0]:
            log.append((phase[0], "all_reduce", tensor.numel(), tensor.nbytes, tensor.numel()))
        return real_ar(tensor, *a, **k)

    dist.all_gather_single, dist.reduce_scatter_single, dist.all_reduce = ag, rs, ar
    x = batch(world, b, d, seed)[rank * b:(rank + 1) * b]
    mesh = init_device_mesh("cpu", (world,))
    out = {}

    def step(model, params_after):
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        phase[0] = "forward"
        loss = loss_fn(model(x))
        phase[0] = "backward"
        loss.backward()
        phase[0] = None
        opt.step()
        flat = torch.cat([params_after(p).detach().flatten() for p in model.parameters()])
        return flat.numpy()                      # numpy: pickled, not shared through file descriptors

    for name, reshard in (("zero3", True), ("zero2", False)):
        model = make_model(d, L, seed)
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh, reshard_after_forward=reshard)
        fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
        local = sum(p.to_local().numel() for p in model.parameters())     # the elements this rank holds
        start = len(log)
        flat = step(model, lambda p: p.full_tensor())                     # gathered after the step, unlogged
        out[name] = {"log": log[start:], "local": local, "params": flat}

    model = make_model(d, L, seed)
    ddp = DDP(model)

    def hook(state, bucket):                     # DDP's all-reduce, through dist.all_reduce so that it is logged
        buf = bucket.buffer().div_(world)
        return dist.all_reduce(buf, async_op=True).get_future().then(lambda f: f.value()[0])

    ddp.register_comm_hook(None, hook)
    start = len(log)
    flat = step(ddp, lambda p: p)
    out["ddp"] = {"log": log[start:], "local": sum(p.numel() for p in model.parameters()), "params": flat}
    return out


def summarise(log):
    """Calls and elements by (phase, op), in a fixed order."""
    keys = [(ph, op) for ph in ("forward", "backward") for op in ("all_gather", "reduce_scatter", "all_reduce")]
    calls = {k: sum(1 for e in log if (e[0], e[1]) == k) for k in keys}
    elems = {k: sum(e[2] for e in log if (e[0], e[1]) == k) for k in keys}
    return calls, elems


if __name__ == "__main__":
    d = given("d", 64, nudge=4)             # a width every N here divides: FSDP2 pads a shard otherwise
    L = given("L", 4)
    b = given("b", 4)
    lr = given("lr", 1.0)
    seed = given("seed", 0, nudge=0)
    worlds = (given("N1", 2, nudge=0), given("N2", 4, nudge=0))   # world sizes; not nudged: each is a run
    # the paper's volumes, in units of the parameter count; not nudged: the check tests the counts against them
    dp_psi = fact("zero_dp_volume_psi", "dp_psi", nudge=0)
    z3_psi = fact("zero3_volume_psi", "z3_psi", nudge=0)
    value("paper_ratio", z3_psi / dp_psi, fixed="3 psi over 2 psi: the paper's ratio, from two facts")

    psi = sum(p.numel() for p in make_model(d, L, seed).parameters())
    value("psi", psi)
    value("psi_bytes", 4 * psi, unit="B")
    value("layer_params", d * d + d)
    print(f"Model: {L} Linear layers of {d} x {d} with bias: psi = {psi:,} parameters, {4 * psi:,} bytes in fp32")

    fwd_ag, bwd_ag, rs = ("forward", "all_gather"), ("backward", "all_gather"), ("backward", "reduce_scatter")
    ar = ("backward", "all_reduce")
    for N in worlds:
        outs = run_group(worker, N, d, L, b, lr, seed, timeout_s=300)

        # the unsharded reference: one process, the whole batch of N*b rows, one SGD step
        ref = make_model(d, L, seed)
        opt = torch.optim.SGD(ref.parameters(), lr=lr)
        loss_fn(ref(batch(N, b, d, seed))).backward()
        before = torch.cat([p.detach().flatten().clone() for p in ref.parameters()])
        opt.step()
        ref_flat = torch.cat([p.detach().flatten() for p in ref.parameters()])
        moved = (ref_flat - before).abs().max().item()

        print(f"\nN = {N} processes (gloo over loopback), one step; elements are those of the full tensors")
        print(f"  {'run':<8}{'phase':<10}{'collective':<16}{'calls':>7}{'elements':>10}{'x psi':>7}")
        res = {}
        for name in ("zero3", "zero2", "ddp"):
            calls, elems = summarise(outs[0][name]["log"])
            same = all(summarise(o[name]["log"]) == (calls, elems) for o in outs)
            diff = max((torch.from_numpy(o[name]["params"]) - ref_flat).abs().max().item() for o in outs)
            res[name] = (calls, elems, same, diff)
            for k in calls:
                if calls[k]:
                    print(f"  {name:<8}{k[0]:<10}{k[1]:<16}{calls[k]:>7}{elems[k]:>10}{elems[k] / psi:>7.2f}")
            print(f"  {name:<8}max |param - unsharded| after the step: {diff:.1e}; "
                  f"elements held per rank: {outs[0][name]['local']:,}")
        print(f"  the step moves a parameter by up to {moved:.2e}")

        c3, e3, same3, diff3 = res["zero3"]
        c2, e2, same2, diff2 = res["zero2"]
        cd, ed, samed, diffd = res["ddp"]
        # volumes in units of psi: all-gather and reduce-scatter move the full tensor once each (their inputs
        # or outputs summed over ranks), an all-reduce is a reduce-scatter plus an all-gather: twice
        vol3 = (e3[fwd_ag] + e3[bwd_ag] + e3[rs]) / psi
        vol2 = (e2[fwd_ag] + e2[bwd_ag] + e2[rs]) / psi
        vold = 2 * ed[ar] / psi
        value(f"z3_fwd_ag_calls_{N}", c3[fwd_ag])
        value(f"z3_bwd_ag_calls_{N}", c3[bwd_ag])
        value(f"z3_rs_calls_{N}", c3[rs])
        value(f"z3_fwd_ag_elems_{N}", e3[fwd_ag])
        value(f"z3_bwd_ag_elems_{N}", e3[bwd_ag])
        value(f"z3_rs_elems_{N}", e3[rs])
        value(f"z2_bwd_ag_calls_{N}", c2[bwd_ag],
              fixed="reshard_after_forward=False keeps the gathered parameters: no all-gather in backward")
        value(f"z2_fwd_ag_calls_{N}", c2[fwd_ag])
        value(f"z2_rs_calls_{N}", c2[rs])
        value(f"ddp_ar_calls_{N}", cd[ar], fixed="DDP's first step reduces every gradient in one bucket (IV.2.A04)")
        value(f"ddp_ar_elems_{N}", ed[ar])
        why = "a volume in units of psi: a count of whole passes over the parameters, whatever the model"
        value(f"vol3_{N}", vol3, fixed=why)
        value(f"vol2_{N}", vol2, fixed=why)
        value(f"vold_{N}", vold, fixed=why)
        ratio = value(f"ratio_{N}", vol3 / vold, fixed="3 passes over the parameters against 2, whatever the model")
        value(f"local3_{N}", outs[0]["zero3"]["local"])
        value(f"diff3_{N}", diff3, fixed="one fp32 rounding step of the same update")
        value(f"diff2_{N}", diff2)
        value(f"diffd_{N}", diffd)
        value(f"moved_{N}", moved)
        # bytes each rank sends on a ring (IV.1.A02): (N-1)/N of each all-gather's or reduce-scatter's full tensor
        value(f"z3_sent_bytes_{N}", 4 * (N - 1) * (e3[fwd_ag] + e3[bwd_ag] + e3[rs]) // N, unit="B")
        value(f"ddp_sent_bytes_{N}", 4 * 2 * (N - 1) * ed[ar] // N, unit="B")

        sanity(f"same_on_all_ranks_{N}", same3 and same2 and samed,
               "every rank logs the same collectives with the same sizes", operands=(N, N), relation="equal")
        sanity(f"z3_counts_{N}", c3[fwd_ag] == L and c3[bwd_ag] == L and c3[rs] == L and c3[ar] == 0
               and e3[fwd_ag] == psi and e3[bwd_ag] == psi and e3[rs] == psi,
               "ZeRO-3 gathers every layer in forward and again in backward, and reduce-scatters every layer's "
               "gradient once: L calls of psi elements in all, each", operands=(e3[fwd_ag] + e3[bwd_ag], 2 * psi),
               relation="equal")
        sanity(f"z3_ratio_{N}", abs(ratio - z3_psi / dp_psi) < 1e-12 and abs(vol3 - z3_psi) < 1e-12
               and abs(vold - dp_psi) < 1e-12,
               "ZeRO-3 moves 3 psi, DDP 2 psi: the paper's 1.5", operands=(vol3, vold), relation="larger")
        sanity(f"z2_no_bwd_gather_{N}", c2[bwd_ag] == 0 and c2[fwd_ag] == L and e2[rs] == psi
               and abs(vol2 - dp_psi) < 1e-12,
               "with reshard_after_forward=False there is no all-gather in backward: 2 psi, DDP's volume",
               operands=(vol2, vold), relation=("equal", "not"))
        sanity(f"ddp_one_bucket_{N}", cd[ar] == 1 and ed[ar] == psi,
               "DDP's first step all-reduces all psi gradients in one bucket", operands=(ed[ar], psi),
               relation="equal")
        sanity(f"shard_{N}", outs[0]["zero3"]["local"] * N == psi,
               "each rank holds psi/N of the parameters", operands=(outs[0]["zero3"]["local"] * N, psi),
               relation="equal")
        sanity(f"equal_params_{N}", max(diff3, diff2, diffd) < 1e-6 and moved > 1e3 * max(diff3, diff2, diffd),
               "the sharded step's parameters equal the unsharded step's to fp32 rounding",
               operands=(max(diff3, diff2, diffd), moved), relation="smaller")
