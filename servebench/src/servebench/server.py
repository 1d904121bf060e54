"""The server loop: static batching and continuous (iteration-level) batching.

Both loops run in one thread, take timestamps with ``time.perf_counter`` right after each model
call returns, and record every output token's time.

**Static batching.** When the server is idle it takes up to ``max_batch`` waiting requests as a
batch, prefills each, then runs decode steps over the *whole batch* until its longest request
is done. Requests that finish early keep their slot, and their rows keep being computed (their
tokens are discarded), as in a padded batch of fixed shape; no request joins until the batch is
done. A request's tokens stream to its client, so it finishes at its own last token.

**Continuous batching.** Before every decode step, waiting requests are admitted into free
slots (up to ``max_batch`` in flight) and prefilled; the step then decodes every request in
flight, and requests that reach their output length leave at once, freeing their slot. New
prefills take priority over the next decode step.

The first output token comes from the prefill; each decode step adds one.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from servebench.protocol import ServedModel
from servebench.trace import RequestTrace
from servebench.workload import RequestSpec, Workload

__all__ = ["Mode", "serve"]

Mode = Literal["static", "continuous"]


@dataclass
class _Live:
    spec: RequestSpec
    arrival: float
    slot: int
    times: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return len(self.times) >= self.spec.n_out

    def record(self, token: int, t: float) -> None:
        self.tokens.append(token)
        self.times.append(t)

    def trace(self) -> RequestTrace:
        return RequestTrace(
            request_id=self.spec.request_id,
            prompt_len=len(self.spec.prompt),
            arrival=self.arrival,
            token_times=tuple(self.times),
            finish=self.times[-1],
            tokens=tuple(self.tokens),
        )


class _Loop:
    def __init__(
        self,
        model: ServedModel,
        workload: Workload,
        max_batch: int,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
    ) -> None:
        self.model = model
        self.workload = workload
        self.max_batch = max_batch
        self.sleep = sleep
        self._clock = clock
        self.t0 = clock()
        self.waiting: deque[tuple[RequestSpec, float]] = deque()
        self.traces: list[RequestTrace] = []

    def now(self) -> float:
        return self._clock() - self.t0

    def poll(self) -> None:
        self.waiting.extend(self.workload.release(self.now()))

    def idle_wait(self) -> bool:
        """Nothing to do: wait for the next arrival. False when the workload is finished."""
        if self.workload.exhausted():
            return False
        nxt = self.workload.next_arrival()
        if nxt is None:
            raise RuntimeError("workload has unreleased requests but no arrival scheduled")
        self.sleep(max(0.0, nxt - self.now()))
        return True

    def check_fits(self, spec: RequestSpec, steps: int) -> None:
        need = len(spec.prompt) + steps
        if need > self.model.max_seq:
            raise ValueError(f"request {spec.request_id} needs {need} cache positions; max_seq is {self.model.max_seq}")

    def prefill(self, live: _Live) -> None:
        token = self.model.prefill(live.slot, live.spec.prompt)
        live.record(token, self.now())
        if live.done:
            self.finish(live)

    def finish(self, live: _Live) -> None:
        self.traces.append(live.trace())
        self.workload.on_finish(live.spec.request_id, live.times[-1])

    def run_static(self) -> None:
        while True:
            self.poll()
            if not self.waiting:
                if not self.idle_wait():
                    return
                continue
            take = min(self.max_batch, len(self.waiting))
            batch = [_Live(*self.waiting.popleft(), slot=i) for i in range(take)]
            steps = max(b.spec.n_out for b in batch) - 1
            for b in batch:
                self.check_fits(b.spec, steps)
            for b in batch:
                self.prefill(b)
            slots = [b.slot for b in batch]
            for _ in range(steps):
                tokens = self.model.decode_step(slots)
                t = self.now()
                for b, tok in zip(batch, tokens, strict=True):
                    if not b.done:
                        b.record(tok, t)
                        if b.done:
                            self.finish(b)
            for b in batch:
                self.model.release(b.slot)

    def run_continuous(self) -> None:
        free = list(range(self.max_batch - 1, -1, -1))
        active: list[_Live] = []
        while True:
            self.poll()
            while self.waiting and free:
                spec, arrival = self.waiting.popleft()
                self.check_fits(spec, spec.n_out - 1)
                live = _Live(spec, arrival, slot=free.pop())
                self.prefill(live)
                if live.done:
                    self.model.release(live.slot)
                    free.append(live.slot)
                else:
                    active.append(live)
            if active:
                tokens = self.model.decode_step([a.slot for a in active])
                t = self.now()
                still = []
                for a, tok in zip(active, tokens, strict=True):
                    a.record(tok, t)
                    if a.done:
                        self.finish(a)
                        self.model.release(a.slot)
                        free.append(a.slot)
                    else:
                        still.append(a)
                active = still
            elif not self.waiting and not self.idle_wait():
                return


def serve(
    model: ServedModel,
    workload: Workload,
    *,
    mode: Mode,
    max_batch: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], None] = time.sleep,
) -> list[RequestTrace]:
    """Serve every request of ``workload`` on ``model``; return their traces by request id.

    ``max_batch`` (default: the model's slot count) caps the requests in flight. Times in the
    traces are seconds since this call started. The model's slots must be empty on entry and
    are empty on return.
    """
    limit = model.max_slots if max_batch is None else max_batch
    if not 1 <= limit <= model.max_slots:
        raise ValueError(f"max_batch={limit} must be in 1..{model.max_slots} (the model's slots)")
    workload.start()
    loop = _Loop(model, workload, limit, clock, sleep)
    if mode == "static":
        loop.run_static()
    elif mode == "continuous":
        loop.run_continuous()
    else:
        raise ValueError(f"unknown batching mode {mode!r}: use 'static' or 'continuous'")
    return sorted(loop.traces, key=lambda r: r.request_id)
