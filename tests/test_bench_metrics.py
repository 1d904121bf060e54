"""Metrics of servebench against traces checked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from servebench import metrics as m
from servebench.summary import BOOK, CONVENTIONS, Convention, distribution, summarize
from servebench.trace import RequestTrace, trace_from_dicts, trace_to_dicts

approx = pytest.approx


def req(rid: int, arrival: float, times: tuple[float, ...], finish: float | None = None) -> RequestTrace:
    end = finish if finish is not None else (times[-1] if times else arrival)
    return RequestTrace(rid, 8, arrival, times, end)


# r0: TTFT 0.5, TPOT (0.8 - 0.5) / 3 = 0.1, E2E 0.8
# r1: TTFT 0.2, TPOT 0.6 / 1 = 0.6, E2E 0.8
# r2: one token: TTFT 0.4, TPOT undefined, E2E 0.4
# span 1.0 - 0.0 = 1.0 s; 3 requests; 4 + 2 + 1 = 7 tokens
TRACE = [
    req(0, 0.0, (0.5, 0.6, 0.7, 0.8)),
    req(1, 0.2, (0.4, 1.0)),
    req(2, 0.5, (0.9,)),
]


def test_per_request_metrics() -> None:
    assert [m.ttft(r) for r in TRACE] == approx([0.5, 0.2, 0.4])
    assert m.tpot(TRACE[0]) == approx(0.1)
    assert m.tpot(TRACE[1]) == approx(0.6)
    assert m.tpot(TRACE[2]) is None
    assert [m.e2e(r) for r in TRACE] == approx([0.8, 0.8, 0.4])
    assert [m.tpot_with_first(r) for r in TRACE] == approx([0.2, 0.4, 0.4])
    assert m.itl(TRACE[0]) == approx([0.1, 0.1, 0.1])
    assert m.itl(TRACE[2]) == []


def test_throughput_over_span() -> None:
    assert m.span(TRACE) == approx(1.0)
    assert m.request_throughput(TRACE) == approx(3.0)
    assert m.token_throughput(TRACE) == approx(7.0)


def test_request_vs_token_weighted_tpot() -> None:
    assert m.mean_tpot(TRACE, "request") == approx((0.1 + 0.6) / 2)
    assert m.mean_tpot(TRACE, "token") == approx((0.3 + 0.6) / (3 + 1))
    assert m.mean_tpot(TRACE, "token") == approx(float(np.mean(m.itl_pool(TRACE))))


def test_goodput_and_attainment() -> None:
    # r0 misses the TTFT SLO, r1 the TPOT SLO; r2 (one token) meets TPOT vacuously.
    assert [m.meets_slo(r, 0.45, 0.2) for r in TRACE] == [False, False, True]
    assert m.goodput(TRACE, 0.45, 0.2) == approx(1.0)
    assert m.slo_attainment(TRACE, 0.45, 0.2) == approx(1 / 3)
    assert m.goodput(TRACE, 1.0, 1.0) == approx(3.0)


def test_one_token_request_is_excluded_from_tpot() -> None:
    one = [req(0, 0.0, (0.25,))]
    assert m.tpot(one[0]) is None
    assert m.mean_tpot(one) is None
    s = summarize(one)
    assert s["tpot"]["n"] == 0 and s["tpot"]["p50"] is None and s["tpot"]["mean"] is None
    assert s["tpot_excluded"] == 1 and s["ttft_excluded"] == 0
    assert s["ttft"]["p99"] == approx(0.25)
    assert s["itl"]["n"] == 0


def test_zero_length_output() -> None:
    empty = req(7, 0.1, (), finish=0.3)
    assert empty.n_out == 0
    assert m.ttft(empty) is None and m.tpot(empty) is None and m.tpot_with_first(empty) is None
    assert m.e2e(empty) == approx(0.2)
    assert not m.meets_slo(empty, 10.0, 10.0)
    trace = [*TRACE, empty]
    assert m.request_throughput(trace) == approx(4.0)  # counted as a request
    assert m.token_throughput(trace) == approx(7.0)
    s = summarize(trace, ttft_slo=1.0, tpot_slo=1.0)
    assert s["ttft_excluded"] == 1 and s["tpot_excluded"] == 2
    assert s["goodput"] == approx(3.0) and s["slo_attainment"] == approx(0.75)


def test_all_arrive_at_zero() -> None:
    burst = [req(i, 0.0, tuple(0.1 * (i + 1) + 0.05 * k for k in range(3))) for i in range(4)]
    assert [m.ttft(r) for r in burst] == approx([0.1, 0.2, 0.3, 0.4])  # queueing shows in TTFT
    assert m.span(burst) == approx(0.4 + 0.1)
    assert m.request_throughput(burst) == approx(4 / 0.5)
    assert m.percentile([m.ttft(r) or 0 for r in burst], 50, "nearest") == approx(0.2)
    assert m.percentile([m.ttft(r) or 0 for r in burst], 50, "linear") == approx(0.25)


def test_zero_span_is_an_error() -> None:
    with pytest.raises(ValueError, match="spans no time"):
        m.request_throughput([req(0, 0.0, (0.0,))])
    with pytest.raises(ValueError, match="empty trace"):
        m.span([])


def test_chunked_stream_itl_per_token_and_per_chunk() -> None:
    r = RequestTrace.from_chunks(0, 0.0, [(0.3, 1), (0.5, 3), (0.6, 2)])
    assert r.token_times == (0.3, 0.5, 0.5, 0.5, 0.6, 0.6)
    assert m.itl(r, "token") == approx([0.2, 0.0, 0.0, 0.1, 0.0])
    assert m.itl(r, "chunk") == approx([0.2, 0.1])
    assert m.tpot(r) == approx(0.3 / 5)
    assert m.tpot_with_first(r) == approx(0.6 / 6)


ONE_TO_TEN = [float(x) for x in range(1, 11)]
WIKI = [15.0, 20.0, 35.0, 40.0, 50.0]


@pytest.mark.parametrize(
    ("values", "q", "want"),
    [
        (ONE_TO_TEN, 50, 5.0),
        (ONE_TO_TEN, 95, 10.0),
        (ONE_TO_TEN, 99, 10.0),
        (ONE_TO_TEN, 70, 7.0),  # (70 / 100) * 10 is 7.000000000000001 in floats; the rank is 7
        (ONE_TO_TEN, 0, 1.0),
        (ONE_TO_TEN, 10, 1.0),
        (WIKI, 30, 20.0),
        (WIKI, 40, 20.0),
        (WIKI, 50, 35.0),
        (WIKI, 100, 50.0),
        ([7.0], 99, 7.0),
    ],
)
def test_percentile_nearest_rank(values: list[float], q: float, want: float) -> None:
    assert m.percentile(values, q, "nearest") == want


@pytest.mark.parametrize(
    ("values", "q", "want"),
    [
        (ONE_TO_TEN, 50, 5.5),
        (ONE_TO_TEN, 95, 9.55),
        (ONE_TO_TEN, 99, 9.91),
        (ONE_TO_TEN, 0, 1.0),
        (ONE_TO_TEN, 100, 10.0),
        (WIKI, 40, 29.0),
        (WIKI, 50, 35.0),
        ([7.0], 99, 7.0),
    ],
)
def test_percentile_linear(values: list[float], q: float, want: float) -> None:
    got = m.percentile(values, q, "linear")
    assert got == approx(want, rel=1e-12)
    assert got == approx(float(np.percentile(values, q, method="linear")), rel=1e-12)


def test_percentile_matches_numpy_on_random_data() -> None:
    rng = np.random.default_rng(3)
    for n in (1, 2, 5, 17, 100):
        xs = rng.exponential(size=n).tolist()
        for q in (0, 1, 25, 50, 90, 95, 99, 99.9, 100):
            assert m.percentile(xs, q, "linear") == approx(float(np.percentile(xs, q)), rel=1e-12)
            assert m.percentile(xs, q, "nearest") == float(np.percentile(xs, q, method="inverted_cdf"))


def test_percentile_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="no values"):
        m.percentile([], 50)
    with pytest.raises(ValueError, match="outside"):
        m.percentile([1.0], 101)
    with pytest.raises(ValueError, match="unknown percentile method"):
        m.percentile([1.0], 50, "midpoint")  # type: ignore[arg-type]


def test_summary_under_each_convention() -> None:
    chunked = RequestTrace.from_chunks(3, 0.0, [(0.3, 1), (0.5, 3), (0.6, 2)])
    trace = [*TRACE, chunked]
    book = summarize(trace, convention=BOOK)
    assert book["tpot"]["mean"] == approx((0.1 + 0.6 + 0.06) / 3)
    assert book["itl"]["n"] == 3 + 1 + 0 + 5
    chunk = summarize(trace, convention=CONVENTIONS["chunk_itl"])
    assert chunk["itl"]["n"] == 3 + 1 + 0 + 2
    with_first = summarize(trace, convention=CONVENTIONS["tpot_with_first"])
    assert with_first["tpot"]["mean"] == approx((0.2 + 0.4 + 0.4 + 0.1) / 4)
    assert with_first["tpot_excluded"] == 0
    token = summarize(trace, convention=CONVENTIONS["token_weighted"])
    assert token["tpot"]["mean"] == approx((0.3 + 0.6 + 0.3) / (3 + 1 + 5))
    tok_first = summarize(trace, convention=Convention("x", tpot="with_first", mean="token"))
    assert tok_first["tpot"]["mean"] == approx((0.8 + 0.8 + 0.4 + 0.6) / (4 + 2 + 1 + 6))
    nearest = summarize(trace, convention=CONVENTIONS["nearest_rank"])
    assert nearest["ttft"]["p50"] == approx(0.3)  # TTFTs 0.2, 0.3, 0.4, 0.5: 2nd smallest
    assert book["ttft"]["p50"] == approx(0.35)


def test_distribution_of_nothing() -> None:
    assert distribution([]) == {"n": 0, "mean": None, "max": None, "p50": None, "p95": None, "p99": None}


def test_trace_round_trip_and_validation() -> None:
    r = RequestTrace(1, 4, 0.0, (0.1, 0.2), 0.2, tokens=(5, 6))
    assert trace_from_dicts(trace_to_dicts([r], tokens=True)) == [r]
    assert trace_from_dicts(trace_to_dicts([r]))[0].tokens == ()
    with pytest.raises(ValueError, match="decrease"):
        RequestTrace(0, 1, 0.0, (0.2, 0.1), 0.3)
    with pytest.raises(ValueError, match="outside"):
        RequestTrace(0, 1, 0.5, (0.2,), 0.6)
    with pytest.raises(ValueError, match="finish before arrival"):
        RequestTrace(0, 1, 0.5, (), 0.4)
    with pytest.raises(ValueError, match="tokens"):
        RequestTrace(0, 1, 0.0, (0.1,), 0.1, tokens=(1, 2))


# Closed-loop-like trace: r0, r1 arrive at 0 (the warm-up), r2..r5 at 1, 2, 3, 4; finishes below.
STEADY = [
    req(0, 0.0, (0.5, 1.0)),
    req(1, 0.0, (0.5, 2.0)),
    req(2, 1.0, (1.5, 3.0)),
    req(3, 2.0, (2.5, 3.5)),
    req(4, 3.0, (3.5, 4.0)),
    req(5, 4.0, (4.5, 6.0)),  # finishes in the drain, after the last arrival
]


def test_steady_window_excludes_warmup_and_drain() -> None:
    assert m.steady_window(STEADY, 2) == (1.0, 4.0)
    # finishes in (1, 4]: r1 (2.0), r2 (3.0), r3 (3.5), r4 (4.0); r0 at 1.0 is the window's open end, r5 at 6.0
    # is drain
    assert m.steady_throughput(STEADY, 2) == approx(4 / 3)
    # the whole-run rate is lower: 6 requests over a span of 6 s
    assert m.request_throughput(STEADY) == approx(1.0)
    # tokens emitted in (1, 4]: 2.0, 1.5, 3.0, 2.5, 3.5, 3.5, 4.0 -> 7
    assert m.steady_token_throughput(STEADY, 2) == approx(7 / 3)
    # the requests after the warm-up are r2..r5; TTFT 0.5 for all, TPOT <= 1.0: r2 (1.5) and r5 (1.5) miss
    assert m.steady_goodput(STEADY, 2, 0.5, 1.0) == approx(4 / 3 * 2 / 4)


def test_steady_throughput_counts_one_finish_per_gap_in_a_closed_loop() -> None:
    # one client: each request arrives the instant the one before finishes, one a second
    loop = [req(i, float(i), (i + 0.5, i + 1.0)) for i in range(4)]
    assert m.steady_window(loop, 1) == (1.0, 3.0)
    # finishes at 1.0 (the open end), 2.0 and 3.0: two in a window of 2 s, the loop's true rate
    assert m.steady_throughput(loop, 1) == approx(1.0)


def test_steady_goodput_leaves_out_the_warm_up_requests() -> None:
    # r0 and r1 arrive at an empty server and meet the SLOs; every request after them misses (TTFT 2 s)
    trace = [req(0, 0.0, (0.1, 1.1)), req(1, 0.0, (0.1, 1.2)),
             req(2, 1.0, (3.0, 3.5)), req(3, 1.5, (3.5, 4.0)), req(4, 2.0, (4.0, 4.5))]
    assert m.steady_goodput(trace, 2, 0.5, 1.0) == 0.0
    # though both warm-up requests finish inside the window (1.0, 2.0]
    assert m.steady_window(trace, 2) == (1.0, 2.0)
    assert all(1.0 < r.finish <= 2.0 for r in trace[:2])


def test_steady_window_needs_a_window() -> None:
    with pytest.raises(ValueError, match="no window"):
        m.steady_window(STEADY, 5)
    with pytest.raises(ValueError, match="spans no time"):
        m.steady_window([req(0, 0.0, (1.0,)), req(1, 0.0, (2.0,))], 0)
    with pytest.raises(ValueError, match="skip"):
        m.steady_window(STEADY, -1)


def test_goodput_search_is_capped_and_monotone() -> None:
    # attainment falls with rate, with a spurious recovery above 7: the scan stops at the first miss
    def att(rate: float) -> float:
        return 1.0 if rate <= 6.0 or rate > 7.5 else 0.5

    assert m.goodput_search(att, 10.0, 0.9, steps=10) == approx(6.0)
    # everything meets the target: the answer is the capacity itself, never above it
    assert m.goodput_search(lambda r: 1.0, 10.0, 0.9, steps=10) == approx(10.0)
    # the lowest grid rate already misses
    assert m.goodput_search(lambda r: 0.0, 10.0, 0.9, steps=10) == 0.0
    tried: list[float] = []
    m.goodput_search(lambda r: tried.append(r) or 1.0, 4.0, 0.5, steps=4)
    assert tried == approx([1.0, 2.0, 3.0, 4.0])
    with pytest.raises(ValueError):
        m.goodput_search(att, 0.0, 0.9)
    with pytest.raises(ValueError):
        m.goodput_search(att, 1.0, 1.5)
