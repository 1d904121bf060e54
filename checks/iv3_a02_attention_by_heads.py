# numbook: processes=6, timeout=300
"""IV.3.A02 — Attention split by heads, and a whole layer's communication.

Self-attention with grouped-query heads split over t gloo workers as Megatron-LM does (Shoeybi et al. 2019,
section 3): the Q, K and V projections by columns, so that each rank holds a/t query heads and kv/t key/value
heads and runs causal scaled_dot_product_attention on them alone, the output projection by rows, with f before
the projections and g after the output projection. Then a whole pre-norm layer (attention and a GeLU MLP, each
split the same way). Real autograd on t = 2 and t = 4 ranks, compared with the unsharded layer in one process;
every collective counted with its bytes. Then the same count for Llama 2 70B at t = 8 in bf16, the bytes a
ring all-reduce sends per rank, which t the grouped KV heads allow, and the KV cache per rank.
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F

from numbook.check import fact, given, run_group, sanity, value

LOG = []            # (phase, bytes of the all-reduce)
PHASE = ["forward"]


def all_reduce(x):
    LOG.append((PHASE[0], x.numel() * x.element_size()))
    dist.all_reduce(x)
    return x


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


def weights(h, a, kv, seed):
    """Full weights of one layer, drawn alike in every process."""
    gen = torch.Generator().manual_seed(seed)
    hd = h // a
    W = {"q": torch.randn(h, h, generator=gen) / h ** 0.5,
         "k": torch.randn(h, kv * hd, generator=gen) / h ** 0.5,
         "v": torch.randn(h, kv * hd, generator=gen) / h ** 0.5,
         "o": torch.randn(h, h, generator=gen) / h ** 0.5,
         "up": torch.randn(h, 4 * h, generator=gen) / h ** 0.5,
         "down": torch.randn(4 * h, h, generator=gen) / (4 * h) ** 0.5}
    return W


def data(b, s, h, seed):
    gen = torch.Generator().manual_seed(seed + 1)
    return torch.randn(b, s, h, generator=gen), torch.randn(b, s, h, generator=gen)


def attention(x, W, a, kv, hd):
    """Causal attention of the heads whose projections W holds: a query heads, kv key/value heads."""
    b, s, _ = x.shape
    q = (x @ W["q"]).view(b, s, a, hd).transpose(1, 2)
    k = (x @ W["k"]).view(b, s, kv, hd).transpose(1, 2)
    v = (x @ W["v"]).view(b, s, kv, hd).transpose(1, 2)
    k, v = k.repeat_interleave(a // kv, dim=1), v.repeat_interleave(a // kv, dim=1)   # grouped-query heads
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return o.transpose(1, 2).reshape(b, s, a * hd) @ W["o"]


def shard(W, rank, world, a, kv, hd):
    """Rank's columns of q, k, v (its heads), rows of o, columns of up, rows of down."""
    nq, nk, nf = a // world * hd, kv // world * hd, W["up"].shape[1] // world
    return {"q": W["q"][:, rank * nq:(rank + 1) * nq], "k": W["k"][:, rank * nk:(rank + 1) * nk],
            "v": W["v"][:, rank * nk:(rank + 1) * nk], "o": W["o"][rank * nq:(rank + 1) * nq, :],
            "up": W["up"][:, rank * nf:(rank + 1) * nf], "down": W["down"][rank * nf:(rank + 1) * nf, :]}


def layer(x, W, a, kv, hd, tp):
    """A pre-norm layer: x + attn(norm x), then + mlp(norm). tp: wrap each block in f and g."""
    f, g = (F_op.apply, G_op.apply) if tp else ((lambda u: u), (lambda u: u))
    h = x.shape[-1]
    x = x + g(attention(f(F.layer_norm(x, (h,))), W, a, kv, hd))
    return x + g(F.gelu(f(F.layer_norm(x, (h,))) @ W["up"]) @ W["down"])


def worker(rank, world, b, s, h, a, kv, seed):
    hd = h // a
    W = {k: w.clone().requires_grad_() for k, w in shard(weights(h, a, kv, seed), rank, world, a, kv, hd).items()}
    X, dY = data(b, s, h, seed)
    out = {}
    # attention alone
    x = X.clone().requires_grad_()
    LOG.clear()
    PHASE[0] = "forward"
    y = G_op.apply(attention(F_op.apply(x), W, a // world, kv // world, hd))
    PHASE[0] = "backward"
    y.backward(dY)
    out["attn"] = {"y": y.detach().numpy(), "dx": x.grad.numpy(), "log": list(LOG),
                   "dq": W["q"].grad.numpy(), "dk": W["k"].grad.numpy(), "dv": W["v"].grad.numpy(),
                   "do": W["o"].grad.numpy()}
    for w in W.values():
        w.grad = None
    # the whole layer
    x = X.clone().requires_grad_()
    LOG.clear()
    PHASE[0] = "forward"
    y = layer(x, W, a // world, kv // world, hd, tp=True)
    PHASE[0] = "backward"
    y.backward(dY)
    out["layer"] = {"y": y.detach().numpy(), "dx": x.grad.numpy(), "log": list(LOG)}
    out["weight_bytes"] = sum(w.nbytes for w in W.values())
    return out


def reference(b, s, h, a, kv, seed):
    hd = h // a
    W = {k: w.clone().requires_grad_() for k, w in weights(h, a, kv, seed).items()}
    X, dY = data(b, s, h, seed)
    x = X.clone().requires_grad_()
    y = attention(x, W, a, kv, hd)
    y.backward(dY)
    attn = {"y": y.detach(), "dx": x.grad, "dq": W["q"].grad.clone(), "dk": W["k"].grad.clone(),
            "dv": W["v"].grad.clone(), "do": W["o"].grad.clone()}
    x = X.clone().requires_grad_()
    y = layer(x, W, a, kv, hd, tp=False)
    y.backward(dY)
    return attn, {"y": y.detach(), "dx": x.grad}, sum(w.nbytes for w in W.values())


if __name__ == "__main__":
    b = given("b", 2)
    s = given("s", 16)
    h = given("h", 64, nudge=8)          # h/a must stay whole
    a = given("a", 8, nudge=8)           # a/t and a/kv must stay whole
    kv = given("kv", 4, nudge=4)         # kv/t must stay whole
    seed = given("seed", 0, nudge=0)
    t_small = given("t_small", 2, nudge=0)   # world sizes: a/t and kv/t must be whole, the header caps the workers
    t_large = given("t_large", 4, nudge=0)

    ref_attn, ref_layer, full_w = reference(b, s, h, a, kv, seed)
    results = {t: run_group(worker, t, b, s, h, a, kv, seed, timeout_s=200) for t in (t_small, t_large)}
    elem = torch.finfo(torch.float32).bits // 8
    act_bytes = value("act_bytes", b * s * h * elem, unit="B")
    value("bsh", b * s * h)
    value("hd", h // a)
    value("elem_bytes", elem, unit="B", fixed="bytes of an fp32 element: a property of the dtype")

    print(f"Layer h = {h}, a = {a} query heads, kv = {kv} KV heads of width {h // a}; X of {b} x {s} x {h}, fp32")
    print(f"{'t':>2} {'heads/rank':>10} {'kv/rank':>8} {'attn max|dy|':>13} {'max|dx|':>9} {'max|dW|':>9} "
          f"{'layer max|dy|':>14} {'max|dx|':>9}")
    worst = {}
    for t, outs in results.items():
        o = [{k: torch.from_numpy(v) for k, v in out["attn"].items() if k != "log"} for out in outs]
        ol = [{k: torch.from_numpy(v) for k, v in out["layer"].items() if k != "log"} for out in outs]
        dW = max((torch.cat([x["dq"] for x in o], 1) - ref_attn["dq"]).abs().max().item(),
                 (torch.cat([x["dk"] for x in o], 1) - ref_attn["dk"]).abs().max().item(),
                 (torch.cat([x["dv"] for x in o], 1) - ref_attn["dv"]).abs().max().item(),
                 (torch.cat([x["do"] for x in o], 0) - ref_attn["do"]).abs().max().item())
        ay = max((x["y"] - ref_attn["y"]).abs().max().item() for x in o)
        adx = max((x["dx"] - ref_attn["dx"]).abs().max().item() for x in o)
        ly = max((x["y"] - ref_layer["y"]).abs().max().item() for x in ol)
        ldx = max((x["dx"] - ref_layer["dx"]).abs().max().item() for x in ol)
        agree = all(torch.equal(x["y"], ol[0]["y"]) and torch.equal(x["dx"], ol[0]["dx"]) for x in ol)
        worst[t] = max(ay, adx, dW, ly, ldx)
        value(f"attn_max_t{t}", max(ay, adx, dW))
        value(f"layer_max_t{t}", max(ly, ldx))
        print(f"{t:>2} {a // t:>10} {kv // t:>8} {ay:13.2e} {adx:9.2e} {dW:9.2e} {ly:14.2e} {ldx:9.2e}")
        sanity(f"close_t{t}", worst[t] < 1e-5 and agree,
               f"on t = {t} attention (output, input gradient, the gradients of W_Q, W_K, W_V and W_O) and the "
               "whole layer (output, input gradient) lie within 1e-5 of the unsharded ones in fp32, and every rank "
               "holds the same output",
               operands=(worst[t], 1e-5))
        value(f"heads_per_rank_t{t}", a // t)
        value(f"kv_per_rank_t{t}", kv // t)
        wb = value(f"rank_weight_bytes_t{t}", outs[0]["weight_bytes"], unit="B")
        sanity(f"weights_split_t{t}", wb * t == full_w, f"each of t = {t} ranks holds 1/t of the layer's weights",
               operands=(wb * t, full_w))
    value("full_weight_bytes", full_w, unit="B")

    print("\nAll-reduces per forward + backward (bytes each):")
    for t, outs in results.items():
        for part in ("attn", "layer"):
            log = outs[0][part]["log"]
            sanity(f"logs_same_{part}_t{t}", all(out[part]["log"] == log for out in outs),
                   "every rank calls the same all-reduces")
            print(f"  t = {t}, {part:<5}: " + ", ".join(f"{p} {nb:,} B" for p, nb in log))
    alog = results[t_large][0]["attn"]["log"]
    llog = results[t_large][0]["layer"]["log"]
    F_ = "counted on the real group; the structure of the split, the same for every b, s, h and t"
    value("attn_fwd", sum(p == "forward" for p, _ in alog), fixed=F_)
    value("attn_bwd", sum(p == "backward" for p, _ in alog), fixed=F_)
    lf = value("layer_fwd", sum(p == "forward" for p, _ in llog), fixed=F_)
    lb = value("layer_bwd", sum(p == "backward" for p, _ in llog), fixed=F_)
    n_layer = value("layer_ar", len(llog), fixed=F_)
    layer_bytes = value("layer_bytes", sum(nb for _, nb in llog), unit="B")
    paper_ops = fact("megatron_comm_ops_per_layer", "paper_ops", nudge=0)   # a count quoted from the paper
    sanity("paper_count", n_layer == paper_ops, "the all-reduces counted on a real layer equal the paper's count",
           operands=(n_layer, paper_ops), relation="equal")
    sanity("attn_two", [p for p, _ in alog] == ["forward", "backward"] and all(nb == act_bytes for _, nb in alog)
           and results[t_small][0]["attn"]["log"] == alog,
           "attention split by heads calls one all-reduce forward and one backward, each of b s h elements",
           operands=(len(alog), 2))
    sanity("layer_four", lf == 2 and lb == 2 and all(nb == act_bytes for _, nb in llog)
           and results[t_small][0]["layer"]["log"] == llog,
           "a whole layer calls two all-reduces forward and two backward, each of b s h elements, on t = 2 and 4",
           operands=(n_layer, 4))

    # -- a named model: Llama 2 70B at t = 8, bf16 ------------------------------------------------------------
    H = fact("llama2_70b_hidden", "H")
    L = fact("llama2_70b_layers", "L")
    A = fact("llama2_70b_heads", "A", nudge=64)      # a nudge keeps A/T whole
    KV = fact("llama2_70b_kv_heads", "KV", nudge=8)  # a nudge keeps KV/T whole
    T = given("T", 8, nudge=0)          # one node of 8 GPUs; a nudge must keep A/T and KV/T whole
    S = given("S", 4096)
    Bm = given("Bm", 1)
    bf16 = value("bf16_bytes", torch.finfo(torch.bfloat16).bits // 8, unit="B",
                 fixed="bytes of a bf16 element: a property of the dtype")
    # the same count, read off a layer built on the meta device: the all-reduced tensor is the layer's output
    x_meta = torch.empty(Bm, S, H, dtype=torch.bfloat16, device="meta")
    per_ar = value("named_ar_bytes", x_meta.nbytes, unit="B")
    sanity("named_formula", per_ar == Bm * S * H * bf16, "one all-reduce carries b s h bf16 elements",
           operands=(per_ar, Bm * S * H * bf16))
    value("named_ar_mb", per_ar / 1e6, unit="MB")
    per_layer = value("named_layer_bytes", n_layer * per_ar, unit="B")
    value("named_layer_mb", per_layer / 1e6, unit="MB")
    per_step = value("named_step_gb", L * per_layer / 1e9, unit="GB")
    value("named_step_ar", L * n_layer)
    ring = value("ring_factor", 2 * (T - 1) / T,
                 fixed="2(t-1)/t at the stated t: the ring's factor, moved only by t, a group size with no small nudge")
    ring_ar = value("ring_ar_mb", ring * per_ar / 1e6, unit="MB")
    ring_step = value("ring_step_gb", ring * L * per_layer / 1e9, unit="GB")
    value("heads_per_rank_named", A // T)
    value("kv_per_rank_named", KV // T)
    value("hd_named", H // A)
    sanity("named_whole", A % T == 0 and KV % T == 0, "at t = 8 both the query heads and the KV heads divide whole",
           operands=(A % T, KV % T))
    # which t the heads allow: a/t whole, and kv/t whole unless the KV heads are replicated
    ok = [t for t in (1, 2, 4, 8, 16, 32, 64, 128) if A % t == 0 and KV % t == 0]
    t_max = value("t_max_kv", max(ok))
    value("t_max_q", max(t for t in (1, 2, 4, 8, 16, 32, 64, 128) if A % t == 0))
    sanity("kv_limits_t", t_max == KV and A % (2 * KV) == 0 and KV % (2 * KV) != 0,
           "the largest t that splits the KV heads is the number of KV heads, below the largest that splits the "
           "query heads", operands=(t_max, A), relation="smaller")
    # the KV cache per token: 2 (K and V) x L x kv x head width x bytes; a rank holds kv/t of the heads
    kv_tok = value("kv_bytes_per_token", 2 * L * KV * (H // A) * bf16, unit="B")
    kv_rank = value("kv_rank_bytes_per_token", 2 * L * (KV // T) * (H // A) * bf16, unit="B")
    value("kv_rank_kib_per_token", kv_rank / 1024, unit="KiB")
    value("kv_kib_per_token", kv_tok / 1024, unit="KiB")
    sanity("kv_divides", kv_rank * T == kv_tok, "the KV cache per rank is the cache over t",
           operands=(kv_rank * T, kv_tok), relation="equal")
    T16 = 2 * KV                        # past t = kv: the KV heads are replicated, one whole head per rank
    kv16 = value("kv_rank_bytes_t16", 2 * L * max(KV // T16, 1) * (H // A) * bf16, unit="B")
    kv_at_kv = 2 * L * (KV // KV) * (H // A) * bf16      # at t = kv: one KV head per rank
    sanity("kv_stops", kv16 == kv_at_kv and kv16 * KV == kv_tok and KV // T16 == 0,
           "past t = kv each rank still holds one whole KV head: the cache per rank does not fall below its "
           "value at t = kv", operands=(kv16, kv_at_kv), relation="does not fall")
    value("T16", T16)
    print(f"\nLlama 2 70B: h = {H}, L = {L}, a = {A}, kv = {KV}; t = {T}, b = {Bm}, s = {S}, bf16")
    print(f"  one all-reduce: {per_ar:,} B = {per_ar / 1e6:.1f} MB; a layer ({n_layer} all-reduces) "
          f"{per_layer / 1e6:.1f} MB; {L} layers {per_step:.2f} GB per forward + backward")
    print(f"  ring all-reduce, sent per rank: the ring factor {ring:.3f} x: {ring_ar:.1f} MB each, "
          f"{ring_step:.2f} GB per step")
    print(f"  heads per rank {A // T}, KV heads per rank {KV // T}; t allowed by the KV heads: {ok}")
    print(f"  KV cache per token {kv_tok:,} B, per rank {kv_rank:,} B; at t = {T16}: {kv16:,} B per rank")

    # the Variation: t = 4
    T4 = value("T4", T // 2, fixed="half of the t = 8 the named model runs at: the Variation's group size")
    value("var_ring_factor", 2 * (T4 - 1) / T4, fixed="2(t-1)/t at t = 4: the ring's factor for the Variation's group")
    value("var_ring_ar_mb", 2 * (T4 - 1) / T4 * per_ar / 1e6, unit="MB")
    value("var_kv_rank_bytes", 2 * L * (KV // T4) * (H // A) * bf16, unit="B")
