# numbook: timeout=600, alone
"""8.1.4 — The benchmark report: one whole run of `python -m servebench --config cpu`.

Runs servebench.run_report on the "cpu" preset (the same code the CLI runs), prints the
report's tables and text plots, and records the figures the page states. Measured numbers are
stated on the page only as bounds that hold on any machine; the exact values of this build are
in the printed output.
"""

import dataclasses
import json

import matplotlib

from numbook.check import figure, given, sanity, value
from servebench import kv_cache_bytes, param_count, preset, run_report, weight_bytes
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
value("decode_gain_8", dec[8]["tokens_per_s"] / dec[1]["tokens_per_s"], measured=MEASURED)
value("decode_batch_hi", 8, fixed="the batch the page compares with one")
value("decode_batch_max", max(cfg.decode_batches), fixed=PRESET)

# --- serving runs -----------------------------------------------------------------------------------
print(f"\n{'run':<20}{'req/s':>6}{'tok/s':>7}{'TTFT p50':>9}{'p95':>7}{'p99':>8}{'TPOT p50':>9}{'p95':>6}{'p99':>7}"
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
loads = sorted(cfg.poisson_loads)
capacity = max(v["request_throughput"] for k, v in runs.items() if k.startswith("continuous_c"))
sanity("capacity_is_the_sweeps_best", capacity == r["capacity"])
value("load_lo", loads[0], fixed=PRESET)
value("load_hi", loads[-1], fixed=PRESET)
for ld in loads:  # the rate each open-loop run was offered is the load times the measured capacity
    rate_x = next(x["rate"] for x in r["runs"] if x.get("load") == ld)
    sanity(f"rate_is_load_times_capacity_{str(ld).replace('.', '_')}", abs(rate_x - ld * capacity) <= 1e-9 * rate_x)
q_lo, q_hi = runs[f"poisson_x{loads[0]:g}"], runs[f"poisson_x{loads[-1]:g}"]
value("ttft_p50_overload_over_underload", q_hi["ttft"]["p50"] / q_lo["ttft"]["p50"], measured=MEASURED)
TARGET = value("goodput_target", 0.9, fixed="DistServe's attainment target: a convention this page adopts")
met = [ld for ld in loads if runs[f"poisson_x{ld:g}"]["slo_attainment"] >= TARGET]
offered = ", ".join(f"{x['load']:g}x = {x['rate']:.1f}" for x in r["runs"] if "load" in x)
print(f"\nclosed-loop capacity {capacity:.1f} req/s; Poisson rates offered (req/s): {offered}")
print(f"DistServe goodput over the tested rates "
      f"(highest with {TARGET:.0%} within both SLOs): "
      f"{f'{max(met) * capacity:.1f} req/s ({max(met):g}x)' if met else 'none'}")
c = cfg.static_concurrency
value("ttft_static_over_cont", runs[f"static_c{c}"]["ttft"]["p50"] / runs[f"continuous_c{c}"]["ttft"]["p50"],
      measured=MEASURED)
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
value("tpot_rises", sweep[-1][1]["tpot"]["p50"] / sweep[0][1]["tpot"]["p50"], measured=MEASURED)
value("tok_rises", sweep[-1][1]["token_throughput"] / sweep[0][1]["token_throughput"], measured=MEASURED)

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

value("elapsed_s", r["elapsed_s"], measured=MEASURED)
print(f"\nthe whole run took {r['elapsed_s']:.1f} s; JSON result: {len(json.dumps(r)) / 1e3:.0f} kB")
