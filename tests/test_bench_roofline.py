"""Roofline and memory arithmetic of servebench, checked by hand on a small config."""

from __future__ import annotations

import pytest

from servebench import (
    ModelConfig,
    critical_decode_batch,
    decode_cost,
    kv_bytes_per_token,
    matmul_params,
    max_sequences,
    param_count,
    prefill_cost,
    ridge_point,
    step_time_bound,
    tpot_lower_bound,
    weight_bytes,
)

# d = 8, 2 heads of 4, kv_dim 8, d_ff 32, 2 layers, vocab 10, max_seq 16
CFG = ModelConfig(layers=2, d_model=8, heads=2, vocab=10, max_seq=16)
# per layer: Q 64 + K 64 + V 64 + O 64 + up 256 + down 256 = 768; 2 layers = 1536; head 80
MM = 1536 + 80
# embeddings (10 + 16) * 8 = 208; norms (2 * 2 + 1) * 8 = 40
PARAMS = MM + 208 + 40
KVB_FP32 = 2 * 2 * 2 * 4 * 4  # 2 (K, V) * layers * kv_heads * head_dim * 4 bytes = 128
STREAMED = (MM + 40) * 4  # weights read per step: all but the embedding tables


def test_parameter_counts_by_hand() -> None:
    assert matmul_params(CFG) == MM == 1616
    assert param_count(CFG) == PARAMS == 1864
    assert weight_bytes(CFG, "bf16") == 2 * PARAMS
    assert kv_bytes_per_token(CFG, "fp32") == KVB_FP32 == 128
    assert kv_bytes_per_token(ModelConfig(layers=2, d_model=8, heads=2, kv_heads=1), "bf16") == 32


def test_decode_cost_by_hand() -> None:
    c = decode_cost(CFG, "fp32", batch=3, context=5)
    # per sequence: 2 * 1616 + 4 * 8 * 5 * 2 = 3232 + 320 = 3552 FLOPs
    assert c.flops == 3 * 3552
    # weights 1656 * 4 = 6624; per sequence 2 * 8 * 4 = 64 embedding bytes + 5 * 128 KV bytes
    assert c.bytes == STREAMED + 3 * (64 + 5 * KVB_FP32) == 6624 + 3 * 704
    assert c.intensity == pytest.approx(10656 / 8736)


def test_prefill_cost_by_hand() -> None:
    c = prefill_cost(CFG, "fp32", prompt_len=4)
    # matmuls without the head: 2 * 1536 * 4; head once: 2 * 80; attention 2 * 8 * 4 * 5 * 2 layers
    assert c.flops == 12288 + 160 + 640
    assert c.bytes == STREAMED + 2 * 4 * 8 * 4 + 4 * KVB_FP32
    one = prefill_cost(CFG, "fp32", prompt_len=1)
    assert one.flops == decode_cost(CFG, "fp32", batch=1, context=1).flops


def test_ridge_and_bounds() -> None:
    assert ridge_point(1000.0, 100.0) == 10.0
    c = decode_cost(CFG, "fp32", batch=1, context=5)
    assert step_time_bound(c, peak_flops=1e6, bandwidth=1e3) == pytest.approx(c.bytes / 1e3)
    assert step_time_bound(c, peak_flops=1.0, bandwidth=1e9) == pytest.approx(c.flops)
    assert tpot_lower_bound(CFG, "fp32", batch=1, context=5, bandwidth=1e3) == pytest.approx(c.bytes / 1e3)
    with pytest.raises(ValueError):
        ridge_point(0.0, 1.0)


def test_critical_decode_batch_is_the_smallest_compute_bound_batch() -> None:
    ctx, peak, bw = 5, 2000.0, 1000.0  # ridge 2 FLOP/byte
    b = critical_decode_batch(CFG, "fp32", context=ctx, peak_flops=peak, bandwidth=bw)
    assert b is not None
    # B * 3552 >= 2 * (6624 + 704 B)  <=>  B >= 13248 / 2144 = 6.18
    assert b == 7
    assert decode_cost(CFG, "fp32", batch=b, context=ctx).intensity >= 2
    assert decode_cost(CFG, "fp32", batch=b - 1, context=ctx).intensity < 2
    # Asymptote 3552 / 704 = 5.05 FLOP/byte: a ridge above it is never reached.
    assert critical_decode_batch(CFG, "fp32", context=ctx, peak_flops=6000.0, bandwidth=1000.0) is None
    # Exactly at the ridge counts as reaching it: intensity at B = 7 is 24864 / 11552.
    assert critical_decode_batch(CFG, "fp32", context=ctx, peak_flops=24864.0, bandwidth=11552.0) == 7
    assert critical_decode_batch(CFG, "fp32", context=ctx, peak_flops=1.0, bandwidth=1000.0) == 1


def test_max_sequences() -> None:
    mem = weight_bytes(CFG, "fp32") + 10 * 16 * KVB_FP32 + 5
    assert max_sequences(CFG, "fp32", memory_bytes=mem, seq_len=16) == 10
    assert max_sequences(CFG, "fp32", memory_bytes=100, seq_len=16) == 0


def test_an_fp8_cache_is_one_byte_an_element_and_the_model_refuses_to_run_in_fp8():
    from servebench.config import ModelConfig, dtype_bytes
    from servebench.memory import kv_bytes_per_token
    from servebench.model import torch_dtype

    cfg = ModelConfig(layers=32, d_model=4096, heads=32, kv_heads=8)
    assert dtype_bytes("fp8") == 1
    assert 2 * kv_bytes_per_token(cfg, "fp8") == kv_bytes_per_token(cfg, "bf16") == 131_072
    with pytest.raises(ValueError, match="runs in 'fp32' or 'bf16', not 'fp8'"):
        torch_dtype("fp8")
    with pytest.raises(ValueError, match="unknown dtype 'fp16'"):
        dtype_bytes("fp16")
