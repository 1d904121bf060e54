"""The same server on a simulated clock: a model whose calls cost time given by a formula.

:func:`simulate` runs :func:`~servebench.server.serve` with a :class:`CostModel` in place of
a network: each model call advances the clock by what a step cost formula says, and an idle
wait jumps the clock to the next arrival. The scheduling is the real one, so the timestamps are
exactly what the batching policies give for that cost, reproducible to the last digit.

Two step costs exist. :class:`RooflineCost` is the roofline of :mod:`servebench.roofline` for a
model shape on a machine (peak FLOP/s and memory bandwidth): a step takes
``max(FLOPs / peak, bytes / bandwidth)`` with every sequence's own context, the time a server
running at the roofline would take. :class:`LinearCost` is a pair of stated formulas, a prefill
of ``T`` tokens costing ``prefill_s(T)`` and a decode step of ``B`` sequences ``decode_s(B)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from servebench.config import ModelConfig
from servebench.memory import kv_bytes_per_token
from servebench.roofline import Chunk, step_cost
from servebench.server import Mode, ServeStats, serve
from servebench.trace import RequestTrace
from servebench.workload import Workload

__all__ = ["SimClock", "Linear", "StepTimer", "LinearCost", "RooflineCost", "CostModel", "simulate"]


class SimClock:
    """A clock that moves only when told to."""

    def __init__(self, start: float = 0.0) -> None:
        self.t = start

    def __call__(self) -> float:
        return self.t

    def sleep(self, dt: float) -> None:
        self.t += max(0.0, dt)


@dataclass(frozen=True)
class Linear:
    """Cost ``fixed + per_unit * n`` seconds."""

    fixed: float
    per_unit: float

    def __call__(self, n: int) -> float:
        return self.fixed + self.per_unit * n


class StepTimer(Protocol):
    """Seconds one model call takes. Contexts are positions attended after the step."""

    def step_s(self, decode_contexts: Sequence[int], chunks: Sequence[Chunk]) -> float: ...

    def kv_bytes_per_token(self) -> int: ...


@dataclass(frozen=True)
class LinearCost:
    """A prefill of ``T`` tokens costs ``prefill(T)``, a decode step of ``B`` rows ``decode(B)``.

    A mixed step (chunked prefill) costs the decode step plus ``prefill.per_unit`` per chunk token.
    """

    prefill: Linear
    decode: Linear
    kv_bytes: int = 0

    def step_s(self, decode_contexts: Sequence[int], chunks: Sequence[Chunk]) -> float:
        tokens = sum(c.length for c in chunks)
        if not decode_contexts:
            return self.prefill(tokens)
        return self.decode(len(decode_contexts)) + self.prefill.per_unit * tokens

    def kv_bytes_per_token(self) -> int:
        return self.kv_bytes


@dataclass(frozen=True)
class RooflineCost:
    """Step times of a server at the roofline: ``max(FLOPs / peak_flops, bytes / bandwidth)``.

    FLOPs and bytes are :func:`servebench.roofline.step_cost` of the model shape ``cfg`` in
    ``dtype``, with each sequence's own context; ``overhead_s`` is added to every step.
    """

    cfg: ModelConfig
    dtype: str
    peak_flops: float
    bandwidth: float
    overhead_s: float = 0.0

    def step_s(self, decode_contexts: Sequence[int], chunks: Sequence[Chunk]) -> float:
        c = step_cost(self.cfg, self.dtype, decode_contexts=decode_contexts, chunks=chunks)
        return self.overhead_s + max(c.flops / self.peak_flops, c.bytes / self.bandwidth)

    def kv_bytes_per_token(self) -> int:
        return kv_bytes_per_token(self.cfg, self.dtype)


class CostModel:
    """A :class:`~servebench.protocol.ServedModel` whose calls advance a :class:`SimClock`.

    Tokens are all 0; only the timing is modelled. It keeps each slot's length, so a step's cost
    sees every sequence's context, and it implements ``mixed_step`` for chunked prefill.
    ``decode_batches`` logs the rows of every decode (or mixed) step.
    """

    def __init__(self, clock: SimClock, timer: StepTimer, *, max_slots: int, max_seq: int = 1 << 20) -> None:
        self.clock = clock
        self.timer = timer
        self._max_slots = max_slots
        self._max_seq = max_seq
        self.length: dict[int, int] = {}
        self.decode_batches: list[int] = []

    @property
    def max_slots(self) -> int:
        return self._max_slots

    @property
    def max_seq(self) -> int:
        return self._max_seq

    def prefill(self, slot: int, tokens: Sequence[int]) -> int:
        if slot in self.length:
            raise RuntimeError(f"slot {slot} holds a request")
        self.clock.t += self.timer.step_s((), [Chunk(0, len(tokens), last=True)])
        self.length[slot] = len(tokens)
        return 0

    def decode_step(self, slots: Sequence[int]) -> list[int]:
        return self.mixed_step(slots, [])[0]

    def mixed_step(
        self, slots: Sequence[int], chunks: Sequence[tuple[int, Sequence[int], bool]]
    ) -> tuple[list[int], dict[int, int]]:
        """Decode ``slots`` and prefill ``chunks`` (slot, tokens, last) in one step."""
        if slots:
            self.decode_batches.append(len(slots))
        contexts = [self.length[s] + 1 for s in slots]
        pieces = [Chunk(self.length.get(slot, 0), len(toks), last) for slot, toks, last in chunks]
        self.clock.t += self.timer.step_s(contexts, pieces)
        for s in slots:
            self.length[s] += 1
        firsts = {}
        for slot, toks, last in chunks:
            self.length[slot] = self.length.get(slot, 0) + len(toks)
            if last:
                firsts[slot] = 0
        return [0] * len(slots), firsts

    def release(self, slot: int) -> None:
        self.length.pop(slot, None)

    def weight_bytes(self) -> int:
        return 0

    def kv_bytes_per_token(self) -> int:
        return self.timer.kv_bytes_per_token()


def simulate(
    workload: Workload,
    *,
    mode: Mode,
    max_batch: int,
    prefill_s: Linear | None = None,
    decode_s: Linear | None = None,
    cost: StepTimer | None = None,
    kv_budget_bytes: int | None = None,
    chunk_tokens: int | None = None,
    stats: ServeStats | None = None,
) -> tuple[list[RequestTrace], CostModel]:
    """Serve ``workload`` on a simulated clock; return the traces and the model (its step log).

    The step cost is ``cost``, or ``LinearCost(prefill_s, decode_s)``; the other arguments are
    :func:`~servebench.server.serve`'s.
    """
    if cost is None:
        if prefill_s is None or decode_s is None:
            raise ValueError("simulate needs cost=, or both prefill_s= and decode_s=")
        cost = LinearCost(prefill_s, decode_s)
    clock = SimClock()
    model = CostModel(clock, cost, max_slots=max_batch)
    trace = serve(
        model,
        workload,
        mode=mode,
        max_batch=max_batch,
        clock=clock,
        sleep=clock.sleep,
        kv_budget_bytes=kv_budget_bytes,
        chunk_tokens=chunk_tokens,
        stats=stats,
    )
    return trace, model
