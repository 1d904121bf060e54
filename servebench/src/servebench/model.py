"""A decoder-only transformer in plain torch with a per-slot KV cache.

Pre-norm blocks (RMSNorm, multi-head or grouped-query attention, GELU MLP), learned absolute
positions, an untied LM head, no biases. Weights are random, drawn in fp32 from a seeded
generator and then cast, so the fp32 and bf16 models of one config hold the same weights up
to bf16 rounding.

The KV cache is preallocated: keys and values of shape
``(layers, max_slots, kv_heads, max_seq, head_dim)``. A request owns one slot from prefill to
release, which is what lets the continuous-batching server insert and evict requests between
decode steps. Decoding gathers the active slots' caches up to the longest context and masks
each row beyond its own length.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from servebench.config import DType, ModelConfig, dtype_bytes

__all__ = ["DecoderLM", "KVCache", "torch_dtype"]


def torch_dtype(dtype: str) -> torch.dtype:
    """The torch dtype the built-in model runs in, by name (``fp32`` or ``bf16``).

    ``fp8`` is a storage size for the memory arithmetic only (:func:`~servebench.config.dtype_bytes`):
    the model does not compute in it, so asking for it is an error, not a silent bf16.
    """
    dtype_bytes(dtype)  # validates the name
    runs_in = {"fp32": torch.float32, "bf16": torch.bfloat16}
    if dtype not in runs_in:
        raise ValueError(f"the built-in model runs in 'fp32' or 'bf16', not {dtype!r}")
    return runs_in[dtype]


class KVCache:
    """Preallocated keys and values for ``slots`` requests of up to ``max_seq`` tokens each."""

    def __init__(self, cfg: ModelConfig, slots: int, dtype: torch.dtype, device: torch.device) -> None:
        shape = (cfg.layers, slots, cfg.n_kv_heads, cfg.max_seq, cfg.head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.lengths = [0] * slots

    @property
    def nbytes(self) -> int:
        """Bytes the two cache tensors occupy."""
        return self.k.nbytes + self.v.nbytes


@dataclass
class _Layer:
    norm1: torch.Tensor
    wq: torch.Tensor
    wk: torch.Tensor
    wv: torch.Tensor
    wo: torch.Tensor
    norm2: torch.Tensor
    w_up: torch.Tensor
    w_down: torch.Tensor

    def tensors(self) -> list[torch.Tensor]:
        return [self.norm1, self.wq, self.wk, self.wv, self.wo, self.norm2, self.w_up, self.w_down]


class DecoderLM:
    """The built-in model; implements :class:`~servebench.protocol.LogitsModel`."""

    def __init__(self, cfg: ModelConfig, *, dtype: DType = "fp32", device: str = "cpu", max_slots: int = 1) -> None:
        if max_slots < 1:
            raise ValueError(f"max_slots must be positive, got {max_slots}")
        self.cfg = cfg
        self.dtype_name: DType = dtype
        self.dtype = torch_dtype(dtype)
        self.device = torch.device(device)
        gen = torch.Generator().manual_seed(cfg.seed)
        d, kv, ff = cfg.d_model, cfg.kv_dim, cfg.d_ff

        def draw(*shape: int, std: float) -> torch.Tensor:
            t = torch.randn(*shape, generator=gen, dtype=torch.float32) * std
            return t.to(device=self.device, dtype=self.dtype)

        def ones(n: int) -> torch.Tensor:
            return torch.ones(n, dtype=self.dtype, device=self.device)

        self.tok_emb = draw(cfg.vocab, d, std=1.0)
        self.pos_emb = draw(cfg.max_seq, d, std=0.5)
        self.layers = [
            _Layer(
                norm1=ones(d),
                wq=draw(d, d, std=d**-0.5),
                wk=draw(d, kv, std=d**-0.5),
                wv=draw(d, kv, std=d**-0.5),
                wo=draw(d, d, std=d**-0.5),
                norm2=ones(d),
                w_up=draw(d, ff, std=d**-0.5),
                w_down=draw(ff, d, std=ff**-0.5),
            )
            for _ in range(cfg.layers)
        ]
        self.final_norm = ones(d)
        # Logits with a spread of a few units (logit_std = 3 by default).
        self.lm_head = draw(d, cfg.vocab, std=cfg.logit_std * d**-0.5)
        self.cache = KVCache(cfg, max_slots, self.dtype, self.device)
        self._last = [0] * max_slots
        self._scale = 1.0 / math.sqrt(cfg.head_dim)

    # -- sizes ---------------------------------------------------------------------------
    @property
    def max_slots(self) -> int:
        return len(self.cache.lengths)

    @property
    def max_seq(self) -> int:
        return self.cfg.max_seq

    def weights(self) -> list[torch.Tensor]:
        """Every weight tensor of the model."""
        out = [self.tok_emb, self.pos_emb, self.final_norm, self.lm_head]
        for layer in self.layers:
            out.extend(layer.tensors())
        return out

    def weight_bytes(self) -> int:
        return sum(t.nbytes for t in self.weights())

    def kv_bytes_per_token(self) -> int:
        c = self.cfg
        return 2 * c.layers * c.n_kv_heads * c.head_dim * self.cache.k.element_size()

    def lengths(self) -> list[int]:
        """Tokens held in each slot."""
        return list(self.cache.lengths)

    # -- the served-model interface ------------------------------------------------------
    def prefill(self, slot: int, tokens: Sequence[int]) -> int:
        return int(self.prefill_logits(slot, tokens).argmax().item())

    def decode_step(self, slots: Sequence[int]) -> list[int]:
        return [int(t) for t in self.decode_logits(slots).argmax(dim=-1).tolist()]

    def release(self, slot: int) -> None:
        self.cache.lengths[slot] = 0

    def reset(self) -> None:
        """Release every slot."""
        for slot in range(self.max_slots):
            self.release(slot)

    # -- the logits interface ------------------------------------------------------------
    @torch.inference_mode()
    def prefill_logits(self, slot: int, tokens: Sequence[int]) -> torch.Tensor:
        if not 0 <= slot < self.max_slots:
            raise IndexError(f"slot {slot} out of range 0..{self.max_slots - 1}")
        if self.cache.lengths[slot]:
            raise RuntimeError(f"slot {slot} holds a request; release it before prefilling")
        if not 1 <= len(tokens) <= self.max_seq:
            raise ValueError(f"prompt of {len(tokens)} tokens; need 1..{self.max_seq}")
        logits = self._forward(tokens, slot=slot, last_only=True)[0]
        self.cache.lengths[slot] = len(tokens)
        self._last[slot] = int(logits.argmax().item())
        return logits

    @torch.inference_mode()
    def forward_full(self, tokens: Sequence[int]) -> torch.Tensor:
        if not 1 <= len(tokens) <= self.max_seq:
            raise ValueError(f"sequence of {len(tokens)} tokens; need 1..{self.max_seq}")
        return self._forward(tokens, slot=None, last_only=False)

    @torch.inference_mode()
    def decode_logits(self, slots: Sequence[int]) -> torch.Tensor:
        if not slots:
            raise ValueError("decode_step needs at least one slot")
        if len(set(slots)) != len(slots):
            raise ValueError(f"slots repeat: {list(slots)}")
        pos = [self.cache.lengths[s] for s in slots]
        for s, p in zip(slots, pos, strict=True):
            if p == 0:
                raise RuntimeError(f"slot {s} is empty; prefill it first")
            if p >= self.max_seq:
                raise RuntimeError(f"slot {s} is full ({p} tokens = max_seq)")
        logits = self._decode(list(slots), pos)
        new = logits.argmax(dim=-1).tolist()
        for s, t in zip(slots, new, strict=True):
            self.cache.lengths[s] += 1
            self._last[s] = int(t)
        return logits

    # -- the arithmetic ------------------------------------------------------------------
    def _norm(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (self.cfg.d_model,), w, eps=1e-6)

    def _mlp(self, x: torch.Tensor, layer: _Layer) -> torch.Tensor:
        h = self._norm(x, layer.norm2)
        return x + F.gelu(h @ layer.w_up) @ layer.w_down

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """q: (..., Hkv, g, T, Dh); k, v: (..., Hkv, L, Dh); keep broadcasts to (..., Hkv, g, T, L)."""
        att = (q @ k.unsqueeze(-3).transpose(-1, -2)) * self._scale
        att = att.masked_fill(~keep, float("-inf")).softmax(dim=-1, dtype=torch.float32)
        return att.to(self.dtype) @ v.unsqueeze(-3)

    def _forward(self, tokens: Sequence[int], slot: int | None, last_only: bool) -> torch.Tensor:
        c = self.cfg
        n, hkv, g, dh = len(tokens), c.n_kv_heads, c.heads // c.n_kv_heads, c.head_dim
        ids = torch.tensor(list(tokens), dtype=torch.long, device=self.device)
        x = self.tok_emb[ids] + self.pos_emb[:n]
        ar = torch.arange(n, device=self.device)
        causal = ar[None, :] <= ar[:, None]  # (T, L): key position <= query position
        for i, layer in enumerate(self.layers):
            h = self._norm(x, layer.norm1)
            q = (h @ layer.wq).view(n, hkv, g, dh).permute(1, 2, 0, 3)
            k = (h @ layer.wk).view(n, hkv, dh).transpose(0, 1)
            v = (h @ layer.wv).view(n, hkv, dh).transpose(0, 1)
            if slot is not None:
                self.cache.k[i, slot, :, :n] = k
                self.cache.v[i, slot, :, :n] = v
            o = self._attend(q, k, v, causal).permute(2, 0, 1, 3).reshape(n, c.d_model)
            x = self._mlp(x + o @ layer.wo, layer)
        if last_only:
            x = x[-1:]
        return self._norm(x, self.final_norm) @ self.lm_head

    def _decode(self, slots: list[int], pos: list[int]) -> torch.Tensor:
        c = self.cfg
        b, hkv, g, dh = len(slots), c.n_kv_heads, c.heads // c.n_kv_heads, c.head_dim
        idx = torch.tensor(slots, dtype=torch.long, device=self.device)
        pos_t = torch.tensor(pos, dtype=torch.long, device=self.device)
        last = torch.tensor([self._last[s] for s in slots], dtype=torch.long, device=self.device)
        x = self.tok_emb[last] + self.pos_emb[pos_t]
        span = max(pos) + 1
        keep = torch.arange(span, device=self.device)[None, :] <= pos_t[:, None]  # (B, L)
        keep = keep[:, None, None, None, :]
        for i, layer in enumerate(self.layers):
            h = self._norm(x, layer.norm1)
            q = (h @ layer.wq).view(b, hkv, g, 1, dh)
            k_new = (h @ layer.wk).view(b, hkv, dh)
            v_new = (h @ layer.wv).view(b, hkv, dh)
            k_layer, v_layer = self.cache.k[i], self.cache.v[i]
            k_layer[idx, :, pos_t] = k_new
            v_layer[idx, :, pos_t] = v_new
            k = k_layer[:, :, :span].index_select(0, idx)
            v = v_layer[:, :, :span].index_select(0, idx)
            o = self._attend(q, k, v, keep).reshape(b, c.d_model)
            x = self._mlp(x + o @ layer.wo, layer)
        return self._norm(x, self.final_norm) @ self.lm_head
