"""The trace: per-request timestamps, the one data structure every metric is computed from.

All times are seconds on one clock (``time.perf_counter`` minus the run's start, for traces
the server records). ``token_times[i]`` is when output token ``i`` became available to the
client; a streaming tool that receives several tokens in one chunk records them with the same
time. ``finish`` is when the request completed (for the server's traces, the time of its last
token; for a request with no output, when it was dropped or answered empty).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RequestTrace", "trace_from_dicts", "trace_to_dicts"]


@dataclass(frozen=True)
class RequestTrace:
    """Timestamps of one request.

    ``token_times`` must be non-decreasing and lie within ``[arrival, finish]``; ``tokens``, when
    recorded, holds the output token ids (same length as ``token_times``).
    """

    request_id: int
    prompt_len: int
    arrival: float
    token_times: tuple[float, ...]
    finish: float
    tokens: tuple[int, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        times = self.token_times
        if any(b < a for a, b in zip(times, times[1:], strict=False)):
            raise ValueError(f"request {self.request_id}: token_times decrease")
        if times and (times[0] < self.arrival or times[-1] > self.finish):
            raise ValueError(f"request {self.request_id}: token_times outside [arrival, finish]")
        if self.finish < self.arrival:
            raise ValueError(f"request {self.request_id}: finish before arrival")
        if self.tokens and len(self.tokens) != len(times):
            raise ValueError(f"request {self.request_id}: {len(self.tokens)} tokens, {len(times)} times")

    @property
    def n_out(self) -> int:
        """Output tokens delivered."""
        return len(self.token_times)

    @classmethod
    def from_chunks(
        cls,
        request_id: int,
        arrival: float,
        chunks: Sequence[tuple[float, int]],
        *,
        prompt_len: int = 0,
        finish: float | None = None,
    ) -> RequestTrace:
        """A trace from streamed chunks ``(time, tokens_in_chunk)``, as a client-side tool sees it."""
        times: list[float] = []
        for t, n in chunks:
            if n < 0:
                raise ValueError(f"chunk of {n} tokens")
            times.extend([t] * n)
        end = finish if finish is not None else (chunks[-1][0] if chunks else arrival)
        return cls(request_id, prompt_len, arrival, tuple(times), end)


def trace_to_dicts(trace: Iterable[RequestTrace], *, tokens: bool = False) -> list[dict[str, Any]]:
    """The trace as JSON-ready dicts (token ids only when ``tokens`` is true)."""
    out = []
    for r in trace:
        d: dict[str, Any] = {
            "request_id": r.request_id,
            "prompt_len": r.prompt_len,
            "arrival": r.arrival,
            "token_times": list(r.token_times),
            "finish": r.finish,
        }
        if tokens:
            d["tokens"] = list(r.tokens)
        out.append(d)
    return out


def trace_from_dicts(rows: Iterable[Mapping[str, Any]]) -> list[RequestTrace]:
    """The inverse of :func:`trace_to_dicts`."""
    return [
        RequestTrace(
            request_id=int(d["request_id"]),
            prompt_len=int(d["prompt_len"]),
            arrival=float(d["arrival"]),
            token_times=tuple(float(t) for t in d["token_times"]),
            finish=float(d["finish"]),
            tokens=tuple(int(t) for t in d.get("tokens", ())),
        )
        for d in rows
    ]
