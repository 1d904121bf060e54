"""The interface a served model implements, so a reader can benchmark their own model.

The server owns the scheduling; the model owns its weights and a KV cache of ``max_slots``
slots, each holding one request's keys and values. A slot is filled by :meth:`prefill`, grown
one token at a time by :meth:`decode_step`, and emptied by :meth:`release`. Decoding is greedy:
the model remembers each slot's last token and feeds it back.

Token ids returned must be plain Python ints, and the calls must return only when the work is
done (on CUDA, reading the tokens to the host synchronises), so a timestamp taken right after a
call is the time the tokens became available.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import torch

__all__ = ["ServedModel", "LogitsModel"]


@runtime_checkable
class ServedModel(Protocol):
    """A model the server can drive: per-slot prefill, batched greedy decode."""

    @property
    def max_slots(self) -> int:
        """How many requests the KV cache can hold at once."""
        ...

    @property
    def max_seq(self) -> int:
        """Most tokens (prompt plus output) one slot can hold."""
        ...

    def prefill(self, slot: int, tokens: Sequence[int]) -> int:
        """Fill ``slot`` with the prompt ``tokens``; return the first output token (greedy)."""
        ...

    def decode_step(self, slots: Sequence[int]) -> list[int]:
        """Advance every slot in ``slots`` by one token; return the new tokens in that order."""
        ...

    def release(self, slot: int) -> None:
        """Empty ``slot`` so a new request can be prefilled into it."""
        ...

    def weight_bytes(self) -> int:
        """Bytes of all weights as stored on the device."""
        ...

    def kv_bytes_per_token(self) -> int:
        """Bytes of KV cache one token of context occupies (all layers, keys and values)."""
        ...


@runtime_checkable
class LogitsModel(ServedModel, Protocol):
    """A served model that also exposes its logits, for the quality checks."""

    def prefill_logits(self, slot: int, tokens: Sequence[int]) -> torch.Tensor:
        """Like :meth:`prefill`, but return the last position's logits, shape ``(vocab,)``."""
        ...

    def decode_logits(self, slots: Sequence[int]) -> torch.Tensor:
        """Like :meth:`decode_step`, but return the logits, shape ``(len(slots), vocab)``."""
        ...

    def forward_full(self, tokens: Sequence[int]) -> torch.Tensor:
        """Logits at every position of ``tokens`` without any cache, shape ``(len, vocab)``."""
        ...
