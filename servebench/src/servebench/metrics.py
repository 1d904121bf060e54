"""Serving metrics as pure functions of a trace (a sequence of :class:`RequestTrace`).

Conventions of this book (each function restates its own):

- **TTFT** = first output token time - arrival. Arrival is when the client sent the request,
  so time spent queued at the server counts. Undefined (``None``) when no token was produced.
- **TPOT** = ``(t_last - t_first) / (n_out - 1)``: the mean time per output token *after* the
  first. Undefined for ``n_out <= 1`` (no gap exists); such requests are *excluded* from TPOT
  means and percentiles and counted in the summary's ``tpot_excluded``. Some tools instead
  divide the whole latency by every token (:func:`tpot_with_first`, ``e2e / n_out``).
- **ITL** = every gap between consecutive output tokens, pooled over requests (so each token,
  not each request, counts once). Per *chunk* it is the gaps between distinct arrival times of
  streamed chunks; per *token* a chunk of k tokens contributes one gap and k - 1 zeros.
- **E2E** = finish - arrival.
- **Throughput** = requests (or output tokens) / span, where span = last finish - first arrival
  over the whole trace. Every request in the trace counts, including empty ones.
- **Goodput** = requests meeting both SLOs / span. A request meets them when it produced at
  least one token, TTFT <= the TTFT SLO, and TPOT <= the TPOT SLO; with one output token the
  TPOT SLO holds vacuously. An empty request never meets them.
- **Steady-state throughput** counts only what happens inside a window that leaves out the
  ramp-up and the drain: from the arrival of the first request after the warm-up to the last
  arrival (see :func:`steady_window`). A whole-run throughput divides by a span that includes
  the start (an empty or filling server) and the drain (the last requests finishing with no new
  ones behind them), and so understates what the server sustains.
- **DistServe goodput** is the highest offered rate at which a target share of requests meets
  both SLOs; :func:`goodput_search` finds it on a grid up to a measured capacity.
- **Percentiles** come in two methods: nearest rank (the smallest value with at least q% of the
  values at or below it: the ceil(q/100 * n)-th smallest) and linear interpolation between
  closest ranks (numpy's default ``'linear'``: position (n - 1) * q / 100).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from typing import Literal

from servebench.trace import RequestTrace

__all__ = [
    "Method",
    "percentile",
    "ttft",
    "tpot",
    "tpot_with_first",
    "itl",
    "itl_pool",
    "e2e",
    "span",
    "request_throughput",
    "token_throughput",
    "meets_slo",
    "goodput",
    "slo_attainment",
    "mean_tpot",
    "defined",
    "after_warmup",
    "arrival_rate",
    "steady_window",
    "steady_throughput",
    "steady_token_throughput",
    "steady_goodput",
    "goodput_search",
]

Method = Literal["nearest", "linear", "loadgen"]
Trace = Sequence[RequestTrace]


def percentile(values: Iterable[float], q: float, method: Method = "linear") -> float:
    """The q-th percentile (0 <= q <= 100) of non-empty ``values``.

    ``nearest``: the ceil(q/100 * n)-th smallest value (the smallest for q = 0), always one of
    the values. ``linear``: with sorted values x and h = (n - 1) * q / 100, the value
    x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)]), as ``numpy.percentile``.
    The rank arithmetic is exact: q is taken as the decimal it prints as.
    """
    xs = sorted(float(v) for v in values)
    if not xs:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q={q} outside [0, 100]")
    n = len(xs)
    qf = Fraction(repr(float(q)))
    if method == "nearest":
        rank = max(1, math.ceil(qf * n / 100))
        return xs[rank - 1]
    if method == "loadgen":  # MLPerf LoadGen: sorted[floor(n * q / 100)], clamped to the last
        return xs[min(n - 1, math.floor(qf * n / 100))]
    if method == "linear":
        h = (n - 1) * qf / 100
        lo = math.floor(h)
        if lo >= n - 1:
            return xs[-1]
        frac = float(h - lo)
        return xs[lo] + frac * (xs[lo + 1] - xs[lo])
    raise ValueError(f"unknown percentile method {method!r}: use 'nearest' or 'linear'")


def ttft(r: RequestTrace) -> float | None:
    """Time to first token: first token time - arrival; ``None`` when no token was produced."""
    return r.token_times[0] - r.arrival if r.token_times else None


def tpot(r: RequestTrace) -> float | None:
    """Time per output token after the first: (t_last - t_first) / (n_out - 1).

    ``None`` for ``n_out <= 1``: such a request has no inter-token gap, so it is excluded from
    TPOT statistics rather than counted as zero.
    """
    if r.n_out <= 1:
        return None
    return (r.token_times[-1] - r.token_times[0]) / (r.n_out - 1)


def tpot_with_first(r: RequestTrace) -> float | None:
    """The other convention: end-to-end latency / n_out (TTFT included); ``None`` if n_out = 0."""
    return e2e(r) / r.n_out if r.n_out else None


def itl(r: RequestTrace, per: Literal["token", "chunk"] = "token") -> list[float]:
    """Gaps between consecutive outputs of one request.

    ``per="token"``: n_out - 1 gaps, one per token after the first (tokens sharing a chunk give
    zero gaps). ``per="chunk"``: gaps between distinct timestamps, one per chunk after the first.
    """
    times = list(r.token_times)
    if per == "chunk":
        times = sorted(set(times))
    elif per != "token":
        raise ValueError(f"unknown ITL unit {per!r}: use 'token' or 'chunk'")
    return [b - a for a, b in zip(times, times[1:], strict=False)]


def itl_pool(trace: Trace, per: Literal["token", "chunk"] = "token") -> list[float]:
    """Every ITL gap of every request, in one list (token- or chunk-weighted by construction)."""
    return [g for r in trace for g in itl(r, per)]


def e2e(r: RequestTrace) -> float:
    """End-to-end latency: finish - arrival."""
    return r.finish - r.arrival


def span(trace: Trace) -> float:
    """Wall-clock span of the trace: last finish - first arrival."""
    if not trace:
        raise ValueError("span of an empty trace")
    return max(r.finish for r in trace) - min(r.arrival for r in trace)


def _per_span(count: float, trace: Trace) -> float:
    s = span(trace)
    if s <= 0:
        raise ValueError("trace spans no time; throughput is undefined")
    return count / s


def request_throughput(trace: Trace) -> float:
    """Requests per second: number of requests / :func:`span` (empty requests included)."""
    return _per_span(len(trace), trace)


def token_throughput(trace: Trace) -> float:
    """Output tokens per second: total n_out / :func:`span`."""
    return _per_span(sum(r.n_out for r in trace), trace)


def meets_slo(r: RequestTrace, ttft_slo: float, tpot_slo: float) -> bool:
    """True when the request produced a token, TTFT <= ``ttft_slo`` and TPOT <= ``tpot_slo``.

    A one-token request meets the TPOT SLO vacuously; an empty one meets neither.
    """
    first = ttft(r)
    if first is None or first > ttft_slo:
        return False
    per_token = tpot(r)
    return per_token is None or per_token <= tpot_slo


def goodput(trace: Trace, ttft_slo: float, tpot_slo: float) -> float:
    """Requests per second that meet both SLOs (see :func:`meets_slo`), over :func:`span`."""
    return _per_span(sum(meets_slo(r, ttft_slo, tpot_slo) for r in trace), trace)


def slo_attainment(trace: Trace, ttft_slo: float, tpot_slo: float) -> float:
    """Fraction of requests that meet both SLOs."""
    if not trace:
        raise ValueError("SLO attainment of an empty trace")
    return sum(meets_slo(r, ttft_slo, tpot_slo) for r in trace) / len(trace)


def mean_tpot(trace: Trace, weighting: Literal["request", "token"] = "request") -> float | None:
    """Mean TPOT over requests with n_out >= 2; ``None`` if there are none.

    ``request``: the mean of per-request TPOTs, each request counting once.
    ``token``: sum(t_last - t_first) / sum(n_out - 1), each inter-token gap counting once
    (equal to the mean of :func:`itl_pool` per token). Long requests weigh more here.
    """
    rs = [r for r in trace if r.n_out >= 2]
    if not rs:
        return None
    if weighting == "request":
        return sum(tpot(r) or 0.0 for r in rs) / len(rs)
    if weighting == "token":
        gaps = sum(r.token_times[-1] - r.token_times[0] for r in rs)
        return gaps / sum(r.n_out - 1 for r in rs)
    raise ValueError(f"unknown weighting {weighting!r}: use 'request' or 'token'")


def defined(values: Iterable[float | None]) -> list[float]:
    """The values that are not ``None`` (the defined ones)."""
    return [v for v in values if v is not None]


def after_warmup(trace: Trace, skip: int) -> list[RequestTrace]:
    """The requests left after dropping the first ``skip`` to arrive (ties by request id).

    A run's first requests meet an empty server, or, when every client starts at t = 0, a
    start-up burst; latency tails are reported over the rest.
    """
    if skip < 0:
        raise ValueError(f"skip must be >= 0, got {skip}")
    order = sorted(trace, key=lambda r: (r.arrival, r.request_id))
    return sorted(order[skip:], key=lambda r: r.request_id)


def arrival_rate(trace: Trace) -> float:
    """Realised arrival rate: (requests - 1) / (last arrival - first arrival), requests/s."""
    arrivals = sorted(r.arrival for r in trace)
    if len(arrivals) < 2 or arrivals[-1] <= arrivals[0]:
        raise ValueError("an arrival rate needs two requests at different times")
    return (len(arrivals) - 1) / (arrivals[-1] - arrivals[0])


def steady_window(trace: Trace, skip: int) -> tuple[float, float]:
    """The steady-state window (t0, t1): t0 is the arrival of the first request after the warm-up
    (the ``skip + 1``-th to arrive, ties by request id), t1 the last arrival.

    Before t0 the server is filling (the warm-up); after t1 no request arrives and the server
    drains. In a closed loop every client starts at t = 0, so ``skip`` should be at least the
    number of clients, or t0 falls inside the start-up burst. Raises ``ValueError`` when the
    window is empty (``skip`` leaves fewer than two requests, or they arrive at the same time).
    """
    if skip < 0:
        raise ValueError(f"skip must be >= 0, got {skip}")
    arrivals = sorted(r.arrival for r in trace)
    if skip >= len(arrivals) - 1:
        raise ValueError(f"a warm-up of {skip} leaves no window in a trace of {len(arrivals)} requests")
    t0, t1 = arrivals[skip], arrivals[-1]
    if t1 <= t0:
        raise ValueError("the steady-state window spans no time: every request after the warm-up arrives at once")
    return t0, t1


def steady_throughput(trace: Trace, skip: int) -> float:
    """Requests per second in the steady state: requests that finish inside :func:`steady_window`
    (t0 < finish <= t1), over its length t1 - t0.

    The window is half open so that it counts one finish per gap: in a closed loop a client's next
    request arrives the instant its last one finishes, so both ends of the window are finishes, and
    a closed interval would count k + 1 finishes over k gaps.
    """
    t0, t1 = steady_window(trace, skip)
    return sum(t0 < r.finish <= t1 for r in trace) / (t1 - t0)


def steady_token_throughput(trace: Trace, skip: int) -> float:
    """Output tokens per second in the steady state: tokens emitted inside :func:`steady_window`
    (t0 < token time <= t1, half open as in :func:`steady_throughput`), over its length."""
    t0, t1 = steady_window(trace, skip)
    return sum(t0 < t <= t1 for r in trace for t in r.token_times) / (t1 - t0)


def steady_goodput(trace: Trace, skip: int, ttft_slo: float, tpot_slo: float) -> float:
    """vLLM's goodput in the steady state: :func:`steady_throughput` times the share of the requests
    after the warm-up (:func:`after_warmup`) that meet both SLOs.

    Counting the SLO-meeting requests that finish inside the window would count warm-up requests
    that arrived at an empty server and finish after t0: a load at which no request after the
    warm-up meets the SLOs would still show a goodput.
    """
    rest = after_warmup(trace, skip)
    share = sum(meets_slo(r, ttft_slo, tpot_slo) for r in rest) / len(rest)
    return steady_throughput(trace, skip) * share


def goodput_search(attainment: Callable[[float], float], capacity: float, target: float, steps: int = 32) -> float:
    """DistServe's goodput: the highest offered rate at which a share ``target`` of requests meets both SLOs.

    ``attainment(rate)`` serves the load at ``rate`` and returns the share of requests that met both
    SLOs. The rates tried are the grid ``capacity * k / steps`` for k = 1 .. ``steps``, in ascending
    order; the answer is the highest grid rate such that it *and every lower grid rate* reach
    ``target`` (the scan stops at the first rate that misses), or 0.0 when the lowest misses. It
    never exceeds ``capacity`` (pass a measured one, such as :func:`steady_throughput` at
    saturation), does not depend on a starting range, and a rate above a miss that happens to reach
    the target again (attainment need not fall monotonically with one draw) cannot raise it. Its
    resolution is ``capacity / steps``.
    """
    if not capacity > 0:
        raise ValueError(f"capacity must be positive, got {capacity}")
    if not 0 < target <= 1:
        raise ValueError(f"target is a share in (0, 1], got {target}")
    if steps < 1:
        raise ValueError(f"steps must be positive, got {steps}")
    best = 0.0
    for k in range(1, steps + 1):
        rate = capacity * k / steps
        if attainment(rate) < target:
            break
        best = rate
    return best
