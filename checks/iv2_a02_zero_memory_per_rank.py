# numbook: processes=5, timeout=420
"""IV.2.A02 — ZeRO stages 1, 2 and 3: memory per rank.

The formulas of Rajbhandari et al. (2020), Figure 1, for mixed-precision Adam (2 + 2 + K bytes per parameter,
K = 12), stage by stage, re-derived for the paper's 7.5B-parameter, 64-rank example and set against the paper's
figures. Then a real ZeroRedundancyOptimizer wrapping fp32 Adam over a small model on two process groups (gloo,
loopback): after one step each rank's optimizer state is counted tensor by tensor (nbytes) and set against plain
Adam's; the partition torch made is compared with a sorted-greedy partition by whole parameters computed here,
and its imbalance against an even 1/N; the parameters after the step are compared across ranks and with one
plain Adam step on the whole batch in one process.
"""

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.optim import ZeroRedundancyOptimizer

from numbook.check import fact, given, run_group, sanity, value


class Net(nn.Module):
    def __init__(self, d_in, h, d_out):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(d_in, h), nn.Linear(h, h), nn.Linear(h, d_out)

    def forward(self, x):
        return self.fc3(F.gelu(self.fc2(F.gelu(self.fc1(x)))))


def make(d_in, h, d_out, seed):
    torch.manual_seed(seed)
    return Net(d_in, h, d_out)


def batch(world, b, d_in, d_out, seed):
    g = torch.Generator().manual_seed(seed + 1)
    return torch.randn(world * b, d_in, generator=g), torch.randn(world * b, d_out, generator=g)


def state_bytes(opt):
    """Bytes of every tensor in an optimizer's state: (exp_avg + exp_avg_sq, step counters, tensors holding state)."""
    moments = sum(st[k].nbytes for st in opt.state.values() for k in ("exp_avg", "exp_avg_sq"))
    steps = sum(st["step"].nbytes for st in opt.state.values())
    return moments, steps, len(opt.state)


def zero_step(rank, world, group, d_in, h, d_out, b, seed, lr):
    """One ZeroRedundancyOptimizer(Adam) step of the ranks of `group` (world of them), each on its micro-batch."""
    x, y = batch(world, b, d_in, d_out, seed)
    model = make(d_in, h, d_out, seed)
    names = {id(p): n for n, p in model.named_parameters()}
    zero = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, process_group=group, lr=lr)
    F.mse_loss(model(x[rank * b:(rank + 1) * b]), y[rank * b:(rank + 1) * b]).backward()
    for p in model.parameters():                  # what DDP does (IV.2.A01): divide, all-reduce
        p.grad.div_(world)
        dist.all_reduce(p.grad, group=group)
    zero.step()                                   # each rank steps its own shard, then broadcasts it
    moments, steps, n_state = state_bytes(zero.optim)
    return {"owned": [names[id(p)] for g in zero.optim.param_groups for p in g["params"]],
            "state_owned": sorted(names[id(p)] for p in zero.optim.state),
            "moments": moments, "steps": steps, "n_state": n_state,
            "params": {n: p.detach().numpy().copy() for n, p in model.named_parameters()}}


def worker(rank, world, world_small, d_in, h, d_out, b, seed, lr):
    """The whole group runs one ZeRO step; then the first world_small ranks, in a group of their own, run another."""
    out = {world: zero_step(rank, world, None, d_in, h, d_out, b, seed, lr)}
    sub = dist.new_group(list(range(world_small)))          # every rank takes part in creating it
    if rank < world_small:
        out[world_small] = zero_step(rank, world_small, sub, d_in, h, d_out, b, seed, lr)
    return out


def greedy(sizes, world):
    """Sorted-greedy by whole parameters: largest first, each to the rank with the fewest elements so far."""
    load, owner = [0] * world, {}
    for name, n in sorted(sizes.items(), key=lambda kv: kv[1], reverse=True):
        r = load.index(min(load))
        owner[name] = r
        load[r] += n
    return owner, load


def row(label, *cells, w=22, cw=13):
    print(f"  {label:<{w}}" + "".join(f"{c!s:>{cw}}" for c in cells))


if __name__ == "__main__":
    GB = 1e9
    # -- the paper's formulas, Figure 1 -----------------------------------------------------------------------
    psi = fact("zero_fig1_params", "psi")
    n_d = fact("zero_fig1_dp_degree", "N_d")
    K = fact("zero_fig1_k", "K", nudge=0)   # the recipe: three fp32 tensors per parameter, no small change
    paper = {"baseline": fact("zero_fig1_baseline_gb", "paper_baseline_gb", nudge=0.01),
             "os": fact("zero_fig1_pos_gb", "paper_os_gb", nudge=0.01),
             "os_g": fact("zero_fig1_pos_g_gb", "paper_os_g_gb", nudge=0.01),
             "os_g_p": fact("zero_fig1_pos_g_p_gb", "paper_os_g_p_gb", nudge=0.01)}
    p16 = value("fp16_elem", torch.tensor(0.0, dtype=torch.float16).element_size(), unit="B",
                fixed="bytes of an fp16 element: a property of the dtype")
    f32 = value("fp32_elem", torch.tensor(0.0).element_size(), unit="B",
                fixed="bytes of an fp32 element: a property of the dtype")
    value("k_parts", 3 * f32, unit="B", fixed="fp32 master weights, momentum and variance: three fp32 elements")
    value("sharded_per_param", 2 * f32, unit="B", fixed="fp32 Adam's momentum and variance: two fp32 elements")
    sanity("k_is_three_fp32", 3 * f32 == K, "K = 12 is the fp32 master copy, momentum and variance, 4 bytes each",
           operands=(K, 3 * f32), relation="equal")
    ours = {"baseline": (p16 + p16 + K) * psi,
            "os": (p16 + p16) * psi + K * psi / n_d,
            "os_g": p16 * psi + (p16 + K) * psi / n_d,
            "os_g_p": (p16 + p16 + K) * psi / n_d}
    print(f"Rajbhandari et al., the ZeRO paper, Figure 1: psi = {psi:.3g} parameters, N_d = {n_d}, K = {K}")
    row("stage", "bytes/param", "ours GB", "paper GB", "ours - paper")
    for key, label in (("baseline", "baseline DP"), ("os", "P_os (stage 1)"), ("os_g", "P_os+g (stage 2)"),
                       ("os_g_p", "P_os+g+p (stage 3)")):
        gb = value(f"{key}_gb", ours[key] / GB, unit="GB")
        value(f"{key}_per_param", ours[key] / psi, unit="B",
              fixed="bytes per parameter of the recipe: 2 + 2 + K, K = 12" if key == "baseline" else None)
        diff = value(f"{key}_minus_paper_gb", gb - paper[key], unit="GB")
        row(label, f"{ours[key] / psi:.4f}", f"{gb:.4f}", paper[key], f"{diff:+.4f}")
    n_d_var = given("N_d_var", 8)
    value("os_var_gb", ((p16 + p16) * psi + K * psi / n_d_var) / GB, unit="GB")
    value("os_g_var_gb", (p16 * psi + (p16 + K) * psi / n_d_var) / GB, unit="GB")
    value("os_g_p_var_gb", (p16 + p16 + K) * psi / n_d_var / GB, unit="GB")
    value("os_floor_gb", (p16 + p16) * psi / GB, unit="GB")
    value("os_g_floor_gb", p16 * psi / GB, unit="GB")
    value("reduction_stage3", ours["baseline"] / ours["os_g_p"])
    value("reduction_stage1", ours["baseline"] / ours["os"])
    value("stage1_limit_per_param", p16 + p16, unit="B", fixed="two fp16 copies (parameters and gradients) of 2 bytes")
    sanity("stages_fall", ours["baseline"] > ours["os"] > ours["os_g"] > ours["os_g_p"],
           "each stage holds fewer bytes per rank than the one before", operands=(ours["os_g_p"], ours["baseline"]),
           relation="smaller")

    # -- a real ZeroRedundancyOptimizer ---------------------------------------------------------------------
    d_in = given("d_in", 32)
    h = given("h", 96)
    d_out = given("d_out", 16, nudge=0)   # the Adam comparison needs the layout it was sized for
    b = given("b", 4)
    lr = given("lr", 1e-3)
    seed = given("seed", 0, nudge=0)
    worlds = [given("world_small", 2, nudge=0), given("world_large", 4)]
    net = make(d_in, h, d_out, seed)
    sizes = {n: p.numel() for n, p in net.named_parameters()}
    n_params = value("n_params", sum(sizes.values()))
    n_tensors = value("n_tensors", len(sizes), fixed="the model's tensors: its layout, not its sizes")
    value("largest_param", max(sizes.values()))
    # plain Adam on the whole batch in one process: the unsharded state (II.1.A01) and the reference step
    ref_results, summed = {}, {}
    for world in worlds:
        ref = make(d_in, h, d_out, seed)
        opt = torch.optim.Adam(ref.parameters(), lr=lr)
        x, y = batch(world, b, d_in, d_out, seed)
        F.mse_loss(ref(x), y).backward()
        opt.step()
        ref_results[world] = ({n: p.detach() for n, p in ref.named_parameters()}, state_bytes(opt))
        # the same step had the ranks summed their gradients instead of averaging them: N times the gradient.
        # Adam's first step is nearly blind to the gradient's scale, so this says how finely the comparison
        # with plain Adam still tells a sum from a mean.
        wrong = make(d_in, h, d_out, seed)
        opt_w = torch.optim.Adam(wrong.parameters(), lr=lr)
        (world * F.mse_loss(wrong(x), y)).backward()
        opt_w.step()
        summed[world] = max((p.detach() - ref_results[world][0][n]).abs().max().item()
                            for n, p in wrong.named_parameters())
    plain_moments, plain_steps, plain_n = ref_results[worlds[0]][1]
    plain_total = value("plain_state_bytes", plain_moments + plain_steps, unit="B")
    value("plain_moment_bytes", plain_moments, unit="B")
    value("plain_step_bytes", plain_steps, unit="B", fixed="Adam's step counters: 4 bytes per tensor")
    value("step_elem", plain_steps // plain_n, unit="B", fixed="one fp32 step counter per tensor")
    sanity("plain_is_8_per_param", plain_moments == 2 * f32 * n_params and plain_steps == f32 * n_tensors,
           "plain fp32 Adam holds 8 bytes per parameter (exp_avg, exp_avg_sq) and one 4-byte step per tensor",
           operands=(plain_moments, 2 * f32 * n_params), relation="equal")

    print(f"\nModel fc1 {d_in}->{h}, fc2 {h}->{h}, fc3 {h}->{d_out}: {n_params:,} parameters in {n_tensors} tensors "
          f"({', '.join(f'{n} {s:,}' for n, s in sizes.items())})")
    print(f"plain Adam, one process: exp_avg + exp_avg_sq {plain_moments:,} B, steps {plain_steps} B, "
          f"total {plain_total:,} B")
    imbalance, max_load = {}, {}
    partition_ok, equal_ok, ref_ok, sum_ok, formula_ok = True, True, True, True, True
    group = run_group(worker, worlds[1], worlds[0], d_in, h, d_out, b, seed, lr, timeout_s=360)
    for world in worlds:
        outs = [o[world] for o in group if world in o]
        owner, load = greedy(sizes, world)
        totals = [o["moments"] + o["steps"] for o in outs]
        print(f"\nZeroRedundancyOptimizer(Adam), {world} ranks, micro-batch {b} each:")
        row("rank", "parameters", "elements", "state B", "share", w=8)
        for r, o in enumerate(outs):
            mine = [n for n in sizes if owner[n] == r]
            partition_ok &= sorted(o["owned"]) == sorted(mine) and o["state_owned"] == sorted(mine)
            formula_ok &= o["moments"] == 2 * f32 * load[r] and o["steps"] == f32 * len(mine)
            row(f"{r}", ",".join(n.replace(".weight", ".w").replace(".bias", ".b") for n in o["owned"]), f"{load[r]:,}",
                f"{totals[r]:,}", f"{totals[r] / plain_total:.3f}", w=8)
        sum_ok &= sum(totals) == plain_total
        tag = "small" if world == worlds[0] else "large"
        value(f"rows_{tag}", world * b)
        value(f"loads_{tag}", load)
        value(f"rank_bytes_{tag}", totals, unit="B")
        value(f"max_rank_bytes_{tag}", max(totals), unit="B")
        value(f"min_rank_bytes_{tag}", min(totals), unit="B")
        value(f"even_bytes_{tag}", plain_total / world, unit="B")
        value(f"summed_diff_{tag}", summed[world], dtype="float32")
        imbalance[tag] = value(f"imbalance_{tag}", max(totals) / (plain_total / world))
        value(f"max_share_{tag}", max(totals) / plain_total)
        max_load[tag] = value(f"max_load_{tag}", max(load))
        value(f"imbalance_floor_{tag}", world * max(sizes.values()) / n_params)   # N x the largest tensor's share
        value(f"min_load_{tag}", min(load))
        rank_diff = max(abs(o["params"][n] - outs[0]["params"][n]).max() for o in outs for n in sizes)
        ref_p = ref_results[world][0]
        ref_diff = max((torch.from_numpy(o["params"][n]) - ref_p[n]).abs().max().item() for o in outs for n in sizes)
        moved = min((torch.from_numpy(outs[0]["params"][n]) - p.detach()).abs().max().item()
                    for n, p in make(d_in, h, d_out, seed).named_parameters())
        value(f"rank_diff_{tag}", float(rank_diff), dtype="float32",
              fixed="zero: every rank holds the same parameters after the step, bit for bit")
        value(f"ref_diff_{tag}", ref_diff, dtype="float32")
        value(f"moved_{tag}", moved, dtype="float32")
        equal_ok &= rank_diff == 0.0
        ref_ok &= ref_diff < 1e-6 * lr * 1e3 and moved > 0.5 * lr and ref_diff < 1e-2 * summed[world]
        print(f"  imbalance: largest rank {max(totals):,} B against an even {plain_total / world:,.1f} B "
              f"({max(totals) / (plain_total / world):.3f}x); parameters after the step: ranks differ by "
              f"{rank_diff:.1e}, "
              f"from one plain Adam step on the whole batch by {ref_diff:.1e} (each tensor moved by at least "
              f"{moved:.2e}; a summed gradient instead of the mean would differ by {summed[world]:.1e})")
    sanity("partition_is_greedy", partition_ok,
           "torch's partition equals the sorted-greedy partition by whole parameters, and each rank holds state for "
           "its own parameters only", relation="equal")
    sanity("rank_bytes_formula", formula_ok and sum_ok,
           "each rank holds 8 bytes per parameter it owns plus 4 per tensor, and the ranks' bytes add up to plain "
           "Adam's", relation="equal")
    sanity("params_equal_on_ranks", equal_ok, "after the step every rank holds the same parameters, bit for bit",
           relation="equal")
    sanity("params_equal_plain_adam", ref_ok,
           "the parameters equal one plain Adam step on the whole batch within fp32 rounding, far closer than the "
           "step on a summed gradient, and the step moved them",
           relation="equal")
    sanity("imbalance_above_one", 1 < imbalance["small"] < imbalance["large"],
           "the largest rank holds more than an even 1/N of the state, and the excess grows from 2 to 4 ranks",
           operands=(imbalance["large"], imbalance["small"]), relation=("larger", "grows"))
    sanity("largest_tensor_bounds", min(max_load.values()) >= max(sizes.values()) == max_load["large"],
           "the fullest rank holds at least the largest tensor at both sizes, and at 4 ranks exactly that tensor: "
           "a tensor is never split",
           operands=(max_load["large"], max(sizes.values())), relation="equal")
