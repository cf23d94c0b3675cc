"""A CUDA-graph engine for serve_llama: a Llama-shaped decoder whose steps replay from CUDA graphs, as vLLM serves.

vLLM's default serving captures its forward passes as CUDA graphs; a process under ncu pays for every eager kernel
launch (~70-100 us on our H200 with ncu 2025.3.1, attached or not) but, once the last attach used
`--graph-profiling graph`, almost nothing per graph-replayed kernel (tests/data/h200_capture/launch_cost*.log).
The transformers engine (serve_llama.LlamaEngine) launches every kernel eagerly, so it cannot show what a
graph-serving deployment sees under ncu; this engine can.

The model: random init (torch.manual_seed(0)), bf16, pre-norm decoder layers (RMSNorm, fused QKV GEMM, grouped-query
SDPA over a static KV cache, output GEMM, SwiGLU MLP), final norm, LM head, greedy argmax; no rotary embedding
(position does not change the kernels or their cost). Per batch size 1..max_batch one prefill graph (at
`graph_prompt_len`) and one decode graph; the decode graph also feeds its token back and advances the position,
so a step launches no eager kernel; `.tolist()` of the tokens is the host sync a streaming server makes. Other
prompt lengths run the same code eagerly. torch is imported only when the engine is built (GPU machine).

On the H200 (tests/data/h200_capture/overhead3/engine_smoke.log): 4 x (128 + 32) tokens in 45 ms from graphs vs
264 ms eagerly; the first generated tokens agree between graph and eager runs, later ones differ, and also
between two graph runs of the same prompt (the cause was not established; near-tied logits of a random model
make greedy decoding sensitive to any reduction-order change). The engine is a load generator for the capture
benchmark, not a reference model: nothing reads its tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class GraphLlamaEngine:
    """Llama-shaped decoder, prefill and decode replayed from CUDA graphs per batch size."""

    def __init__(self, layers: int = 16, hidden: int = 2048, intermediate: int = 5632, heads: int = 16,
                 kv_heads: int = 8, vocab: int = 32000, max_batch: int = 8, graph_prompt_len: int = 128,
                 max_len: int = 640, device: str = "cuda") -> None:
        import torch

        self.torch = torch
        self.dev = torch.device(device)
        torch.zeros(1, device=self.dev)  # first CUDA call: under `ncu --mode launch` this blocks until an attach
        torch.manual_seed(0)
        self.heads, self.kv_heads, self.hd = heads, kv_heads, hidden // heads
        self.vocab, self.max_batch, self.max_len, self.prompt_len = vocab, max_batch, max_len, graph_prompt_len
        bf = dict(device=self.dev, dtype=torch.bfloat16)

        def w(*shape: int) -> Any:
            return torch.randn(*shape, **bf) * 0.02

        qkv = (heads + 2 * kv_heads) * self.hd
        self.layers = [dict(n1=torch.ones(hidden, **bf), wqkv=w(hidden, qkv), wo=w(hidden, hidden),
                            n2=torch.ones(hidden, **bf), w13=w(hidden, 2 * intermediate), w2=w(intermediate, hidden),
                            k=torch.zeros(max_batch, kv_heads, max_len, self.hd, **bf),
                            v=torch.zeros(max_batch, kv_heads, max_len, self.hd, **bf)) for _ in range(layers)]
        self.emb, self.nf, self.head = w(vocab, hidden), torch.ones(hidden, **bf), w(hidden, vocab)
        self.prompt = torch.randint(0, vocab, (max_batch, graph_prompt_len), device=self.dev)
        self.ids = torch.zeros(max_batch, 1, dtype=torch.long, device=self.dev)
        self.pos = torch.zeros(1, dtype=torch.long, device=self.dev)
        self.arange = torch.arange(max_len, device=self.dev)
        self.prefill_graphs: dict[int, Any] = {}
        self.decode_graphs: dict[int, Any] = {}
        self._capture_all()

    # -- the model -------------------------------------------------------------------------------------------
    def _norm(self, x: Any, weight: Any) -> Any:
        return self.torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, 1e-5)

    def _forward(self, ids: Any, b: int, decode: bool) -> Any:
        """Logits' argmax of the last position, shape (b,); fills the KV cache (prefill from 0, decode at pos)."""
        F = self.torch.nn.functional
        t = ids.shape[1]
        h = F.embedding(ids, self.emb)
        mask = (self.arange <= self.pos).view(1, 1, 1, self.max_len) if decode else None
        for layer in self.layers:
            x = self._norm(h, layer["n1"])
            q, k, v = (x @ layer["wqkv"]).split([self.heads * self.hd, self.kv_heads * self.hd,
                                                  self.kv_heads * self.hd], dim=-1)
            q = q.view(b, t, self.heads, self.hd).transpose(1, 2)
            k = k.view(b, t, self.kv_heads, self.hd).transpose(1, 2)
            v = v.view(b, t, self.kv_heads, self.hd).transpose(1, 2)
            kc, vc = layer["k"][:b], layer["v"][:b]
            if decode:
                kc.index_copy_(2, self.pos, k)
                vc.index_copy_(2, self.pos, v)
                a = F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask, enable_gqa=True)
            else:
                kc[:, :, :t].copy_(k)
                vc[:, :, :t].copy_(v)
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            h = h + a.transpose(1, 2).reshape(b, t, -1) @ layer["wo"]
            g, u = (self._norm(h, layer["n2"]) @ layer["w13"]).chunk(2, dim=-1)
            h = h + (F.silu(g) * u) @ layer["w2"]
        return (self._norm(h[:, -1], self.nf) @ self.head).argmax(dim=-1)

    def _prefill(self, b: int, prompt: Any) -> None:
        nxt = self._forward(prompt, b, decode=False)
        self.ids[:b, 0].copy_(nxt)
        self.pos.fill_(prompt.shape[1])

    def _decode(self, b: int) -> None:
        nxt = self._forward(self.ids[:b], b, decode=True)
        self.ids[:b, 0].copy_(nxt)
        self.pos.add_(1)

    # -- graphs ----------------------------------------------------------------------------------------------
    def _capture_all(self) -> None:
        torch = self.torch
        pool = None
        with torch.inference_mode():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up outside capture (library handles, autotuning)
                for b in range(1, self.max_batch + 1):
                    self._prefill(b, self.prompt[:b])
                    self._decode(b)
            torch.cuda.current_stream().wait_stream(side)
            for b in range(1, self.max_batch + 1):
                for graphs, step in ((self.prefill_graphs, lambda b=b: self._prefill(b, self.prompt[:b])),
                                     (self.decode_graphs, lambda b=b: self._decode(b))):
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g, pool=pool):
                        step()
                    pool = g.pool()
                    graphs[b] = g
        torch.cuda.synchronize()

    def generate(self, batch: int, prompt_len: int, steps: int, on_step: Callable[[int], None]) -> None:
        """Prefill, then one decode per token; graphs when the shape was captured, else the same code eagerly."""
        torch = self.torch
        if batch > self.max_batch or prompt_len + steps > self.max_len:
            raise ValueError(f"batch {batch} x {prompt_len}+{steps} tokens exceeds the engine's static shapes "
                             f"(max batch {self.max_batch}, max length {self.max_len})")
        graphs = prompt_len == self.prompt_len
        with torch.inference_mode():
            if graphs:
                self.prefill_graphs[batch].replay()
            else:
                self._prefill(batch, torch.randint(0, self.vocab, (batch, prompt_len), device=self.dev))
            for k in range(1, steps + 1):
                self.ids[:batch, 0].tolist()
                on_step(k)
                if k < steps:
                    if graphs:
                        self.decode_graphs[batch].replay()
                    else:
                        self._decode(batch)
