# numbook: timeout=300, alone
"""8.1.3 — Batch shape and concurrency.

First on a simulated clock (servebench.simulate: the real scheduler, each step costing what
8.1.2's roofline says for an 8B-class model on an H100), each experiment over several request
draws (seed k for draw k), every figure that depends on the draw the mean over the draws with its
95% t interval: static against
continuous batching, a closed-loop concurrency sweep, Poisson arrivals, chunked prefill against
prefill-first, and admission by KV bytes with preemption. Then the static/continuous comparison
on the real CPU-sized model, measured, with the conditions under which batching keeps every
greedy token, and where that breaks.
"""

import functools
import statistics

import matplotlib
import torch

from numbook.check import estimate, fact, figure, given, sanity, value
from servebench import (
    ClosedLoop,
    DecoderLM,
    ModelConfig,
    OpenLoop,
    RooflineCost,
    ServeStats,
    decode_terms,
    generate,
    kv_bytes_per_token,
    make_requests,
    max_sequences,
    param_count,
    prefill_cost,
    preset,
    serve,
    simulate,
    weight_bytes,
)
from servebench import metrics as m
from servebench.plotting import finish, new_figure
from servebench.summary import summarize

matplotlib.use("Agg")
torch.set_num_threads(1)
MS = 1e-3
ALL_MET = "every request met both SLOs: a share at its ceiling, which a small nudge of an input leaves there"

# --- the cost model: 8.1.2's roofline for an 8B-class model on an H100 ------------------------------
LAYERS = fact("llama3_8b_layers", "layers")
D = fact("llama3_8b_hidden", "d_model", nudge=32)     # nudged by a head count: heads must divide it
HEADS = fact("llama3_8b_heads", "heads", nudge=32)    # doubled: it must divide d_model, kv_heads must divide it
KVH = fact("llama3_8b_kv_heads", "kv_heads", nudge=8)  # doubled: it must divide the heads
VOCAB = fact("llama3_8b_vocab", "vocab")
INTER = fact("llama3_8b_intermediate", "intermediate")
MAXPOS = fact("llama3_8b_max_positions", "max_positions")
PEAK = fact("h100_sxm_bf16_dense_tflops", "peak_tflops", unit="TFLOP/s") * 1e12
BW = fact("h100_sxm_hbm_tbs", "bw_tbs") * 1e12
# A two-matrix MLP with as many weights as Llama 3's three-matrix SwiGLU: 3 * intermediate / 2 wide.
cfg8 = ModelConfig(
    layers=LAYERS, d_model=D, heads=HEADS, kv_heads=KVH, vocab=VOCAB, max_seq=MAXPOS, ff_dim=3 * INTER // 2
)
value("ff_dim", cfg8.d_ff)
value("params_b", param_count(cfg8) / 1e9)
cost = RooflineCost(cfg8, "bf16", PEAK, BW)
CTX = given("terms_context", 1024)
terms = decode_terms(cfg8, "bf16", context=CTX, peak_flops=PEAK, bandwidth=BW)
value("weights_ms", terms.weights_s / MS)
value("per_seq_us", terms.bytes_per_seq_s * 1e6)
value("per_seq_flops_us", terms.flops_per_seq_s * 1e6)
sanity("reads_outweigh_arithmetic", terms.bytes_per_seq_s > terms.flops_per_seq_s,
       "each sequence adds more KV reading time than arithmetic time: the step is memory bound at any batch",
       operands=(terms.bytes_per_seq_s, terms.flops_per_seq_s))
value("per_seq_ratio", terms.per_seq_ratio)
kvb = value("kv_bytes_per_token", kv_bytes_per_token(cfg8, "bf16"))

N_REQ = given("n_requests", 160)
N_SEEDS = given("seeds", 5)
SEEDS = range(N_SEEDS)  # repeat k draws its requests with seed k, and its arrival times with seed ARRIVAL_SEED + k
ARRIVAL_SEED = value("arrival_seed", 1000,   # arrivals from a stream of their own: seed k's also draws the lengths
                     fixed="a choice of this check: an offset that keeps the arrival seeds apart from the draws'")
P_LO, P_HI = given("prompt_lo", 128), given("prompt_hi", 2048)
O_LO, O_HI = given("out_lo", 16), given("out_hi", 256)
SLO_TTFT, SLO_TPOT = given("slo_ttft_ms", 200), given("slo_tpot_ms", 7, nudge=0.07)  # 1% of an SLO in ms
WARM = given("warmup_requests", 16)
MAX_BATCH = given("max_batch", 8)
SIM = f"simulated on the roofline clock over {N_SEEDS} request draws"
draws = {k: make_requests(N_REQ, (P_LO, P_HI), (O_LO, O_HI), vocab=1000, seed=k) for k in SEEDS}
N_AFTER = N_REQ - WARM  # requests per draw that the latency percentiles rest on
value("n_after_warmup", N_AFTER)
value("n_pooled", N_AFTER * N_SEEDS)


def est(name, per_seed, n, unit=None):
    """The mean over the seeds of one figure per seed, with its 95% t interval."""
    return estimate(name, list(per_seed), measured=SIM, n=n, unit=unit, repeated="seeds")


useful = {k: sum(r.n_out - 1 for r in draws[k]) for k in SEEDS}
est("useful_rows", useful.values(), n=N_REQ * N_SEEDS)
est("mean_out", [statistics.mean(r.n_out for r in draws[k]) for k in SEEDS], n=N_REQ * N_SEEDS)
est("mean_prompt", [statistics.mean(len(r.prompt) for r in draws[k]) for k in SEEDS], n=N_REQ * N_SEEDS)
for t in (P_LO, P_HI):
    c = prefill_cost(cfg8, "bf16", prompt_len=t)
    value(f"prefill_{'lo' if t == P_LO else 'hi'}_ms", max(c.flops / PEAK, c.bytes / BW) / MS)
print(
    f"{param_count(cfg8) / 1e9:.2f} B parameters in bf16 at {PEAK / 1e12:g} TFLOP/s and {BW / 1e12:g} TB/s: a decode "
    f"step costs {terms.weights_s / MS:.2f} ms for the weights, plus per sequence at context {CTX} "
    f"{terms.bytes_per_seq_s * 1e6:.1f} us of KV reads ({terms.per_seq_ratio:.4f} of the weights) "
    f"or {terms.flops_per_seq_s * 1e6:.1f} us of compute, whichever the step is bound by"
)
print(f"{N_REQ} requests a draw, {N_SEEDS} draws (seeds {list(SEEDS)}): prompts {P_LO}..{P_HI}, outputs "
      f"{O_LO}..{O_HI} tokens; every figure below is the mean over the draws\n")


def score(trace, window_skip):
    """Latency over the requests after the warm-up; throughput and goodput over the steady-state window
    (servebench.metrics.steady_window: from the arrival of request ``window_skip`` + 1 to the last arrival)."""
    steady = summarize(m.after_warmup(trace, WARM), ttft_slo=SLO_TTFT * MS, tpot_slo=SLO_TPOT * MS)
    t0, t1 = m.steady_window(trace, window_skip)
    return {
        **steady,
        "request_throughput": m.steady_throughput(trace, window_skip),
        "whole_run_throughput": m.request_throughput(trace),
        "token_throughput": m.steady_token_throughput(trace, window_skip),
        # the steady rate times the share of the requests after the warm-up that met both SLOs: a request of the
        # start-up burst that happens to finish inside the window cannot lend the steady state its attainment
        "goodput": m.steady_throughput(trace, window_skip) * steady["slo_attainment"],
        "in_window": sum(t0 < r.finish <= t1 for r in trace),   # as steady_throughput counts them
        "n_output_tokens": sum(r.n_out for r in trace),
    }


def mean_of(runs, *path):
    """The mean over seeds of one entry of each seed's score."""
    out = []
    for s in runs:
        for p in path:
            s = s[p]
        out.append(s)
    return statistics.mean(out), out


def avg_of(runs, *path):
    return mean_of(runs, *path)[0]


def row(label, runs, extra=None):
    g = functools.partial(avg_of, runs)
    print(
        f"{label:<12}{g('request_throughput'):7.2f}{g('token_throughput'):8.0f}"
        + "".join(f"{g('ttft', p) / MS:8.1f}" for p in ("p50", "p95", "p99"))
        + "".join(f"{g('tpot', p) / MS:7.2f}" for p in ("p50", "p95", "p99"))
        + f"{g('goodput'):8.2f}"
        + (f"{extra:10.2f}" if extra is not None else "")
    )


HEAD = (
    f"{'':<12}{'req/s':>7}{'tok/s':>8}{'TTFT p50':>9}{'p95':>7}{'p99':>8}"
    f"{'TPOT p50':>9}{'p95':>5}{'p99':>7}{'goodput':>8}"
)
LAT_N = N_AFTER * N_SEEDS  # TTFT and TPOT samples behind a pooled percentile: every request after the warm-up


def record_latency(prefix, runs, keys=("ttft", "tpot"), ps=("p50", "p95", "p99")):
    """One estimate per percentile, each with the samples it rests on (the distributions' own n)."""
    out = {}
    for key in keys:
        for p in ps:
            n = sum(s[key]["n"] for s in runs)
            out[(key, p)] = est(f"{prefix}_{key}_{p}_ms", [s[key][p] / MS for s in runs], n=n, unit="ms")
    return out


# --- static against continuous, N = max_batch clients -------------------------------------------
print(f"closed loop, {MAX_BATCH} clients, batch limit {MAX_BATCH}; latency after the first {WARM} requests (ms)")
print(HEAD)
res, rows_by_mode, steps_by_mode, traces_by_mode, lat = {}, {}, {}, {}, {}
for mode in ("static", "continuous"):
    res[mode], rows_by_mode[mode], steps_by_mode[mode], traces_by_mode[mode] = [], [], [], []
    for k in SEEDS:
        trace, cm = simulate(ClosedLoop(draws[k], MAX_BATCH), mode=mode, max_batch=MAX_BATCH, cost=cost)
        traces_by_mode[mode].append(trace)
        res[mode].append(score(trace, max(WARM, MAX_BATCH)))
        rows_by_mode[mode].append(sum(cm.decode_batches))
        steps_by_mode[mode].append(len(cm.decode_batches))
    runs = res[mode]
    row(mode, runs)
    win_n = sum(s["in_window"] for s in runs)
    est(f"{mode}_req_s", [s["request_throughput"] for s in runs], n=win_n, unit="req/s")
    est(f"{mode}_tok_s", [s["token_throughput"] for s in runs], n=win_n, unit="tokens/s")
    lat[mode] = record_latency(mode, runs)
    est(f"{mode}_rows", rows_by_mode[mode], n=N_REQ * N_SEEDS)
    est(f"{mode}_mean_rows", [r / st_ for r, st_ in zip(rows_by_mode[mode], steps_by_mode[mode], strict=True)],
        n=sum(steps_by_mode[mode]))
est("static_waste", [1 - useful[k] / rows_by_mode["static"][k] for k in SEEDS], n=N_REQ * N_SEEDS)
cont_gain = est("cont_over_static_req", [c["request_throughput"] / s["request_throughput"]
                                         for s, c in zip(res["static"], res["continuous"], strict=True)],
                n=sum(s["in_window"] for s in res["continuous"]))
ttft_drop = est("static_over_cont_ttft", [s["ttft"]["p50"] / c["ttft"]["p50"]
                                          for s, c in zip(res["static"], res["continuous"], strict=True)], n=2 * LAT_N)
sanity("all_tokens_delivered",
       all(s["n_output_tokens"] == sum(r.n_out for r in draws[k]) for mode in res for k, s in zip(SEEDS, res[mode],
                                                                                                  strict=True)),
       relation="larger")
sanity(
    "static_computes_padding",
    all(rows_by_mode["static"][k] > rows_by_mode["continuous"][k] == useful[k] for k in SEEDS),
    "in every draw static batching decodes rows for finished requests; continuous decodes only useful ones",
    operands=(statistics.mean(rows_by_mode["static"]), statistics.mean(rows_by_mode["continuous"])), relation="larger",
)
# What the steps' sizes alone add to continuous batching's TPOT, by the cost model: the difference in
# mean rows per step times the most one row can cost (a decode row at the longest context this
# workload reaches), against the TPOT gap the runs show; in every draw.
LONGEST = P_HI + O_HI
per_row_max = cost.step_s([LONGEST] * 2, []) - cost.step_s([LONGEST], [])
size_gaps, tpot_gaps = [], []
for k in SEEDS:
    size_gaps.append((rows_by_mode["continuous"][k] / steps_by_mode["continuous"][k]
                      - rows_by_mode["static"][k] / steps_by_mode["static"][k]) * per_row_max)
    tpot_gaps.append(res["continuous"][k]["tpot"]["p50"] - res["static"][k]["tpot"]["p50"])
sanity(
    "not_the_step_size",
    all(sg < 0.25 * tg for sg, tg in zip(size_gaps, tpot_gaps, strict=True)),
    "in every draw the steps' sizes account for less than a quarter of continuous batching's extra median TPOT",
    operands=(max(size_gaps), 0.25 * min(tpot_gaps)), relation=("smaller", "not"),
)
# the static TPOT tail is short requests: in every draw the quarter of requests (after the warm-up) with the
# highest TPOT produced fewer tokens on average than the rest, over which a wait at the batch's start is spread
tops, rests = [], []
for trace in traces_by_mode["static"]:
    by_tpot = sorted((r for r in m.after_warmup(trace, WARM) if m.tpot(r) is not None), key=m.tpot)
    top = by_tpot[-(len(by_tpot) // 4):]
    tops.append(statistics.mean(r.n_out for r in top))
    rests.append(statistics.mean(r.n_out for r in by_tpot[: len(by_tpot) - len(top)]))
sanity(
    "static_tail_is_short_requests",
    all(t < r for t, r in zip(tops, rests, strict=True)),
    "in every draw the static run's highest-TPOT quarter of requests produced fewer tokens on average than the rest",
    operands=(max(tops), min(rests)), relation=("largest", "smaller"),
)
sanity(
    "continuous_ttft_lower",
    lat["static"]["ttft", "p50"].lo > lat["continuous"]["ttft", "p50"].hi and ttft_drop.lo > 1,
    "the intervals of the two median TTFTs lie apart",
    operands=(lat["static"]["ttft", "p50"].lo, lat["continuous"]["ttft", "p50"].hi), relation=("falls", "smaller"),
)
sanity(
    "continuous_serves_more",
    cont_gain.lo > 1,
    "continuous batching serves more requests per second, over the whole interval of the ratio",
    operands=(cont_gain.lo, 1.0), relation="larger",
)
sanity(
    "continuous_tpot_higher",
    lat["continuous"]["tpot", "p50"].lo > lat["static"]["tpot", "p50"].hi,
    "continuous batching pays in median TPOT: the intervals lie apart",
    operands=(lat["continuous"]["tpot", "p50"].lo, lat["static"]["tpot", "p50"].hi), relation="larger",
)

# --- the concurrency sweep ------------------------------------------------------------------------
SWEEP_BATCH = given("sweep_max_batch", 16)
print(f"\nclosed loop, continuous batching, batch limit {SWEEP_BATCH}")
print(HEAD + f"{'in flight':>10}")
sweep, sweep_traces, sweep_est = {}, {}, {}
NS = (1, 2, 4, 8, SWEEP_BATCH, 2 * SWEEP_BATCH)
for n in NS:
    runs, traces, flights = [], [], []
    for k in SEEDS:
        trace, _ = simulate(ClosedLoop(draws[k], n), mode="continuous", max_batch=SWEEP_BATCH, cost=cost)
        traces.append(trace)
        # a closed loop's first n requests all arrive at t = 0: the window starts after them and the warm-up
        runs.append(score(trace, max(WARM, n)))
        flights.append(sum(m.e2e(r) for r in trace) / m.span(trace))  # time-average requests in the system
    sweep[n], sweep_traces[n] = runs, traces
    row(f"N={n}", runs, statistics.mean(flights))
    key = "nhi" if n == 2 * SWEEP_BATCH else "nlim" if n == SWEEP_BATCH else f"n{n}"
    win_n = sum(s["in_window"] for s in runs)
    e = sweep_est[n] = {
        "tok_s": est(f"{key}_tok_s", [s["token_throughput"] for s in runs], n=win_n, unit="tokens/s"),
        "req_s": est(f"{key}_req_s", [s["request_throughput"] for s in runs], n=win_n, unit="req/s"),
        "goodput": est(f"{key}_goodput", [s["goodput"] for s in runs], n=win_n, unit="req/s"),
    }
    for (lk, p), v in record_latency(key, runs, keys=("ttft",)).items():
        e[f"{lk}_{p}"] = v
    for (lk, p), v in record_latency(key, runs, keys=("tpot",), ps=("p50", "p95")).items():
        e[f"{lk}_{p}"] = v
    if n == 1:
        value("n1_in_flight", statistics.mean(flights),
              fixed="one client keeps exactly one request in the system, whatever the inputs")
    else:
        e["in_flight"] = est(f"{key}_in_flight", flights, n=N_REQ * N_SEEDS)
    value(f"{key}_n", n, fixed="a row of the table: the client counts it tabulates" if n in (1, 2, 4, 8) else None)
gain = est("tok_gain_lim", [a["token_throughput"] / b["token_throughput"]
                            for a, b in zip(sweep[SWEEP_BATCH], sweep[1], strict=True)], n=N_REQ * N_SEEDS)
tcost = est("tpot_cost_lim", [a["tpot"]["p50"] / b["tpot"]["p50"] for a, b in zip(sweep[SWEEP_BATCH], sweep[1],
                                                                                   strict=True)], n=2 * LAT_N)
sanity("gain_beats_cost", gain.lo > tcost.hi, "throughput grows faster than TPOT up to the limit: the intervals lie "
       "apart", operands=(gain.lo, tcost.hi), relation="grows")
good_gain = [a["goodput"] / b["goodput"] for a, b in zip(sweep[SWEEP_BATCH], sweep[1], strict=True)]
tok_gain = [a["token_throughput"] / b["token_throughput"] for a, b in zip(sweep[SWEEP_BATCH], sweep[1], strict=True)]
sanity("goodput_lags", all(g < t for g, t in zip(good_gain, tok_gain, strict=True)),
       "in every draw goodput grows less than throughput from one client to the limit",
       operands=(max(g / t for g, t in zip(good_gain, tok_gain, strict=True)), 1.0), relation=("grows", "smaller"))
sanity("tpot_p95_misses_at_limit", sweep_est[SWEEP_BATCH]["tpot_p95"].lo > SLO_TPOT,
       "the TPOT p95 at the batch limit is above the objective over its whole interval",
       operands=(sweep_est[SWEEP_BATCH]["tpot_p95"].lo, SLO_TPOT), relation="larger")
hi = 2 * SWEEP_BATCH
flat = [abs(a["token_throughput"] - b["token_throughput"]) / b["token_throughput"]
        for a, b in zip(sweep[hi], sweep[SWEEP_BATCH], strict=True)]
sanity(
    "throughput_flat_past_limit",
    max(flat) < 0.05,
    "clients beyond the batch limit only queue: in every draw the steady throughput moves by under 5%",
    operands=(max(flat), 0.05),
)
sanity(
    "ttft_jumps_past_limit",
    sweep_est[hi]["ttft_p50"].lo > 10 * sweep_est[SWEEP_BATCH]["ttft_p50"].hi,
    operands=(sweep_est[hi]["ttft_p50"].lo, 10 * sweep_est[SWEEP_BATCH]["ttft_p50"].hi),
)
sanity(
    "goodput_collapses_past_limit",
    all(a["goodput"] < b["goodput"] for a, b in zip(sweep[hi], sweep[SWEEP_BATCH], strict=True)),
    "past the limit the goodput falls in every draw (the draws are paired: the same requests at each client count)",
    operands=(max(a["goodput"] - b["goodput"] for a, b in zip(sweep[hi], sweep[SWEEP_BATCH], strict=True)), 0.0),
    relation="falls",
)
queued = max(0, hi - SWEEP_BATCH)
value("closed_queue_max", queued)

# TTFT against prompt length, at the batch limit: requests sorted into prompt-length bins, a median per draw
lim = [r for tr in sweep_traces[SWEEP_BATCH] for r in m.after_warmup(tr, WARM)]
bins = [(P_LO, 700), (700, 1400), (1400, P_HI + 1)]


def ttft_bin(lo, hi_):
    per = [[m.ttft(r) / MS for r in m.after_warmup(tr, WARM) if lo <= r.prompt_len < hi_]
           for tr in sweep_traces[SWEEP_BATCH]]
    return [m.percentile(t, 50) for t in per], sum(len(t) for t in per)


short_ttft = est("ttft_short_ms", *ttft_bin(*bins[0]), unit="ms")
long_ttft = est("ttft_long_ms", *ttft_bin(*bins[-1]), unit="ms")
sanity("ttft_grows_with_prompt", long_ttft.lo > short_ttft.hi, operands=(long_ttft.lo, short_ttft.hi),
       relation="grows")

# --- capacity: the steady-state rate at the batch limit ----------------------------------------------
capacity_k = [s["request_throughput"] for s in sweep[SWEEP_BATCH]]
capacity = est("capacity_req_s", capacity_k, n=sum(s["in_window"] for s in sweep[SWEEP_BATCH]), unit="req/s")
whole = est("capacity_whole_req_s", [s["whole_run_throughput"] for s in sweep[SWEEP_BATCH]], n=N_REQ * N_SEEDS,
            unit="req/s")
under = est("whole_run_short", [1 - s["whole_run_throughput"] / s["request_throughput"] for s in sweep[SWEEP_BATCH]],
            n=N_REQ * N_SEEDS)
sanity("whole_run_understates", under.lo > 0,
       "over the whole run the rate is below the steady-state rate, over the whole interval of the shortfall",
       operands=(under.lo, 0.0), relation="below")

# --- open loop: Poisson arrivals ------------------------------------------------------------------
RATES = (given("rate_a", 4, unit="req/s"), given("rate_b", 8, unit="req/s"), given("rate_c", 16, unit="req/s"),
         given("rate_d", 32, unit="req/s"))
print(f"\nPoisson arrivals (seed {ARRIVAL_SEED} + k for draw k), continuous batching, batch limit {SWEEP_BATCH}")
print(f"{'offered':>8}{'arrived':>8}{'served':>8}{'TTFT p99':>9}{'TPOT p99':>9}{'SLO met':>8}{'goodput':>8}")


def poisson_run(k, rate, mode="continuous", chunk=None):
    tr, _ = simulate(OpenLoop.poisson(draws[k], rate, seed=ARRIVAL_SEED + k), mode=mode, max_batch=SWEEP_BATCH,
                     cost=cost, chunk_tokens=chunk)
    return tr


pois, pois_traces, pois_est = {}, {}, {}
for key, rate in zip("abcd", RATES, strict=True):
    pois_traces[key] = [poisson_run(k, rate) for k in SEEDS]
    runs = pois[key] = [score(tr, WARM) for tr in pois_traces[key]]
    for s, tr in zip(runs, pois_traces[key], strict=True):
        s["arrived"] = m.arrival_rate(tr)
        s["attain"] = m.slo_attainment(m.after_warmup(tr, WARM), SLO_TTFT * MS, SLO_TPOT * MS)
    g = functools.partial(avg_of, runs)
    print(f"{rate:>8}{g('arrived'):8.2f}{g('request_throughput'):8.2f}{g('ttft', 'p99') / MS:9.1f}"
          f"{g('tpot', 'p99') / MS:9.2f}{g('attain'):8.0%}{g('goodput'):8.2f}")
    win_n = sum(s["in_window"] for s in runs)
    e = pois_est[key] = {
        "arrived": est(f"r{key}_arrived", [s["arrived"] for s in runs], n=N_REQ * N_SEEDS, unit="req/s"),
        "req_s": est(f"r{key}_req_s", [s["request_throughput"] for s in runs], n=win_n, unit="req/s"),
        "goodput": est(f"r{key}_goodput", [s["goodput"] for s in runs], n=win_n, unit="req/s"),
    }
    for (lk, p), v in record_latency(f"r{key}", runs, ps=("p99",)).items():
        e[f"{lk}_{p}"] = v
    if all(s["attain"] == 1 for s in runs):
        value(f"r{key}_attain", 1.0, fixed=ALL_MET)
    else:
        e["attain"] = est(f"r{key}_attain", [s["attain"] for s in runs], n=LAT_N)
sanity("overload_over_capacity", RATES[3] > capacity.hi, operands=(RATES[3], capacity.hi), relation="larger")
# the queue grows for as long as the run lasts: in every draw the last quarter of arrivals waits far longer
# for its first token than the first quarter
late_over_early = []
for tr in pois_traces["d"]:
    by_arrival = sorted(tr, key=lambda r: r.arrival)
    quarter = len(by_arrival) // 4
    early = statistics.mean(m.ttft(r) for r in by_arrival[:quarter])
    late = statistics.mean(m.ttft(r) for r in by_arrival[-quarter:])
    late_over_early.append(late / early)
sanity("overload_tail", min(late_over_early) > 5,
       "in every draw the last quarter's mean TTFT is over 5x the first quarter's",
       operands=(min(late_over_early), 5), relation=("falls", "grows", "larger"))

# DistServe's goodput: the highest offered rate at which a target share of requests meets both SLOs, searched
# per draw on a grid of rates up to that draw's capacity (servebench.metrics.goodput_search)
TARGET = given("goodput_target", 0.9)
GRID = given("goodput_grid", 32)


def attainment_for(k):
    def attainment(rate):
        return m.slo_attainment(m.after_warmup(poisson_run(k, rate), WARM), SLO_TTFT * MS, SLO_TPOT * MS)

    return attainment


dist_k = [m.goodput_search(attainment_for(k), capacity_k[i], TARGET, GRID) for i, k in enumerate(SEEDS)]
dist = est("distserve_goodput", dist_k, n=LAT_N, unit="req/s")
sanity("goodput_within_capacity", all(g <= c for g, c in zip(dist_k, capacity_k, strict=True)),
       "in every draw the goodput is at most that draw's capacity", operands=(max(dist_k), max(capacity_k)),
       relation="at most")
sanity("goodput_below_capacity", dist.hi < capacity.lo, "the goodput's interval lies below the capacity's",
       operands=(dist.hi, capacity.lo), relation="below")
print(f"DistServe goodput (highest rate with {TARGET:.0%} of requests within both SLOs), per draw: "
      + ", ".join(f"{g:.2f}" for g in dist_k) + f" req/s; mean {dist:.2f} ({dist.lo:.2f} to {dist.hi:.2f})")

# --- chunked prefill against prefill-first --------------------------------------------------------
CHUNK = given("chunk_tokens", 512)
rate = RATES[2]
print(
    f"\nPoisson {rate} req/s, batch limit {SWEEP_BATCH}: prefill-first against chunked prefill ({CHUNK} tokens a step)"
)
print(f"{'':<14}{'TTFT p50':>9}{'p99':>8}{'TPOT p50':>9}{'p95':>7}{'p99':>7}{'ITL max':>8}{'SLO met':>8}")
ch, ch_est = {}, {}
for name, mode, ck in (("prefill_first", "continuous", None), ("chunked", "chunked", CHUNK)):
    runs = []
    for k in SEEDS:
        tr = poisson_run(k, rate, mode, ck)
        s = score(tr, WARM)
        s["attain"] = m.slo_attainment(m.after_warmup(tr, WARM), SLO_TTFT * MS, SLO_TPOT * MS)
        runs.append(s)
    ch[name] = runs
    g = functools.partial(avg_of, runs)
    print(
        f"{name:<14}{g('ttft', 'p50') / MS:9.1f}{g('ttft', 'p99') / MS:8.1f}{g('tpot', 'p50') / MS:9.2f}"
        f"{g('tpot', 'p95') / MS:7.2f}{g('tpot', 'p99') / MS:7.2f}{g('itl', 'max') / MS:8.1f}{g('attain'):8.0%}"
    )
    e = ch_est[name] = {f"{lk}_{p}": v for (lk, p), v in record_latency(name, runs).items()}
    e["itl_max"] = est(f"{name}_itl_max_ms", [s["itl"]["max"] / MS for s in runs], n=sum(s["itl"]["n"] for s in runs),
                       unit="ms")
    if all(s["attain"] == 1 for s in runs):
        value(f"{name}_attain", 1.0, fixed=ALL_MET)
    else:
        e["attain"] = est(f"{name}_attain", [s["attain"] for s in runs], n=LAT_N)
p99_gap = est("ttft_p99_gap_ms", [(p["ttft"]["p99"] - c["ttft"]["p99"]) / MS
                                  for p, c in zip(ch["prefill_first"], ch["chunked"], strict=True)],
              n=LAT_N, unit="ms")
sanity("chunked_cuts_ttft_tail", p99_gap.lo > 0 and all(p["ttft"]["p99"] > c["ttft"]["p99"]
                                                        for p, c in zip(ch["prefill_first"], ch["chunked"],
                                                                        strict=True)),
       "prefill-first's TTFT p99 is the longer in every draw, and the interval of the paired gap lies above zero",
       operands=(p99_gap.lo, 0.0), relation="longer")
sanity(
    "chunked_cuts_tpot_tail",
    ch_est["chunked"]["tpot_p99"].hi < ch_est["prefill_first"]["tpot_p99"].lo,
    operands=(ch_est["chunked"]["tpot_p99"].hi, ch_est["prefill_first"]["tpot_p99"].lo),
)
sanity(
    "chunked_cuts_itl_max",
    ch_est["chunked"]["itl_max"].hi < ch_est["prefill_first"]["itl_max"].lo,
    operands=(ch_est["chunked"]["itl_max"].hi, ch_est["prefill_first"]["itl_max"].lo),
)
# Where the TTFT gain comes from. (1) Capacity: the steady rate of a saturated server (closed loop at the batch
# limit) under each scheduler. A chunked step mixes decode rows with prompt pieces, so the weights' read that
# every step pays serves both; prefill-first runs prefills as steps of their own.
cap_ch_k, cap_ch_n = [], 0
for k in SEEDS:
    tr, _ = simulate(ClosedLoop(draws[k], SWEEP_BATCH), mode="chunked", max_batch=SWEEP_BATCH, cost=cost,
                     chunk_tokens=CHUNK)
    s_ch = score(tr, max(WARM, SWEEP_BATCH))
    cap_ch_k.append(s_ch["request_throughput"])
    cap_ch_n += s_ch["in_window"]
cap_ch = est("chunked_capacity_req_s", cap_ch_k, n=cap_ch_n, unit="req/s")
cap_gain = est("chunked_capacity_gain", [c / p - 1 for c, p in zip(cap_ch_k, capacity_k, strict=True)],
               n=N_REQ * N_SEEDS)
sanity("chunked_raises_capacity", cap_ch.lo > capacity.hi, "chunked prefill's capacity lies above prefill-first's",
       operands=(cap_ch.lo, capacity.hi), relation="above")
est("load_share_prefill_first", [rate / c for c in capacity_k], n=N_REQ * N_SEEDS)
est("load_share_chunked", [rate / c for c in cap_ch_k], n=N_REQ * N_SEEDS)
# (2) Waiting behind whole prefills: at a light load, where queueing is rare and capacity does not bind, chunking
# does not lower the median TTFT; it raises it, since a prompt's pieces share steps with the decode rows.
light, light_per, light_n = {}, {}, {}
for name, mode, ck in (("prefill_first", "continuous", None), ("chunked", "chunked", CHUNK)):
    per = [summarize(m.after_warmup(poisson_run(k, RATES[0], mode, ck), WARM))["ttft"] for k in SEEDS]
    light_per[name], light_n[name] = [d["p50"] / MS for d in per], sum(d["n"] for d in per)
    light[name] = est(f"light_{name}_ttft_p50_ms", [d["p50"] / MS for d in per], n=sum(d["n"] for d in per),
                      unit="ms")
rise = est("light_ttft_rise_ms", [c - p for c, p in zip(light_per["chunked"], light_per["prefill_first"], strict=True)],
           n=sum(light_n.values()), unit="ms")
sanity("light_load_no_ttft_gain", rise.lo > 0,
       "at the light load chunking raises the median TTFT: the interval of the paired difference lies above zero",
       operands=(rise.lo, 0.0), relation="at least")
print(f"capacity (steady state, closed loop at the batch limit): prefill-first {capacity:.2f} req/s, chunked "
      f"{cap_ch:.2f} req/s; median TTFT at {RATES[0]} req/s: prefill-first {light['prefill_first']:.1f} ms, "
      f"chunked {light['chunked']:.1f} ms")

# --- the memory limit: admission by KV bytes, preemption by recompute --------------------------------
MEM_GB = given("memory_gb", 18)
FIX_P, FIX_O = given("fixed_prompt", 256), given("fixed_out", 768)
KV_CLIENTS = given("kv_clients", 64)
KV_N = given("kv_requests", 640)   # ten requests a client: the fixed lengths finish in waves, which a short run
                                   # would catch at one of its crests
mem = MEM_GB * 10**9
kv_budget = value("kv_budget_gb", (mem - weight_bytes(cfg8, "bf16")) / 1e9)
value("weights_gb", weight_bytes(cfg8, "bf16") / 1e9)
analytic = value("max_seqs", max_sequences(cfg8, "bf16", memory_bytes=mem, seq_len=FIX_P + FIX_O))


def kv_run(seed, *, by_bytes):
    """Closed loop of KV_CLIENTS clients, requests of fixed lengths: admitted by KV bytes (with preemption), or
    by reserving every sequence's final length (a batch limit of max_sequences)."""
    fixed = make_requests(KV_N, FIX_P, FIX_O, vocab=1000, seed=seed)
    st = ServeStats()
    tr, cm = simulate(ClosedLoop(fixed, KV_CLIENTS), mode="continuous",
                      max_batch=KV_CLIENTS if by_bytes else analytic, cost=cost,
                      kv_budget_bytes=int(kv_budget * 1e9) if by_bytes else None, stats=st)
    return tr, cm, st


kv_tr, kv_cm, st = kv_run(0, by_bytes=True)
res_tr, res_cm, res_st = kv_run(0, by_bytes=False)
# with every length fixed the schedule does not depend on the draw: the token ids are all that a seed changes,
# and the simulated clock does not read them
other_tr, _, _ = kv_run(1, by_bytes=True)
sanity("kv_schedule_fixed", [r.token_times for r in other_tr] == [r.token_times for r in kv_tr],
       "another seed gives the same schedule, to the last timestamp")
largest = value("kv_largest_batch", st.largest_batch)
kv_mean = value("kv_mean_batch", statistics.mean(kv_cm.decode_batches))
res_mean = value("res_mean_batch", statistics.mean(res_cm.decode_batches))
value("kv_preemptions", st.preemptions)
value("kv_positions", int(kv_budget * 1e9) // kvb)
kv_s = summarize(m.after_warmup(kv_tr, WARM))
res_s = summarize(m.after_warmup(res_tr, WARM))
value("kv_tpot_n", kv_s["tpot"]["n"])
kv_p99 = value("kv_tpot_p99_ms", kv_s["tpot"]["p99"] / MS)
res_p99 = value("res_tpot_p99_ms", res_s["tpot"]["p99"] / MS)
kv_stall = value("kv_longest_stall_s", kv_s["itl"]["max"])
res_stall = value("res_longest_gap_ms", res_s["itl"]["max"] / MS)
kv_rate = value("kv_req_s", m.steady_throughput(kv_tr, KV_CLIENTS))
res_rate = value("res_req_s", m.steady_throughput(res_tr, KV_CLIENTS))
value("kv_rate_gain", kv_rate / res_rate)
print(
    f"\nmemory {MEM_GB} GB - weights {weight_bytes(cfg8, 'bf16') / 1e9:.2f} GB = {kv_budget:.2f} GB of KV "
    f"({int(kv_budget * 1e9) // kvb} positions of {kvb} B)\n"
    f"{KV_N} requests of {FIX_P} + {FIX_O} tokens, {KV_CLIENTS} clients: max_sequences = {analytic}\n"
    f"admitted by KV bytes: largest batch {st.largest_batch}, mean {kv_mean:.1f} rows a decode step, "
    f"{st.preemptions} preemptions by recompute, at most {st.most_kv_tokens} positions held; steady "
    f"{kv_rate:.2f} req/s, TPOT p99 {kv_p99:.2f} ms (n = {kv_s['tpot']['n']}), longest gap {kv_stall:.2f} s\n"
    f"reserved (batch limit {analytic}): mean {res_mean:.1f} rows, steady {res_rate:.2f} req/s, TPOT p99 "
    f"{res_p99:.2f} ms, longest gap {res_stall:.1f} ms"
)
sanity(
    "bytes_admit_more",
    largest > analytic,
    "admission by current bytes runs a larger batch than full reservation",
    operands=(largest, analytic), relation="largest",
)
value("kv_mean_share", kv_mean / largest)
sanity("peak_not_typical", kv_mean < largest, "the mean batch is smaller than the largest",
       operands=(kv_mean, largest), relation=("largest", "smaller"))
sanity("bytes_batch_larger_on_average", kv_mean > res_mean, operands=(kv_mean, res_mean), relation="larger")
sanity("bytes_serve_more", kv_rate > res_rate, operands=(kv_rate, res_rate), relation="larger")
sanity("preempts", st.preemptions > 0, operands=(st.preemptions, 0))
sanity("preemption_costs_tpot", kv_p99 > res_p99,
       "the TPOT p99 is higher than the reserved run's",
       operands=(kv_p99, res_p99), relation="larger")
sanity("preemption_stalls", kv_stall * 1e3 > 20 * res_stall,
       "the longest gap between two tokens is over twenty times the reserved run's",
       operands=(kv_stall * 1e3, 20 * res_stall))
sanity(
    "never_over_budget",
    st.most_kv_tokens <= int(kv_budget * 1e9) // kvb,
    operands=(st.most_kv_tokens, int(kv_budget * 1e9) // kvb), relation="not",
)

# --- figures ------------------------------------------------------------------------------------------
fig, (a1, a2) = new_figure(2)
avg = lambda n, *p: mean_of(sweep[n], *p)[0]  # noqa: E731
xs = [avg(n, "token_throughput") for n in NS[:-1]]
a1.plot(xs, [avg(n, "tpot", "p50") / MS for n in NS[:-1]], "o-", label="TPOT p50")
a1.plot(xs, [avg(n, "tpot", "p95") / MS for n in NS[:-1]], "s--", label="TPOT p95")
for n, x in zip(NS[:-1], xs, strict=True):
    a1.annotate(
        f"N={n}",
        (x, avg(n, "tpot", "p50") / MS),
        textcoords="offset points",
        xytext=(0, 8),
        ha="center",
        fontsize=9,
        color="#8a8f98",
    )
a1.set(xlabel="output tokens/s (steady state)", ylabel="ms", title="Throughput against time per token")
a1.legend()
a2.plot(list(NS), [avg(n, "ttft", "p50") / MS for n in NS], "o-", label="TTFT p50")
a2.plot(list(NS), [avg(n, "ttft", "p95") / MS for n in NS], "s--", label="TTFT p95")
a2.set(xscale="log", yscale="log", xlabel="clients N", ylabel="ms", title="TTFT against concurrency")
a2.set_xticks(list(NS), [str(n) for n in NS])
a2.legend()
figure(
    "sweep",
    finish(fig),
    "Simulated clock, continuous batching, batch limit as stated, each point the mean over the request draws: "
    "steady-state throughput against median and 95th-percentile TPOT (one mark per client count), and TTFT "
    "against the client count.",
)
fig, (b1, b2) = new_figure(2)
b1.scatter([r.prompt_len for r in lim], [m.ttft(r) / MS for r in lim], s=6)
b1.set(xlabel="prompt tokens", ylabel="TTFT, ms", title="TTFT against prompt length")
labels = ["prefill first", "chunked"]
for i, key in enumerate(("p50", "p95", "p99")):
    b2.bar(
        [j + 0.27 * (i - 1) for j in range(2)], [mean_of(ch[n], "tpot", key)[0] / MS for n in ch], width=0.27,
        label=f"TPOT {key}"
    )
b2.set_xticks([0, 1], labels)
b2.set(ylabel="ms", title="Chunked prefill and the TPOT tail")
b2.legend()
figure(
    "ttft_and_chunking",
    finish(fig),
    "Left: TTFT of every request after the warm-up against its prompt length, at the batch limit, all draws "
    "pooled. Right: TPOT percentiles under Poisson load, prefill-first against chunked prefill, means over the "
    "draws.",
)

# --- measured: the real model on this machine -------------------------------------------------------
pc = preset("cpu")
model = DecoderLM(pc.model, max_slots=MAX_BATCH)
N_REAL = given("measured_n", 24)
SEED_REAL = given("measured_seed", 11)
real = make_requests(N_REAL, pc.prompt_len, pc.output_len, vocab=pc.model.vocab, seed=SEED_REAL)
serve(model, ClosedLoop(real[:4], 4), mode="continuous")  # warm-up
RUNS = given("measured_runs", 5)
measured, ratios = {}, []
print(f"\nmeasured: preset 'cpu' model on this machine, {len(real)} requests, {MAX_BATCH} clients, {RUNS} runs")
for run in range(RUNS):
    this = {}
    for mode in ("static", "continuous"):
        trace = serve(model, ClosedLoop(real, MAX_BATCH), mode=mode, max_batch=MAX_BATCH)
        this[mode] = (summarize(trace), trace)
        print(
            f"run {run} {mode:<11} {this[mode][0]['request_throughput']:6.2f} req/s  TTFT p50 "
            f"{this[mode][0]['ttft']['p50'] / MS:7.1f} ms  TPOT p50 {this[mode][0]['tpot']['p50'] / MS:6.2f} ms"
        )
    ratios.append(this["static"][0]["ttft"]["p50"] / this["continuous"][0]["ttft"]["p50"])
    measured = measured or this  # the first run's traces: their tokens are compared below
ratio = estimate("measured_ttft_ratio", ratios, measured="served and timed on this machine", n=RUNS * len(real),
                 repeated="runs")
print(f"static over continuous median TTFT, per run: {', '.join(f'{r:.2f}' for r in ratios)}; "
      f"mean {ratio:.2f} ({ratio.lo:.2f} to {ratio.hi:.2f})")
alone = [generate(model, spec.prompt, spec.n_out) for spec in real]
same = sum(list(r.tokens) == a for mode in measured for r, a in zip(measured[mode][1], alone, strict=True))
value("same_tokens", same)
value("comparisons", 2 * len(real))
print(f"greedy outputs identical to the request served alone: {same} of {2 * len(real)}")
sanity(
    "batching_keeps_tokens",
    same == 2 * len(real),
    "every request's greedy tokens equal its tokens served alone",
    operands=(same, 2 * len(real)), relation=("equal", "not"),
)

# Why the tokens held, and where they would not. The first MAX_BATCH requests, each served alone and all
# together as one batch: their logits differ a little (in a batch the CPU's kernels see other shapes and
# sum in another order), but far less than the gap between the top two logits.
prompts = [list(r.prompt) for r in real[:MAX_BATCH]]
STEPS = given("inv_steps", 24)


def step_logits(prompts, steps, *, batched):
    """Logits (prompt, step, vocab) of ``steps`` greedy steps: each prompt prefilled in its own slot, then
    decoded as one batch (``batched``) or one slot at a time, the others waiting in the cache."""
    n = len(prompts)
    out = [[model.prefill_logits(i, p).float()] for i, p in enumerate(prompts)]
    for _ in range(steps - 1):
        if batched:
            rows = model.decode_logits(list(range(n)))
        else:
            rows = torch.cat([model.decode_logits([i]) for i in range(n)])
        for i in range(n):
            out[i].append(rows[i].float())
    for i in range(n):
        model.release(i)
    return torch.stack([torch.stack(o) for o in out])


alone = torch.cat([step_logits([p], STEPS, batched=True) for p in prompts])
together = step_logits(prompts, STEPS, batched=True)
one_by_one = step_logits(prompts, STEPS, batched=False)
diff = value("fp32_logit_diff", float((alone - together).abs().max()))
sanity("logits_differ", diff > 0, "in a batch the kernels sum in another order, so the logits move",
       operands=(diff, 0.0), relation="differs")
sanity(
    "one_slot_at_a_time_matches",
    torch.equal(one_by_one, alone),
    "decoded one slot at a time beside the others, every logit equals the request's logit alone, bit for bit",
    operands=(float((one_by_one - alone).abs().max()), 0.0), relation="equal",
)
top2 = alone.topk(2, dim=-1).values
gaps = (top2[..., 0] - top2[..., 1]).flatten()
value("positions", gaps.numel())
margin = value("min_margin", float(gaps.min()))
# A greedy token flips only if another logit overtakes or ties the top one: each logit moves by at most
# `diff`, so a gap changes by at most twice that.
sanity("margin_exceeds_diff", margin > 2 * diff, "no greedy choice is close enough to flip",
       operands=(margin, 2 * diff),
       relation=("at least", "smallest", "smaller", "at most", "largest", "twice", "larger"))
value("margin_over_move", margin / diff)
sanity("margin_over_ten_moves", margin > 10 * diff, "the smallest gap is more than ten times the largest move",
       operands=(margin, 10 * diff), relation=("smallest", "largest"))
flipped = int((alone.argmax(-1) != together.argmax(-1)).sum())
sanity("no_token_flips", flipped == 0, "every greedy choice is the same alone and in the batch",
       operands=(flipped, 0), relation="not")
seqs = [p + generate(model, p, STEPS)[:-1] for p in prompts]
head = model.lm_head
model.lm_head = torch.eye(pc.model.d_model)  # the final hidden states instead of the logits
hidden = torch.cat([model.forward_full(q)[len(p) - 1 :] for p, q in zip(prompts, seqs, strict=True)])
model.lm_head = head
sanity("same_positions", hidden.shape[0] == gaps.numel(), "the split kernels see the positions above",
       operands=(hidden.shape[0], gaps.numel()))


def split_k_logits(h, w, parts, acc):
    """A kernel whose reduction over d is split in ``parts`` pieces, partial sums kept in ``acc``."""
    out = torch.zeros(h.shape[0], w.shape[1], dtype=acc)
    for hs, ws in zip(h.tensor_split(parts, dim=1), w.tensor_split(parts, dim=0), strict=True):
        out = out + (hs @ ws).to(acc)
    return out.float()


flips, moved = {}, {}
for acc in (torch.float32, torch.bfloat16):
    whole = split_k_logits(hidden, head, 1, acc)
    split = split_k_logits(hidden, head, MAX_BATCH, acc)  # the split follows the batch size
    changed = whole.argmax(-1) != split.argmax(-1)
    flips[str(acc).removeprefix("torch.")] = int(changed.sum())
    moved[str(acc).removeprefix("torch.")] = float((whole - split).abs().max())
    if acc == torch.bfloat16:
        # the changed positions where the top of one kernel or the other is a tie (two logits share the top
        # bf16 value, and argmax takes the lowest token index); with other inputs a change need not be a tie
        rows = changed.nonzero().flatten().tolist()
        ties = sum(any(int((k[i] == k[i].max()).sum()) > 1 for k in (whole, split)) for i in rows)
FLOOR = "no token flips: a count at its floor, which a small nudge of an input leaves there"
value("flips_fp32", flips["float32"], fixed=FLOOR if flips["float32"] == 0 else None)
value("flips_bf16", flips["bfloat16"])
print(
    f"max |logit difference| alone vs batched {diff:.2e}; smallest top-1 margin {margin:.2e} over "
    f"{hidden.shape[0]} positions\nan LM head summed in {MAX_BATCH} pieces changes {flips['float32']} greedy tokens "
    f"of the same kernel unsplit with fp32 partial sums and {flips['bfloat16']} with bf16 ones"
)
sanity("bf16_split_flips", flips["bfloat16"] > flips["float32"], operands=(flips["bfloat16"], flips["float32"]),
       relation="differs")
value("bf16_tie_flips", ties)
sanity("split_moves_logits", min(moved.values()) > 0, "the split changes logits with fp32 and with bf16 partial sums",
       operands=(min(moved.values()), 0.0))
first = int(torch.tensor([1.0, 3.0, 3.0]).argmax())
sanity("argmax_takes_first", first == 1, "torch.argmax breaks a tie by the lowest index", operands=(first, 1),
       relation=("at least", "smallest"))
# bf16 keeps 8 significant bits: next to the top logit where the gap is smallest, its rounding step
# (the distance to the next bf16 number) is larger than that gap.
tight = int(gaps.argmin())
x = top2[..., 0].flatten()[tight].to(torch.bfloat16)
BINADE = ("the spacing of bf16 numbers is one power of two across each binade (2**-4 from 8 to 16): "
          "a small nudge of an input moves the top logit within its binade and leaves the spacing there")
bf16_step = value("bf16_step", float(torch.nextafter(x, torch.tensor(float("inf"), dtype=torch.bfloat16)) - x),
                  fixed=BINADE)
sanity("bf16_step_exceeds_margin", bf16_step > margin, "bf16 cannot tell the top two logits apart there",
       operands=(bf16_step, margin), relation=("smallest", "larger"))
value("tight_top_logit", float(top2[..., 0].flatten()[tight]))
print(f"bf16 rounding step next to the top logit ({float(top2[..., 0].flatten()[tight]):.4g}) where the gap is "
      f"smallest: {bf16_step}")
