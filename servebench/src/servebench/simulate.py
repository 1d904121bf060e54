"""The same server on a simulated clock: a model whose calls cost time given by a formula.

:func:`simulate` runs :func:`~servebench.server.serve` with a :class:`CostModel` in place of
a network: a prefill of ``T`` tokens advances the clock by ``prefill_s(T)``, a decode step of
``B`` sequences by ``decode_s(B)``, and an idle wait jumps the clock to the next arrival. The
scheduling is the real one, so the timestamps are exactly what the two batching policies give
for that cost model, reproducible to the last digit and checkable by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from servebench.server import Mode, serve
from servebench.trace import RequestTrace
from servebench.workload import Workload

__all__ = ["SimClock", "Linear", "CostModel", "simulate"]


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


class CostModel:
    """A :class:`~servebench.protocol.ServedModel` whose calls advance a :class:`SimClock`.

    Tokens are all 0; only the timing is modelled. Bytes are reported as 0.
    """

    def __init__(
        self, clock: SimClock, prefill_s: Linear, decode_s: Linear, *, max_slots: int, max_seq: int = 1 << 20
    ) -> None:
        self.clock = clock
        self.prefill_s = prefill_s
        self.decode_s = decode_s
        self._max_slots = max_slots
        self._max_seq = max_seq
        self.held: set[int] = set()
        self.decode_batches: list[int] = []

    @property
    def max_slots(self) -> int:
        return self._max_slots

    @property
    def max_seq(self) -> int:
        return self._max_seq

    def prefill(self, slot: int, tokens: Sequence[int]) -> int:
        if slot in self.held:
            raise RuntimeError(f"slot {slot} holds a request")
        self.held.add(slot)
        self.clock.t += self.prefill_s(len(tokens))
        return 0

    def decode_step(self, slots: Sequence[int]) -> list[int]:
        self.decode_batches.append(len(slots))
        self.clock.t += self.decode_s(len(slots))
        return [0] * len(slots)

    def release(self, slot: int) -> None:
        self.held.discard(slot)

    def weight_bytes(self) -> int:
        return 0

    def kv_bytes_per_token(self) -> int:
        return 0


def simulate(
    workload: Workload, *, mode: Mode, max_batch: int, prefill_s: Linear, decode_s: Linear
) -> tuple[list[RequestTrace], CostModel]:
    """Serve ``workload`` on a simulated clock; return the traces and the model (its step log)."""
    clock = SimClock()
    model = CostModel(clock, prefill_s, decode_s, max_slots=max_batch)
    trace = serve(model, workload, mode=mode, max_batch=max_batch, clock=clock, sleep=clock.sleep)
    return trace, model
