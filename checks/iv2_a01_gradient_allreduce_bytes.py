# numbook: processes=5, timeout=420
"""IV.2.A01 — Gradient all-reduce bytes per step in data parallelism.

A small fp32 model (a frozen input projection, a registered buffer, three trainable Linear layers) wrapped in
torch.nn.parallel.DistributedDataParallel on gloo, world workers each with its own micro-batch. A DDP
communication hook records every bucket it is handed (the flat buffer's bytes and the parameters in it) and then
does what torch's default allreduce_hook does (divide by the world size, all_reduce, return the buffer). The
bytes reduced per step are counted on the real buffers and set against 4 bytes times the trainable parameters;
each rank's gradient after the step is set against the gradient of the whole batch computed in one process, and
against DDP without the hook. Then Llama 2 7B, built on the meta device: its gradient bytes per step in fp32 and
bf16, and the bytes each rank sends in a ring all-reduce of them, 2(N-1)/N of the buffer, at two ring sizes.
"""

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from numbook.check import fact, given, run_group, sanity, value


class Net(nn.Module):
    """x -> frozen projection of (x - shift) -> fc1 -> GELU -> fc2 -> GELU -> fc3."""

    def __init__(self, d_in, h, d_out):
        super().__init__()
        self.register_buffer("shift", torch.linspace(-1.0, 1.0, d_in))     # a buffer: no gradient
        self.frozen = nn.Linear(d_in, d_in, bias=False).requires_grad_(False)  # one frozen parameter
        self.fc1, self.fc2, self.fc3 = nn.Linear(d_in, h), nn.Linear(h, h), nn.Linear(h, d_out)

    def forward(self, x):
        x = self.frozen(x - self.shift)
        return self.fc3(F.gelu(self.fc2(F.gelu(self.fc1(x)))))


def make(d_in, h, d_out, seed):
    torch.manual_seed(seed)
    return Net(d_in, h, d_out)


def batch(world, b, d_in, d_out, seed):
    """The global batch of world * b rows; rank r takes rows r*b .. (r+1)*b - 1."""
    g = torch.Generator().manual_seed(seed + 1)
    return torch.randn(world * b, d_in, generator=g), torch.randn(world * b, d_out, generator=g)


def recording_hook(state, bucket):
    """torch's default allreduce_hook written in place, after recording the bucket it is handed."""
    buf = bucket.buffer()
    state["buckets"].append({"index": bucket.index(), "numel": buf.numel(), "nbytes": buf.numel() * buf.element_size(),
                             "dtype": str(buf.dtype), "param_numel": sum(p.numel() for p in bucket.parameters()),
                             "n_params": len(bucket.parameters())})
    buf.div_(dist.get_world_size())                       # divide first, as the default hook does
    return dist.all_reduce(buf, async_op=True).get_future().then(lambda fut: fut.value()[0])


def worker(rank, world, d_in, h, d_out, b, seed, steps):
    x, y = batch(world, b, d_in, d_out, seed)
    xs, ys = x[rank * b:(rank + 1) * b], y[rank * b:(rank + 1) * b]
    state = {"buckets": []}
    ddp = DDP(make(d_in, h, d_out, seed))
    ddp.register_comm_hook(state, recording_hook)
    plain = DDP(make(d_in, h, d_out, seed))               # the same model, DDP's built-in reduction, no hook
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    per_step, grads = [], None
    for step in range(steps):
        state["buckets"].clear()
        opt.zero_grad(set_to_none=True)
        F.mse_loss(ddp(xs), ys).backward()
        per_step.append([dict(bk) for bk in state["buckets"]])
        if step == 0:
            grads = {n: p.grad.numpy().copy() for n, p in ddp.module.named_parameters() if p.grad is not None}
            F.mse_loss(plain(xs), ys).backward()
            plain_grads = {n: p.grad.numpy().copy() for n, p in plain.module.named_parameters() if p.grad is not None}
        opt.step()
    return {"per_step": per_step, "grads": grads, "plain_grads": plain_grads,
            "no_grad": [n for n, p in ddp.module.named_parameters() if p.grad is None]}


def row(label, *cells, w=34, cw=14):
    print(f"  {label:<{w}}" + "".join(f"{c!s:>{cw}}" for c in cells))


if __name__ == "__main__":
    d_in = given("d_in", 32)
    h = given("h", 64)
    d_out = given("d_out", 8)
    b = given("b", 6)
    world = given("world", 4, nudge=0)   # a world size: 5 ranks split the batch unevenly
    steps = value("steps", 2, fixed="two steps: the first, after which DDP rebuilds its buckets in the order the "
                  "gradients arrived, and one with the rebuilt buckets")
    seed = given("seed", 0, nudge=0)

    outs = run_group(worker, world, d_in, h, d_out, b, seed, steps, timeout_s=360)

    # -- (a) the bytes DDP all-reduces per step, counted on the buckets ------------------------------------------
    net = make(d_in, h, d_out, seed)
    trainable = value("n_trainable", sum(p.numel() for p in net.parameters() if p.requires_grad))
    frozen = value("n_frozen", sum(p.numel() for p in net.parameters() if not p.requires_grad))
    n_buffer = value("n_buffer", sum(t.numel() for t in net.buffers()))
    elem = value("fp32_elem", torch.tensor(0.0).element_size(), unit="B",
                 fixed="bytes of an fp32 element: a property of the dtype")
    grad_bytes = value("grad_bytes", elem * trainable, unit="B")
    value("fc_shapes", [list(p.shape) for n, p in net.named_parameters() if p.requires_grad])
    value("B_global", world * b)
    print(f"Model: frozen {d_in}x{d_in} projection ({frozen:,} parameters), a buffer of {n_buffer} elements, "
          f"fc1 {d_in}->{h}, fc2 {h}->{h}, fc3 {h}->{d_out}: {trainable:,} trainable parameters, "
          f"{grad_bytes:,} bytes of fp32 gradient")
    print(f"DDP on gloo, {world} ranks, micro-batch {b} rows each, global batch {world * b} rows; {steps} steps\n")
    row("step, rank", "buckets", "bucket bytes", "sum (B)")
    step_bytes = []
    for s in range(steps):
        for r, o in enumerate(outs):
            bks = o["per_step"][s]
            tot = sum(bk["nbytes"] for bk in bks)
            step_bytes.append(tot)
            row(f"step {s}, rank {r}", len(bks), "+".join(str(bk["nbytes"]) for bk in bks), f"{tot:,}")
    all_buckets = [bk for o in outs for st in o["per_step"] for bk in st]
    reduced = value("reduced_bytes", sum(bk["nbytes"] for bk in outs[0]["per_step"][0]),
                    unit="B")
    value("n_buckets", len(outs[0]["per_step"][0]), fixed="one bucket: the model is far under the 25 MiB cap at any nearby size")
    value("bucket_dtypes", sorted({bk["dtype"] for bk in all_buckets})[0])
    sanity("reduced_is_grad_bytes", all(t == grad_bytes for t in step_bytes) and reduced == grad_bytes,
           "on every rank and every step the buckets all-reduced hold exactly 4 bytes per trainable parameter",
           operands=(reduced, grad_bytes), relation="equal")
    sanity("frozen_and_buffer_excluded",
           all(bk["param_numel"] == bk["numel"] for bk in all_buckets)
           and reduced == elem * trainable and reduced < elem * (trainable + frozen + n_buffer)
           and outs[0]["no_grad"] == ["frozen.weight"],
           "the buckets hold the trainable parameters' gradients and nothing else: not the frozen weight, "
           "which has no gradient, nor the buffer", operands=(reduced, elem * (trainable + frozen + n_buffer)),
           relation="not")
    value("with_frozen_bytes", elem * (trainable + frozen), unit="B")

    # -- (b) every rank's gradient is the whole batch's ----------------------------------------------------------
    x, y = batch(world, b, d_in, d_out, seed)
    ref = make(d_in, h, d_out, seed)
    F.mse_loss(ref(x), y).backward()
    ref_g = {n: p.grad for n, p in ref.named_parameters() if p.grad is not None}
    for o in outs:                                        # numpy arrays over the queue; tensors again here
        o["grads"] = {n: torch.from_numpy(a) for n, a in o["grads"].items()}
        o["plain_grads"] = {n: torch.from_numpy(a) for n, a in o["plain_grads"].items()}
    g0 = outs[0]["grads"]
    rank_diff = max((o["grads"][n] - g0[n]).abs().max().item() for o in outs for n in g0)
    ref_diff = max((o["grads"][n] - ref_g[n]).abs().max().item() for o in outs for n in g0)
    ref_scale = max(g.abs().max().item() for g in ref_g.values())
    hook_vs_plain = max((o["grads"][n] - o["plain_grads"][n]).abs().max().item() for o in outs for n in g0)
    value("rank_diff", rank_diff, dtype="float32", fixed="zero: every rank holds the same all-reduced gradient, bit for bit")
    value("ref_diff", ref_diff, dtype="float32")
    value("ref_rel", ref_diff / ref_scale, dtype="float32")
    value("hook_vs_plain", hook_vs_plain, dtype="float32", fixed="zero: the hook does what DDP's built-in reduction does")
    # each rank alone: the gradient of its own micro-batch, far from the whole batch's
    solo = make(d_in, h, d_out, seed)
    F.mse_loss(solo(x[:b]), y[:b]).backward()
    solo_diff = value("solo_diff", max((p.grad - ref_g[n]).abs().max().item() for n, p in solo.named_parameters()
                                       if p.grad is not None), dtype="float32")
    print(f"\nAfter step 0: largest |g_rank - g_rank0| over all ranks and entries {rank_diff:.3e}; "
          f"largest |g_rank - g_whole_batch| {ref_diff:.3e} (largest |g| {ref_scale:.3e}); "
          f"recording hook against DDP without it {hook_vs_plain:.3e}; "
          f"rank 0's own micro-batch alone against the whole batch {solo_diff:.3e}")
    sanity("ranks_identical", rank_diff == 0.0, "after the all-reduce every rank holds the same gradient, bit for bit",
           operands=(rank_diff, 0.0), relation="equal")
    sanity("equals_whole_batch", ref_diff < 1e-6 * max(1.0, ref_scale) and ref_diff < solo_diff * 1e-4,
           "every rank's gradient equals the whole batch's within fp32 rounding, while one micro-batch's own gradient "
           "is far from it", operands=(ref_diff, solo_diff), relation="smaller")
    sanity("hook_changes_nothing", hook_vs_plain == 0.0,
           "the recording hook gives bit for bit the gradient of DDP's built-in reduction",
           operands=(hook_vs_plain, 0.0), relation="equal")

    # -- Llama 2 7B: gradient bytes per step and ring traffic ----------------------------------------------------
    V = fact("llama2_7b_vocab", "V")
    d = fact("llama2_7b_hidden", "d")
    L = fact("llama2_7b_layers", "L")
    f = fact("llama2_7b_intermediate", "f")
    H = fact("llama2_7b_heads", "H")
    H_kv = fact("llama2_7b_kv_heads", "H_kv")
    vd = fact("llama2_7b_vocab_matrices", "vocab_matrices", nudge=0)  # 2: untied head; 1 would be tied, no nudge
    n_small = given("n_ring_small", 8)
    n_large = given("n_ring_large", 64)
    with torch.device("meta"):
        kv = d * H_kv // H                                                              # k and v width
        layers = [nn.ModuleList([nn.Linear(d, d, bias=False), nn.Linear(d, kv, bias=False),  # q, k
                                 nn.Linear(d, kv, bias=False), nn.Linear(d, d, bias=False),   # v, o
                                 nn.Linear(d, f, bias=False), nn.Linear(d, f, bias=False),    # gate, up
                                 nn.Linear(f, d, bias=False), nn.RMSNorm(d), nn.RMSNorm(d)]) for _ in range(L)]
        embed, head = nn.Embedding(V, d), nn.Linear(d, V, bias=False)
        if vd == 1:
            head.weight = embed.weight                                                  # a tied head: one matrix
        llama = nn.ModuleList([embed, *layers, nn.RMSNorm(d), head])
    N = value("N_7b", sum(p.numel() for p in llama.parameters()))
    bf16_elem = value("bf16_elem", torch.tensor(0.0, dtype=torch.bfloat16).element_size(), unit="B",
                      fixed="bytes of a bf16 element: a property of the dtype")
    GB = 1e9
    g32 = value("grad_fp32_gb", elem * N / GB, unit="GB")
    g16 = value("grad_bf16_gb", bf16_elem * N / GB, unit="GB")
    print(f"\nLlama 2 7B on the meta device: {N:,} parameters; gradient per step {g32:.2f} GB in fp32, "
          f"{g16:.2f} GB in bf16")
    row("ring of N ranks", "2(N-1)/N", "fp32 GB", "bf16 GB")
    for tag, n in (("small", n_small), ("large", n_large)):
        factor = value(f"ring_factor_{tag}", 2 * (n - 1) / n)
        s32 = value(f"send_fp32_{tag}_gb", factor * elem * N / GB, unit="GB")
        s16 = value(f"send_bf16_{tag}_gb", factor * bf16_elem * N / GB, unit="GB")
        row(f"N = {n}", f"{factor:.4f}", f"{s32:.2f}", f"{s16:.2f}")
    value("send_bf16_limit_gb", 2 * bf16_elem * N / GB, unit="GB")
    sanity("ring_below_twice", 1 < 2 * (n_large - 1) / n_large < 2 and 2 * (n_small - 1) / n_small < 2 * (n_large - 1)
           / n_large, "each rank sends less than twice the buffer, more at 64 ranks than at 8",
           operands=(2 * (n_large - 1) / n_large, 2), relation=("smaller", "grows"))
    sanity("bf16_half", bf16_elem * N * 2 == elem * N, "bf16 gradients are half the fp32 bytes",
           operands=(g16, g32), relation="half")
