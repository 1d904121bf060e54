"""Measured ceilings of the device: matmul FLOP/s and memory bandwidth, for the roofline.

These are what this device achieves on a large square matmul and a large tensor copy with
torch, not vendor peaks; they are the honest ceilings to compare a step's time against.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

__all__ = ["synchronize", "median_time", "best_time", "matmul_flops", "copy_bandwidth"]


def synchronize(device: torch.device) -> None:
    """Wait for queued work on ``device`` (CUDA); a no-op on the CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _times(fn: Callable[[], object], device: torch.device, repeats: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    synchronize(device)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - t)
    return sorted(times)


def median_time(fn: Callable[[], object], device: torch.device, *, repeats: int, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` over ``repeats`` runs, in seconds (device synchronised)."""
    return _times(fn, device, repeats, warmup)[repeats // 2]


def best_time(fn: Callable[[], object], device: torch.device, *, repeats: int, warmup: int = 1) -> float:
    """Shortest wall time of ``fn()`` over ``repeats`` runs: the least disturbed one, in seconds.

    On a shared machine other work only ever adds time, so the minimum is the best estimate of
    what the step itself costs; use the median to describe what a user sees.
    """
    return _times(fn, device, repeats, warmup)[0]


def matmul_flops(device: torch.device, dtype: torch.dtype, *, n: int, repeats: int = 5) -> float:
    """FLOP/s of an ``n x n`` by ``n x n`` matmul (2 n^3 FLOPs), median of ``repeats``."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    t = median_time(lambda: a @ b, device, repeats=repeats)
    return 2 * n**3 / t


def copy_bandwidth(device: torch.device, *, nbytes: int, repeats: int = 5) -> float:
    """Bytes/s of copying an ``nbytes`` tensor (each copy reads and writes it: 2 * nbytes moved)."""
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    t = median_time(lambda: dst.copy_(src), device, repeats=repeats)
    return 2 * src.nbytes / t
