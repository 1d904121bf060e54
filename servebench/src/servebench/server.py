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

**Admission by KV bytes.** With ``kv_budget_bytes`` the continuous server admits by memory,
not only by slots: a waiting request joins only when the cache positions held by everyone in
flight, plus its prompt, plus one position per sequence for the next step, fit in the budget
(``kv_budget_bytes // model.kv_bytes_per_token()`` positions). Each decode step grows every
sequence by one position; when the next step would not fit, the most recently admitted request
is **preempted by recompute** (vLLM's default): its cache is freed, it goes back to the front of
the queue, and when it is admitted again its prompt and the tokens it already produced are
prefilled anew, which yields its next token.

**Chunked prefill** (``mode="chunked"``). Every step carries at most ``chunk_tokens`` tokens:
one decode row per sequence in flight first, then pieces of waiting prompts in arrival order. A
long prompt is spread over several steps instead of stalling every decode for its whole
prefill. The model must implement ``mixed_step(decode_slots, chunks)`` (the simulated
:class:`~servebench.simulate.CostModel` does).

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

__all__ = ["Mode", "ServeStats", "serve"]

Mode = Literal["static", "continuous", "chunked"]


@dataclass
class ServeStats:
    """What the scheduler did: filled in by :func:`serve` when passed as ``stats``."""

    preemptions: int = 0
    largest_batch: int = 0
    most_kv_tokens: int = 0
    steps: int = 0


@dataclass
class _Live:
    spec: RequestSpec
    arrival: float
    slot: int
    times: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    prefilled: int = 0  # prompt tokens in the cache so far (chunked prefill)

    @property
    def held(self) -> int:
        """Cache positions this request holds once prefilled: prompt plus tokens fed back."""
        return len(self.spec.prompt) + max(0, len(self.tokens) - 1)

    def replay(self) -> tuple[int, ...]:
        """What a (re)admission prefills: the prompt and every token already produced."""
        return self.spec.prompt + tuple(self.tokens)

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
        kv_tokens: int | None = None,
        stats: ServeStats | None = None,
    ) -> None:
        self.kv_tokens = kv_tokens
        self.stats = stats if stats is not None else ServeStats()
        self.model = model
        self.workload = workload
        self.max_batch = max_batch
        self.sleep = sleep
        self._clock = clock
        self.t0 = clock()
        self.waiting: deque[tuple[RequestSpec, float] | _Live] = deque()
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
        token = self.model.prefill(live.slot, live.replay())
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
            batch = [self._take(i) for i in range(take)]
            steps = max(b.spec.n_out for b in batch) - 1
            for b in batch:
                self.check_fits(b.spec, steps)
            for b in batch:
                self.prefill(b)
            slots = [b.slot for b in batch]
            for _ in range(steps):
                self._note(batch)
                tokens = self.model.decode_step(slots)
                t = self.now()
                for b, tok in zip(batch, tokens, strict=True):
                    if not b.done:
                        b.record(tok, t)
                        if b.done:
                            self.finish(b)
            for b in batch:
                self.model.release(b.slot)

    def _take(self, slot: int) -> _Live:
        item = self.waiting.popleft()
        if isinstance(item, _Live):  # a preempted request, back for its recompute
            item.slot = slot
            return item
        spec, arrival = item
        return _Live(spec, arrival, slot=slot)

    def _fits(self, active: list[_Live]) -> bool:
        """Can the head of the queue join, by KV positions (always, without a budget)?"""
        if self.kv_tokens is None:
            return True
        head = self.waiting[0]
        spec = head.spec if isinstance(head, _Live) else head[0]
        if len(spec.prompt) + spec.n_out - 1 > self.kv_tokens:
            raise ValueError(f"request {spec.request_id} can never fit the KV budget of {self.kv_tokens} positions")
        need = len(head.replay()) if isinstance(head, _Live) else len(spec.prompt)
        held = sum(a.held for a in active)
        return held + need + len(active) + 1 <= self.kv_tokens

    def _note(self, active: list[_Live]) -> None:
        self.stats.steps += 1
        self.stats.largest_batch = max(self.stats.largest_batch, len(active))
        self.stats.most_kv_tokens = max(self.stats.most_kv_tokens, sum(a.held for a in active) + len(active))

    def _advance(self, active: list[_Live], tokens: list[int], free: list[int], t: float) -> list[_Live]:
        """Record one decoded token per active request at ``t``; finish and release those done; the rest."""
        still = []
        for a, tok in zip(active, tokens, strict=True):
            a.record(tok, t)
            if a.done:
                self.finish(a)
                self.model.release(a.slot)
                free.append(a.slot)
            else:
                still.append(a)
        return still

    def _preempt(self, active: list[_Live], free: list[int]) -> None:
        """Free the latest admitted requests until the next step's growth fits the budget."""
        if self.kv_tokens is None:
            return
        while len(active) > 1 and sum(a.held for a in active) + len(active) > self.kv_tokens:
            victim = active.pop()
            self.model.release(victim.slot)
            free.append(victim.slot)
            self.waiting.appendleft(victim)
            self.stats.preemptions += 1

    def run_continuous(self) -> None:
        free = list(range(self.max_batch - 1, -1, -1))
        active: list[_Live] = []
        while True:
            self.poll()
            while self.waiting and free and self._fits(active):
                live = self._take(free.pop())
                self.check_fits(live.spec, live.spec.n_out - 1)
                self.prefill(live)
                if live.done:
                    self.model.release(live.slot)
                    free.append(live.slot)
                else:
                    active.append(live)
            self._preempt(active, free)
            if active:
                self._note(active)
                tokens = self.model.decode_step([a.slot for a in active])
                active = self._advance(active, tokens, free, self.now())
            elif not self.waiting and not self.idle_wait():
                return

    def run_chunked(self, chunk_tokens: int) -> None:
        mixed = getattr(self.model, "mixed_step", None)
        if mixed is None:
            raise TypeError(
                "mode 'chunked' needs a model with mixed_step(decode_slots, chunks), "
                "such as servebench.simulate.CostModel"
            )
        if chunk_tokens <= self.max_batch:
            raise ValueError(f"chunk_tokens={chunk_tokens} must exceed max_batch={self.max_batch}")
        free = list(range(self.max_batch - 1, -1, -1))
        active: list[_Live] = []  # prefilled, decoding
        filling: list[_Live] = []  # admitted, prompt not yet all in the cache
        while True:
            self.poll()
            while self.waiting and free:
                live = self._take(free.pop())
                self.check_fits(live.spec, live.spec.n_out - 1)
                filling.append(live)
            if not active and not filling:
                if not self.waiting and not self.idle_wait():
                    return
                continue
            budget = chunk_tokens - len(active)
            chunks: list[tuple[_Live, int]] = []
            for f in filling:
                if budget <= 0:
                    break
                n = min(budget, len(f.spec.prompt) - f.prefilled)
                chunks.append((f, n))
                budget -= n
            self._note(active)
            decoded, firsts = mixed(
                [a.slot for a in active],
                [
                    (f.slot, f.spec.prompt[f.prefilled : f.prefilled + n], f.prefilled + n == len(f.spec.prompt))
                    for f, n in chunks
                ],
            )
            t = self.now()
            still = self._advance(active, decoded, free, t)
            for f, n in chunks:
                f.prefilled += n
                if f.prefilled == len(f.spec.prompt):
                    filling.remove(f)
                    f.record(firsts[f.slot], t)
                    if f.done:
                        self.finish(f)
                        self.model.release(f.slot)
                        free.append(f.slot)
                    else:
                        still.append(f)
            active = still


def serve(
    model: ServedModel,
    workload: Workload,
    *,
    mode: Mode,
    max_batch: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], None] = time.sleep,
    kv_budget_bytes: int | None = None,
    chunk_tokens: int | None = None,
    stats: ServeStats | None = None,
) -> list[RequestTrace]:
    """Serve every request of ``workload`` on ``model``; return their traces by request id.

    ``max_batch`` (default: the model's slot count) caps the requests in flight. Times in the
    traces are seconds since this call started. The model's slots must be empty on entry and
    are empty on return. ``kv_budget_bytes`` (continuous mode) admits by KV bytes and preempts
    by recompute; ``chunk_tokens`` is the per-step token budget of ``mode="chunked"``. A
    :class:`ServeStats` passed as ``stats`` receives the preemptions, the largest decode batch,
    the most KV positions held at once and the number of steps.
    """
    limit = model.max_slots if max_batch is None else max_batch
    if not 1 <= limit <= model.max_slots:
        raise ValueError(f"max_batch={limit} must be in 1..{model.max_slots} (the model's slots)")
    kv_tokens = None
    if kv_budget_bytes is not None:
        if mode != "continuous":
            raise ValueError("kv_budget_bytes applies to mode='continuous'")
        per = model.kv_bytes_per_token()
        if per <= 0:
            raise ValueError("admission by KV bytes needs a model that reports kv_bytes_per_token() > 0")
        kv_tokens = kv_budget_bytes // per
    workload.start()
    loop = _Loop(model, workload, limit, clock, sleep, kv_tokens, stats)
    if mode == "static":
        loop.run_static()
    elif mode == "continuous":
        loop.run_continuous()
    elif mode == "chunked":
        if chunk_tokens is None:
            raise ValueError("mode 'chunked' needs chunk_tokens")
        loop.run_chunked(chunk_tokens)
    else:
        raise ValueError(f"unknown batching mode {mode!r}: use 'static', 'continuous' or 'chunked'")
    return sorted(loop.traces, key=lambda r: r.request_id)
