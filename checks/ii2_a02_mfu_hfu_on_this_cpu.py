"""II.2.A02 — MFU and HFU, measured on this CPU.

Takes this CPU's peak to be one core's achieved FLOP/s on a large square fp32 product (torch.set_num_threads(1);
servebench.ceilings.matmul_flops), not a datasheet figure. Times one training step of a small Llama-style model
(forward, backward, AdamW update) with and without activation checkpointing, and the AdamW update alone. Each round measures them in turn, each the median of ITERS timed iterations;
every figure is formed within a round (a ratio divides two medians of the same round) and recorded with
estimate() as the mean over the rounds with a 95% t interval. The FLOPs of the step are counted with
FlopCounterMode (II.2.A01): the model FLOPs with PaLM's convention (the full attention square, no recomputation),
the hardware FLOPs of the checkpointed step with its recomputed forward. MFU and HFU follow PaLM (Chowdhery et
al., 2022, appendix B).
"""

import torch

from torch.utils.flop_counter import FlopCounterMode

from _train_flops import Llama, block_weights, count, matrix_weights
from numbook.check import estimate, given, sanity, value
from servebench.ceilings import matmul_flops, median_time

torch.set_num_threads(1)
CPU = torch.device("cpu")
ROUNDS, ITERS = 5, 5


def row(label, *cells, w=36, cw=16):
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

g = torch.Generator().manual_seed(seed)
tokens = torch.randint(0, V, (B, T), generator=g)


def make(ckpt):
    torch.manual_seed(seed)
    return Llama(V, d, L, H, f, ckpt=ckpt)


# -- the FLOPs of one step, counted -------------------------------------------------------------------------
plain, ck = make(False), make(True)
fwd_m, bwd_m, _ = count(plain, tokens, math=True)          # PaLM's convention: the full attention square
fwd_c, bwd_c, _ = count(ck, tokens, math=True)             # what the checkpointed step runs (torch's early stop)
Nw = value("Nw", matrix_weights(plain))
model_flops = value("model_flops_step", fwd_m + bwd_m, unit="FLOP")
hw_flops = value("hw_flops_step", fwd_c + bwd_c, unit="FLOP")
value("model_gflop_step", model_flops / 1e9)
value("hw_gflop_step", hw_flops / 1e9)
value("n_tok", tok)
hw_over_model = value("hw_over_model", hw_flops / model_flops)
value("attn_share", 12 * L * T * d / (6 * Nw + 12 * L * T * d))
sanity("model_flops_closed", model_flops == (6 * Nw + 12 * L * T * d) * tok,
       "the model FLOPs of the step are 6 N_w + 12 L T d per token, as II.2.A01 counts them",
       operands=(model_flops, (6 * Nw + 12 * L * T * d) * tok), relation="equal")
sanity("hw_over_model_count", hw_flops > model_flops and fwd_c == fwd_m,
       "the checkpointed step does more FLOPs than the model FLOPs: the recomputed forward, in the backward",
       operands=(hw_flops, model_flops), relation="larger")
print(f"Small model: V={V}, d={d}, L={L}, H={H}, f={f}; N_w = {Nw:,}; one step on {B} x {T} tokens")
row("model FLOPs per step (6N_w + 12LTd)", f"{model_flops / 1e9:.3f} G")
row("hardware FLOPs, checkpointed", f"{hw_flops / 1e9:.3f} G", f"x {hw_over_model:.3f}")


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
opt_counted = value("opt_counted", fc.get_total_flops(), unit="FLOP")
step_ck, _ = trainer(ck)

rounds = {k: [] for k in ("peak_gflops", "step_ms", "step_ck_ms", "opt_ms")}
for _ in range(ROUNDS):
    rounds["peak_gflops"].append(matmul_flops(CPU, torch.float32, n=n_peak, repeats=ITERS) / 1e9)
    rounds["step_ms"].append(median_time(step_plain, CPU, repeats=ITERS) * 1e3)
    rounds["step_ck_ms"].append(median_time(step_ck, CPU, repeats=ITERS) * 1e3)
    rounds["opt_ms"].append(median_time(opt_plain.step, CPU, repeats=ITERS) * 1e3)
pk, sp, sc = rounds["peak_gflops"], rounds["step_ms"], rounds["step_ck_ms"]
rounds["mfu"] = [model_flops / (t / 1e3) / (p * 1e9) for t, p in zip(sp, pk, strict=True)]
rounds["mfu_ck"] = [model_flops / (t / 1e3) / (p * 1e9) for t, p in zip(sc, pk, strict=True)]
rounds["hfu_ck"] = [hw_flops / (t / 1e3) / (p * 1e9) for t, p in zip(sc, pk, strict=True)]
rounds["ck_over_plain"] = [c / p for c, p in zip(sc, sp, strict=True)]
rounds["opt_share"] = [o / s for o, s in zip(rounds["opt_ms"], sp, strict=True)]
rounds["at_peak_over_step"] = [s / (model_flops / (p * 1e9) * 1e3) for s, p in zip(sp, pk, strict=True)]
UNITS = {"peak_gflops": "GFLOP/s", "step_ms": "ms", "step_ck_ms": "ms", "opt_ms": "ms"}
MEASURED = f"timed on this machine, one thread: the median of {ITERS} iterations in each of {ROUNDS} rounds"
est = {k: estimate(k, xs, unit=UNITS.get(k), n=ROUNDS * ITERS, repeated="rounds", measured=MEASURED)
       for k, xs in rounds.items()}
value("rounds", ROUNDS, fixed="the number of measurement rounds: a choice of the check")
value("iters", ITERS, fixed="the timed iterations of each measurement in a round: a choice of the check")

print(f"\nMeasured in {ROUNDS} rounds, each the median of {ITERS} timed iterations: mean and 95% t interval")
row("", "mean", "95% CI")
for k, e in est.items():
    row(k, f"{e.point:.4g}", f"{e.lo:.4g} to {e.hi:.4g}")

mfu, mfu_ck, hfu_ck = est["mfu"], est["mfu_ck"], est["hfu_ck"]
# HFU / MFU of one timed step is the ratio of two counts: the same time divides both
sanity("hfu_at_least_mfu", all(h >= m for h, m in zip(rounds["hfu_ck"], rounds["mfu_ck"], strict=True))
       and abs(hfu_ck.point / mfu_ck.point - hw_over_model) < 1e-9,
       "HFU is at least MFU in every round, by the ratio of the counted FLOPs: the same time divides both",
       operands=(hfu_ck.point, mfu_ck.point), relation=("at least", "larger"))
sanity("mfu_between", 0.1 < mfu_ck.lo and mfu.hi < 0.9 and hfu_ck.hi < 0.9,
       "MFU and HFU lie between a tenth and nine tenths of the large product's rate over their whole intervals",
       operands=(mfu.hi, 0.9))
sanity("step_over_at_peak", est["at_peak_over_step"].lo > 1.0,
       "the plain step takes longer than what its model FLOPs would take at the large product's rate",
       operands=(est["at_peak_over_step"].lo, 1.0), relation="larger")
sanity("ck_slower", est["ck_over_plain"].lo > 1.0,
       "the checkpointed step takes longer than the plain one over the whole interval",
       operands=(est["ck_over_plain"].lo, 1.0), relation=("slower", "larger"))
sanity("mfu_ck_below_mfu", all(c < p for c, p in zip(rounds["mfu_ck"], rounds["mfu"], strict=True)),
       "in every round the checkpointed step's MFU is smaller than the plain step's: the same model FLOPs take longer",
       operands=(mfu_ck.point, mfu.point), relation=("smaller", "larger"))
sanity("opt_counts_nothing", est["opt_share"].lo > 0.05 and opt_counted == 0,
       "the AdamW update takes more than 5% of the step and the counter records no FLOPs for it",
       operands=(est["opt_share"].lo, 0.05), relation=("larger", "not"))
