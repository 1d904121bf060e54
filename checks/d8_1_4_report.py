# numbook: timeout=600, alone
"""8.1.4 — The benchmark report: one whole run of `python -m servebench --config cpu`.

Runs servebench.run_report on the "cpu" preset (the same code the CLI runs), prints the
report's tables and text plots, and records the figures the page states. Measured numbers are
stated on the page only as bounds that hold on any machine; the exact values of this build are
in the printed output.
"""

import dataclasses
import json
import statistics
import time

import matplotlib
import torch

from numbook.check import estimate, figure, given, sanity, value
from servebench import (
    ClosedLoop,
    DecoderLM,
    OpenLoop,
    critical_decode_batch,
    decode_cost,
    kv_cache_bytes,
    make_requests,
    param_count,
    preset,
    run_report,
    serve,
    summarize,
    weight_bytes,
)
from servebench.metrics import steady_throughput
from servebench.plotting import GREY, finish, new_figure
from servebench.textplot import bars, scatter

matplotlib.use("Agg")  # no display: figures are written as SVG into the result

PRESET = "the cpu preset's setting (servebench/config.py)"   # why a stated setting is fixed
MEASURED = "timed on this machine"
cfg = preset(given("config", "cpu"))
base = cfg.model  # the model's shape is this report's input; a nudged one reruns the whole report
mc = dataclasses.replace(
    base,
    layers=given("layers", base.layers),
    d_model=given("d_model", base.d_model, nudge=base.heads),   # d_model stays a multiple of the heads
    vocab=given("vocab", base.vocab),
    max_seq=given("max_seq", base.max_seq),
)
cfg = cfg.replace(model=mc)
r = run_report(cfg)
env, mem, steps, q = r["environment"], r["memory"], r["steps"], r["quality"]

# --- setup ---------------------------------------------------------------------------------------
print(
    f"device {env['device']}; python {env['python']}, torch {env['torch']}, numpy {env['numpy']}, "
    f"{env['threads']} thread(s); {env['date']}"
)
print(
    f"model: {mc.layers} layers, d_model {mc.d_model}, {mc.heads} heads, vocab {mc.vocab}, max_seq {mc.max_seq}, "
    f"{cfg.dtype}; batch limit {cfg.max_batch}"
)
value("heads", mc.heads, fixed=PRESET + "; d_model must stay a multiple of it, so it is not nudged")
value("kv_heads", mc.n_kv_heads, fixed=PRESET + "; one key/value head per query head (no grouping)")
value("ff_mult", mc.ff_mult, fixed=PRESET)
value("d_ff", mc.d_ff)
value("max_batch", cfg.max_batch, fixed=PRESET)
value("n_requests", cfg.n_requests, fixed=PRESET)
value("prompt_lo", cfg.prompt_len[0], fixed=PRESET)
value("prompt_hi", cfg.prompt_len[1], fixed=PRESET)
value("out_lo", cfg.output_len[0], fixed=PRESET)
value("out_hi", cfg.output_len[1], fixed=PRESET)
value("static_concurrency", cfg.static_concurrency, fixed=PRESET)
value("slo_ttft_ms", cfg.slo_ttft_s * 1e3, fixed=PRESET)
value("slo_tpot_ms", cfg.slo_tpot_s * 1e3, fixed=PRESET)
value("threads", cfg.threads, fixed=PRESET)
ce = r["ceilings"]
print(
    f"ceilings measured: {ce['matmul_flops'] / 1e9:.1f} GFLOP/s, {ce['copy_bandwidth'] / 1e9:.1f} GB/s, "
    f"ridge {ce['ridge']:.1f} FLOP/B"
)

# --- memory -------------------------------------------------------------------------------------
value("params_m", param_count(mc) / 1e6)
value("weights_mb", mem["weight_bytes"] / 1e6)
value("kv_per_token", mem["kv_bytes_per_token"], unit="B")
value("kv_slots", mem["kv_slots"], fixed=PRESET + ": the most requests any part of the run holds at once")
value("kv_cache_mb", mem["kv_cache_bytes_allocated"] / 1e6)
peak = [run["peak_bytes"] for run in r["runs"]]
sanity(
    "peak_none_on_cpu",
    cfg.device != "cpu" or all(p is None for p in peak),
    "no peak figure is invented where the device does not report one", relation="not",
)
print(
    f"\nweights {mem['weight_bytes'] / 1e6:.1f} MB (allocated {mem['weight_bytes_allocated'] / 1e6:.1f} MB); "
    f"KV {mem['kv_bytes_per_token']} B/token x {mc.max_seq} positions x {mem['kv_slots']} slots = "
    f"{mem['kv_cache_bytes_allocated'] / 1e6:.1f} MB; peak: "
    f"{'not reported on this device' if peak[0] is None else f'{max(peak) / 1e6:.1f} MB'}"
)
sanity("weights_match_analytic", mem["weight_bytes"] == mem["weight_bytes_allocated"] == weight_bytes(mc, cfg.dtype))
sanity("kv_matches_analytic", mem["kv_cache_bytes_allocated"] == kv_cache_bytes(mc, cfg.dtype, slots=mem["kv_slots"]),
       relation="largest")

# --- isolated steps -------------------------------------------------------------------------------
print(f"\ndecode step (context {cfg.decode_context}): measured against the roofline bound")
print(bars([(f"B={d['batch']:<2} tok/s", d["tokens_per_s"]) for d in steps["decode"]], fmt="{:,.0f}"))
for d in steps["decode"]:
    print(
        f"  B={d['batch']:>2}: {d['time_s'] * 1e3:6.2f} ms (bound {d['bound_s'] * 1e3:5.2f} ms, "
        f"{d['intensity']:.1f} FLOP/B)"
    )
print(f"  smallest compute-bound batch by the measured ceilings: {steps['critical_decode_batch']}")
print("prefill:")
for p in steps["prefill"]:
    print(f"  T={p['prompt_len']:>3}: {p['time_s'] * 1e3:6.2f} ms (bound {p['bound_s'] * 1e3:5.2f} ms)")
dec = {d["batch"]: d for d in steps["decode"]}
fig, ax = new_figure()
bs = [d["batch"] for d in steps["decode"]]
ax.plot(bs, [d["tokens_per_s"] for d in steps["decode"]], "o-", label="measured")
bound_tok_s = [d["batch"] / d["bound_s"] for d in steps["decode"]]
ax.plot(bs, bound_tok_s, "--", color=GREY, label="roofline (measured ceilings)")
ax.set(xscale="log", yscale="log", xlabel="decode batch size B", ylabel="output tokens/s",
       title=f"Decode throughput, context {cfg.decode_context}")
ax.set_xticks(bs, [str(b) for b in bs])
ax.grid(alpha=0.3)
ax.legend()
figure("decode_roofline", finish(fig), "Decode throughput against batch size, measured (dots) and the roofline bound "
       "from bytes and FLOPs per step over the measured copy bandwidth and matmul rate (dashed).")
HI_B = value("decode_batch_hi", 8, fixed="the batch the page compares with one")
print(f"  this run: B={HI_B} delivered {dec[HI_B]['tokens_per_s'] / dec[1]['tokens_per_s']:.2f}x the tokens/s of B=1")
value("decode_batch_max", max(cfg.decode_batches), fixed=PRESET)
# The intensity a decode step tends to as the batch grows: the FLOPs one more sequence adds over the bytes it
# adds. Decode can turn compute bound only on a machine whose ridge lies below it.
CTX = value("decode_context", cfg.decode_context, fixed=PRESET)
one_seq, two_seq = (decode_cost(mc, cfg.dtype, batch=b, context=CTX) for b in (1, 2))
asym = value("decode_asymptote", (two_seq.flops - one_seq.flops) / (two_seq.bytes - one_seq.bytes), unit="FLOP/B")
value("decode_repeats", cfg.decode_repeats, fixed=PRESET)


def intensity(b):
    return decode_cost(mc, cfg.dtype, batch=b, context=CTX).intensity


sanity("decode_intensity_rises",
       all(intensity(b) < intensity(b + 1) < asym for b in (1, 8, 32, 256, 10**6))
       and intensity(10**9) > asym * (1 - 1e-6),
       "a decode step's intensity rises with the batch, stays below the asymptote and is within 10^-6 of it at a "
       "batch of 10^9", operands=(intensity(10**9), asym), relation=("grows", "smaller"))
ridge_here, crit_here = ce["ridge"], steps["critical_decode_batch"]
print(f"  decode intensity at context {CTX} tends to {asym:.2f} FLOP/B as the batch grows; ridge here "
      f"{ridge_here:.2f} FLOP/B: " + ("no batch reaches it" if crit_here is None else f"from B = {crit_here}"))


def crit_ok(ridge_x, crit_x):
    """None exactly when the ridge is at or above the asymptote; else the smallest batch that reaches the ridge."""
    if crit_x is None:
        return ridge_x >= asym
    return ridge_x < asym and intensity(crit_x) >= ridge_x * (1 - 1e-12) and (
        crit_x == 1 or intensity(crit_x - 1) < ridge_x * (1 + 1e-12))


def crit_at(ridge_x):
    return critical_decode_batch(mc, cfg.dtype, context=CTX, peak_flops=ridge_x * 1e9, bandwidth=1e9)


# the report's answer at its measured ridge, and both cases at ridges half and twice the asymptote
sanity("critical_batch_consistent",
       crit_ok(ridge_here, crit_here) and all(crit_ok(x, crit_at(x)) for x in (asym / 2, asym * 2)),
       "the report names no compute-bound batch exactly when its measured ridge is at or above the asymptote, "
       "and otherwise the smallest batch whose intensity reaches it", operands=(asym, ridge_here),
       relation=("smaller", "smallest", "larger", "not"))

# --- serving runs -----------------------------------------------------------------------------------
print(f"\nserving runs, {cfg.n_requests} requests each; percentiles over all of them (n = {cfg.n_requests} per run)")
print(f"{'run':<20}{'req/s':>6}{'tok/s':>7}{'TTFT p50':>9}{'p95':>7}{'p99':>8}{'TPOT p50':>9}{'p95':>6}{'p99':>7}"
      f"{'SLO met':>8}{'goodput':>8}   (ms)")
runs = {}
for run in r["runs"]:
    mt = run["metrics"]
    key = f"{run['mode']}_c{run['concurrency']}" if run["workload"] == "closed" else f"poisson_x{run['load']:g}"
    runs[key] = mt
    label = f"{run['mode']} N={run['concurrency']}" if run["workload"] == "closed" else f"Poisson {run['load']:g}x"
    print(
        f"{label:<20}{mt['request_throughput']:6.1f}{mt['token_throughput']:7.0f}{mt['ttft']['p50'] * 1e3:9.1f}"
        f"{mt['ttft']['p95'] * 1e3:7.1f}{mt['ttft']['p99'] * 1e3:8.1f}{mt['tpot']['p50'] * 1e3:9.2f}"
        f"{mt['tpot']['p95'] * 1e3:6.2f}{mt['tpot']['p99'] * 1e3:7.2f}{mt['slo_attainment']:8.0%}{mt['goodput']:8.1f}"
    )
    sanity(f"complete_{key.replace('.', '_')}", mt["n_requests"] == cfg.n_requests)
# Every percentile of the table rests on all the run's requests, and a p99 over so few (linear interpolation at
# rank 0.99 (n - 1)) lies between the two largest of them.
counted = all(x["metrics"][k]["n"] == cfg.n_requests for x in r["runs"] for k in ("ttft", "tpot"))
top_two = [
    sorted(row[k] for row in x["requests"])[-2:] + [x["metrics"][k]["p99"]] for x in r["runs"] for k in ("ttft", "tpot")
]
sanity("p99_between_top_two", counted and all(lo <= p99 <= hi for lo, hi, p99 in top_two),
       "every percentile rests on all the run's requests, and each p99 lies between the two largest of them",
       operands=(max(p99 / hi for _, hi, p99 in top_two), 1.0), relation="largest")
value("p99_rank", 0.99 * (cfg.n_requests - 1),
      fixed=PRESET + ": the rank of a p99 by linear interpolation over the run's requests")
loads = sorted(cfg.poisson_loads)
# the capacity: the best steady-state request throughput of the continuous closed loops, recomputed from each run's
# own request rows (finishes in the window from the arrival after the clients' first requests to the last arrival)
steady = {}
for x in r["runs"]:
    if x["workload"] == "closed" and x["mode"] == "continuous":
        arrivals = sorted(q["arrival"] for q in x["requests"])
        t0, t1 = arrivals[x["concurrency"]], arrivals[-1]
        steady[x["concurrency"]] = sum(t0 < q["finish"] <= t1 for q in x["requests"]) / (t1 - t0)
capacity = max(steady.values())
sanity("capacity_is_the_sweeps_best", abs(capacity - r["capacity"]) <= 1e-9 * capacity
       and all(abs(v - x["steady_request_throughput"]) <= 1e-9 * v for x in r["runs"]
               for v in [steady.get(x.get("concurrency"))] if x["mode"] == "continuous" and v is not None))
value("load_lo", loads[0], fixed=PRESET)
value("load_hi", loads[-1], fixed=PRESET)
for ld in loads:  # the rate each open-loop run was offered is the load times the measured capacity
    rate_x = next(x["rate"] for x in r["runs"] if x.get("load") == ld)
    sanity(f"rate_is_load_times_capacity_{str(ld).replace('.', '_')}", abs(rate_x - ld * capacity) <= 1e-9 * rate_x)
q_lo, q_hi = runs[f"poisson_x{loads[0]:g}"], runs[f"poisson_x{loads[-1]:g}"]
print(f"this run: median TTFT at {loads[-1]:g}x capacity {q_hi['ttft']['p50'] / q_lo['ttft']['p50']:.1f}x that "
      f"at {loads[0]:g}x")
TARGET = value("goodput_target", 0.9, fixed="DistServe's attainment target: a convention this page adopts")
met = [ld for ld in loads if runs[f"poisson_x{ld:g}"]["slo_attainment"] >= TARGET]
offered = ", ".join(f"{x['load']:g}x = {x['rate']:.1f}" for x in r["runs"] if "load" in x)
print(f"\nclosed-loop capacity {capacity:.1f} req/s; Poisson rates offered (req/s): {offered}")
print(f"DistServe goodput over the tested rates "
      f"(highest with {TARGET:.0%} within both SLOs): "
      f"{f'{max(met) * capacity:.1f} req/s ({max(met):g}x)' if met else 'none'}")
c = cfg.static_concurrency
print(f"this run: median TTFT static over continuous at N={c}: "
      f"{runs[f'static_c{c}']['ttft']['p50'] / runs[f'continuous_c{c}']['ttft']['p50']:.1f}x")
sweep = sorted((int(k.split("_c")[1]), v) for k, v in runs.items() if k.startswith("continuous_c"))
print("\nthroughput against median TPOT, continuous batching, one mark per client count N")
print(
    scatter(
        [(v["token_throughput"], v["tpot"]["p50"] * 1e3, str(n) if n < 10 else "G") for n, v in sweep],
        xlabel="output tokens/s   (marks: N = 1, 2, 4, 8; G = 16)",
        ylabel="TPOT p50, ms",
    )
)
fig, (a1, a2) = new_figure(2)
ns = [n for n, _ in sweep]
for key, axis, name in (("ttft", a1, "TTFT"), ("tpot", a2, "TPOT")):
    for pct, style in (("p50", "o-"), ("p95", "s--")):
        axis.plot(ns, [v[key][pct] * 1e3 for _, v in sweep], style, label=f"{name} {pct}")
    axis.set(xscale="log", xlabel="concurrent clients N", ylabel="ms", title=f"{name} against concurrency")
    axis.set_xticks(ns, [str(n) for n in ns])
    axis.grid(alpha=0.3)
    axis.legend()
figure("latency_vs_concurrency", finish(fig), "Median and 95th-percentile TTFT and TPOT against the number of "
       "concurrent "
       "clients under continuous batching (percentiles by linear interpolation).")
fig, ax = new_figure()
ax.plot(ns, [v["token_throughput"] for _, v in sweep], "o-", label="output tokens/s")
ax.set(xscale="log", xlabel="concurrent clients N (continuous batching)", ylabel="output tokens/s",
       title="Throughput against concurrency")
ax.set_xticks(ns, [str(n) for n in ns])
ax.grid(alpha=0.3)
figure("throughput_vs_concurrency", finish(fig), "Output-token throughput against the number of concurrent clients.")
value("sweep_lo", sweep[0][0], fixed=PRESET)
value("sweep_hi", sweep[-1][0], fixed=PRESET)
print(f"this run, N={sweep[0][0]} to N={sweep[-1][0]}: tokens/s x"
      f"{sweep[-1][1]['token_throughput'] / sweep[0][1]['token_throughput']:.2f}, median TPOT x"
      f"{sweep[-1][1]['tpot']['p50'] / sweep[0][1]['tpot']['p50']:.2f}")

# --- quality --------------------------------------------------------------------------------------
bi, ag = q["batch_invariance"], q["fp32_vs_bf16"]
print(
    f"\nbatch invariance: batch of {bi['batch']}, {bi['steps']} steps, max |logit difference| "
    f"{bi['max_abs_logit_diff']:.2e}, greedy tokens equal: {bi['tokens_equal']}"
)
print(
    f"fp32 vs bf16: top-1 match {ag['match_rate']:.3f} over {ag['positions']} positions (teacher forced); "
    f"free-running outputs agree for {ag['mean_common_prefix']:.1f} of {ag['steps']} tokens on average"
)
value("inv_batch", bi["batch"], fixed=PRESET)
value("inv_steps", bi["steps"], fixed=PRESET)
value("inv_diff", bi["max_abs_logit_diff"])
value("bf16_match", ag["match_rate"])
value("bf16_positions", ag["positions"], fixed=PRESET + ": prompts times steps")
sanity("positions_are_prompts_times_steps", ag["positions"] == cfg.quality_prompts * cfg.quality_steps)
value("bf16_prompts", cfg.quality_prompts, fixed=PRESET)
value("bf16_steps", ag["steps"], fixed=PRESET)
sanity("batch_invariant_tokens", bi["tokens_equal"], "greedy tokens are the same alone and in a batch",
       relation=("differs", "at most", "equal"))

print(f"\nthe whole run took {r['elapsed_s']:.1f} s; JSON result: {len(json.dumps(r)) / 1e3:.0f} kB")

# --- five repeats: the figures the page states ------------------------------------------------------
# One run of the report is one draw of requests on a machine whose load comes and goes. The figures the page
# states come from five repeats, each on its own draw of fewer requests (seed k), run back to back on one
# model: decode steps timed as the report times them (the median of its 20 steps at batch 1 and 8, contexts
# spanning the report's), static and continuous batching at the static concurrency, continuous batching
# with one client and with the sweep's largest count, and Poisson arrivals at the overload multiple of this
# repeat's capacity (its best steady-state request throughput of a continuous closed loop, start-up and drain left out).
REPEATS = value("repeats", 5, fixed="the number of repeats, a choice of this check")
N_REP = value("rep_requests", 48, fixed="the requests per repeat, a choice of this check: enough for the overload "
              "run to queue well past the batch limit, few enough for five repeats to run in under two minutes")
lo_n, hi_n = sweep[0][0], sweep[-1][0]
over = loads[-1]
torch.set_num_threads(cfg.threads)  # run_report restores torch's default when it returns
rep_model = DecoderLM(mc, dtype=cfg.dtype, device=cfg.device, max_slots=max(cfg.max_batch, 1 + HI_B))
warm = make_requests(cfg.warmup_requests, cfg.prompt_len, cfg.output_len, vocab=mc.vocab, seed=cfg.seed + 1)
serve(rep_model, ClosedLoop(warm, cfg.max_batch), mode="continuous", max_batch=cfg.max_batch)


def decode_tok_s(seed):
    """Tokens/s of decode steps at batch 1 and HI_B: each the median of decode_repeats steps at contexts spanning
    the report's, as the report times them, but with the two batches' steps taken in turn so that load from other
    processes hits both alike."""
    reps = cfg.decode_repeats
    start = CTX - reps // 2 - 1
    groups = {1: [0], HI_B: list(range(1, 1 + HI_B))}
    for slots in groups.values():
        for s_ in slots:
            rep_model.prefill(s_, [(seed * 131 + 7 * s_ + k) % mc.vocab for k in range(start)])
    times = {b: [] for b in groups}
    for _ in range(reps):
        for b, slots in groups.items():
            t0 = time.perf_counter()
            rep_model.decode_step(slots)
            times[b].append(time.perf_counter() - t0)
    rep_model.reset()
    return {b: b / statistics.median(times[b]) for b in groups}


def served(workload, mode):
    """The run's summary; for a closed loop also its steady-state request throughput (the window after its
    clients' first requests, servebench.metrics.steady_throughput)."""
    trace = serve(rep_model, workload, mode=mode, max_batch=cfg.max_batch)
    out = summarize(trace, ttft_slo=cfg.slo_ttft_s, tpot_slo=cfg.slo_tpot_s)
    if isinstance(workload, ClosedLoop):
        out["steady_rps"] = steady_throughput(trace, workload.concurrency)
    return out


per = []
for k in range(REPEATS):
    reqs = make_requests(N_REP, cfg.prompt_len, cfg.output_len, vocab=mc.vocab, seed=k)
    tok_s = decode_tok_s(k)
    one = {"tok_s_1": tok_s[1], "tok_s_hi": tok_s[HI_B]}
    one["static"] = served(ClosedLoop(reqs, c), "static")
    one["cont"] = served(ClosedLoop(reqs, c), "continuous")
    one["lo"] = served(ClosedLoop(reqs, lo_n), "continuous")
    one["hi"] = served(ClosedLoop(reqs, hi_n), "continuous")
    one["cap"] = max(one[x]["steady_rps"] for x in ("cont", "lo", "hi"))
    one["over"] = served(OpenLoop.poisson(reqs, over * one["cap"], seed=k), "continuous")
    per.append(one)
sanity("repeats_complete", all(one[x]["n_requests"] == N_REP for one in per
                               for x in ("static", "cont", "lo", "hi", "over")))
print(f"\nfive repeats, {N_REP} requests each (seed = repeat), static and continuous at N={c}, continuous at "
      f"N={lo_n} and N={hi_n}, Poisson at {over:g}x the repeat's capacity")
print(f"{'seed':>4} {f'B={HI_B}/B=1':>8} {'TTFT st/co':>10} {'tok/s hi/lo':>11} {'TPOT hi/lo':>10} "
      f"{'TTFT over/lo':>12} "
      f"{'wait share':>10} {'cap req/s':>9}")
figs = {
    "decode_gain_8": [one["tok_s_hi"] / one["tok_s_1"] for one in per],
    "ttft_static_over_cont": [one["static"]["ttft"]["p50"] / one["cont"]["ttft"]["p50"] for one in per],
    "tok_rises": [one["hi"]["token_throughput"] / one["lo"]["token_throughput"] for one in per],
    "tpot_rises": [one["hi"]["tpot"]["p50"] / one["lo"]["tpot"]["p50"] for one in per],
    "ttft_overload_over_one_client": [one["over"]["ttft"]["p50"] / one["lo"]["ttft"]["p50"] for one in per],
    "overload_wait_share": [1 - one["lo"]["ttft"]["p50"] / one["over"]["ttft"]["p50"] for one in per],
}
for k, one in enumerate(per):
    print(f"{k:>4} " + " ".join(f"{figs[name][k]:{w}.2f}" for name, w in zip(figs, (8, 10, 11, 10, 12, 10),
                                                                               strict=True))
          + f" {one['cap']:9.1f}")
steps_n = REPEATS * 2 * cfg.decode_repeats
estimate("decode_gain_8", figs["decode_gain_8"], n=steps_n, repeated="runs",
         measured=f"decode steps timed on this machine, batch {HI_B} over batch 1 in tokens/s; per run the median of "
         f"{cfg.decode_repeats} steps of each, the two batches' steps in turn")
TWO = REPEATS * 2 * N_REP  # two runs of N_REP requests per repeat behind each ratio
estimate("ttft_static_over_cont", figs["ttft_static_over_cont"], n=TWO, repeated="seeds",
         measured=f"median TTFT of static over continuous batching at {c} clients, {N_REP} requests each, served on "
         "this machine")
estimate("tok_rises", figs["tok_rises"], n=TWO, repeated="seeds",
         measured=f"output tokens/s of continuous batching with {hi_n} clients over {lo_n}, {N_REP} requests each, "
         "served on this machine")
estimate("tpot_rises", figs["tpot_rises"], n=TWO, repeated="seeds",
         measured=f"median TPOT of continuous batching with {hi_n} clients over {lo_n}, {N_REP} requests each, "
         "served on this machine")
# The ratio of the two medians scatters widely from repeat to repeat (a t interval of it can reach below zero);
# the share of the overloaded median that is beyond one client's, 1 - one client's / the overload's, is bounded
# by one and states the same thing: the page claims that.
estimate("overload_wait_share", figs["overload_wait_share"], n=TWO, repeated="seeds",
         measured=f"one minus the median TTFT of one client over that of Poisson arrivals at {over:g}x the repeat's "
         f"capacity, {N_REP} requests each, served on this machine")
