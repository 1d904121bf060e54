"""One whole benchmark run: the measurements of the report, as a JSON-ready dict.

:func:`run_report` measures, in order: the device's ceilings; the model's memory (analytic and
as allocated); isolated prefill and decode step times with their roofline bounds; static
against continuous batching at one concurrency; a continuous-batching concurrency sweep; Poisson
arrivals, at fixed rates and at multiples of the capacity the sweep measured; batch invariance
and fp32/bf16 agreement. Every serving run reuses the same requests.
"""

from __future__ import annotations

import datetime as _dt
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np
import torch

from servebench import ceilings, memory, roofline
from servebench.config import BenchConfig, DType
from servebench.metrics import steady_throughput
from servebench.model import DecoderLM
from servebench.quality import batch_invariance, dtype_agreement
from servebench.server import Mode, serve
from servebench.summary import request_rows, summarize
from servebench.trace import RequestTrace, trace_to_dicts
from servebench.workload import ClosedLoop, OpenLoop, Workload, make_requests

__all__ = ["run_report", "environment", "serving_run"]

Log = Callable[[str], None]


def environment(device: torch.device) -> dict[str, Any]:
    """Device name, library versions, thread count and the date, for the result's provenance."""
    if device.type == "cuda":
        name = "cuda: " + torch.cuda.get_device_name(device)
    else:
        name = "cpu: " + (platform.processor() or platform.machine())
    return {
        "device": name,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }


def serving_run(
    model: DecoderLM,
    workload: Workload,
    *,
    mode: Mode,
    max_batch: int,
    cfg: BenchConfig,
    label: dict[str, Any],
    full_traces: bool = False,
) -> tuple[dict[str, Any], list[RequestTrace]]:
    """Serve ``workload`` and summarise it (book convention, the config's SLOs)."""
    memory.reset_peak(model.device)
    t = time.perf_counter()
    trace = serve(model, workload, mode=mode, max_batch=max_batch)
    wall = time.perf_counter() - t
    out: dict[str, Any] = {
        **label,
        "mode": mode,
        "max_batch": max_batch,
        "wall_s": wall,
        "peak_bytes": memory.peak_bytes(model.device),
        "metrics": summarize(trace, ttft_slo=cfg.slo_ttft_s, tpot_slo=cfg.slo_tpot_s),
        "requests": request_rows(trace),
    }
    if full_traces:
        out["trace"] = trace_to_dicts(trace)
    return out, trace


def _prompt(n: int, vocab: int, seed: int) -> list[int]:
    return [int(t) for t in np.random.default_rng(seed).integers(0, vocab, size=n)]


def _step_timings(model: DecoderLM, cfg: BenchConfig, peak: float, bw: float) -> dict[str, Any]:
    mc, dev, reps = cfg.model, model.device, cfg.decode_repeats
    prefill = []
    for n in cfg.prefill_lens:
        tokens = _prompt(n, mc.vocab, cfg.seed + n)

        def one(tokens: list[int] = tokens) -> None:
            model.prefill(0, tokens)
            model.release(0)

        t = ceilings.median_time(one, dev, repeats=reps)
        cost = roofline.prefill_cost(mc, cfg.dtype, prompt_len=n)
        bound = roofline.step_time_bound(cost, peak, bw)
        prefill.append(
            {
                "prompt_len": n,
                "time_s": t,
                "flops": cost.flops,
                "bytes": cost.bytes,
                "intensity": cost.intensity,
                "bound_s": bound,
            }
        )
    decode = []
    start = cfg.decode_context - reps // 2 - 1  # contexts attended span decode_context on average
    for b in cfg.decode_batches:
        for s in range(b):
            model.prefill(s, _prompt(start, mc.vocab, cfg.seed + s))
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            model.decode_step(list(range(b)))
            ceilings.synchronize(dev)
            times.append(time.perf_counter() - t0)
        model.reset()
        cost = roofline.decode_cost(mc, cfg.dtype, batch=b, context=cfg.decode_context)
        step = statistics.median(times)
        decode.append(
            {
                "batch": b,
                "time_s": step,
                "tokens_per_s": b / step,
                "flops": cost.flops,
                "bytes": cost.bytes,
                "intensity": cost.intensity,
                "bound_s": roofline.step_time_bound(cost, peak, bw),
                "memory_bound_s": cost.bytes / bw,
            }
        )
    critical = roofline.critical_decode_batch(mc, cfg.dtype, context=cfg.decode_context, peak_flops=peak, bandwidth=bw)
    return {"prefill": prefill, "decode": decode, "critical_decode_batch": critical}


def _quality(model: DecoderLM, cfg: BenchConfig) -> dict[str, Any]:
    mc = cfg.model
    qs = make_requests(cfg.quality_prompts, cfg.prompt_len, 1, vocab=mc.vocab, seed=cfg.seed + 7)
    prompts = [list(r.prompt) for r in qs]
    steps = min(cfg.quality_steps, mc.max_seq - max(len(p) for p in prompts))
    others = prompts[1 : model.max_slots]
    inv = batch_invariance(model, prompts[0], others, steps)
    other_dtype: DType = "bf16" if cfg.dtype == "fp32" else "fp32"
    twin = DecoderLM(mc, dtype=other_dtype, device=str(model.device), max_slots=1)
    ref, test = (model, twin) if cfg.dtype == "fp32" else (twin, model)
    agree = dtype_agreement(ref, test, prompts, steps)
    return {"batch_invariance": asdict(inv), "fp32_vs_bf16": asdict(agree)}


def run_report(cfg: BenchConfig, *, full_traces: bool = False, log: Log | None = None) -> dict[str, Any]:
    """Run every measurement of ``cfg`` and return the result (see the module docstring)."""
    before = torch.get_num_threads()
    if cfg.threads is not None:
        torch.set_num_threads(cfg.threads)
    try:
        return _run(cfg, full_traces, log or (lambda _: None))
    finally:
        torch.set_num_threads(before)


def _run(cfg: BenchConfig, full_traces: bool, say: Log) -> dict[str, Any]:
    started = time.perf_counter()
    dev = torch.device(cfg.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"config {cfg.name!r} needs CUDA, and this machine has none")
    mc = cfg.model
    slots = max(cfg.max_batch, *cfg.decode_batches, cfg.quality_prompts)
    model = DecoderLM(mc, dtype=cfg.dtype, device=cfg.device, max_slots=slots)
    result: dict[str, Any] = {"config": asdict(cfg), "environment": environment(dev)}

    say("ceilings")
    big = torch.float32 if cfg.dtype == "fp32" else torch.bfloat16
    peak = ceilings.matmul_flops(dev, big, n=cfg.ceiling_matmul_n, repeats=5)
    bw = ceilings.copy_bandwidth(dev, nbytes=cfg.ceiling_copy_mib * 2**20, repeats=5)
    result["ceilings"] = {"matmul_flops": peak, "copy_bandwidth": bw, "ridge": roofline.ridge_point(peak, bw)}

    result["memory"] = {
        "param_count": memory.param_count(mc),
        "weight_bytes": memory.weight_bytes(mc, cfg.dtype),
        "weight_bytes_allocated": model.weight_bytes(),
        "kv_bytes_per_token": memory.kv_bytes_per_token(mc, cfg.dtype),
        "kv_cache_bytes_allocated": model.cache.nbytes,
        "kv_slots": slots,
    }

    say("warm-up")
    warm = make_requests(cfg.warmup_requests, cfg.prompt_len, cfg.output_len, vocab=mc.vocab, seed=cfg.seed + 1)
    serve(model, ClosedLoop(warm, cfg.max_batch), mode="continuous", max_batch=cfg.max_batch)

    say("step timings")
    result["steps"] = _step_timings(model, cfg, peak, bw)

    requests = make_requests(cfg.n_requests, cfg.prompt_len, cfg.output_len, vocab=mc.vocab, seed=cfg.seed)
    runs: list[dict[str, Any]] = []

    def run(workload: Workload, mode: Mode, label: dict[str, Any]) -> None:
        say(f"serving {mode} {label}")
        out, trace = serving_run(
            model, workload, mode=mode, max_batch=cfg.max_batch, cfg=cfg, label=label, full_traces=full_traces
        )
        if label["workload"] == "closed":   # every client starts at t = 0: the window starts after their requests
            out["steady_request_throughput"] = steady_throughput(trace, label["concurrency"])
        runs.append(out)

    c = cfg.static_concurrency
    run(ClosedLoop(requests, c), "static", {"workload": "closed", "concurrency": c})
    for conc in sorted({*cfg.concurrencies, c}):
        run(ClosedLoop(requests, conc), "continuous", {"workload": "closed", "concurrency": conc})
    for rate in cfg.poisson_rates:
        wl = OpenLoop.poisson(requests, rate, seed=cfg.seed)
        run(wl, "continuous", {"workload": "poisson", "rate": rate})
    if cfg.poisson_loads:
        if max(cfg.concurrencies) >= cfg.n_requests - 1:
            raise ValueError(f"poisson_loads need a steady-state capacity: every concurrency must leave a window, "
                             f"below n_requests - 1 = {cfg.n_requests - 1}, got {max(cfg.concurrencies)}")
        # the capacity: the best steady-state request throughput of the continuous closed loops (the start-up
        # burst and the drain left out: servebench.metrics.steady_window)
        capacity = max(r["steady_request_throughput"] for r in runs
                       if r["workload"] == "closed" and r["mode"] == "continuous")
        result["capacity"] = capacity
        for load in cfg.poisson_loads:
            wl = OpenLoop.poisson(requests, load * capacity, seed=cfg.seed)
            run(wl, "continuous", {"workload": "poisson", "rate": load * capacity, "load": load})
    result["runs"] = runs

    say("quality")
    result["quality"] = _quality(model, cfg)
    result["elapsed_s"] = time.perf_counter() - started
    result["argv"] = sys.argv
    return result
