"""The serving harness of servebench: scheduling, load, the tiny model, memory, quality, CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
import torch

from servebench import (
    ClosedLoop,
    DecoderLM,
    LogitsModel,
    ModelConfig,
    OpenLoop,
    RequestSpec,
    RequestTrace,
    ServedModel,
    batch_invariance,
    dtype_agreement,
    generate,
    kv_bytes_per_token,
    kv_cache_bytes,
    make_requests,
    param_count,
    peak_bytes,
    preset,
    serve,
    weight_bytes,
)
from servebench.cli import main

TINY = preset("tiny").model


@pytest.fixture(autouse=True, scope="module")
def one_thread() -> Iterator[None]:
    """Tiny tensors gain nothing from threads, and on a loaded machine OpenMP threads stall."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, dt: float) -> None:
        self.t += dt


class ScriptedModel:
    """A served model whose calls cost fixed fake time: prefill 1 s, decode step 1 s."""

    def __init__(self, clock: FakeClock, slots: int = 2, max_seq: int = 64) -> None:
        self.clock = clock
        self._slots = slots
        self._max_seq = max_seq
        self.held: dict[int, int] = {}
        self.decode_calls: list[list[int]] = []

    @property
    def max_slots(self) -> int:
        return self._slots

    @property
    def max_seq(self) -> int:
        return self._max_seq

    def prefill(self, slot: int, tokens: Sequence[int]) -> int:
        assert slot not in self.held
        self.held[slot] = len(tokens)
        self.clock.t += 1.0
        return slot

    def decode_step(self, slots: Sequence[int]) -> list[int]:
        assert all(s in self.held for s in slots)
        self.decode_calls.append(list(slots))
        self.clock.t += 1.0
        return list(slots)

    def release(self, slot: int) -> None:
        del self.held[slot]

    def weight_bytes(self) -> int:
        return 0

    def kv_bytes_per_token(self) -> int:
        return 0


def specs(*n_out: int) -> list[RequestSpec]:
    return [RequestSpec(i, (1, 2, 3), n) for i, n in enumerate(n_out)]


def run_scripted(mode: str, workload: ClosedLoop | OpenLoop, slots: int = 2) -> list[RequestTrace]:
    clock = FakeClock()
    model = ScriptedModel(clock, slots=slots)
    trace = serve(model, workload, mode=mode, clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]
    assert model.held == {}
    return trace


def test_static_batching_schedule_by_hand() -> None:
    # Batch {r0, r1}: prefills end at 1 and 2; two decode steps end at 3 and 4. Then {r2}.
    trace = run_scripted("static", OpenLoop.burst(specs(3, 1, 2)))
    assert [r.token_times for r in trace] == [(1.0, 3.0, 4.0), (2.0,), (5.0, 6.0)]
    assert [r.finish for r in trace] == [4.0, 2.0, 6.0]


def test_continuous_batching_schedule_by_hand() -> None:
    # r1 finishes at its prefill (t=2) and r2 takes its slot at once (t=3); they decode together.
    trace = run_scripted("continuous", OpenLoop.burst(specs(3, 1, 2)))
    assert [r.token_times for r in trace] == [(1.0, 4.0, 5.0), (2.0,), (3.0, 4.0)]


def test_static_batch_keeps_its_shape_until_done() -> None:
    clock = FakeClock()
    model = ScriptedModel(clock, slots=2)
    serve(model, OpenLoop.burst(specs(4, 2)), mode="static", clock=clock, sleep=clock.sleep)
    assert model.decode_calls == [[0, 1]] * 3  # r1 is done after 1 step but stays in the batch


def test_open_loop_waits_for_arrivals_and_keeps_them() -> None:
    trace = run_scripted("continuous", OpenLoop(specs(2, 2), [0.0, 10.0]))
    assert [r.arrival for r in trace] == [0.0, 10.0]
    assert [r.token_times for r in trace] == [(1.0, 2.0), (11.0, 12.0)]


def test_closed_loop_sends_next_request_at_finish() -> None:
    trace = run_scripted("continuous", ClosedLoop(specs(2, 2, 1), concurrency=1))
    assert [r.arrival for r in trace] == [0.0, 2.0, 4.0]
    assert [r.finish for r in trace] == [2.0, 4.0, 5.0]


def in_flight_max(trace: Sequence[RequestTrace]) -> int:
    events = sorted([(r.arrival, 1) for r in trace] + [(r.finish, -1) for r in trace])
    level = peak = 0
    for _, d in events:
        level += d
        peak = max(peak, level)
    return peak


@pytest.fixture(scope="module")
def tiny_model() -> DecoderLM:
    return DecoderLM(TINY, max_slots=4)


@pytest.fixture(scope="module")
def tiny_requests() -> list[RequestSpec]:
    return make_requests(10, (3, 12), (1, 9), vocab=TINY.vocab, seed=5)


@pytest.mark.parametrize("mode", ["static", "continuous"])
def test_tiny_model_serves_every_request(tiny_model: DecoderLM, tiny_requests: list[RequestSpec], mode: str) -> None:
    trace = serve(tiny_model, ClosedLoop(tiny_requests, 3), mode=mode)  # type: ignore[arg-type]
    assert [r.request_id for r in trace] == list(range(10))
    assert [r.n_out for r in trace] == [s.n_out for s in tiny_requests]
    assert [r.prompt_len for r in trace] == [len(s.prompt) for s in tiny_requests]
    assert all(len(r.tokens) == r.n_out and r.arrival <= r.token_times[0] for r in trace)
    assert in_flight_max(trace) <= 3
    assert tiny_model.lengths() == [0, 0, 0, 0]
    # Greedy output in a batch equals the output served alone.
    for spec, r in zip(tiny_requests, trace, strict=True):
        assert list(r.tokens) == generate(tiny_model, spec.prompt, spec.n_out)


def test_poisson_arrivals_are_seeded(tiny_requests: list[RequestSpec]) -> None:
    a = OpenLoop.poisson(tiny_requests, 50.0, seed=1).schedule
    b = OpenLoop.poisson(tiny_requests, 50.0, seed=1).schedule
    c = OpenLoop.poisson(tiny_requests, 50.0, seed=2).schedule
    assert a == b and a != c and a[0][1] == 0.0
    many = OpenLoop.poisson(specs(*[1] * 4001), 50.0, seed=0).schedule
    assert many[-1][1] / 4000 == pytest.approx(1 / 50, rel=0.05)


def test_make_requests_is_reproducible() -> None:
    a = make_requests(5, 4, (2, 3), vocab=9, seed=1)
    assert a == make_requests(5, 4, (2, 3), vocab=9, seed=1)
    assert all(len(r.prompt) == 4 and 2 <= r.n_out <= 3 and max(r.prompt) < 9 for r in a)


def test_cached_decode_matches_a_full_forward(tiny_model: DecoderLM) -> None:
    prompt = [3, 1, 4, 1, 5, 9, 2, 6]
    out = generate(tiny_model, prompt, 6)
    seq = prompt + out[:-1]
    full = tiny_model.forward_full(seq)[len(prompt) - 1 :]
    assert full.argmax(-1).tolist() == out


def test_batch_invariance(tiny_model: DecoderLM) -> None:
    inv = batch_invariance(tiny_model, [7, 7, 1, 2], [[5] * 11, [9, 8], [1, 2, 3, 4, 5, 6]], steps=8)
    assert inv.tokens_equal and inv.batch == 4
    assert inv.max_abs_logit_diff < 1e-4
    assert tiny_model.lengths() == [0, 0, 0, 0]


def test_fp32_bf16_agreement() -> None:
    ref = DecoderLM(TINY, dtype="fp32")
    low = DecoderLM(TINY, dtype="bf16")
    agree = dtype_agreement(ref, low, [[1, 2, 3], [4, 5, 6, 7]], steps=5)
    assert agree.positions == 10
    assert 0.5 <= agree.match_rate <= 1.0
    assert 0 <= agree.mean_common_prefix <= 5
    assert low.lm_head.dtype == torch.bfloat16
    assert torch.equal(low.lm_head, ref.lm_head.to(torch.bfloat16))


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("kv_heads", [None, 1])
def test_memory_formulas_match_the_tensors(dtype: str, kv_heads: int | None) -> None:
    cfg = ModelConfig(layers=3, d_model=32, heads=4, kv_heads=kv_heads, vocab=50, max_seq=16)
    model = DecoderLM(cfg, dtype=dtype, max_slots=5)  # type: ignore[arg-type]
    per_token = kv_bytes_per_token(cfg, dtype)
    assert per_token == 2 * 3 * (kv_heads or 4) * 8 * (4 if dtype == "fp32" else 2)
    assert model.kv_bytes_per_token() == per_token
    assert model.cache.k.nbytes + model.cache.v.nbytes == per_token * 5 * 16
    assert model.cache.nbytes == kv_cache_bytes(cfg, dtype, slots=5)
    assert model.weight_bytes() == weight_bytes(cfg, dtype)
    assert sum(t.numel() for t in model.weights()) == param_count(cfg)


def test_models_implement_the_protocols(tiny_model: DecoderLM) -> None:
    assert isinstance(tiny_model, LogitsModel)
    assert isinstance(ScriptedModel(FakeClock()), ServedModel)


def test_peak_memory_is_not_reported_on_cpu() -> None:
    assert peak_bytes("cpu") is None


def test_errors_name_the_problem(tiny_model: DecoderLM) -> None:
    with pytest.raises(ValueError, match="max_batch=9"):
        serve(tiny_model, ClosedLoop(specs(1), 1), mode="continuous", max_batch=9)
    with pytest.raises(ValueError, match="cache positions"):
        long = [RequestSpec(0, tuple(range(60)), 10)]
        serve(tiny_model, ClosedLoop(long, 1), mode="continuous")
    with pytest.raises(ValueError, match="n_out must be at least 1"):
        RequestSpec(0, (1,), 0)
    with pytest.raises(ValueError, match="unknown batching mode"):
        serve(tiny_model, ClosedLoop(specs(1), 1), mode="dynamic")  # type: ignore[arg-type]
    tiny_model.reset()
    with pytest.raises(ValueError, match="not a multiple"):
        ModelConfig(d_model=30, heads=4)


def test_cli_tiny_run_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert main(["--config", "tiny", "--out", str(out), "--quiet"]) == 0
    result = json.loads(out.read_text())
    assert result["config"]["name"] == "tiny"
    assert {r["mode"] for r in result["runs"]} == {"static", "continuous"}
    for run in result["runs"]:
        assert run["metrics"]["n_requests"] == result["config"]["n_requests"]
        assert run["peak_bytes"] is None
    assert result["memory"]["weight_bytes"] == result["memory"]["weight_bytes_allocated"]
    assert result["quality"]["batch_invariance"]["tokens_equal"] is True
    assert np.isfinite(result["ceilings"]["matmul_flops"])


def test_cli_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    assert "--config" in capsys.readouterr().out


def test_gpu_config_without_cuda_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert main(["--config", "gpu", "--quiet"]) == 2
    assert "needs CUDA" in capsys.readouterr().err


def test_simulated_clock_static_vs_continuous() -> None:
    from servebench import Linear, simulate

    reqs = specs(2, 6, 2, 6)
    cost = {"prefill_s": Linear(0.0, 0.01), "decode_s": Linear(0.02, 0.005)}  # 30 ms, 20 + 5 B ms
    static, sm = simulate(OpenLoop.burst(reqs), mode="static", max_batch=2, **cost)
    cont, cm = simulate(OpenLoop.burst(reqs), mode="continuous", max_batch=2, **cost)
    # static: batch {r0, r1} runs 5 steps of 30 ms after 60 ms of prefill, then {r2, r3} the same
    assert static[1].finish == pytest.approx(0.06 + 5 * 0.03)
    assert static[2].token_times[0] == pytest.approx(0.21 + 0.03)
    assert sm.decode_batches == [2] * 10
    # continuous: r2 joins as soon as r0 leaves, so it starts long before r1 is done
    assert cont[2].token_times[0] < static[2].token_times[0]
    assert sum(cm.decode_batches) == sum(s.n_out - 1 for s in reqs)
    assert max(r.finish for r in cont) < max(r.finish for r in static)
