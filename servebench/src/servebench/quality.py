"""Quality checks a faster serving set-up must pass: batch invariance and dtype agreement.

- **Batch invariance**: the logits of one request served alone, and served in a batch with
  others (different prompts, different lengths), differ only by floating-point reordering.
  Reported as the largest absolute logit difference over the prefill and every decode step,
  and whether the greedy tokens are identical.
- **fp32 vs bf16 agreement**: the reference (fp32) model generates greedily; both models then
  score that same token sequence (teacher forcing), and the top-1 token match rate over the
  generated positions is reported. Teacher forcing keeps one early mismatch from making every
  later position differ; the free-running comparison is reported separately as the mean
  length of the common prefix of the two greedy outputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from servebench.protocol import LogitsModel

__all__ = ["Invariance", "Agreement", "generate", "batch_invariance", "dtype_agreement"]


@dataclass(frozen=True)
class Invariance:
    """Result of :func:`batch_invariance`."""

    max_abs_logit_diff: float
    tokens_equal: bool
    batch: int
    steps: int


@dataclass(frozen=True)
class Agreement:
    """Result of :func:`dtype_agreement`."""

    match_rate: float
    positions: int
    max_abs_logit_diff: float
    mean_common_prefix: float
    steps: int


def generate(model: LogitsModel, prompt: Sequence[int], steps: int, *, slot: int = 0) -> list[int]:
    """Greedy output of ``steps`` tokens for ``prompt`` in ``slot`` (released afterwards)."""
    out = [int(model.prefill_logits(slot, prompt).argmax().item())]
    for _ in range(steps - 1):
        out.append(int(model.decode_logits([slot])[0].argmax().item()))
    model.release(slot)
    return out


def batch_invariance(
    model: LogitsModel, prompt: Sequence[int], others: Sequence[Sequence[int]], steps: int
) -> Invariance:
    """Serve ``prompt`` alone, then in the last slot of a batch after ``others``; compare.

    Needs ``len(others) + 1`` empty slots (slots 0..len(others)); they are released on return.
    """
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    k = len(others)
    if k + 1 > model.max_slots:
        raise ValueError(f"{k + 1} requests need {k + 1} slots; the model has {model.max_slots}")
    alone = [model.prefill_logits(0, prompt).float()]
    for _ in range(steps - 1):
        alone.append(model.decode_logits([0])[0].float())
    model.release(0)
    for i, other in enumerate(others):
        model.prefill_logits(i, other)
    batched = [model.prefill_logits(k, prompt).float()]
    for _ in range(steps - 1):
        batched.append(model.decode_logits(list(range(k + 1)))[k].float())
    for i in range(k + 1):
        model.release(i)
    diff = max(float((a - b).abs().max().item()) for a, b in zip(alone, batched, strict=True))
    same = all(int(a.argmax()) == int(b.argmax()) for a, b in zip(alone, batched, strict=True))
    return Invariance(max_abs_logit_diff=diff, tokens_equal=same, batch=k + 1, steps=steps)


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def dtype_agreement(
    reference: LogitsModel, test: LogitsModel, prompts: Sequence[Sequence[int]], steps: int
) -> Agreement:
    """Top-1 agreement of ``test`` with ``reference`` over ``steps`` greedy tokens per prompt."""
    if steps < 1 or not prompts:
        raise ValueError("need at least one prompt and one step")
    matches = positions = 0
    diff = 0.0
    prefix = 0
    for prompt in prompts:
        ref_out = generate(reference, prompt, steps)
        seq = list(prompt) + ref_out[:-1]
        lo = len(prompt) - 1  # logits at position i predict token i + 1
        ref_logits = reference.forward_full(seq)[lo:].float()
        test_logits = test.forward_full(seq)[lo:].float()
        matches += int((ref_logits.argmax(-1) == test_logits.argmax(-1)).sum().item())
        positions += ref_logits.shape[0]
        diff = max(diff, float((ref_logits - test_logits).abs().max().item()))
        prefix += _common_prefix(ref_out, generate(test, prompt, steps))
    return Agreement(
        match_rate=matches / positions,
        positions=positions,
        max_abs_logit_diff=diff,
        mean_common_prefix=prefix / len(prompts),
        steps=steps,
    )
