"""Requests and the load generators that release them to the server.

A :class:`RequestSpec` is a prompt and an output length. A workload decides *when* each request
arrives: :class:`OpenLoop` at times fixed in advance (Poisson arrivals at a given rate, or all at
once), :class:`ClosedLoop` with N clients that each send their next request the moment their
previous one finishes. Every random draw comes from a seeded ``numpy`` generator.

Times are seconds since the run started, on the server's clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

__all__ = ["RequestSpec", "Lengths", "make_requests", "Workload", "OpenLoop", "ClosedLoop"]


@dataclass(frozen=True)
class RequestSpec:
    """One request: prompt token ids and the number of output tokens to generate (at least 1)."""

    request_id: int
    prompt: tuple[int, ...]
    n_out: int

    def __post_init__(self) -> None:
        if not self.prompt:
            raise ValueError(f"request {self.request_id}: empty prompt")
        if self.n_out < 1:
            raise ValueError(f"request {self.request_id}: n_out must be at least 1, got {self.n_out}")


@dataclass(frozen=True)
class Lengths:
    """Integer lengths drawn uniformly from ``low..high`` inclusive; fixed when equal."""

    low: int
    high: int

    def __post_init__(self) -> None:
        if not 1 <= self.low <= self.high:
            raise ValueError(f"lengths need 1 <= low <= high, got {self.low}..{self.high}")

    @classmethod
    def of(cls, spec: int | tuple[int, int] | Lengths) -> Lengths:
        """From a fixed length, a ``(low, high)`` pair, or a ``Lengths``."""
        if isinstance(spec, Lengths):
            return spec
        if isinstance(spec, int):
            return cls(spec, spec)
        return cls(spec[0], spec[1])

    def sample(self, rng: np.random.Generator, n: int) -> list[int]:
        return [int(x) for x in rng.integers(self.low, self.high + 1, size=n)]


def make_requests(
    n: int,
    prompt_len: int | tuple[int, int] | Lengths,
    output_len: int | tuple[int, int] | Lengths,
    *,
    vocab: int,
    seed: int = 0,
    first_id: int = 0,
) -> list[RequestSpec]:
    """``n`` requests with random prompt tokens and lengths, reproducible from ``seed``."""
    rng = np.random.default_rng(seed)
    p_lens = Lengths.of(prompt_len).sample(rng, n)
    o_lens = Lengths.of(output_len).sample(rng, n)
    return [
        RequestSpec(first_id + i, tuple(int(t) for t in rng.integers(0, vocab, size=p)), o)
        for i, (p, o) in enumerate(zip(p_lens, o_lens, strict=True))
    ]


class Workload(Protocol):
    """What the server asks of a load generator."""

    def start(self) -> None:
        """Reset to the beginning (a workload can be run more than once)."""
        ...

    def release(self, now: float) -> list[tuple[RequestSpec, float]]:
        """Requests that have arrived by ``now`` and were not released before, with arrival times."""
        ...

    def on_finish(self, request_id: int, t: float) -> None:
        """Tell the workload a request finished at ``t``."""
        ...

    def next_arrival(self) -> float | None:
        """The earliest arrival time not yet released, if one is already known."""
        ...

    def exhausted(self) -> bool:
        """True when every request has been released."""
        ...


class OpenLoop:
    """Arrival times fixed in advance, independent of how fast the server answers."""

    def __init__(self, requests: Sequence[RequestSpec], arrivals: Sequence[float]) -> None:
        if len(requests) != len(arrivals):
            raise ValueError(f"{len(requests)} requests but {len(arrivals)} arrival times")
        order = sorted(range(len(arrivals)), key=lambda i: arrivals[i])
        self.schedule = [(requests[i], float(arrivals[i])) for i in order]
        self._next = 0

    @classmethod
    def poisson(cls, requests: Sequence[RequestSpec], rate: float, *, seed: int = 0) -> OpenLoop:
        """Poisson arrivals at ``rate`` requests/s: exponential gaps of mean 1/rate, seeded.

        The first request arrives at t = 0 and request i at the sum of the first i gaps.
        """
        if rate <= 0:
            raise ValueError(f"arrival rate must be positive, got {rate}")
        gaps = np.random.default_rng(seed).exponential(1.0 / rate, size=len(requests))
        arrivals = np.concatenate([[0.0], np.cumsum(gaps[1:])])
        return cls(requests, [float(a) for a in arrivals])

    @classmethod
    def burst(cls, requests: Sequence[RequestSpec]) -> OpenLoop:
        """Every request arrives at t = 0."""
        return cls(requests, [0.0] * len(requests))

    def start(self) -> None:
        self._next = 0

    def release(self, now: float) -> list[tuple[RequestSpec, float]]:
        out = []
        while self._next < len(self.schedule) and self.schedule[self._next][1] <= now:
            out.append(self.schedule[self._next])
            self._next += 1
        return out

    def on_finish(self, request_id: int, t: float) -> None:
        return None

    def next_arrival(self) -> float | None:
        return self.schedule[self._next][1] if self._next < len(self.schedule) else None

    def exhausted(self) -> bool:
        return self._next >= len(self.schedule)


class ClosedLoop:
    """``concurrency`` clients; each sends its next request ``think_s`` after its last finished.

    The first ``concurrency`` requests arrive at t = 0; requests are handed out in order.
    """

    def __init__(self, requests: Sequence[RequestSpec], concurrency: int, *, think_s: float = 0.0) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be positive, got {concurrency}")
        self.requests = list(requests)
        self.concurrency = concurrency
        self.think_s = think_s
        self.start()

    def start(self) -> None:
        first = min(self.concurrency, len(self.requests))
        self._due: list[float] = [0.0] * first  # arrival times scheduled but not released
        self._sent = 0

    def release(self, now: float) -> list[tuple[RequestSpec, float]]:
        out = []
        self._due.sort()
        while self._due and self._due[0] <= now and self._sent < len(self.requests):
            out.append((self.requests[self._sent], self._due.pop(0)))
            self._sent += 1
        return out

    def on_finish(self, request_id: int, t: float) -> None:
        if self._sent + len(self._due) < len(self.requests):
            self._due.append(t + self.think_s)

    def next_arrival(self) -> float | None:
        return min(self._due) if self._due else None

    def exhausted(self) -> bool:
        return self._sent >= len(self.requests)
