"""Summaries of a trace under a stated convention, so one trace can be scored the ways tools do.

A :class:`Convention` names the four choices on which benchmarking tools differ: whether TPOT
counts the first token, whether ITL gaps are per token or per streamed chunk, which percentile
method is used, and whether a mean weights requests or tokens equally. :func:`summarize`
applies one convention to a trace; :data:`BOOK` is this book's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from servebench import metrics as m
from servebench.trace import RequestTrace

__all__ = ["Convention", "BOOK", "CONVENTIONS", "distribution", "summarize", "request_rows"]

QUANTILES = (50.0, 95.0, 99.0)


@dataclass(frozen=True)
class Convention:
    """How a trace is scored.

    ``tpot``: ``after_first`` is (t_last - t_first) / (n_out - 1); ``with_first`` is e2e / n_out.
    ``itl``: gaps per ``token`` or per ``chunk``. ``percentile``: ``nearest`` rank or ``linear``.
    ``mean``: the TPOT mean weights each ``request`` or each ``token`` equally.
    """

    name: str
    tpot: Literal["after_first", "with_first"] = "after_first"
    itl: Literal["token", "chunk"] = "token"
    percentile: m.Method = "linear"
    mean: Literal["request", "token"] = "request"


BOOK = Convention("book")
CONVENTIONS: dict[str, Convention] = {
    c.name: c
    for c in (
        BOOK,
        Convention("nearest_rank", percentile="nearest"),
        Convention("chunk_itl", itl="chunk"),
        Convention("tpot_with_first", tpot="with_first"),
        Convention("token_weighted", mean="token"),
    )
}


def distribution(values: Sequence[float], method: m.Method = "linear") -> dict[str, Any]:
    """Count, mean, p50/p95/p99 (by ``method``) and max of ``values``; None entries if empty."""
    out: dict[str, Any] = {"n": len(values)}
    if not values:
        out.update({"mean": None, "max": None, **{f"p{int(q)}": None for q in QUANTILES}})
        return out
    out["mean"] = sum(values) / len(values)
    for q in QUANTILES:
        out[f"p{int(q)}"] = m.percentile(values, q, method)
    out["max"] = max(values)
    return out


def _tpot_values(trace: Sequence[RequestTrace], c: Convention) -> list[float]:
    if c.tpot == "after_first":
        return m.defined(m.tpot(r) for r in trace)
    return m.defined(m.tpot_with_first(r) for r in trace)


def _tpot_mean(trace: Sequence[RequestTrace], c: Convention) -> float | None:
    if c.tpot == "after_first":
        return m.mean_tpot(trace, c.mean)
    rs = [r for r in trace if r.n_out >= 1]
    if not rs:
        return None
    if c.mean == "request":
        return sum(m.e2e(r) / r.n_out for r in rs) / len(rs)
    return sum(m.e2e(r) for r in rs) / sum(r.n_out for r in rs)


def summarize(
    trace: Sequence[RequestTrace],
    *,
    ttft_slo: float | None = None,
    tpot_slo: float | None = None,
    convention: Convention = BOOK,
) -> dict[str, Any]:
    """Every metric of the trace under ``convention``, as a JSON-ready dict.

    ``tpot.mean`` follows the convention's weighting; the distribution fields are per request.
    ``ttft_excluded`` counts requests with no output, ``tpot_excluded`` those with n_out <= 1
    (``with_first``: n_out = 0). Goodput and SLO attainment appear when both SLOs are given.
    """
    c = convention
    ttfts = m.defined(m.ttft(r) for r in trace)
    tpots = _tpot_values(trace, c)
    out: dict[str, Any] = {
        "convention": asdict(c),
        "n_requests": len(trace),
        "n_output_tokens": sum(r.n_out for r in trace),
        "span_s": m.span(trace),
        "request_throughput": m.request_throughput(trace),
        "token_throughput": m.token_throughput(trace),
        "ttft": distribution(ttfts, c.percentile),
        "tpot": {**distribution(tpots, c.percentile), "mean": _tpot_mean(trace, c)},
        "itl": distribution(m.itl_pool(trace, c.itl), c.percentile),
        "e2e": distribution([m.e2e(r) for r in trace], c.percentile),
        "ttft_excluded": len(trace) - len(ttfts),
        "tpot_excluded": len(trace) - len(tpots),
    }
    if ttft_slo is not None and tpot_slo is not None:
        out["slo"] = {"ttft_s": ttft_slo, "tpot_s": tpot_slo}
        out["goodput"] = m.goodput(trace, ttft_slo, tpot_slo)
        out["slo_attainment"] = m.slo_attainment(trace, ttft_slo, tpot_slo)
    return out


def request_rows(trace: Sequence[RequestTrace]) -> list[dict[str, Any]]:
    """One summary row per request: lengths, arrival, TTFT, TPOT, E2E, finish."""
    return [
        {
            "request_id": r.request_id,
            "prompt_len": r.prompt_len,
            "n_out": r.n_out,
            "arrival": r.arrival,
            "ttft": m.ttft(r),
            "tpot": m.tpot(r),
            "e2e": m.e2e(r),
            "finish": r.finish,
        }
        for r in trace
    ]
