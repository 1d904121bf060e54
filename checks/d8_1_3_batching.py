# numbook: timeout=300, alone
"""8.1.3 — Batch shape and concurrency.

First on a simulated clock (servebench.simulate: the real scheduler, a stated cost model), so
every number is exact: static against continuous batching at one concurrency, a closed-loop
concurrency sweep, and open-loop Poisson arrivals. Then the same static/continuous comparison
on the real CPU-sized model, measured, with a check that batching never changes a greedy token.
"""

import torch

from numbook.check import given, sanity, value
from servebench import ClosedLoop, DecoderLM, Linear, OpenLoop, generate, make_requests, preset, serve, simulate
from servebench import metrics as m
from servebench.summary import summarize
from servebench.textplot import bars, scatter

torch.set_num_threads(1)
MS = 1e-3

# --- the cost model and the workload ----------------------------------------------------------
PRE_FIXED = given("prefill_fixed_ms", 2.0)
PRE_TOKEN = given("prefill_per_token_ms", 0.05)
DEC_FIXED = given("decode_fixed_ms", 5.0)
DEC_SEQ = given("decode_per_seq_ms", 0.5)
N_REQ = given("n_requests", 64)
P_LO, P_HI = given("prompt_lo", 32), given("prompt_hi", 256)
O_LO, O_HI = given("out_lo", 8), given("out_hi", 128)
SLO_TTFT, SLO_TPOT = given("slo_ttft_ms", 100), given("slo_tpot_ms", 20)
MAX_BATCH = given("max_batch", 8)

pre, dec = Linear(PRE_FIXED * MS, PRE_TOKEN * MS), Linear(DEC_FIXED * MS, DEC_SEQ * MS)
reqs = make_requests(N_REQ, (P_LO, P_HI), (O_LO, O_HI), vocab=1000, seed=3)
useful = sum(r.n_out - 1 for r in reqs)
value("useful_rows", useful)
value("mean_out", sum(r.n_out for r in reqs) / len(reqs))


def score(trace):
    return summarize(trace, ttft_slo=SLO_TTFT * MS, tpot_slo=SLO_TPOT * MS)


# --- static against continuous, N = max_batch clients -------------------------------------------
print(f"cost model: prefill {PRE_FIXED} ms + {PRE_TOKEN} ms/token, decode step {DEC_FIXED} ms + {DEC_SEQ} ms/seq")
print(
    f"{N_REQ} requests, prompts {P_LO}..{P_HI}, outputs {O_LO}..{O_HI} tokens; "
    f"{MAX_BATCH} clients, batch limit {MAX_BATCH}\n"
)
print(
    f"{'':<11}{'req/s':>7}{'tok/s':>8}{'TTFT p50':>10}{'TTFT p99':>10}{'TPOT p50':>10}{'E2E p50':>9}"
    f"{'rows':>7}{'mean B':>8}"
)
res, rows_by_mode = {}, {}
for mode in ("static", "continuous"):
    trace, cm = simulate(ClosedLoop(reqs, MAX_BATCH), mode=mode, max_batch=MAX_BATCH, prefill_s=pre, decode_s=dec)
    s = res[mode] = score(trace)
    rows = rows_by_mode[mode] = sum(cm.decode_batches)
    mean_b = useful / len(cm.decode_batches)
    print(
        f"{mode:<11}{s['request_throughput']:7.2f}{s['token_throughput']:8.1f}{s['ttft']['p50'] / MS:10.1f}"
        f"{s['ttft']['p99'] / MS:10.1f}{s['tpot']['p50'] / MS:10.2f}{s['e2e']['p50'] / MS:9.1f}{rows:7d}{mean_b:8.2f}"
    )
    value(f"{mode}_req_s", s["request_throughput"])
    value(f"{mode}_tok_s", s["token_throughput"])
    value(f"{mode}_ttft_p50_ms", s["ttft"]["p50"] / MS)
    value(f"{mode}_ttft_p99_ms", s["ttft"]["p99"] / MS)
    value(f"{mode}_tpot_p50_ms", s["tpot"]["p50"] / MS)
    value(f"{mode}_e2e_p50_ms", s["e2e"]["p50"] / MS)
    value(f"{mode}_rows", rows)
    value(f"{mode}_steps", len(cm.decode_batches))
    value(f"{mode}_mean_useful_batch", mean_b)
value("static_waste", 1 - useful / rows_by_mode["static"])
value("cont_over_static_req", res["continuous"]["request_throughput"] / res["static"]["request_throughput"])
value("static_over_cont_ttft", res["static"]["ttft"]["p50"] / res["continuous"]["ttft"]["p50"])

# --- the concurrency sweep ------------------------------------------------------------------------
SWEEP_BATCH = given("sweep_max_batch", 16)
print(f"\nclosed loop, continuous batching, batch limit {SWEEP_BATCH}:")
print(f"{'N':>4}{'tok/s':>9}{'TPOT p50':>10}{'TTFT p50':>10}{'TTFT p99':>10}{'in flight':>10}{'goodput':>9}")
points, sweep = [], {}
for n in (1, 2, 4, 8, 16, 32):
    trace, _ = simulate(ClosedLoop(reqs, n), mode="continuous", max_batch=SWEEP_BATCH, prefill_s=pre, decode_s=dec)
    s = sweep[n] = score(trace)
    in_flight = sum(m.e2e(r) for r in trace) / m.span(trace)  # time-average requests in the system
    print(
        f"{n:>4}{s['token_throughput']:9.1f}{s['tpot']['p50'] / MS:10.2f}{s['ttft']['p50'] / MS:10.1f}"
        f"{s['ttft']['p99'] / MS:10.1f}{in_flight:10.2f}{s['goodput']:9.2f}"
    )
    for k, v in (
        ("tok_s", s["token_throughput"]),
        ("tpot_p50_ms", s["tpot"]["p50"] / MS),
        ("ttft_p50_ms", s["ttft"]["p50"] / MS),
        ("ttft_p99_ms", s["ttft"]["p99"] / MS),
        ("in_flight", in_flight),
        ("goodput", s["goodput"]),
        ("req_s", s["request_throughput"]),
    ):
        value(f"n{n}_{k}", v)
    value(f"n{n}_n", n)
    value(f"n{n}_little", s["request_throughput"] * sum(m.e2e(r) for r in trace) / len(trace))
    if n <= 16:
        points.append((s["token_throughput"], s["tpot"]["p50"] / MS, str(n) if n < 10 else "G"))
print(scatter(points, xlabel="output tokens/s   (marks: N = 1, 2, 4, 8; G = 16)", ylabel="TPOT p50, ms"))
best_n = max(sweep, key=lambda n: sweep[n]["goodput"])
value("best_goodput_n", best_n)
value("tok_gain_16", sweep[16]["token_throughput"] / sweep[1]["token_throughput"])
value("tpot_cost_16", sweep[16]["tpot"]["p50"] / sweep[1]["tpot"]["p50"])

# --- open loop: Poisson arrivals ------------------------------------------------------------------
print(f"\nPoisson arrivals, continuous batching, batch limit {SWEEP_BATCH}:")
print(f"{'rate':>5}{'served/s':>10}{'TTFT p50':>10}{'TTFT p99':>10}{'TPOT p50':>10}{'SLO met':>9}{'goodput':>9}")
for rate in (5, 10, 20, 40):
    trace, _ = simulate(
        OpenLoop.poisson(reqs, rate, seed=1), mode="continuous", max_batch=SWEEP_BATCH, prefill_s=pre, decode_s=dec
    )
    s = score(trace)
    print(
        f"{rate:>5}{s['request_throughput']:10.2f}{s['ttft']['p50'] / MS:10.1f}{s['ttft']['p99'] / MS:10.1f}"
        f"{s['tpot']['p50'] / MS:10.2f}{s['slo_attainment']:9.0%}{s['goodput']:9.2f}"
    )
    value(f"r{rate}_req_s", s["request_throughput"])
    value(f"r{rate}_ttft_p99_ms", s["ttft"]["p99"] / MS)
    value(f"r{rate}_attain", s["slo_attainment"])
    value(f"r{rate}_goodput", s["goodput"])
    value(f"rate_{rate}", rate)

sanity("all_tokens_delivered", all(res[k]["n_output_tokens"] == sum(r.n_out for r in reqs) for k in res))
sanity(
    "static_computes_padding",
    rows_by_mode["static"] > rows_by_mode["continuous"] == useful,
    "static batching decodes rows for finished requests; continuous decodes only useful ones",
)
sanity(
    "throughput_flat_past_limit",
    abs(sweep[32]["token_throughput"] - sweep[16]["token_throughput"]) < 0.02 * sweep[16]["token_throughput"],
    "clients beyond the batch limit only queue",
)

# --- measured: the real model on this machine -------------------------------------------------------
cfg = preset("cpu")
model = DecoderLM(cfg.model, max_slots=MAX_BATCH)
real = make_requests(32, cfg.prompt_len, cfg.output_len, vocab=cfg.model.vocab, seed=11)
serve(model, ClosedLoop(real[:4], 4), mode="continuous")  # warm-up
measured = {}
print(f"\nmeasured: preset 'cpu' model on this machine, {len(real)} requests, {MAX_BATCH} clients")
for mode in ("static", "continuous"):
    trace = serve(model, ClosedLoop(real, MAX_BATCH), mode=mode, max_batch=MAX_BATCH)
    s = measured[mode] = (score(trace), trace)
    print(
        f"{mode:<11} {s[0]['request_throughput']:6.2f} req/s  TTFT p50 {s[0]['ttft']['p50'] / MS:7.1f} ms  "
        f"TPOT p50 {s[0]['tpot']['p50'] / MS:6.2f} ms"
    )
print(bars([(f"{k} TTFT p50", v[0]["ttft"]["p50"] / MS) for k, v in measured.items()], unit=" ms"))
value("measured_n", len(real))
value("measured_ttft_ratio", measured["static"][0]["ttft"]["p50"] / measured["continuous"][0]["ttft"]["p50"])
alone = [generate(model, spec.prompt, spec.n_out) for spec in real]
same = sum(list(r.tokens) == a for mode in measured for r, a in zip(measured[mode][1], alone, strict=True))
value("same_tokens", same)
print(f"greedy outputs identical to the request served alone: {same} of {2 * len(real)}")
sanity(
    "batching_keeps_tokens",
    same == 2 * len(real),
    "every request's greedy tokens, in either mode, equal its tokens served alone",
)
