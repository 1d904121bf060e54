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
value("ttft_mean_ms", sum(ttfts) / len(ttfts) / MS)
value("ttft_n", len(ttfts), fixed=COUNT)

# --- MLPerf LoadGen's own arithmetic, transcribed from mlcommons/inference (loadgen 6.0.17) -------
# results.cc, PerformanceSummary::ProcessLatencies: sort, then sorted[sample_count * percentile]
# with the percentile a fraction; the double index converts to size_t by truncation, and every
# percentile it prints passes assert(percentile < 1.0). There is no clamp.
LG_PERCENTILES = (0.50, 0.90, 0.95, 0.97, 0.99, 0.999)  # results.h: latency_percentiles[6]


def lg_percentile(latencies: list[float], fraction: float) -> tuple[float, int]:
    assert 0.0 <= fraction < 1.0  # results.cc: assert(lp.percentile < 1.0)
    xs = sorted(latencies)
    idx = int(len(xs) * fraction)  # C++ double -> size_t: truncation
    return xs[idx], idx


def trunc_div(a: int, b: int) -> int:
    """C++ integer division of int64 latencies (truncates towards zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


NS = 1e-9


def ns(seconds: float) -> int:
    return round(seconds / NS)


lg_index_ok = True
for q in (50, 95, 99):
    lg_value, lg_idx = lg_percentile(ttfts, q / 100)
    lg_index_ok = lg_index_ok and lg_idx < len(ttfts) and lg_value == m.percentile(ttfts, q, "loadgen")
    value(f"ttft_p{q}_loadgen_ms", lg_value / MS)
    value(f"ttft_p{q}_loadgen_index", lg_idx, fixed=COUNT)
sanity(
    "loadgen_is_a_sample",
    all(lg_percentile(ttfts, q / 100)[0] in ttfts for q in (50, 95, 99)),
    "LoadGen's percentile, like nearest rank, is always a sample",
)
# every fraction below 1 puts floor(n * q) below n, for every n: no index runs past the end
lg_max_index_gap = min(n - int(n * f) for n in range(1, 100_001) for f in (*LG_PERCENTILES, 0.99))
sanity(
    "loadgen_index_below_n",
    lg_index_ok and lg_max_index_gap >= 1,
    "LoadGen's index floor(n q) is below n for each of its percentiles (all < 1), so it never needs "
    "a clamp; its values match servebench's 'loadgen' method on this trace",
    operands=(max(lg_percentile(ttfts, f)[1] for f in LG_PERCENTILES), len(ttfts) - 1), relation="smaller",
)
# LoadGen's floor(n q) and nearest rank's ceil(n q) - 1 (both 0-based) pick the same sample exactly when n q is
# not a whole number: at n = 5 no q of the table makes it one; at n = 100 the p99 does, and LoadGen's index is one up.
agree_here = all(lg_percentile(ttfts, q / 100)[0] == m.percentile(ttfts, q, "nearest") for q in (50, 95, 99))
n_whole = value("lg_vs_nearest_n", next(n for n in range(1, 1000) if n * 99 % 100 == 0),
                fixed="arithmetic: the smallest n for which 0.99 n is a whole number, whatever the trace")
hundred = [float(v) for v in range(1, n_whole + 1)]
lg_100, _ = lg_percentile(hundred, 0.99)
nr_100 = m.percentile(hundred, 99, "nearest")
sanity("loadgen_nearest_agree_only_here", agree_here and lg_100 > nr_100,
       "LoadGen and nearest rank agree at n = 5; at n = 100 LoadGen's p99 is the next value up",
       operands=(lg_100, nr_100), relation="larger")


# logging.cc, AsyncLog::RecordSampleCompletion: in LLM mode each sample's
#   time_per_output_token = (latency - first_token_latency) / (n_tokens - 1)
# in int64 nanoseconds, latency and first-token latency both measured from the query's
# scheduled time (loadgen.cc). n_tokens == 1 logs "Number of tokens need to be greater than 1"
# and records n_tokens = 0, so the division is by -1 and the sample still enters the TPOT array.
def lg_tpot_ns(r: RequestTrace) -> int:
    n_tok = r.n_out if r.n_out > 1 else 0  # logging.cc: n_tokens == 1 -> error, n_tokens = 0
    latency, first = ns(r.finish - r.arrival), ns(r.token_times[0] - r.arrival)
    return trunc_div(latency - first, n_tok - 1)


streamed = [r for r in trace if r.n_out > 1]
lg_tpot_diff_ns = max(abs(lg_tpot_ns(r) - ns(m.tpot(r))) for r in streamed)
value("lg_tpot_n", len(streamed), fixed=COUNT)
sanity(
    "loadgen_tpot_is_book_tpot",
    lg_tpot_diff_ns == 0,
    "LoadGen's (latency - TTFT) / (n - 1) equals the book's TPOT on every request of two or more "
    "tokens, since each finishes with its last token",
    operands=(lg_tpot_diff_ns, 0), relation="equal",
)
value("r2_tpot_loadgen_ms", lg_tpot_ns(r2) * NS / MS,
      fixed="R2's one token is also its finish, so latency - TTFT is zero whatever its times")
sanity(
    "loadgen_r2_counted",
    lg_tpot_ns(r2) == 0 and m.tpot(r2) is None,
    "a one-token answer gets a TPOT of 0 in LoadGen's array where the book has none",
    operands=(lg_tpot_ns(r2), 0),
)
# token_count (results.cc, ProcessTokenLatencies) sums tokens_per_sample, where R2's 1 became 0
lg_tokens = sum(r.n_out if r.n_out > 1 else 0 for r in trace)
value("lg_token_count", lg_tokens, fixed=COUNT)

# results.cc, LogSummary, Server: "Completed samples per second" =
#   (sample_count - 1) / final_query_all_samples_done_time, the final query being the last one
# scheduled (loadgen.cc: queries[queries_issued - 1]); "Scheduled samples per second" =
#   (sample_count - 1) / final_query_scheduled_time, under Additional Stats only; in LLM mode
# "Completed tokens per second" = token_count / final_query_all_samples_done_time.
# The trace read as a Server run: one sample per query, scheduled at its arrival, start at t = 0.
final_query = max(trace, key=lambda r: r.arrival)
lg_done = final_query.finish - trace[0].arrival
lg_sched = final_query.arrival - trace[0].arrival
value("lg_final_query", final_query.request_id, fixed="the last request of the trace to arrive: its order")
value("lg_final_done_ms", lg_done / MS)
value("lg_final_sched_ms", lg_sched / MS)
lg_completed = value("lg_completed_sps", (len(trace) - 1) / lg_done, unit="samples/s")
lg_scheduled = value("lg_scheduled_sps", (len(trace) - 1) / lg_sched, unit="samples/s")
lg_tps = value("lg_completed_tps", lg_tokens / lg_done, unit="tokens/s")
value("lg_over_book", lg_completed / m.request_throughput(trace))
last_finish = max(r.finish for r in trace)
sanity(
    "loadgen_final_not_last",
    lg_done < last_finish - trace[0].arrival,
    "the final query scheduled (R5) finishes before the last answer (R4): LoadGen's divisor "
    "stops short of the span",
    operands=(lg_done / MS, (last_finish - trace[0].arrival) / MS), relation="smaller",
)
sanity(
    "loadgen_server_above_book",
    lg_completed > m.request_throughput(trace) and lg_tps > m.token_throughput(trace),
    "on this trace LoadGen's completed rates exceed the book's, which divide by the whole span",
    operands=(lg_completed, m.request_throughput(trace)), relation="larger",
)
sanity(
    "loadgen_scheduled_above_completed",
    lg_scheduled >= lg_completed,
    "the final query completes after it is scheduled, so the scheduled rate is at least the completed one",
    operands=(lg_scheduled, lg_completed), relation="at least",
)
print(
    f"\nLoadGen, the trace read as a Server run: final query R{final_query.request_id} scheduled at "
    f"{lg_sched / MS:.0f} ms, done at {lg_done / MS:.0f} ms -> completed {lg_completed:.2f} samples/s, "
    f"scheduled {lg_scheduled:.2f} samples/s, {lg_tps:.2f} tokens/s ({lg_tokens} tokens); "
    f"LoadGen TPOT of R2: {lg_tpot_ns(r2)} ns"
)

MIN_DURATION = fact("mlperf_min_duration_s", "mlperf_min_duration_s")
value("trace_short_of_loadgen", MIN_DURATION / (m.span(trace)))
value("trace_sched_short_of_loadgen", MIN_DURATION / lg_sched)

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
