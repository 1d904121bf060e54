"""8.1.1 — Serving metrics: one synthetic trace, scored under each convention.

Builds a six-request trace by hand (times in ms, stored in seconds), computes TTFT, TPOT, ITL,
E2E, throughput and goodput with servebench.metrics, then scores the same trace under the
conventions tools differ on: TPOT with or without the first token, ITL per token or per chunk,
nearest-rank or linear percentiles, request- or token-weighted means.
"""

from numbook.check import fact, given, sanity, value
from servebench import metrics as m
from servebench.summary import CONVENTIONS, summarize
from servebench.trace import RequestTrace

MS = 1e-3
COUNT = "a count fixed by the stated trace's shape (its requests, tokens and chunks): nudging its times cannot move it"


def request(rid: int, prompt: int, arrival_ms: float, times_ms: list[float], finish_ms: float | None = None):
    finish = finish_ms if finish_ms is not None else times_ms[-1]
    return RequestTrace(rid, prompt, arrival_ms * MS, tuple(t * MS for t in times_ms), finish * MS)


# --- the trace: the page's input, stated as lists of times (ms) -------------------------------
ARRIVAL_MS = given("arrival_ms", [0.0, 0.0, 20.0, 30.0, 40.0, 50.0])
R0_MS = given("r0_times_ms", [40.0 + 10 * k for k in range(12)])  # long, steady
R1_MS = given("r1_times_ms", [60.0, 90.0, 120.0, 150.0])  # short, slow
R2_MS = given("r2_times_ms", [70.0])  # one token
R3_MS = given("r3_chunk_times_ms", [90.0, 130.0, 170.0, 210.0])  # streamed in chunks of 1, 4, 4, 4
R4_MS = given("r4_times_ms", [240.0 + 10 * k for k in range(8)])  # queued
R5_END_MS = given("r5_end_ms", 55.0)  # empty answer

r0 = request(0, 32, ARRIVAL_MS[0], R0_MS)
r1 = request(1, 8, ARRIVAL_MS[1], R1_MS)
r2 = request(2, 16, ARRIVAL_MS[2], R2_MS)
r3 = RequestTrace.from_chunks(
    3, ARRIVAL_MS[3] * MS, [(t * MS, n) for t, n in zip(R3_MS, (1, 4, 4, 4), strict=True)], prompt_len=24
)
r4 = request(4, 64, ARRIVAL_MS[4], R4_MS)
r5 = request(5, 12, ARRIVAL_MS[5], [], finish_ms=R5_END_MS)
trace = [r0, r1, r2, r3, r4, r5]

SLO_TTFT_MS = given("slo_ttft_ms", 100, nudge=110)   # a threshold moves goodput only when it crosses a TTFT
SLO_TPOT_MS = given("slo_tpot_ms", 20, nudge=-12)

print("request  arrival  n_out  first   last  finish   TTFT   TPOT  TPOT(e2e/n)    E2E   (ms)")
for r in trace:

    def ms(x: float | None) -> str:
        return "     -" if x is None else f"{x / MS:6.1f}"

    first = r.token_times[0] if r.token_times else None
    last = r.token_times[-1] if r.token_times else None
    print(
        f"   R{r.request_id}    {r.arrival / MS:6.1f} {r.n_out:6d} {ms(first)} {ms(last)} {r.finish / MS:7.1f} "
        f"{ms(m.ttft(r))} {ms(m.tpot(r))}       {ms(m.tpot_with_first(r))} {m.e2e(r) / MS:6.1f}"
    )
    value(f"r{r.request_id}_n_out", r.n_out, fixed=COUNT)
    value(f"r{r.request_id}_arrival_ms", r.arrival / MS,
          fixed="arrives at t = 0, the origin of the trace's clock" if r.arrival == 0 else None)
    value(f"r{r.request_id}_finish_ms", r.finish / MS)
    value(f"r{r.request_id}_e2e_ms", m.e2e(r) / MS)
    if first is not None:
        value(f"r{r.request_id}_first_ms", first / MS)
        value(f"r{r.request_id}_last_ms", last / MS)
        value(f"r{r.request_id}_ttft_ms", m.ttft(r) / MS)
        value(f"r{r.request_id}_tpot1_ms", m.tpot_with_first(r) / MS)
    if m.tpot(r) is not None:
        value(f"r{r.request_id}_tpot_ms", m.tpot(r) / MS)

value("n_requests", len(trace), fixed=COUNT)
value("n_tokens", sum(r.n_out for r in trace), fixed=COUNT)
value("r3_chunks", len(m.itl(r3, "chunk")) + 1, fixed=COUNT)
value("r3_itl_chunk_ms", m.itl(r3, "chunk")[0] / MS)
value("r3_later_chunks", len(m.itl(r3, "chunk")), fixed=COUNT)
value("r3_chunk_size", 4, fixed="the stated chunk size of R3's stream")
value("r3_token_gaps", len(m.itl(r3, "token")), fixed=COUNT)
value("r3_zero_gaps", sum(g == 0 for g in m.itl(r3, "token")), fixed=COUNT)
value("r0_gaps", r0.n_out - 1, fixed=COUNT)

# --- throughput and goodput ------------------------------------------------------------------
span = value("span_ms", m.span(trace) / MS)
value("req_per_s", m.request_throughput(trace))
value("tok_per_s", m.token_throughput(trace))
good = [r.request_id for r in trace if m.meets_slo(r, SLO_TTFT_MS * MS, SLO_TPOT_MS * MS)]
value("n_good", len(good))
value("goodput", m.goodput(trace, SLO_TTFT_MS * MS, SLO_TPOT_MS * MS), unit="req/s")
value("attainment", m.slo_attainment(trace, SLO_TTFT_MS * MS, SLO_TPOT_MS * MS))
print(f"\nspan {span:.0f} ms: {m.request_throughput(trace):.2f} req/s, {m.token_throughput(trace):.2f} tok/s")
print(
    f"meet TTFT <= {SLO_TTFT_MS} ms and TPOT <= {SLO_TPOT_MS} ms: R{', R'.join(map(str, good))} "
    f"-> goodput {m.goodput(trace, SLO_TTFT_MS * MS, SLO_TPOT_MS * MS):.2f} req/s"
)

# --- percentiles, two methods --------------------------------------------------------------------
ttfts = m.defined(m.ttft(r) for r in trace)
print(f"\nTTFTs (ms): {sorted(round(t / MS, 1) for t in ttfts)}")
for q in (50, 95, 99):
    near = m.percentile(ttfts, q, "nearest") / MS
    lin = m.percentile(ttfts, q, "linear") / MS
    value(f"ttft_p{q}_nearest_ms", near)
    value(f"ttft_p{q}_linear_ms", lin)
    print(
        f"  p{q}: nearest rank {near:6.1f}   linear {lin:6.1f}   LoadGen {m.percentile(ttfts, q, 'loadgen') / MS:6.1f}"
    )
    lg = m.percentile(ttfts, q, "loadgen") / MS
    value(f"ttft_p{q}_loadgen_ms", lg)
value("ttft_mean_ms", sum(ttfts) / len(ttfts) / MS)
MIN_DURATION = fact("mlperf_min_duration_s", "mlperf_min_duration_s")
value("trace_short_of_loadgen", MIN_DURATION / (m.span(trace)))
sanity(
    "loadgen_is_a_sample",
    all(m.percentile(ttfts, q, "loadgen") in ttfts for q in (50, 95, 99)),
    "LoadGen's percentile, like nearest rank, is always a sample",
)
value("ttft_n", len(ttfts), fixed=COUNT)

# --- weighting ---------------------------------------------------------------------------------
req_w = value("tpot_mean_request_ms", m.mean_tpot(trace, "request") / MS)
tok_w = value("tpot_mean_token_ms", m.mean_tpot(trace, "token") / MS)
value("tpot_gap_sum_ms", sum(r.token_times[-1] - r.token_times[0] for r in trace if r.n_out > 1) / MS)
value("tpot_gap_count", sum(r.n_out - 1 for r in trace if r.n_out > 1), fixed=COUNT)
print(f"\nmean TPOT: request-weighted {req_w:.2f} ms, token-weighted {tok_w:.2f} ms")

# --- one trace, five conventions ------------------------------------------------------------
conventions = {
    "book": CONVENTIONS["book"],
    "chunk": CONVENTIONS["chunk_itl"],
    "first": CONVENTIONS["tpot_with_first"],
    "nearest": CONVENTIONS["nearest_rank"],
    "token": CONVENTIONS["token_weighted"],
}
rows = [
    ("TTFT p99", "ttft", "p99"),
    ("TPOT mean", "tpot", "mean"),
    ("TPOT p99", "tpot", "p99"),
    ("ITL mean", "itl", "mean"),
    ("ITL p50", "itl", "p50"),
    ("ITL p99", "itl", "p99"),
]
print(f"\n{'(ms)':<10}" + "".join(f"{k:>9}" for k in conventions))
scores = {k: summarize(trace, convention=c) for k, c in conventions.items()}
for label, metric, field in rows:
    cells = []
    for k in conventions:
        v = scores[k][metric][field] / MS
        value(f"{k}_{metric}_{field}_ms", v)
        cells.append(f"{v:9.2f}")
    print(f"{label:<10}" + "".join(cells))
for k in conventions:
    value(f"{k}_itl_n", scores[k]["itl"]["n"], fixed=COUNT)
    value(f"{k}_tpot_n", scores[k]["tpot"]["n"], fixed=COUNT)
value("n_conventions", len(conventions), fixed="the conventions this page compares: a definition")

tpot_means = [scores[k]["tpot"]["mean"] for k in conventions]
spread = value("tpot_spread", max(tpot_means) / min(tpot_means))
sanity(
    "spread_is_first_over_token",
    abs(spread - m.mean_tpot(trace, "token") ** -1 * scores["first"]["tpot"]["mean"]) < 1e-12,
    "the widest pair is E2E/n per request against the token-weighted mean",
    operands=(spread, scores["first"]["tpot"]["mean"] / m.mean_tpot(trace, "token")),
)
sanity("first_moves_r4", m.tpot_with_first(r4) > m.tpot(r4), operands=(m.tpot_with_first(r4), m.tpot(r4)))
sanity(
    "chunk_itl_rises",
    scores["chunk"]["itl"]["mean"] > scores["book"]["itl"]["mean"],
    operands=(scores["chunk"]["itl"]["mean"], scores["book"]["itl"]["mean"]), relation="grows",
)
print(f"\nthe largest 'mean TPOT' is {max(tpot_means) / min(tpot_means):.2f}x the smallest, on one trace")

# --- all at t = 0: queueing counts in TTFT -----------------------------------------------------
PREFILL_MS = given("burst_prefill_ms", 25)
burst = [request(i, 8, 0, [PREFILL_MS * (i + 1)]) for i in range(4)]
burst_ttft = [m.ttft(r) / MS for r in burst]
value("burst_n", len(burst), fixed=COUNT)
value("burst_ttft_last_ms", burst_ttft[-1])
value("burst_ttft_mean_ms", sum(burst_ttft) / len(burst_ttft))
print(f"\n{len(burst)} requests at t = 0, one {PREFILL_MS} ms prefill at a time: TTFTs {burst_ttft} ms")
sanity(
    "burst_is_queueing",
    sum(burst_ttft) / len(burst_ttft) > PREFILL_MS,
    "the mean TTFT exceeds every prefill: the rest is the queue",
    operands=(sum(burst_ttft) / len(burst_ttft), PREFILL_MS), relation="at most",
)

sanity(
    "tpot_excludes_short",
    scores["book"]["tpot_excluded"] == 2,
    "R2 (one token) and R5 (none) have no TPOT under the book's convention", relation="larger",
)
sanity(
    "with_first_keeps_one_token",
    scores["first"]["tpot_excluded"] == 1,
    "e2e / n_out is defined for R2, so only R5 is excluded",
)
sanity(
    "token_mean_is_itl_mean",
    abs(tok_w - scores["book"]["itl"]["mean"] / MS) < 1e-9,
    "the token-weighted TPOT mean is the mean of the per-token ITLs", relation="equal",
)
sanity(
    "nearest_is_a_sample",
    all(scores["nearest"]["ttft"][f"p{q}"] in ttfts for q in (50, 95, 99)),
    "nearest-rank percentiles are always values of the sample",
)
sanity("goodput_le_throughput", m.goodput(trace, SLO_TTFT_MS * MS, SLO_TPOT_MS * MS) <= m.request_throughput(trace),
       relation="at most")
