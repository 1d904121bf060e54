"""Memory: analytic weight and KV-cache bytes, and the measured peak where the device reports it.

The analytic counts follow the built-in model exactly (:class:`~servebench.model.DecoderLM`):
token and position embeddings, per layer two RMSNorm weights, Q, K, V, O projections and a
two-matrix MLP, a final norm and an untied LM head, no biases.
"""

from __future__ import annotations

import torch

from servebench.config import ModelConfig, dtype_bytes

__all__ = [
    "param_count",
    "matmul_params",
    "weight_bytes",
    "kv_bytes_per_token",
    "kv_cache_bytes",
    "max_sequences",
    "reset_peak",
    "peak_bytes",
]


def matmul_params(cfg: ModelConfig) -> int:
    """Parameters in weight matrices every token multiplies by: Q, K, V, O, MLP, LM head."""
    d, kv, ff = cfg.d_model, cfg.kv_dim, cfg.d_ff
    per_layer = d * d + 2 * d * kv + d * d + 2 * d * ff
    return cfg.layers * per_layer + d * cfg.vocab


def param_count(cfg: ModelConfig) -> int:
    """All parameters: :func:`matmul_params` plus embeddings (vocab and positions) and norms."""
    norms = (2 * cfg.layers + 1) * cfg.d_model
    return matmul_params(cfg) + (cfg.vocab + cfg.max_seq) * cfg.d_model + norms


def weight_bytes(cfg: ModelConfig, dtype: str) -> int:
    """Bytes of all weights: ``param_count * bytes_per_elem``."""
    return param_count(cfg) * dtype_bytes(dtype)


def kv_bytes_per_token(cfg: ModelConfig, dtype: str) -> int:
    """KV-cache bytes per token of context: ``2 * layers * kv_heads * head_dim * bytes_per_elem``.

    The 2 is keys and values.
    """
    return 2 * cfg.layers * cfg.n_kv_heads * cfg.head_dim * dtype_bytes(dtype)


def kv_cache_bytes(cfg: ModelConfig, dtype: str, *, slots: int, tokens: int | None = None) -> int:
    """Bytes of a cache of ``slots`` sequences of ``tokens`` each (default ``max_seq``, as allocated)."""
    n = cfg.max_seq if tokens is None else tokens
    return slots * n * kv_bytes_per_token(cfg, dtype)


def max_sequences(cfg: ModelConfig, dtype: str, *, memory_bytes: int, seq_len: int) -> int:
    """How many sequences of ``seq_len`` tokens fit in ``memory_bytes`` after the weights (floor)."""
    free = memory_bytes - weight_bytes(cfg, dtype)
    return max(0, free // (seq_len * kv_bytes_per_token(cfg, dtype)))


def reset_peak(device: str | torch.device) -> None:
    """Start a new peak-memory window on a CUDA device; nothing elsewhere."""
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)


def peak_bytes(device: str | torch.device) -> int | None:
    """Peak bytes allocated by torch since :func:`reset_peak`, or ``None`` where not reported.

    Only CUDA reports it (``torch.cuda.max_memory_allocated``). On a CPU torch keeps no such
    count, and a process-level figure (RSS, tracemalloc) does not measure tensors, so the answer
    is ``None`` rather than a number that means something else.
    """
    dev = torch.device(device)
    if dev.type == "cuda":
        return int(torch.cuda.max_memory_allocated(dev))
    return None
