"""II.2.A02 — MFU and HFU, measured on this CPU.

Takes this CPU's peak to be one core's achieved FLOP/s on a large square fp32 product (torch.set_num_threads(1)),
not a datasheet figure. Times, interleaved, one training step of a small Llama-style model (forward, backward,
AdamW update) with and without activation checkpointing, and the AdamW update alone. Each round measures them in
turn, each the shortest of ITERS timed iterations (on a shared machine other work only adds time, so the
shortest is the least disturbed);
every figure is formed within a round (a ratio divides two shortest times of the same round) and recorded with
estimate() as the mean over the rounds with a 95% t interval. The FLOPs of the step are counted with
FlopCounterMode (II.2.A01): the model FLOPs with PaLM's convention (the full attention square, no recomputation),
the hardware FLOPs of the checkpointed step with its recomputed forward. MFU and HFU follow PaLM (Chowdhery et
al., 2022, appendix B).
"""

import math
import time

import torch
from _train_flops import Llama, block_weights, count, matrix_weights
from torch.utils.checkpoint import set_checkpoint_early_stop
from torch.utils.flop_counter import FlopCounterMode

from numbook.check import estimate, given, sanity, value

torch.set_num_threads(1)
ROUNDS, ITERS = 8, 3
LEVEL = 0.95            # the confidence level of the t intervals


def row(label, *cells, w=36, cw=20):
    print(f"  {label:<{w}}" + "".join(f"{c!s:>{cw}}" for c in cells))


V = given("V", 256)
H = given("H", 4, nudge=4)
d = given("d", 256, nudge=16)
L = given("L", 2)
f = given("f", 688)
B = given("B", 2)
T = given("T", 128)
n_peak = given("n_peak", 1024, nudge=64)
seed = given("seed", 0, nudge=0)
tok = B * T
value("Q", d // H)
value("peak_product_gflop", 2 * n_peak**3 / 1e9, unit="GFLOP")

g = torch.Generator().manual_seed(seed)
tokens = torch.randint(0, V, (B, T), generator=g)


def make(ckpt):
    torch.manual_seed(seed)
    return Llama(V, d, L, H, f, ckpt=ckpt)


# -- the FLOPs of one step, counted -------------------------------------------------------------------------
plain, ck = make(False), make(True)
fwd_m, bwd_m, _ = count(plain, tokens, math=True)          # PaLM's convention: the full attention square
fwd_c, bwd_c, _ = count(ck, tokens, math=True)             # what the checkpointed step runs (torch's early stop)
with set_checkpoint_early_stop(False):                      # the whole blocks' forward run again
    fwd_f, bwd_f, _ = count(ck, tokens, math=True)
Nw = value("Nw", matrix_weights(plain))
model_flops = value("model_flops_step", fwd_m + bwd_m, unit="FLOP")
hw_flops = value("hw_flops_step", fwd_c + bwd_c, unit="FLOP")
value("model_gflop_step", model_flops / 1e9)
value("hw_gflop_step", hw_flops / 1e9)
value("n_tok", tok)
hw_over_model = value("hw_over_model", hw_flops / model_flops)
hw_full = value("hw_full_flops_step", fwd_f + bwd_f, unit="FLOP")
value("hw_full_gflop_step", hw_full / 1e9)
value("hw_full_over_model", hw_full / model_flops)
Nb = block_weights(ck)
down = 2 * L * d * f * tok                                  # down_proj's forward product over the step
value("down_gflop_step", down / 1e9)
N_all = value("N", sum(p.numel() for p in plain.parameters()))
palm_flops = (6 * N_all + 12 * L * H * (d // H) * T) * tok  # PaLM's 6N + 12LHQT, N all the parameters
value("palm_gflop_step", palm_flops / 1e9)
value("palm_over_model", palm_flops / model_flops - 1)
value("attn_share", 12 * L * T * d / (6 * Nw + 12 * L * T * d))
sanity("model_flops_closed", model_flops == (6 * Nw + 12 * L * T * d) * tok,
       "the model FLOPs of the step are 6 N_w + 12 L T d per token, as II.2.A01 counts them",
       operands=(model_flops, (6 * Nw + 12 * L * T * d) * tok), relation="equal")
sanity("hw_over_model_count", hw_flops > model_flops and fwd_c == fwd_m,
       "the checkpointed step does more FLOPs than the model FLOPs: the recomputed forward, in the backward",
       operands=(hw_flops, model_flops), relation="larger")
sanity("hw_early_stop", hw_full - model_flops == (2 * Nb + 4 * L * T * d) * tok and hw_flops == hw_full - down,
       "the recomputed extra is the blocks' forward with early stop off; by default it is smaller by down_proj's "
       "product, which nothing saves", operands=(hw_flops, hw_full), relation="smaller")
sanity("palm_over_count", palm_flops > model_flops and palm_flops - model_flops == 6 * (N_all - Nw) * tok,
       "PaLM's 6N + 12LHQT with N all the parameters is larger than the counted model FLOPs by 6 (V d + norm gains) "
       "a token", operands=(palm_flops, model_flops), relation="larger")
print(f"Small model: V={V}, d={d}, L={L}, H={H}, f={f}; N_w = {Nw:,}; one step on {B} x {T} tokens")
row("model FLOPs per step (6N_w + 12LTd)", f"{model_flops / 1e9:.3f} G")
row("hardware FLOPs, checkpointed", f"{hw_flops / 1e9:.3f} G", f"x {hw_over_model:.3f}")
row("  with early stop off", f"{hw_full / 1e9:.3f} G", f"x {hw_full / model_flops:.3f}")
row("PaLM's 6N + 12LHQT, N all parameters", f"{palm_flops / 1e9:.3f} G", f"x {palm_flops / model_flops:.3f}")


# -- the steps, timed ---------------------------------------------------------------------------------------
def trainer(model):
    opt = torch.optim.AdamW(model.parameters())

    def step():
        opt.zero_grad(set_to_none=True)
        model(tokens).backward()
        opt.step()
    step()                                                  # AdamW's state exists from here on
    return step, opt


step_plain, opt_plain = trainer(plain)
with FlopCounterMode(display=False) as fc:
    opt_plain.step()                                        # the update's FLOPs, as the counter sees them
opt_counted = value("opt_counted", fc.get_total_flops(), unit="FLOP",
                    fixed="the counter has formulas for matrix products only; AdamW's update is elementwise")
step_ck, _ = trainer(ck)

a = torch.randn(n_peak, n_peak, generator=g)               # the large square product that stands for the peak
b = torch.randn(n_peak, n_peak, generator=g)
def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


work = {"peak": lambda: a @ b, "step": step_plain, "step_ck": step_ck, "opt": opt_plain.step}
for fn in work.values():                                   # one warm-up of each
    fn()
rounds = {k: [] for k in ("peak_gflops", "step_ms", "step_ck_ms", "opt_ms")}
for _ in range(ROUNDS):
    best = {k: math.inf for k in work}
    for _ in range(ITERS):                                 # the four interleaved, so that a disturbance meets all
        for k, fn in work.items():
            best[k] = min(best[k], timed(fn))
    rounds["peak_gflops"].append(2 * n_peak**3 / best["peak"] / 1e9)
    rounds["step_ms"].append(best["step"] * 1e3)
    rounds["step_ck_ms"].append(best["step_ck"] * 1e3)
    rounds["opt_ms"].append(best["opt"] * 1e3)
pk, sp, sc = rounds["peak_gflops"], rounds["step_ms"], rounds["step_ck_ms"]
rounds["mfu"] = [model_flops / (t / 1e3) / (p * 1e9) for t, p in zip(sp, pk, strict=True)]
rounds["mfu_ck"] = [model_flops / (t / 1e3) / (p * 1e9) for t, p in zip(sc, pk, strict=True)]
rounds["hfu_ck"] = [hw_flops / (t / 1e3) / (p * 1e9) for t, p in zip(sc, pk, strict=True)]
rounds["ck_over_plain"] = [c / p for c, p in zip(sc, sp, strict=True)]
rounds["opt_share"] = [o / s for o, s in zip(rounds["opt_ms"], sp, strict=True)]
rounds["at_peak_over_step"] = [s / (model_flops / (p * 1e9) * 1e3) for s, p in zip(sp, pk, strict=True)]
UNITS = {"peak_gflops": "GFLOP/s", "step_ms": "ms", "step_ck_ms": "ms", "opt_ms": "ms"}
MEASURED = f"timed on this machine, one thread: the shortest of {ITERS} iterations in each of {ROUNDS} rounds"
est = {k: estimate(k, xs, unit=UNITS.get(k), n=ROUNDS * ITERS, repeated="rounds", level=LEVEL, measured=MEASURED)
       for k, xs in rounds.items()}
value("rounds", ROUNDS, fixed="the number of measurement rounds: a choice of the check")
value("iters", ITERS, fixed="the timed iterations of each measurement in a round: a choice of the check")
value("n_timed", ROUNDS * ITERS, fixed="rounds times iterations: a choice of the check")
value("ci_level", LEVEL, fixed="the confidence level of every interval of the check: a choice of the check")

print(f"\nMeasured in {ROUNDS} rounds, each the shortest of {ITERS} timed iterations: mean and {est['mfu'].kind}")
row("", "mean", f"{LEVEL:.0%} CI")
for k, e in est.items():
    row(k, f"{e.point:.4g}", f" {e.lo:.4g} to {e.hi:.4g}")

mfu, mfu_ck, hfu_ck = est["mfu"], est["mfu_ck"], est["hfu_ck"]
# HFU / MFU of one timed step is the ratio of two counts: the same time divides both, so this follows from the
# counts and tests nothing measured
sanity("hfu_at_least_mfu", all(h >= m for h, m in zip(rounds["hfu_ck"], rounds["mfu_ck"], strict=True))
       and abs(hfu_ck.point / mfu_ck.point - hw_over_model) < 1e-9 and hw_flops >= model_flops,
       "HFU over MFU is the hardware FLOPs over the model FLOPs in every round, whatever the time: a consequence "
       "of the counts", operands=(hfu_ck.point / mfu_ck.point, hw_over_model), relation=("at least", "larger"))
sanity("mfu_between", mfu.lo > 0.2 and mfu_ck.lo > 0.15 and hfu_ck.lo > 0.2
       and max(mfu.hi, mfu_ck.hi, hfu_ck.hi) < 1.0,
       "MFU and HFU lie above the page's lower bounds and below the large product's rate over their whole intervals",
       operands=(max(mfu.hi, mfu_ck.hi, hfu_ck.hi), 1.0), relation="smaller")
# a tighter bound failed once under heavy load: a round whose large product is disturbed inflates that round's MFU
sanity("step_over_at_peak", est["at_peak_over_step"].lo > 1.0,
       "the plain step takes longer than its model FLOPs would take at the large product's rate (MFU below 1)",
       operands=(est["at_peak_over_step"].lo, 1.0))
sanity("opt_counts_nothing", est["opt_share"].lo > 0.05 and opt_counted == 0,
       "the AdamW update takes more than 5% of the step and the counter records no FLOPs for it",
       operands=(est["opt_share"].lo, 0.05), relation="not")
