"""Admission by KV bytes, preemption by recompute, chunked prefill, the roofline cost model, the
new metric conventions, and the static-shape decode step."""

from __future__ import annotations

import math

import pytest
import torch

from servebench import (
    Chunk,
    ClosedLoop,
    DecoderLM,
    Linear,
    OpenLoop,
    RequestSpec,
    RooflineCost,
    ServeStats,
    decode_cost,
    decode_terms,
    make_requests,
    max_sequences,
    part_intensities,
    prefill_cost,
    preset,
    serve,
    simulate,
    step_cost,
)
from servebench import metrics as m
from servebench.static_decode import StaticDecode
from servebench.trace import RequestTrace

GPU = preset("gpu").model


def specs(prompt: int, *n_out: int) -> list[RequestSpec]:
    return [RequestSpec(i, tuple(range(1, prompt + 1)), n) for i, n in enumerate(n_out)]


def test_step_cost_generalises_decode_and_prefill() -> None:
    assert step_cost(GPU, "bf16", decode_contexts=[100] * 3) == decode_cost(GPU, "bf16", batch=3, context=100)
    assert step_cost(GPU, "bf16", chunks=[Chunk(0, 77)]) == prefill_cost(GPU, "bf16", prompt_len=77)
    # two chunks of one prompt do the attention FLOPs of the whole prompt
    whole = prefill_cost(GPU, "bf16", prompt_len=64)
    a = step_cost(GPU, "bf16", chunks=[Chunk(0, 40, last=False)])
    b = step_cost(GPU, "bf16", chunks=[Chunk(40, 24, last=True)])
    assert a.flops + b.flops == whole.flops


def test_decode_terms_and_part_intensities() -> None:
    t = decode_terms(GPU, "bf16", context=512, peak_flops=989e12, bandwidth=3.35e12)
    assert t.per_seq_ratio == pytest.approx(0.0191, abs=1e-4)
    c = decode_cost(GPU, "bf16", batch=8, context=512)
    assert t.step_s(8) == pytest.approx(max(c.flops / 989e12, c.bytes / 3.35e12))
    w1, att1 = part_intensities(GPU, "bf16", batch=1, context=512)
    w300, att300 = part_intensities(GPU, "bf16", batch=300, context=512)
    assert att1 == att300 == GPU.heads / GPU.n_kv_heads
    assert w300 > 295 > w1


def test_roofline_cost_on_the_simulated_clock_sees_each_context() -> None:
    cost = RooflineCost(GPU, "bf16", 989e12, 3.35e12)
    trace, cm = simulate(OpenLoop.burst(specs(32, 4)), mode="continuous", max_batch=1, cost=cost)
    pre = prefill_cost(GPU, "bf16", prompt_len=32)
    first = max(pre.flops / 989e12, pre.bytes / 3.35e12)
    assert trace[0].token_times[0] == pytest.approx(first)
    steps = [decode_cost(GPU, "bf16", batch=1, context=33 + k) for k in range(3)]
    assert trace[0].finish == pytest.approx(first + sum(s.bytes / 3.35e12 for s in steps))


def test_admission_by_kv_bytes_and_the_largest_batch() -> None:
    # kv budget of 40 positions (1 byte each): prompts of 8 tokens, 4 outputs
    cost = type("C", (), {"step_s": lambda self, d, c: 1.0, "kv_bytes_per_token": lambda self: 1})()
    st = ServeStats()
    trace, _ = simulate(
        ClosedLoop(specs(8, *[4] * 12), 12), mode="continuous", max_batch=12, cost=cost, kv_budget_bytes=40, stats=st
    )
    assert len(trace) == 12 and all(r.n_out == 4 for r in trace)
    assert st.most_kv_tokens <= 40
    # full reservation (prompt + 4 outputs = 12 positions) would allow 3; current bytes admit more
    assert st.largest_batch > 40 // 12


def test_preemption_by_recompute_keeps_every_token() -> None:
    cost = type("C", (), {"step_s": lambda self, d, c: 1.0, "kv_bytes_per_token": lambda self: 1})()
    st = ServeStats()
    reqs = specs(4, *[20] * 6)
    trace, _ = simulate(ClosedLoop(reqs, 6), mode="continuous", max_batch=6, cost=cost, kv_budget_bytes=40, stats=st)
    assert st.preemptions > 0
    assert [r.n_out for r in trace] == [20] * 6
    assert st.most_kv_tokens <= 40


def test_preemption_on_the_real_model_gives_the_same_tokens() -> None:
    torch.set_num_threads(1)
    model = DecoderLM(preset("tiny").model, max_slots=4)
    reqs = make_requests(4, 6, 10, vocab=256, seed=2)
    free = serve(model, ClosedLoop(reqs, 4), mode="continuous")
    st = ServeStats()
    tight = serve(
        model, ClosedLoop(reqs, 4), mode="continuous", kv_budget_bytes=34 * model.kv_bytes_per_token(), stats=st
    )
    assert st.preemptions > 0
    assert [r.tokens for r in tight] == [r.tokens for r in free]


def test_a_request_that_can_never_fit_is_an_error() -> None:
    cost = type("C", (), {"step_s": lambda self, d, c: 1.0, "kv_bytes_per_token": lambda self: 1})()
    with pytest.raises(ValueError, match="never fit"):
        simulate(OpenLoop.burst(specs(30, 20)), mode="continuous", max_batch=1, cost=cost, kv_budget_bytes=40)


def test_chunked_prefill_caps_every_step() -> None:
    seen: list[int] = []

    class Cost:
        def step_s(self, d, c):
            seen.append(len(d) + sum(x.length for x in c))
            return 1.0

        def kv_bytes_per_token(self):
            return 0

    trace, _ = simulate(OpenLoop.burst(specs(100, 3, 3)), mode="chunked", max_batch=2, cost=Cost(), chunk_tokens=32)
    assert max(seen) <= 32
    assert [r.n_out for r in trace] == [3, 3]
    # 200 prompt tokens at most 32 a step: the first token needs at least 4 steps
    assert trace[0].token_times[0] >= 4


def test_chunked_prefill_shortens_the_longest_gap() -> None:
    reqs = [RequestSpec(0, (1,) * 8, 40)] + [RequestSpec(i, (1,) * 400, 2) for i in range(1, 4)]
    arrivals = [0.0, 0.01, 0.02, 0.03]
    cost = {"prefill_s": Linear(0.001, 0.0001), "decode_s": Linear(0.005, 0.0)}
    first, _ = simulate(OpenLoop(reqs, arrivals), mode="continuous", max_batch=4, **cost)
    chunked, _ = simulate(OpenLoop(reqs, arrivals), mode="chunked", max_batch=4, chunk_tokens=64, **cost)
    assert max(m.itl(chunked[0])) < max(m.itl(first[0]))


def test_chunked_mode_needs_a_mixed_step() -> None:
    model = DecoderLM(preset("tiny").model, max_slots=2)
    with pytest.raises(TypeError, match="mixed_step"):
        serve(model, OpenLoop.burst(specs(4, 2)), mode="chunked", chunk_tokens=8)


def test_max_sequences_is_the_reserved_count() -> None:
    cfg = preset("tiny").model
    from servebench import kv_bytes_per_token, weight_bytes

    mem = weight_bytes(cfg, "fp32") + 10 * 50 * kv_bytes_per_token(cfg, "fp32") + 1
    assert max_sequences(cfg, "fp32", memory_bytes=mem, seq_len=50) == 10


@pytest.mark.parametrize(("n", "q", "want"), [(5, 99, 4), (5, 50, 2), (100, 99, 99), (100, 50, 50), (10, 95, 9)])
def test_loadgen_percentile_is_floor_n_p(n: int, q: float, want: int) -> None:
    xs = list(range(n))
    assert m.percentile(xs, q, "loadgen") == xs[min(n - 1, math.floor(n * q / 100))] == want


def test_after_warmup_and_arrival_rate() -> None:
    trace = [RequestTrace(i, 1, a, (a + 1,), a + 1) for i, a in enumerate([0.0, 0.0, 1.0, 3.0])]
    assert [r.request_id for r in m.after_warmup(trace, 2)] == [2, 3]
    assert m.arrival_rate(trace) == pytest.approx(3 / 3.0)


def test_static_decode_matches_the_served_model() -> None:
    torch.set_num_threads(1)
    cfg = preset("tiny").model
    model = DecoderLM(cfg, max_slots=2)
    L = 12
    for s in range(2):
        model.prefill(s, [(5 * s + k) % cfg.vocab for k in range(L - 1)])
    sd = StaticDecode(model, batch=2, context=L)
    sd.k.copy_(model.cache.k[:, :2, :, :L])
    sd.v.copy_(model.cache.v[:, :2, :, :L])
    sd.tokens.copy_(torch.tensor([model._last[0], model._last[1]]))
    want = model.decode_logits([0, 1])
    got = sd.step()
    assert torch.allclose(got, want, atol=1e-4)
    with pytest.raises(RuntimeError, match="CUDA"):
        sd.capture()
