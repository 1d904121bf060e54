"""Command line: ``python -m servebench --config cpu --out result.json``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from servebench.config import PRESETS, preset
from servebench.report import run_report

__all__ = ["main", "format_summary"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m servebench",
        description="Benchmark the built-in decoder: step timings against the roofline, static and "
        "continuous batching under closed-loop and Poisson load, memory, and quality checks. "
        "Writes one JSON result.",
    )
    p.add_argument(
        "--config",
        choices=sorted(PRESETS),
        default="tiny",
        help="preset to run: tiny (seconds, for tests), cpu (the report), gpu (needs CUDA)",
    )
    p.add_argument("--out", metavar="PATH", help="write the JSON result here (default: stdout)")
    p.add_argument("--device", help="override the preset's device (cpu, cuda)")
    p.add_argument("--dtype", choices=["fp32", "bf16"], help="override the preset's dtype")
    p.add_argument("--full-traces", action="store_true", help="include every token timestamp in the result")
    p.add_argument("--quiet", action="store_true", help="print no progress or summary on stderr")
    return p


def _ms(x: Any) -> str:
    return "-" if x is None else f"{1e3 * float(x):.2f}"


def format_summary(result: dict[str, Any]) -> str:
    """A few lines a person reads: one per serving run, then memory and quality."""
    lines = [f"{result['config']['name']} on {result['environment']['device']} ({result.get('elapsed_s', 0.0):.1f} s)"]
    lines.append(f"{'run':<28}{'req/s':>8}{'tok/s':>9}{'TTFT p50':>10}{'p99':>8}{'TPOT p50':>10}{'p99':>8}")
    for r in result["runs"]:
        m = r["metrics"]
        what = f"{r['mode']} {r['workload']} " + (
            f"c={r['concurrency']}" if r["workload"] == "closed" else f"rate={r['rate']:.3g}"
        )
        lines.append(
            f"{what:<28}{m['request_throughput']:>8.1f}{m['token_throughput']:>9.0f}"
            f"{_ms(m['ttft']['p50']):>10}{_ms(m['ttft']['p99']):>8}"
            f"{_ms(m['tpot']['p50']):>10}{_ms(m['tpot']['p99']):>8}"
        )
    mem = result["memory"]
    lines.append(f"weights {mem['weight_bytes'] / 1e6:.1f} MB, KV {mem['kv_bytes_per_token']} B/token")
    q = result["quality"]
    lines.append(
        f"batch invariance: max |dlogit| {q['batch_invariance']['max_abs_logit_diff']:.2e}; "
        f"fp32/bf16 top-1 match {q['fp32_vs_bf16']['match_rate']:.3f}"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    cfg = preset(args.config)
    if args.device:
        cfg = cfg.replace(device=args.device)
    if args.dtype:
        cfg = cfg.replace(dtype=args.dtype)

    def log(msg: str) -> None:
        if not args.quiet:
            print(f"[bench] {msg}", file=sys.stderr, flush=True)

    try:
        result = run_report(cfg, full_traces=args.full_traces, log=log)
    except RuntimeError as exc:
        print(f"python -m servebench: {exc}", file=sys.stderr)
        return 2
    text = json.dumps(result, indent=1)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    else:
        print(text)
    if not args.quiet:
        print(format_summary(result), file=sys.stderr)
    return 0
