"""A decode step with static shapes, for timing on a GPU with CUDA graphs.

:class:`DecoderLM` gathers each step's slots and slices the cache to the longest context, so its
shapes change from step to step; on a GPU every step is then dozens of small kernel launches
whose overhead, not memory traffic, sets the time. :class:`StaticDecode` fixes the batch ``B``
and the context ``L``: every sequence attends exactly ``L`` cached positions, the new key and
value are written in place at position ``L - 1``, and every tensor keeps its address, so one
step can be captured once as a CUDA graph and replayed. Its FLOPs and bytes are those of
:func:`servebench.roofline.decode_cost` at ``batch=B, context=L``, so a replayed step's time
gives an achieved memory bandwidth.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from servebench.model import DecoderLM

__all__ = ["StaticDecode"]


class StaticDecode:
    """One decode step of ``model`` for ``batch`` sequences at context ``context``, static shapes."""

    def __init__(self, model: DecoderLM, *, batch: int, context: int) -> None:
        c = model.cfg
        if not 1 <= context <= c.max_seq:
            raise ValueError(f"context {context} outside 1..{c.max_seq}")
        self.model, self.b, self.l = model, batch, context
        dev, dt = model.device, model.dtype
        gen = torch.Generator().manual_seed(1)
        shape = (c.layers, batch, c.n_kv_heads, context, c.head_dim)
        self.k = (torch.randn(shape, generator=gen) * 0.5).to(device=dev, dtype=dt)
        self.v = (torch.randn(shape, generator=gen) * 0.5).to(device=dev, dtype=dt)
        self.tokens = torch.randint(0, c.vocab, (batch,), generator=gen).to(dev)
        self.pos = torch.full((batch,), context - 1, dtype=torch.long, device=dev)
        self.logits = torch.empty(batch, c.vocab, device=dev, dtype=dt)
        self.graph: torch.cuda.CUDAGraph | None = None

    @torch.inference_mode()
    def step(self) -> torch.Tensor:
        """Run one step eagerly; returns (and keeps in ``self.logits``) the logits."""
        m, c = self.model, self.model.cfg
        b, hkv, g, dh = self.b, c.n_kv_heads, c.heads // c.n_kv_heads, c.head_dim
        x = m.tok_emb[self.tokens] + m.pos_emb[self.pos]
        for i, layer in enumerate(m.layers):
            h = F.rms_norm(x, (c.d_model,), layer.norm1, eps=1e-6)
            q = (h @ layer.wq).view(b, hkv, g, dh)
            self.k[i, :, :, self.l - 1] = (h @ layer.wk).view(b, hkv, dh)
            self.v[i, :, :, self.l - 1] = (h @ layer.wv).view(b, hkv, dh)
            att = (q @ self.k[i].transpose(-1, -2)) * (dh**-0.5)  # (b, hkv, g, L)
            o = att.softmax(dim=-1, dtype=torch.float32).to(m.dtype) @ self.v[i]
            x = x + o.reshape(b, c.d_model) @ layer.wo
            h = F.rms_norm(x, (c.d_model,), layer.norm2, eps=1e-6)
            x = x + F.gelu(h @ layer.w_up) @ layer.w_down
        self.logits.copy_(F.rms_norm(x, (c.d_model,), m.final_norm, eps=1e-6) @ m.lm_head)
        return self.logits

    def capture(self, warmup: int = 3) -> None:
        """Capture one step as a CUDA graph (CUDA only)."""
        if self.model.device.type != "cuda":
            raise RuntimeError("CUDA graphs need a CUDA device")
        stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]  # torch 2.13 leaves Stream.__init__ untyped
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(warmup):
                self.step()
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.step()

    def replay(self) -> None:
        """Replay the captured step (call :meth:`capture` first)."""
        if self.graph is None:
            raise RuntimeError("capture() first")
        self.graph.replay()
