"""The benchmark harness of the 8.1 Inference Performance Model module.

A decoder-only transformer with a per-slot KV cache (:class:`DecoderLM`), the interface any
served model implements (:class:`ServedModel`), a server with static and continuous batching
(:func:`serve`), closed- and open-loop load (:class:`ClosedLoop`, :class:`OpenLoop`), metrics as
pure functions of a trace (:mod:`servebench.metrics`, :func:`summarize`), analytic memory
and roofline arithmetic, quality checks, and one whole report run (:func:`run_report`, also
``python -m servebench``).
"""

from servebench import metrics, roofline
from servebench.config import PRESETS, BenchConfig, ModelConfig, dtype_bytes, preset
from servebench.memory import (
    kv_bytes_per_token,
    kv_cache_bytes,
    matmul_params,
    max_sequences,
    param_count,
    peak_bytes,
    reset_peak,
    weight_bytes,
)
from servebench.model import DecoderLM, KVCache
from servebench.protocol import LogitsModel, ServedModel
from servebench.quality import Agreement, Invariance, batch_invariance, dtype_agreement, generate
from servebench.report import run_report
from servebench.roofline import (
    Chunk,
    DecodeTerms,
    StepCost,
    critical_decode_batch,
    decode_cost,
    decode_terms,
    part_intensities,
    prefill_cost,
    ridge_point,
    step_cost,
    step_time_bound,
    tpot_lower_bound,
)
from servebench.server import Mode, ServeStats, serve
from servebench.simulate import CostModel, Linear, LinearCost, RooflineCost, SimClock, simulate
from servebench.summary import BOOK, CONVENTIONS, Convention, distribution, request_rows, summarize
from servebench.trace import RequestTrace, trace_from_dicts, trace_to_dicts
from servebench.workload import ClosedLoop, Lengths, OpenLoop, RequestSpec, Workload, make_requests

__all__ = [
    "metrics",
    "roofline",
    "PRESETS",
    "BenchConfig",
    "ModelConfig",
    "dtype_bytes",
    "preset",
    "kv_bytes_per_token",
    "kv_cache_bytes",
    "matmul_params",
    "max_sequences",
    "param_count",
    "peak_bytes",
    "reset_peak",
    "weight_bytes",
    "DecoderLM",
    "KVCache",
    "LogitsModel",
    "ServedModel",
    "Agreement",
    "Invariance",
    "batch_invariance",
    "dtype_agreement",
    "generate",
    "run_report",
    "Chunk",
    "DecodeTerms",
    "StepCost",
    "critical_decode_batch",
    "decode_cost",
    "decode_terms",
    "part_intensities",
    "step_cost",
    "prefill_cost",
    "ridge_point",
    "step_time_bound",
    "tpot_lower_bound",
    "Mode",
    "ServeStats",
    "serve",
    "CostModel",
    "Linear",
    "LinearCost",
    "RooflineCost",
    "SimClock",
    "simulate",
    "BOOK",
    "CONVENTIONS",
    "Convention",
    "distribution",
    "request_rows",
    "summarize",
    "RequestTrace",
    "trace_from_dicts",
    "trace_to_dicts",
    "ClosedLoop",
    "Lengths",
    "OpenLoop",
    "RequestSpec",
    "Workload",
    "make_requests",
]
