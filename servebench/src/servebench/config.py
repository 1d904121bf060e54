"""Configurations of the benchmark: the model's shape and the named presets of a whole run.

A :class:`ModelConfig` fixes every tensor shape of the built-in decoder, so the analytic
memory and roofline functions take it alone. A :class:`BenchConfig` adds what one report run
measures: batch limits, workloads, sweeps. Three presets exist: ``tiny`` (tests, well under
a few seconds), ``cpu`` (the report's measurement on a 2-core CPU, under two minutes in all)
and ``gpu`` (larger, used only when CUDA is available).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["ModelConfig", "BenchConfig", "PRESETS", "preset", "DType", "dtype_bytes"]

DType = Literal["fp32", "bf16"]

_DTYPE_BYTES: dict[str, int] = {"fp32": 4, "bf16": 2, "fp8": 1}


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of a dtype name: ``fp32`` is 4, ``bf16`` is 2, ``fp8`` is 1.

    ``fp8`` is there for the memory arithmetic of an fp8 KV cache (``kv_bytes_per_token``,
    ``kv_cache_bytes``); the built-in model itself runs in ``fp32`` or ``bf16`` only.
    """
    try:
        return _DTYPE_BYTES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}: use 'fp32', 'bf16' or 'fp8'") from None


@dataclass(frozen=True)
class ModelConfig:
    """Shape of the built-in decoder-only transformer.

    ``kv_heads`` below ``heads`` gives grouped-query attention (``heads`` must be a multiple of
    it); ``ff_mult`` sets the MLP width ``d_ff = ff_mult * d_model`` unless ``ff_dim`` gives it.
    ``seed`` fixes the random weights. ``logit_std`` scales the LM head's init (std
    ``logit_std / sqrt(d_model)``): the default of 3 spreads the logits by a few units. It does not
    change how close to a tie a greedy choice is relative to rounding: the gaps between logits and the
    rounding errors in them both scale with it.
    """

    layers: int = 2
    d_model: int = 64
    heads: int = 4
    vocab: int = 256
    max_seq: int = 128
    kv_heads: int | None = None
    ff_mult: int = 4
    seed: int = 0
    ff_dim: int | None = None
    logit_std: float = 3.0

    def __post_init__(self) -> None:
        for name in ("layers", "d_model", "heads", "vocab", "max_seq", "ff_mult"):
            if getattr(self, name) < 1:
                raise ValueError(f"ModelConfig.{name} must be positive, got {getattr(self, name)}")
        if self.d_model % self.heads:
            raise ValueError(f"d_model={self.d_model} is not a multiple of heads={self.heads}")
        if self.n_kv_heads < 1 or self.heads % self.n_kv_heads:
            raise ValueError(f"heads={self.heads} is not a multiple of kv_heads={self.n_kv_heads}")

    @property
    def n_kv_heads(self) -> int:
        """Key/value heads (equal to ``heads`` unless grouped-query attention is configured)."""
        return self.heads if self.kv_heads is None else self.kv_heads

    @property
    def head_dim(self) -> int:
        """Width of one attention head, ``d_model / heads``."""
        return self.d_model // self.heads

    @property
    def kv_dim(self) -> int:
        """Width of the key (or value) projection, ``kv_heads * head_dim``."""
        return self.n_kv_heads * self.head_dim

    @property
    def d_ff(self) -> int:
        """Hidden width of the MLP."""
        return self.ff_dim if self.ff_dim is not None else self.ff_mult * self.d_model


@dataclass(frozen=True)
class BenchConfig:
    """Everything one report run measures.

    Lengths are ``(low, high)`` integer ranges drawn uniformly (inclusive) with ``seed``;
    ``low == high`` makes them fixed. ``concurrencies`` are the closed-loop client counts swept
    with continuous batching; ``static_concurrency`` is the one at which static and continuous
    batching are compared; ``poisson_rates`` are open-loop arrival rates in requests/s, and
    ``poisson_loads`` are open-loop rates given as multiples of the closed-loop capacity measured
    earlier in the same run (the highest request throughput over ``concurrencies``), so that
    "below capacity" and "overloaded" mean the same on a slow laptop and a fast server.
    ``decode_batches`` (at ``decode_context``) and ``prefill_lens`` are isolated step timings,
    each the median of ``decode_repeats`` runs. SLOs are in seconds. ``threads`` sets torch's
    intra-op threads for the run (None leaves torch's default): the CPU presets use one,
    because on a small shared CPU two OpenMP threads stall whenever another process takes a core.
    The device's ceilings are measured on an ``n x n`` matmul and a copy of ``ceiling_copy_mib`` MiB.
    """

    name: str
    model: ModelConfig
    dtype: DType = "fp32"
    device: str = "cpu"
    max_batch: int = 8
    n_requests: int = 16
    prompt_len: tuple[int, int] = (8, 16)
    output_len: tuple[int, int] = (4, 16)
    concurrencies: tuple[int, ...] = (1, 4)
    static_concurrency: int = 4
    poisson_rates: tuple[float, ...] = ()
    poisson_loads: tuple[float, ...] = (0.1, 3.0)
    decode_batches: tuple[int, ...] = (1, 2, 4)
    decode_context: int = 32
    decode_repeats: int = 5
    prefill_lens: tuple[int, ...] = (8, 32)
    warmup_requests: int = 2
    quality_steps: int = 8
    quality_prompts: int = 4
    threads: int | None = None
    ceiling_matmul_n: int = 256
    ceiling_copy_mib: int = 8
    slo_ttft_s: float = 0.5
    slo_tpot_s: float = 0.05
    seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def replace(self, **changes: Any) -> BenchConfig:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)


PRESETS: dict[str, BenchConfig] = {
    "tiny": BenchConfig(
        name="tiny",
        model=ModelConfig(layers=2, d_model=64, heads=4, kv_heads=2, vocab=256, max_seq=64),
        max_batch=4,
        n_requests=8,
        prompt_len=(4, 12),
        output_len=(2, 8),
        concurrencies=(1, 4),
        static_concurrency=4,
        poisson_rates=(),
        poisson_loads=(2.0,),
        decode_batches=(1, 4),
        decode_context=16,
        decode_repeats=3,
        prefill_lens=(8, 32),
        warmup_requests=1,
        quality_steps=6,
        quality_prompts=3,
        threads=1,
    ),
    "cpu": BenchConfig(
        name="cpu",
        model=ModelConfig(layers=4, d_model=256, heads=8, kv_heads=8, vocab=8192, max_seq=256),
        max_batch=16,
        n_requests=64,
        prompt_len=(16, 96),
        output_len=(8, 64),
        concurrencies=(1, 2, 4, 8, 16),
        static_concurrency=8,
        poisson_rates=(),
        poisson_loads=(0.1, 3.0),
        decode_batches=(1, 2, 4, 8, 16, 32),
        decode_context=128,
        decode_repeats=20,
        prefill_lens=(16, 64, 128, 192),
        warmup_requests=4,
        quality_steps=32,
        quality_prompts=8,
        threads=1,
        ceiling_matmul_n=1024,
        ceiling_copy_mib=64,
        slo_ttft_s=0.25,
        slo_tpot_s=0.02,
    ),
    "gpu": BenchConfig(
        name="gpu",
        model=ModelConfig(layers=12, d_model=1024, heads=16, kv_heads=4, vocab=32000, max_seq=1024),
        dtype="bf16",
        device="cuda",
        max_batch=64,
        n_requests=256,
        prompt_len=(64, 512),
        output_len=(16, 256),
        concurrencies=(1, 4, 16, 32, 64),
        static_concurrency=32,
        poisson_rates=(),
        poisson_loads=(0.1, 3.0),
        decode_batches=(1, 2, 4, 8, 16, 32, 64, 128),
        decode_context=512,
        decode_repeats=20,
        prefill_lens=(64, 256, 512, 768),
        warmup_requests=8,
        quality_steps=64,
        quality_prompts=16,
        ceiling_matmul_n=8192,
        ceiling_copy_mib=1024,
        slo_ttft_s=0.2,
        slo_tpot_s=0.02,
    ),
}


def preset(name: str) -> BenchConfig:
    """The named preset (``tiny``, ``cpu`` or ``gpu``)."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}: choose one of {sorted(PRESETS)}") from None
