"""Roofline arithmetic for the built-in model: FLOPs and bytes of a prefill and of a decode step.

Counting rules (exact integers; 2 FLOPs per multiply-add):

- **Matmul FLOPs** per token: ``2 * matmul_params`` (Q, K, V, O, MLP and, where logits are
  computed, the LM head). **Attention FLOPs** for a query that attends ``L`` positions:
  ``4 * d_model * L`` per layer (``Q K^T`` and ``A V``, each ``2 * d_model * L``). Norms,
  softmax and GELU are not counted.
- **Bytes**: every weight except the embedding tables is read once per forward; of those two
  tables only the gathered rows are (``2 * d_model`` elements per token). The KV cache moves
  ``kv_bytes_per_token`` per position: a decode step reads every cached position it attends
  (the one it just wrote included, counted once); a prefill writes one per prompt token.
  Activations are not counted.
- A **decode step** of batch ``B`` at context ``L`` has every sequence attend ``L`` positions
  (``L`` = tokens in the sequence after the step). It computes logits for every sequence.
- A **prefill** of ``T`` tokens attends causally (token i attends i positions: sum = T(T+1)/2)
  and computes logits only for the last position, as a server does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from servebench.config import ModelConfig, dtype_bytes
from servebench.memory import kv_bytes_per_token, matmul_params

__all__ = [
    "StepCost",
    "Chunk",
    "step_cost",
    "decode_cost",
    "prefill_cost",
    "DecodeTerms",
    "decode_terms",
    "part_intensities",
    "ridge_point",
    "step_time_bound",
    "tpot_lower_bound",
    "critical_decode_batch",
]


@dataclass(frozen=True)
class StepCost:
    """FLOPs and bytes moved by one forward step."""

    flops: int
    bytes: int

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOPs per byte."""
        return self.flops / self.bytes


def _streamed_weight_bytes(cfg: ModelConfig, dtype: str) -> int:
    """Bytes of weights read once per forward: all but the embedding tables."""
    norms = (2 * cfg.layers + 1) * cfg.d_model
    return (matmul_params(cfg) + norms) * dtype_bytes(dtype)


def _decode_per_seq(cfg: ModelConfig, dtype: str, context: int) -> tuple[int, int]:
    """(FLOPs, bytes) each sequence of a decode step adds on top of the weights."""
    flops = 2 * matmul_params(cfg) + 4 * cfg.d_model * context * cfg.layers
    moved = 2 * cfg.d_model * dtype_bytes(dtype) + context * kv_bytes_per_token(cfg, dtype)
    return flops, moved


@dataclass(frozen=True)
class Chunk:
    """A piece of one prompt prefilled in a step: ``length`` tokens after ``start`` cached ones.

    ``last`` marks the prompt's final chunk, the only one whose last position gets logits.
    """

    start: int
    length: int
    last: bool = True


def step_cost(
    cfg: ModelConfig, dtype: str, *, decode_contexts: Sequence[int] = (), chunks: Sequence[Chunk] = ()
) -> StepCost:
    """One forward step that decodes a token for sequences at ``decode_contexts`` and prefills ``chunks``.

    The general form of :func:`decode_cost` and :func:`prefill_cost` (a mixed step of chunked
    prefill): the weights are read once; each decode row adds the per-sequence FLOPs and bytes of
    its context; a chunk of ``c`` tokens after ``s`` cached ones does ``c`` tokens of matmuls,
    attends positions ``s + 1 .. s + c``, reads the ``s`` cached positions and writes ``c`` new ones.
    """
    if not decode_contexts and not chunks:
        raise ValueError("a step needs at least one decode row or prefill chunk")
    b = dtype_bytes(dtype)
    head = cfg.d_model * cfg.vocab
    kv = kv_bytes_per_token(cfg, dtype)
    flops, moved = 0, _streamed_weight_bytes(cfg, dtype)
    for ctx in decode_contexts:
        if ctx < 1:
            raise ValueError(f"decode context must be at least 1, got {ctx}")
        f1, m1 = _decode_per_seq(cfg, dtype, ctx)
        flops += f1
        moved += m1
    for c in chunks:
        if c.length < 1 or c.start < 0:
            raise ValueError(f"chunk needs length >= 1 and start >= 0, got {c}")
        attended = c.length * (2 * c.start + c.length + 1) // 2  # sum of start+1 .. start+length
        flops += 2 * (matmul_params(cfg) - head) * c.length + 4 * cfg.d_model * attended * cfg.layers
        flops += 2 * head if c.last else 0
        moved += 2 * c.length * cfg.d_model * b + (c.start + c.length) * kv
    return StepCost(flops=flops, bytes=moved)


def decode_cost(cfg: ModelConfig, dtype: str, *, batch: int, context: int) -> StepCost:
    """One decode step: ``batch`` sequences, each attending ``context`` positions."""
    if batch < 1 or context < 1:
        raise ValueError(f"decode needs batch >= 1 and context >= 1, got {batch}, {context}")
    f1, m1 = _decode_per_seq(cfg, dtype, context)
    return StepCost(flops=batch * f1, bytes=_streamed_weight_bytes(cfg, dtype) + batch * m1)


def prefill_cost(cfg: ModelConfig, dtype: str, *, prompt_len: int) -> StepCost:
    """Prefill of one prompt of ``prompt_len`` tokens (logits for the last position only)."""
    if prompt_len < 1:
        raise ValueError(f"prefill needs prompt_len >= 1, got {prompt_len}")
    return step_cost(cfg, dtype, chunks=[Chunk(0, prompt_len, last=True)])


@dataclass(frozen=True)
class DecodeTerms:
    """A decode step's roofline time split into its terms, in seconds (see :func:`decode_terms`).

    A step of ``B`` sequences takes ``max(B * flops_per_seq_s, weights_s + B * bytes_per_seq_s)``.
    """

    weights_s: float
    bytes_per_seq_s: float
    flops_per_seq_s: float

    @property
    def per_seq_ratio(self) -> float:
        """What one more sequence adds to a memory-bound step, as a fraction of the weights' time."""
        return self.bytes_per_seq_s / self.weights_s

    def step_s(self, batch: int) -> float:
        """The roofline time of a step of ``batch`` sequences."""
        return max(batch * self.flops_per_seq_s, self.weights_s + batch * self.bytes_per_seq_s)


def decode_terms(cfg: ModelConfig, dtype: str, *, context: int, peak_flops: float, bandwidth: float) -> DecodeTerms:
    """The cost model of a decode step from the roofline: weights over bandwidth, then per sequence.

    ``weights_s`` is the streamed weight bytes over the bandwidth (paid once per step);
    ``bytes_per_seq_s`` is one sequence's embedding rows and KV cache at ``context`` over the
    bandwidth; ``flops_per_seq_s`` is one sequence's FLOPs over the peak rate.
    """
    f1, m1 = _decode_per_seq(cfg, dtype, context)
    return DecodeTerms(
        weights_s=_streamed_weight_bytes(cfg, dtype) / bandwidth,
        bytes_per_seq_s=m1 / bandwidth,
        flops_per_seq_s=f1 / peak_flops,
    )


def part_intensities(cfg: ModelConfig, dtype: str, *, batch: int, context: int) -> tuple[float, float]:
    """FLOP/B of a decode step's two parts: (weight matmuls, attention over the KV cache).

    The weight matmuls do ``2 * matmul_params`` FLOPs per sequence against weights read once, so
    their intensity grows with ``batch``; attention does ``4 * d_model * context`` FLOPs per layer
    against that sequence's own cache, so its intensity does not depend on ``batch`` at all.
    """
    w = _streamed_weight_bytes(cfg, dtype)
    weights = batch * 2 * matmul_params(cfg) / (w + batch * 2 * cfg.d_model * dtype_bytes(dtype))
    attention = 4 * cfg.d_model * context * cfg.layers / (context * kv_bytes_per_token(cfg, dtype))
    return weights, attention


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """Intensity (FLOP/byte) above which a step is compute bound: peak FLOP/s / bandwidth B/s."""
    if peak_flops <= 0 or bandwidth <= 0:
        raise ValueError("peak FLOP/s and bandwidth must be positive")
    return peak_flops / bandwidth


def step_time_bound(cost: StepCost, peak_flops: float, bandwidth: float) -> float:
    """Lower bound on a step's time: max(FLOPs / peak FLOP/s, bytes / bandwidth), in seconds."""
    return max(cost.flops / peak_flops, cost.bytes / bandwidth)


def tpot_lower_bound(cfg: ModelConfig, dtype: str, *, batch: int, context: int, bandwidth: float) -> float:
    """Memory-bound floor on TPOT: bytes one decode step moves / bandwidth (B/s), in seconds.

    Every sequence in the batch gets one token per step, so this is also each one's TPOT floor.
    """
    return decode_cost(cfg, dtype, batch=batch, context=context).bytes / bandwidth


def critical_decode_batch(
    cfg: ModelConfig, dtype: str, *, context: int, peak_flops: float, bandwidth: float
) -> int | None:
    """Smallest decode batch whose intensity reaches the ridge point (compute bound); else None.

    Intensity is ``B f / (W + B m)`` with ``f``, ``m`` the per-sequence FLOPs and bytes and ``W``
    the weight bytes: it rises with ``B`` towards ``f / m``. When ``f / m`` does not exceed the
    ridge (long contexts: the KV reads grow with ``B`` as fast as the FLOPs) no batch is
    compute bound and the answer is None. Compared exactly, in rationals.
    """
    f1, m1 = _decode_per_seq(cfg, dtype, context)
    w = _streamed_weight_bytes(cfg, dtype)
    peak, bw = Fraction(peak_flops), Fraction(bandwidth)
    if f1 * bw <= peak * m1:
        return None

    def reaches(b: int) -> bool:
        return b * f1 * bw >= peak * (w + b * m1)

    b = max(1, math.ceil(peak * w / (f1 * bw - peak * m1)))
    while b > 1 and reaches(b - 1):
        b -= 1
    while not reaches(b):
        b += 1
    return b
