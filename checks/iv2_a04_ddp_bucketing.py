# numbook: processes=2, timeout=300
"""IV.2.A04 — Gradient bucketing in DDP: the buckets, their order, and what their number costs.

A stack of Linear layers of known sizes is wrapped in DistributedDataParallel on two real processes (gloo
over loopback) at several bucket_cap_mb values. A comm hook records every bucket the reducer hands over:
its index, its elements and which parameters it holds, in the order the all-reduces are launched. The
first step and the steps after it are recorded apart: the installed DDP builds one bucket for the first
step and rebuilds them, in the order the gradients became ready, before the second. The counts are
predicted by a packing rule written here, from the parameter sizes and the ready order recorded by
post-accumulate-grad hooks on a plain (non-DDP) backward. Then the time of one step with small buckets
against one bucket, the time of the same bytes all-reduced in k calls against one, and the latency of one
tiny all-reduce are measured over repeats. Last, the rule counts the 25 MiB buckets of GPT-2 small's and
Llama 2 7B's fp32 gradients from their parameter shapes, against torch's own packer on meta tensors.
"""

import time

import torch
import torch.distributed as dist
import torch.nn as nn

from numbook.check import estimate, fact, given, run_group, sanity, value

MIB = 1024 * 1024


def make_model(widths, seed=0):
    torch.manual_seed(seed)
    layers = []
    for a, b in zip(widths[:-1], widths[1:], strict=False):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def pack(sizes_in_order, first_cap, cap):
    """The rule: walk the tensors in the order their gradients become ready, add each tensor's bytes to the
    open bucket, and close the bucket as soon as it holds at least its limit (the first bucket's limit, then
    the cap). Returns the buckets as lists of positions in the walk."""
    buckets, cur, size, limit = [], [], 0, first_cap
    for i, nbytes in enumerate(sizes_in_order):
        cur.append(i)
        size += nbytes
        if size >= limit:
            buckets.append(cur)
            cur, size, limit = [], 0, cap
    if cur:
        buckets.append(cur)
    return buckets


def worker(rank, world, widths, batch, caps, small_cap, repeats, inner, tiny_calls, blocks):
    from torch.nn.parallel import DistributedDataParallel as DDP

    g = torch.Generator().manual_seed(rank)
    x = torch.randn(batch, widths[0], generator=g)
    out = {}

    # the order gradients become ready, on a plain backward
    m = make_model(widths)
    pos = {p: i for i, p in enumerate(m.parameters())}
    ready = []
    for p in m.parameters():
        p.register_post_accumulate_grad_hook(lambda p: ready.append(pos[p]))
    m(x).pow(2).mean().backward()
    out["ready"] = ready

    def wrap(cap, log):
        model = make_model(widths)
        ids = {id(p): i for i, p in enumerate(model.parameters())}
        ddp = DDP(model) if cap is None else DDP(model, bucket_cap_mb=cap)

        def hook(state, bucket):                 # record, then all-reduce the bucket as DDP would (mean)
            log.append((bucket.index(), bucket.buffer().numel(), [ids[id(p)] for p in bucket.parameters()]))
            buf = bucket.buffer().div_(world)
            return dist.all_reduce(buf, async_op=True).get_future().then(lambda f: f.value()[0])

        ddp.register_comm_hook(None, hook)
        return ddp

    def train_step(ddp):
        ddp.zero_grad(set_to_none=True)
        ddp(x).pow(2).mean().backward()

    out["buckets"] = {}
    for cap in caps:
        log = []
        ddp = wrap(cap, log)
        steps = []
        for _ in range(3):
            log.clear()
            train_step(ddp)
            steps.append(list(log))
        out["buckets"][str(cap)] = steps

    # timing: a step with small buckets against one bucket (the same model, the same bytes)
    log_small, log_one = [], []
    ddp_small, ddp_one = wrap(small_cap, log_small), wrap(10 ** 6, log_one)
    for _ in range(2):                           # the first step, the rebuild, a warm-up
        train_step(ddp_small)
        train_step(ddp_one)
    sizes = [e[1] for e in log_small[1:]]       # the first step's one bucket, then the rebuilt buckets of the second
    t_small, t_one, t_k, t_1, alpha = [], [], [], [], []
    grads_k = [torch.zeros(n) for n in sizes]
    grad_1 = torch.zeros(sum(sizes))
    tiny = torch.zeros(1)
    for r in range(repeats):
        ts, to, tk, t1 = [], [], [], []
        for i in range(inner):
            for which in ((0, 1) if (r + i) % 2 == 0 else (1, 0)):
                dist.barrier()
                t0 = time.perf_counter()
                train_step(ddp_small if which == 0 else ddp_one)
                (ts if which == 0 else to).append(time.perf_counter() - t0)
            dist.barrier()
            t0 = time.perf_counter()
            for t in grads_k:                    # the same buckets' bytes, one all-reduce each, back to back
                dist.all_reduce(t)
            tk.append(time.perf_counter() - t0)
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(grad_1)              # the same bytes in one all-reduce
            t1.append(time.perf_counter() - t0)
        means = []
        for _ in range(blocks):                  # blocks of tiny_calls calls; the quickest block's mean
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(tiny_calls):
                dist.all_reduce(tiny)
            means.append((time.perf_counter() - t0) / tiny_calls)
        alpha.append(min(means))
        t_small.append(min(ts))
        t_one.append(min(to))
        t_k.append(min(tk))
        t_1.append(min(t1))
    out["timing"] = {"k": len(sizes), "sizes": sizes, "t_small": t_small, "t_one": t_one, "t_k": t_k,
                     "t_1": t_1, "alpha": alpha}
    return out


def gpt2_shapes(V, d, L, ctx):
    """GPT-2's parameters in registration order (Hugging Face GPT2LMHeadModel; the head is tied to wte)."""
    f = 4 * d                                    # GPT-2's MLP is four times the width (n_inner unset)
    shapes = [(V, d), (ctx, d)]
    for _ in range(L):
        shapes += [(d,), (d,), (d, 3 * d), (3 * d,), (d, d), (d,), (d,), (d,), (d, f), (f,), (f, d), (d,)]
    return shapes + [(d,), (d,)]


def llama_shapes(V, d, L, f):
    """Llama 2's parameters in registration order (Hugging Face LlamaForCausalLM; the head is untied)."""
    shapes = [(V, d)]
    for _ in range(L):
        shapes += [(d, d)] * 4 + [(f, d), (f, d), (d, f), (d,), (d,)]
    return shapes + [(d,), (V, d)]


if __name__ == "__main__":
    w = given("w", 256, nudge=128)              # the base width; nudged by half of it, so that sizes cross the caps
    n_mid = given("n_mid", 4)                    # the layers of w x w at the end of the stack
    widths = (2 * w, 8 * w, 2 * w, 4 * w, 4 * w) + (w,) * n_mid + (w // 4,)
    value("widths", widths)
    value("n_layers", len(widths) - 1)
    batch = given("batch", 8, nudge=0)           # rows per rank: moves the step time only
    caps = (None,) + given("caps", (0.25, 1, 4, 8, 25), unit="MiB")   # None: DDP's default, no bucket_cap_mb
    small_cap = given("small_cap", 0.25, unit="MiB", nudge=0)
    repeats = given("repeats", 10, nudge=0)      # the timing's repeats and samples: they move measured values only
    inner = given("inner", 3, nudge=0)
    tiny_calls = given("tiny_calls", 20, nudge=0)
    blocks = given("blocks", 5, nudge=0)
    default_cap = nn.parallel.distributed._DEFAULT_BUCKET_CAP_MB
    first_default = dist._DEFAULT_FIRST_BUCKET_BYTES
    value("default_cap_mib", default_cap, unit="MiB", fixed="torch's _DEFAULT_BUCKET_CAP_MB in the installed DDP")
    value("first_default_mib", first_default / MIB, unit="MiB",
          fixed="torch's dist._DEFAULT_FIRST_BUCKET_BYTES in the installed build")

    outs = run_group(worker, 2, widths, batch, caps, small_cap, repeats, inner, tiny_calls, blocks,
                     timeout_s=400)
    o = outs[0]
    params = list(make_model(widths).parameters())
    nbytes = [p.numel() * p.element_size() for p in params]
    psi = sum(p.numel() for p in params)
    value("n_tensors", len(params))
    value("psi", psi)
    value("grad_mib", 4 * psi / MIB, unit="MiB")
    ready = o["ready"]
    tail = params[8:]                            # the layers after the fourth (4w x 4w): the last five
    value("n_tail_layers", len(tail) // 2)
    value("tail_mib", sum(p.numel() * p.element_size() for p in tail) / MIB, unit="MiB")
    value("big_weight_mib", params[6].numel() * params[6].element_size() / MIB, unit="MiB")
    value("ready_reverse", int(ready == list(range(len(params)))[::-1]), fixed="1 when the gradients of a "
          "stack of layers become ready in the reverse of the parameters' order, bias before weight")
    print(f"Model: Linear layers {' > '.join(map(str, widths))}: {len(params)} tensors, {psi:,} parameters, "
          f"{4 * psi / MIB:.2f} MiB of fp32 gradients")
    print(f"Gradients become ready in the order of parameters {ready}")
    head = ("bucket_cap_mb", "first cap", "step 1", "step 2", "predicted")
    print(f"\n  {head[0]:<14}{head[1]:>10}{head[2]:>8}{head[3]:>8}{head[4]:>10}  bucket MiB, launch order")

    rows = []
    for cap in caps:
        steps = o["buckets"][str(cap)]
        first_cap = first_default if cap is None else int(cap * MIB)
        cap_b = int((default_cap if cap is None else cap) * MIB)
        pred = [[ready[j] for j in b] for b in pack([nbytes[i] for i in ready], first_cap, cap_b)]
        got = [b[2] for b in steps[1]]
        launch = [b[0] for b in steps[1]]
        sizes_mib = [b[1] * 4 / MIB for b in steps[1]]
        label = "default" if cap is None else f"{cap:g}"
        tag = "default" if cap is None else f"{cap:g}".replace(".", "p")
        value(f"n_step1_{tag}", len(steps[0]), fixed="DDP's first step: one bucket, whatever the cap")
        if cap is not None:
            value(f"cap_{tag}", cap, unit="MiB", fixed="the cap of this row: an input of Given, not nudged")
        value(f"n_buckets_{tag}", len(got))
        value(f"n_pred_{tag}", len(pred))
        value(f"first_bucket_mib_{tag}", sizes_mib[0], unit="MiB")
        value(f"largest_bucket_mib_{tag}", max(sizes_mib), unit="MiB")
        value(f"sizes_mib_{tag}", sizes_mib)
        print(f"  {label:<14}{first_cap / MIB:>10.2f}{len(steps[0]):>8}{len(got):>8}{len(pred):>10}  "
              + ", ".join(f"{s:.2f}" for s in sizes_mib))
        same_all = all(r["buckets"][str(cap)][1:] == [steps[1], steps[1]] for r in outs)
        rows.append((cap, steps, pred, got, launch, same_all))
        sanity(f"match_{tag}", pred == got and launch == list(range(len(got))) and same_all
               and len(steps[0]) == 1 and steps[2] == steps[1],
               "from the second step on, the buckets are those the rule predicts, parameter for parameter, "
               "launched in index order, on both ranks; the first step has one bucket",
               operands=(len(pred), len(got)), relation="equal")
    counts = [len(r[3]) for r in rows[1:]]
    sanity("fewer_with_cap", all(a >= b for a, b in zip(counts, counts[1:], strict=False)) and counts[0] > counts[-1],
           "raising the cap never adds a bucket", operands=(counts[0], counts[-1]), relation="not")

    # -- time -----------------------------------------------------------------------------------------
    tm = o["timing"]
    k = value("k_small", tm["k"])
    n = repeats * inner
    e_small = estimate("t_small_ms", [1e3 * t for t in tm["t_small"]], unit="ms", n=n, method="bootstrap",
                       measured=f"one DDP step (forward, backward, {k} bucket all-reduces) on rank 0, wall time, "
                       f"per repeat the shortest of {inner}")
    e_one = estimate("t_one_ms", [1e3 * t for t in tm["t_one"]], unit="ms", n=n, method="bootstrap",
                     measured="one DDP step with one bucket on rank 0, wall time, per repeat the shortest of "
                     f"{inner}")
    e_k = estimate("t_k_ms", [1e3 * t for t in tm["t_k"]], unit="ms", n=n, method="bootstrap",
                   measured=f"the {k} buckets' bytes all-reduced in {k} back-to-back calls, rank 0, wall time")
    e_1 = estimate("t_1_ms", [1e3 * t for t in tm["t_1"]], unit="ms", n=n, method="bootstrap",
                   measured="the same bytes all-reduced in one call, rank 0, wall time")
    e_alpha = estimate("alpha_us", [1e6 * t for t in tm["alpha"]], unit="us", n=repeats * blocks * tiny_calls,
                       method="bootstrap",
                       measured=f"one all-reduce of one fp32 element: per repeat the quickest of {blocks} blocks of "
                       f"{tiny_calls} back-to-back calls, its mean per call")
    extra = [1e3 * (a - b) for a, b in zip(tm["t_k"], tm["t_1"], strict=True)]
    e_extra = estimate("extra_ms", extra, unit="ms", n=n, method="bootstrap",
                       measured=f"{k} calls minus one call for the same bytes, per repeat")
    pred_extra = value("pred_extra_ms", (k - 1) * float(e_alpha) / 1e3, unit="ms",
                       measured="(k - 1) times the measured latency of one tiny all-reduce, with its interval",
                       n=e_alpha.n, repeats=e_alpha.repeats, repeated="runs",
                       interval=((k - 1) * e_alpha.lo / 1e3, (k - 1) * e_alpha.hi / 1e3), interval_kind=e_alpha.kind)
    print(f"\nTiming over {repeats} repeats of {inner} rounds (rank 0, wall clock, {len(outs)} processes, shared "
          "cores): mean with its bootstrap interval, then the median and the range of the repeats")
    figs = {"step, small buckets": [1e3 * t for t in tm["t_small"]], "step, one bucket": [1e3 * t for t in tm["t_one"]],
            "all-reduce in k calls": [1e3 * t for t in tm["t_k"]],
            "all-reduce in one call": [1e3 * t for t in tm["t_1"]],
            "k calls - one call": extra}
    for (label, xs), e in zip(figs.items(), (e_small, e_one, e_k, e_1, e_extra), strict=True):
        med = sorted(xs)[len(xs) // 2] if len(xs) % 2 else sum(sorted(xs)[len(xs) // 2 - 1:len(xs) // 2 + 1]) / 2
        print(f"  {label:<26}{float(e):>9.2f} ms  ({e.lo:.2f} to {e.hi:.2f}); median {med:.2f}, "
              f"range {min(xs):.2f} to {max(xs):.2f}")
    al = [1e6 * t for t in tm["alpha"]]
    print(f"  one tiny all-reduce (alpha) {float(e_alpha):>7.1f} us  ({e_alpha.lo:.1f} to {e_alpha.hi:.1f}); "
          f"range {min(al):.1f} to {max(al):.1f}; (k - 1) alpha = {pred_extra:.2f} ms for k = {k}")
    slower_k = sum(1 for d in extra if d > 0)
    slower_s = sum(1 for a, b in zip(tm["t_small"], tm["t_one"], strict=True) if a > b)
    print(f"  repeats where the k calls were slower than one call: {slower_k} of {repeats}; "
          f"where the small-bucket step was slower than the one-bucket step: {slower_s} of {repeats}")

    # -- the named models: 25 MiB buckets of fp32 gradients, ready order = reverse of registration -----
    cap25 = default_cap * MIB
    named = {}
    for key, shapes in (
        ("gpt2", gpt2_shapes(fact("gpt2_vocab", "V_gpt2", nudge=0), fact("gpt2_hidden", "d_gpt2"),
                             fact("gpt2_layers", "L_gpt2"), fact("gpt2_context", "ctx_gpt2", nudge=0))),
        ("llama", llama_shapes(fact("llama2_7b_vocab", "V_llama", nudge=0), fact("llama2_7b_hidden", "d_llama"),
                               fact("llama2_7b_layers", "L_llama"),
                               fact("llama2_7b_intermediate", "f_llama", nudge=0))),
    ):
        rev = shapes[::-1]
        sizes = [4 * torch.Size(s).numel() for s in rev]
        mine = pack(sizes, first_default, cap25)
        metas = [torch.empty(s, device="meta") for s in rev]
        theirs, _ = dist._compute_bucket_assignment_by_size(metas, [first_default, cap25])
        n_par = sum(torch.Size(s).numel() for s in shapes)
        value(f"{key}_params", n_par)
        value(f"{key}_grad_mib", 4 * n_par / MIB, unit="MiB")
        value(f"{key}_buckets", len(mine))
        value(f"{key}_bytes_over_cap", 4 * n_par / cap25)
        big = sum(1 for s in sizes if s >= cap25)
        value(f"{key}_tensors_over_cap", big)
        sanity(f"{key}_torch_agrees", [sorted(b) for b in mine] == [sorted(b) for b in theirs],
               "the rule's buckets are torch's own packer's, on meta tensors of the model's shapes",
               operands=(len(mine), len(theirs)), relation="equal")
        named[key] = (n_par, len(mine), big)
        bucket_mib = [sum(sizes[i] for i in b) / MIB for b in mine]
        value(f"{key}_largest_bucket_mib", max(bucket_mib), unit="MiB")
        value(f"{key}_first_bucket_mib", bucket_mib[0], unit="MiB")
        value(f"{key}_smallest_bucket_mib", min(bucket_mib), unit="MiB")
        if key == "gpt2":
            value("gpt2_sizes_mib", bucket_mib)
            value("gpt2_wte_mib", 4 * shapes[0][0] * shapes[0][1] / MIB, unit="MiB")
            value("gpt2_last_in_caps", bucket_mib[-1] / default_cap)
            value("gpt2_layer_bucket_mib", bucket_mib[1], unit="MiB")
            value("gpt2_layer_buckets", sum(1 for b in bucket_mib[1:-1] if abs(b - bucket_mib[1]) < 1e-9))
            print("  gpt2 buckets, MiB, in launch order: " + ", ".join(f"{b:.1f}" for b in bucket_mib))
        print(f"  {key}: {n_par:,} parameters, {4 * n_par / MIB:,.1f} MiB of fp32 gradients, "
              f"{len(mine)} buckets at the default caps ({big} tensors alone exceed the cap)")
    sanity("gpt2_fewer_than_ratio", named["gpt2"][1] < 4 * named["gpt2"][0] / cap25,
           "GPT-2 small needs fewer buckets than its bytes over 25 MiB: the last bucket holds the token embedding, "
           "several caps on its own, and a bucket closes only once it holds at least the cap", operands=(named["gpt2"][1], 4 * named["gpt2"][0] / cap25), relation="fewer")
    sanity("llama_one_per_matrix", named["llama"][1] == named["llama"][2] and named["llama"][2] > 0,
           "Llama 2 7B has as many buckets as tensors larger than the cap: every matrix is a bucket of its own, "
           "the norms riding along", operands=(named["llama"][1], named["llama"][2]), relation=("equal", "larger"))
