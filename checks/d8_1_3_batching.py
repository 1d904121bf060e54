# numbook: timeout=300, alone
"""8.1.3 — Batch shape and concurrency.

First on a simulated clock (servebench.simulate: the real scheduler, each step costing what
8.1.2's roofline says for an 8B-class model on an H100), so every number is exact: static against
continuous batching, a closed-loop concurrency sweep, Poisson arrivals, chunked prefill against
prefill-first, and admission by KV bytes with preemption. Then the static/continuous comparison
on the real CPU-sized model, measured, with the conditions under which batching keeps every
greedy token, and where that breaks.
"""

import statistics

import matplotlib
import torch

from numbook.check import fact, figure, given, sanity, value
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

N_REQ = given("n_requests", 64)
P_LO, P_HI = given("prompt_lo", 128), given("prompt_hi", 2048)
O_LO, O_HI = given("out_lo", 16), given("out_hi", 256)
SEED = given("request_seed", 3, nudge=0)   # a seed names a draw: --perturb does not nudge it
SLO_TTFT, SLO_TPOT = given("slo_ttft_ms", 200), given("slo_tpot_ms", 7)
WARM = given("warmup_requests", 16)
MAX_BATCH = given("max_batch", 8)
reqs = make_requests(N_REQ, (P_LO, P_HI), (O_LO, O_HI), vocab=1000, seed=SEED)
useful = sum(r.n_out - 1 for r in reqs)
value("useful_rows", useful)
value("mean_out", sum(r.n_out for r in reqs) / len(reqs))
value("mean_prompt", sum(len(r.prompt) for r in reqs) / len(reqs))
for t in (P_LO, P_HI):
    c = prefill_cost(cfg8, "bf16", prompt_len=t)
    value(f"prefill_{'lo' if t == P_LO else 'hi'}_ms", max(c.flops / PEAK, c.bytes / BW) / MS)
print(
    f"{param_count(cfg8) / 1e9:.2f} B parameters in bf16 at {PEAK / 1e12:g} TFLOP/s and {BW / 1e12:g} TB/s: a decode "
    f"step costs {terms.weights_s / MS:.2f} ms for the weights, plus per sequence at context {CTX} "
    f"{terms.bytes_per_seq_s * 1e6:.1f} us of KV reads ({terms.per_seq_ratio:.4f} of the weights) "
    f"or {terms.flops_per_seq_s * 1e6:.1f} us of compute, whichever the step is bound by"
)
print(f"{N_REQ} requests: prompts {P_LO}..{P_HI}, outputs {O_LO}..{O_HI} tokens (seed {SEED})\n")


def score(trace, skip=WARM):
    """Throughput over the whole run; latency over the requests after the warm-up."""
    full = summarize(trace, ttft_slo=SLO_TTFT * MS, tpot_slo=SLO_TPOT * MS)
    steady = summarize(m.after_warmup(trace, skip), ttft_slo=SLO_TTFT * MS, tpot_slo=SLO_TPOT * MS)
    return {
        **steady,
        "request_throughput": full["request_throughput"],
        "token_throughput": full["token_throughput"],
        "goodput": full["goodput"],
        "slo_attainment": full["slo_attainment"],
        "n_output_tokens": full["n_output_tokens"],
    }


def row(label, s, extra=None):
    print(
        f"{label:<12}{s['request_throughput']:7.2f}{s['token_throughput']:8.0f}"
        + "".join(f"{s['ttft'][p] / MS:8.1f}" for p in ("p50", "p95", "p99"))
        + "".join(f"{s['tpot'][p] / MS:7.2f}" for p in ("p50", "p95", "p99"))
        + f"{s['goodput']:8.2f}"
        + (f"{extra:10.2f}" if extra is not None else "")
    )


HEAD = (
    f"{'':<12}{'req/s':>7}{'tok/s':>8}{'TTFT p50':>9}{'p95':>7}{'p99':>8}"
    f"{'TPOT p50':>9}{'p95':>5}{'p99':>7}{'goodput':>8}"
)

# --- static against continuous, N = max_batch clients -------------------------------------------
print(f"closed loop, {MAX_BATCH} clients, batch limit {MAX_BATCH}; latency after the first {WARM} requests (ms)")
print(HEAD)
res, rows_by_mode, steps_by_mode, traces_by_mode = {}, {}, {}, {}
for mode in ("static", "continuous"):
    trace, cm = simulate(ClosedLoop(reqs, MAX_BATCH), mode=mode, max_batch=MAX_BATCH, cost=cost)
    traces_by_mode[mode] = trace
    s = res[mode] = score(trace)
    rows = rows_by_mode[mode] = sum(cm.decode_batches)
    steps_by_mode[mode] = len(cm.decode_batches)
    row(mode, s)
    value(f"{mode}_req_s", s["request_throughput"])
    value(f"{mode}_tok_s", s["token_throughput"])
    for p in ("p50", "p95", "p99"):
        value(f"{mode}_ttft_{p}_ms", s["ttft"][p] / MS)
        value(f"{mode}_tpot_{p}_ms", s["tpot"][p] / MS)
    value(f"{mode}_rows", rows)
    value(f"{mode}_mean_rows", rows / len(cm.decode_batches))
    value(f"{mode}_mean_useful_batch", useful / len(cm.decode_batches))
value("static_waste", 1 - useful / rows_by_mode["static"])
value("cont_over_static_req", res["continuous"]["request_throughput"] / res["static"]["request_throughput"])
value("static_over_cont_ttft", res["static"]["ttft"]["p50"] / res["continuous"]["ttft"]["p50"])
sanity("all_tokens_delivered", all(res[k]["n_output_tokens"] == sum(r.n_out for r in reqs) for k in res),
       relation="larger")
sanity(
    "static_computes_padding",
    rows_by_mode["static"] > rows_by_mode["continuous"] == useful,
    "static batching decodes rows for finished requests; continuous decodes only useful ones",
    operands=(rows_by_mode["static"], rows_by_mode["continuous"]),
)
# What the steps' sizes alone add to continuous batching's TPOT, by the cost model: the difference in
# mean rows per step times the most one row can cost (a decode row at the longest context this
# workload reaches), against the TPOT gap the runs show.
LONGEST = P_HI + O_HI
per_row_max = cost.step_s([LONGEST] * 2, []) - cost.step_s([LONGEST], [])
size_gap = (rows_by_mode["continuous"] / steps_by_mode["continuous"]
            - rows_by_mode["static"] / steps_by_mode["static"]) * per_row_max
tpot_gap = res["continuous"]["tpot"]["p50"] - res["static"]["tpot"]["p50"]
sanity(
    "not_the_step_size",
    size_gap < 0.25 * tpot_gap,
    "the steps' sizes account for less than a quarter of continuous batching's extra median TPOT",
    operands=(size_gap, 0.25 * tpot_gap), relation=("smaller", "not"),
)
# the static TPOT tail is short requests: the quarter of requests (after the warm-up) with the highest
# TPOT produced fewer tokens on average than the rest, over which a wait at the batch's start is spread
by_tpot = sorted((r for r in m.after_warmup(traces_by_mode["static"], WARM) if m.tpot(r) is not None), key=m.tpot)
top = by_tpot[-(len(by_tpot) // 4):]
rest = by_tpot[: len(by_tpot) - len(top)]
sanity(
    "static_tail_is_short_requests",
    statistics.mean(r.n_out for r in top) < statistics.mean(r.n_out for r in rest),
    "the static run's highest-TPOT quarter of requests produced fewer tokens on average than the rest",
    operands=(statistics.mean(r.n_out for r in top), statistics.mean(r.n_out for r in rest)),
       relation=("largest", "smaller"),
)
sanity(
    "continuous_ttft_lower",
    res["static"]["ttft"]["p50"] > res["continuous"]["ttft"]["p50"],
    operands=(res["static"]["ttft"]["p50"], res["continuous"]["ttft"]["p50"]), relation=("falls", "not"),
)
sanity(
    "continuous_tpot_higher",
    res["continuous"]["tpot"]["p50"] > res["static"]["tpot"]["p50"],
    "continuous batching pays in median TPOT",
    operands=(res["continuous"]["tpot"]["p50"], res["static"]["tpot"]["p50"]),
)

# --- the concurrency sweep ------------------------------------------------------------------------
SWEEP_BATCH = given("sweep_max_batch", 16)
print(f"\nclosed loop, continuous batching, batch limit {SWEEP_BATCH}")
print(HEAD + f"{'in flight':>10}")
sweep, sweep_traces = {}, {}
NS = (1, 2, 4, 8, SWEEP_BATCH, 2 * SWEEP_BATCH)
for n in NS:
    trace, _ = simulate(ClosedLoop(reqs, n), mode="continuous", max_batch=SWEEP_BATCH, cost=cost)
    s = sweep[n] = score(trace)
    sweep_traces[n] = trace
    in_flight = sum(m.e2e(r) for r in trace) / m.span(trace)  # time-average requests in the system
    row(f"N={n}", s, in_flight)
    key = "nhi" if n == 2 * SWEEP_BATCH else "nlim" if n == SWEEP_BATCH else f"n{n}"
    for k, v in (
        ("tok_s", s["token_throughput"]),
        ("req_s", s["request_throughput"]),
        ("tpot_p50_ms", s["tpot"]["p50"] / MS),
        ("tpot_p95_ms", s["tpot"]["p95"] / MS),
        ("ttft_p50_ms", s["ttft"]["p50"] / MS),
        ("ttft_p95_ms", s["ttft"]["p95"] / MS),
        ("ttft_p99_ms", s["ttft"]["p99"] / MS),
        ("in_flight", in_flight),
        ("goodput", s["goodput"]),
        ("n", n),
    ):
        why = None
        if k == "n" and n in (1, 2, 4, 8):
            why = "a row of the table: the client counts it tabulates"
        elif k == "in_flight" and n == 1:
            why = "one client keeps exactly one request in the system, whatever the inputs"
        value(f"{key}_{k}", v, fixed=why)
best_n = value("best_goodput_n", max(sweep, key=lambda n: sweep[n]["goodput"]))
gain = value("tok_gain_lim", sweep[SWEEP_BATCH]["token_throughput"] / sweep[1]["token_throughput"])
tcost = value("tpot_cost_lim", sweep[SWEEP_BATCH]["tpot"]["p50"] / sweep[1]["tpot"]["p50"])
sanity("gain_beats_cost", gain > tcost, "throughput grows faster than TPOT up to the limit", operands=(gain, tcost),
       relation="grows")
good_gain = sweep[SWEEP_BATCH]["goodput"] / sweep[1]["goodput"]
sanity("goodput_lags", good_gain < gain, operands=(good_gain, gain), relation=("grows", "smaller"))
hi = 2 * SWEEP_BATCH
sanity(
    "throughput_flat_past_limit",
    abs(sweep[hi]["token_throughput"] - sweep[SWEEP_BATCH]["token_throughput"])
    < 0.02 * sweep[SWEEP_BATCH]["token_throughput"],
    "clients beyond the batch limit only queue",
    operands=(sweep[hi]["token_throughput"], sweep[SWEEP_BATCH]["token_throughput"]),
)
sanity(
    "ttft_jumps_past_limit",
    sweep[hi]["ttft"]["p50"] > 10 * sweep[SWEEP_BATCH]["ttft"]["p50"],
    operands=(sweep[hi]["ttft"]["p50"], 10 * sweep[SWEEP_BATCH]["ttft"]["p50"]),
)
sanity(
    "goodput_falls_past_limit",
    sweep[hi]["goodput"] < sweep[best_n]["goodput"],
    operands=(sweep[hi]["goodput"], sweep[best_n]["goodput"]), relation=("largest", "falls"),
)
queued = max(0, hi - SWEEP_BATCH)
value("closed_queue_max", queued)

# TTFT against prompt length, at the batch limit: requests sorted into prompt-length bins
lim = m.after_warmup(sweep_traces[SWEEP_BATCH], WARM)
bins = [(P_LO, 700), (700, 1400), (1400, P_HI + 1)]
ttft_by_len = []
for lo, hi_ in bins:
    t = [m.ttft(r) / MS for r in lim if lo <= r.prompt_len < hi_]
    ttft_by_len.append(m.percentile(t, 50))
short_ttft = value("ttft_short_ms", ttft_by_len[0])
long_ttft = value("ttft_long_ms", ttft_by_len[-1])
sanity("ttft_grows_with_prompt", long_ttft > short_ttft, operands=(long_ttft, short_ttft), relation="grows")

# --- open loop: Poisson arrivals, realised rates --------------------------------------------------
ARR_SEED = given("arrival_seed", 1, nudge=0)
RATES = (given("rate_a", 4, unit="req/s"), given("rate_b", 8, unit="req/s"), given("rate_c", 16, unit="req/s"),
         given("rate_d", 32, unit="req/s"))
print(f"\nPoisson arrivals (seed {ARR_SEED}), continuous batching, batch limit {SWEEP_BATCH}")
print(f"{'offered':>8}{'arrived':>8}{'served':>8}{'TTFT p99':>9}{'TPOT p99':>9}{'SLO met':>8}{'goodput':>8}")
pois, pois_traces = {}, {}
for k, rate in zip("abcd", RATES, strict=True):
    trace, _ = simulate(
        OpenLoop.poisson(reqs, rate, seed=ARR_SEED), mode="continuous", max_batch=SWEEP_BATCH, cost=cost
    )
    pois_traces[k] = trace
    s = pois[k] = score(trace)
    arrived = m.arrival_rate(trace)
    print(
        f"{rate:>8}{arrived:8.2f}{s['request_throughput']:8.2f}{s['ttft']['p99'] / MS:9.1f}{s['tpot']['p99'] / MS:9.2f}"
        f"{s['slo_attainment']:8.0%}{s['goodput']:8.2f}"
    )
    value(f"r{k}_arrived", arrived)
    value(f"r{k}_req_s", s["request_throughput"])
    value(f"r{k}_ttft_p99_ms", s["ttft"]["p99"] / MS)
    value(f"r{k}_tpot_p99_ms", s["tpot"]["p99"] / MS)
    value(f"r{k}_attain", s["slo_attainment"], fixed=ALL_MET if s["slo_attainment"] == 1 else None)
    value(f"r{k}_goodput", s["goodput"])
value("arrived_short", 1 - pois["a"]["request_throughput"] / RATES[0])
# served over the span from the first arrival to the last finish, the rate is below the arrival rate too
sanity("served_lower_still", pois["a"]["request_throughput"] < m.arrival_rate(pois_traces["a"]) < RATES[0],
       "the served rate is below the realised arrival rate, which is below the offered rate",
       operands=(pois["a"]["request_throughput"], m.arrival_rate(pois_traces["a"])), relation=("smaller", "smallest"))
draw = OpenLoop.poisson(reqs, RATES[0], seed=ARR_SEED)
last = value("ra_last_arrival_s", draw.schedule[-1][1])
value("ra_nominal_last_s", (N_REQ - 1) / RATES[0])
sanity(
    "draw_sparser",
    last > (N_REQ - 1) / RATES[0],
    "this draw's arrivals are sparser than the rate",
    operands=(last, (N_REQ - 1) / RATES[0]), relation="not",
)
capacity = value("capacity_req_s", sweep[SWEEP_BATCH]["request_throughput"])
sanity("overload_over_capacity", RATES[3] > capacity, operands=(RATES[3], capacity))
# the queue grows for as long as the run lasts: the last quarter of arrivals waits far longer for its
# first token than the first quarter
by_arrival = sorted(pois_traces["d"], key=lambda r: r.arrival)
quarter = len(by_arrival) // 4
early = statistics.mean(m.ttft(r) for r in by_arrival[:quarter])
late = statistics.mean(m.ttft(r) for r in by_arrival[-quarter:])
sanity("overload_tail", late > 5 * early, "the last quarter's mean TTFT is over 5x the first quarter's",
       operands=(late, 5 * early), relation=("falls", "grows"))

# DistServe's goodput: the highest rate at which a target share of requests meets both SLOs
TARGET = given("goodput_target", 0.9)


def attainment(rate):
    tr, _ = simulate(OpenLoop.poisson(reqs, rate, seed=ARR_SEED), mode="continuous", max_batch=SWEEP_BATCH, cost=cost)
    return m.slo_attainment(tr, SLO_TTFT * MS, SLO_TPOT * MS)


lo_r, hi_r = 0.5, 4 * capacity
for _ in range(14):
    mid = (lo_r + hi_r) / 2
    lo_r, hi_r = (mid, hi_r) if attainment(mid) >= TARGET else (lo_r, mid)
dist = value("distserve_goodput", lo_r, unit="req/s")
print(f"DistServe goodput (highest rate with {TARGET:.0%} of requests within both SLOs): {dist:.2f} req/s")

# --- chunked prefill against prefill-first --------------------------------------------------------
CHUNK = given("chunk_tokens", 512)
rate = RATES[2]
print(
    f"\nPoisson {rate} req/s, batch limit {SWEEP_BATCH}: prefill-first against chunked prefill ({CHUNK} tokens a step)"
)
print(f"{'':<14}{'TTFT p50':>9}{'p99':>8}{'TPOT p50':>9}{'p95':>7}{'p99':>7}{'ITL max':>8}{'SLO met':>8}")
ch = {}
for name, mode, ck in (("prefill_first", "continuous", None), ("chunked", "chunked", CHUNK)):
    tr, _ = simulate(
        OpenLoop.poisson(reqs, rate, seed=ARR_SEED), mode=mode, max_batch=SWEEP_BATCH, cost=cost, chunk_tokens=ck
    )
    s = ch[name] = score(tr)
    print(
        f"{name:<14}{s['ttft']['p50'] / MS:9.1f}{s['ttft']['p99'] / MS:8.1f}{s['tpot']['p50'] / MS:9.2f}"
        f"{s['tpot']['p95'] / MS:7.2f}{s['tpot']['p99'] / MS:7.2f}{s['itl']['max'] / MS:8.1f}{s['slo_attainment']:8.0%}"
    )
    for k, v in (
        ("ttft_p50_ms", s["ttft"]["p50"]),
        ("ttft_p99_ms", s["ttft"]["p99"]),
        ("tpot_p50_ms", s["tpot"]["p50"]),
        ("tpot_p95_ms", s["tpot"]["p95"]),
        ("tpot_p99_ms", s["tpot"]["p99"]),
        ("itl_max_ms", s["itl"]["max"]),
    ):
        value(f"{name}_{k}", v / MS)
    value(f"{name}_attain", s["slo_attainment"], fixed=ALL_MET if s["slo_attainment"] == 1 else None)
sanity(
    "chunked_cuts_tpot_tail",
    ch["chunked"]["tpot"]["p99"] < ch["prefill_first"]["tpot"]["p99"],
    operands=(ch["chunked"]["tpot"]["p99"], ch["prefill_first"]["tpot"]["p99"]),
)
sanity(
    "chunked_cuts_itl_max",
    ch["chunked"]["itl"]["max"] < ch["prefill_first"]["itl"]["max"],
    operands=(ch["chunked"]["itl"]["max"], ch["prefill_first"]["itl"]["max"]),
)

# --- the memory limit: admission by KV bytes, preemption by recompute --------------------------------
MEM_GB = given("memory_gb", 18)
FIX_P, FIX_O = given("fixed_prompt", 256), given("fixed_out", 768)
mem = MEM_GB * 10**9
kv_budget = value("kv_budget_gb", (mem - weight_bytes(cfg8, "bf16")) / 1e9)
value("weights_gb", weight_bytes(cfg8, "bf16") / 1e9)
analytic = value("max_seqs", max_sequences(cfg8, "bf16", memory_bytes=mem, seq_len=FIX_P + FIX_O))
fixed = make_requests(N_REQ, FIX_P, FIX_O, vocab=1000, seed=SEED)
st = ServeStats()
simulate(
    ClosedLoop(fixed, N_REQ),
    mode="continuous",
    max_batch=N_REQ,
    cost=cost,
    kv_budget_bytes=int(kv_budget * 1e9),
    stats=st,
)
largest = value("kv_largest_batch", st.largest_batch)
value("kv_preemptions", st.preemptions)
value("kv_positions", int(kv_budget * 1e9) // kvb)
print(
    f"\nmemory {MEM_GB} GB - weights {weight_bytes(cfg8, 'bf16') / 1e9:.2f} GB = {kv_budget:.2f} GB of KV "
    f"({int(kv_budget * 1e9) // kvb} positions of {kvb} B)\n"
    f"requests of {FIX_P} + {FIX_O} tokens: max_sequences = {analytic}; admitted by KV bytes: largest batch "
    f"{st.largest_batch}, {st.preemptions} preemptions by recompute, at most {st.most_kv_tokens} positions held"
)
sanity(
    "bytes_admit_more",
    largest > analytic,
    "admission by current bytes runs a larger batch than full reservation",
    operands=(largest, analytic), relation="largest",
)
sanity("preempts", st.preemptions > 0, operands=(st.preemptions, 0))
sanity(
    "never_over_budget",
    st.most_kv_tokens <= int(kv_budget * 1e9) // kvb,
    operands=(st.most_kv_tokens, int(kv_budget * 1e9) // kvb), relation="not",
)

# --- figures ------------------------------------------------------------------------------------------
fig, (a1, a2) = new_figure(2)
xs = [sweep[n]["token_throughput"] for n in NS[:-1]]
a1.plot(xs, [sweep[n]["tpot"]["p50"] / MS for n in NS[:-1]], "o-", label="TPOT p50")
a1.plot(xs, [sweep[n]["tpot"]["p95"] / MS for n in NS[:-1]], "s--", label="TPOT p95")
for n, x in zip(NS[:-1], xs, strict=True):
    a1.annotate(
        f"N={n}",
        (x, sweep[n]["tpot"]["p50"] / MS),
        textcoords="offset points",
        xytext=(0, 8),
        ha="center",
        fontsize=9,
        color="#8a8f98",
    )
a1.set(xlabel="output tokens/s", ylabel="ms", title="Throughput against time per token")
a1.legend()
a2.plot([n for n in NS], [sweep[n]["ttft"]["p50"] / MS for n in NS], "o-", label="TTFT p50")
a2.plot([n for n in NS], [sweep[n]["ttft"]["p95"] / MS for n in NS], "s--", label="TTFT p95")
a2.set(xscale="log", yscale="log", xlabel="clients N", ylabel="ms", title="TTFT against concurrency")
a2.set_xticks(list(NS), [str(n) for n in NS])
a2.legend()
figure(
    "sweep",
    finish(fig),
    "Simulated clock, continuous batching, batch limit as stated: throughput against "
    "median and 95th-percentile TPOT (one mark per client count), and TTFT against the client count.",
)
fig, (b1, b2) = new_figure(2)
b1.scatter([r.prompt_len for r in lim], [m.ttft(r) / MS for r in lim], s=14)
b1.set(xlabel="prompt tokens", ylabel="TTFT, ms", title="TTFT against prompt length")
labels = ["prefill first", "chunked"]
for i, key in enumerate(("p50", "p95", "p99")):
    b2.bar(
        [j + 0.27 * (i - 1) for j in range(2)], [ch[n]["tpot"][key] / MS for n in ch], width=0.27, label=f"TPOT {key}"
    )
b2.set_xticks([0, 1], labels)
b2.set(ylabel="ms", title="Chunked prefill and the TPOT tail")
b2.legend()
figure(
    "ttft_and_chunking",
    finish(fig),
    "Left: TTFT of every request after the warm-up against its prompt length, "
    "at the batch limit. Right: TPOT percentiles under Poisson load, prefill-first against chunked prefill.",
)

# --- measured: the real model on this machine -------------------------------------------------------
pc = preset("cpu")
model = DecoderLM(pc.model, max_slots=MAX_BATCH)
N_REAL = given("measured_n", 24)
SEED_REAL = given("measured_seed", 11)
real = make_requests(N_REAL, pc.prompt_len, pc.output_len, vocab=pc.model.vocab, seed=SEED_REAL)
serve(model, ClosedLoop(real[:4], 4), mode="continuous")  # warm-up
measured = {}
print(f"\nmeasured: preset 'cpu' model on this machine, {len(real)} requests, {MAX_BATCH} clients")
for mode in ("static", "continuous"):
    trace = serve(model, ClosedLoop(real, MAX_BATCH), mode=mode, max_batch=MAX_BATCH)
    s = measured[mode] = (summarize(trace), trace)
    print(
        f"{mode:<11} {s[0]['request_throughput']:6.2f} req/s  TTFT p50 {s[0]['ttft']['p50'] / MS:7.1f} ms  "
        f"TPOT p50 {s[0]['tpot']['p50'] / MS:6.2f} ms"
    )
value("measured_ttft_ratio", measured["static"][0]["ttft"]["p50"] / measured["continuous"][0]["ttft"]["p50"],
      measured="served and timed on this machine")
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
