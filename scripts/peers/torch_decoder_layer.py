#!/usr/bin/env python3
"""PyTorch peer for ch20/transformer_decode: the same Llama-3-8B-shaped decoder layer's decode step.

The layer (ch20/decoder_layer.cuh): hidden 4096, 32 query heads over 8 KV heads of 128, SwiGLU MLP
14336, RMSNorm before attention and before the MLP, residual adds, RoPE (theta 500000) on q and k
at position 4096, a KV cache of 4096 tokens per sequence with the new token's K and V written at
slot 4096, SDPA over the 4097 keys with GQA; BF16 weights and activations. Batch 1, 8 and 32.
Each is timed eager and under torch.compile (default mode; `reduce-overhead` makes no CUDA graph
here: the KV append mutates an input), and each of those captured by hand into a CUDA graph on
the same static tensors (`torch.cuda.CUDAGraph`, as a serving engine captures its decode step):
at batch 1 the eager and compiled steps are launch-bound, so their times follow the host's load
(2.3-3.7x apart between leases), while a graph replay is the GPU's time, which is what the
chapter's graphed rungs are. GB/s counts what the chapter's cost model counts: the weights and the
cached K/V read (453 MB at batch 1), plus the new K/V row, x and y.
Run it in the same GPU session as `bench compare --chapter ch20`, so the two are comparable.

  python3 scripts/peers/torch_decoder_layer.py [--json FILE] [--only decoder_layer]
  PEER_BATCHES=32 python3 scripts/peers/torch_decoder_layer.py     # some of the batches only

Timing: CUDA events around a batch of launches after warm-up, the median of several batches
(torch_rowwise.median_us). Then, per batch, the compiled step's kernels under torch.profiler: each
kernel's GPU time per step (`decoder_layer_kernels` rows, the 12 largest and the sum), to hold
against the chapter's op breakdown.
"""
import math
import os
import sys

try:
    import torch
    import torch.nn.functional as F

    from torch_inference import peer_main, report, skipped
    from torch_rowwise import median_us
except ImportError as missing:  # the GPU machine has PyTorch; say so anywhere else, and succeed
    print(f"SKIPPED: {missing}")
    sys.exit(0)

HIDDEN, Q_HEADS, KV_HEADS, HEAD_DIM, FFN, PAST, EPS, THETA = 4096, 32, 8, 128, 14336, 4096, 1e-5, 500000.0
QKV = (Q_HEADS + 2 * KV_HEADS) * HEAD_DIM


def weight(n, k):
    """uniform(-a, a), a = sqrt(3 / fan-in), as the chapter fills its weights."""
    return ((torch.rand(n, k, device="cuda") * 2 - 1) * math.sqrt(3 / k)).to(torch.bfloat16)


def rope_tables():
    """cos and sin at position PAST for the rotate-half pairs (i, i + 64), shaped to broadcast."""
    inv_freq = THETA ** (-torch.arange(HEAD_DIM // 2, dtype=torch.float64, device="cuda") / (HEAD_DIM // 2))
    angle = PAST * inv_freq
    cos, sin = torch.cat([angle.cos()] * 2), torch.cat([angle.sin()] * 2)
    return cos.to(torch.bfloat16), sin.to(torch.bfloat16)


def rope(t, cos, sin):
    half = HEAD_DIM // 2
    rotated = torch.cat([-t[..., half:], t[..., :half]], dim=-1)
    return t * cos + rotated * sin


def graphed(call):
    """`call` captured once into a CUDA graph (after warm-up on a side stream, which compiles a
    torch.compile'd step before the capture); returns the replay. Inputs, cache and outputs are
    the tensors `call` closes over, static across replays, as in a serving engine's decode graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    return graph.replay


def kernel_times(call, steps=20, top=12):
    """Where a step's GPU time goes: torch.profiler over `steps` calls (after warm-up), each kernel's
    (and copy's) GPU time per step in us, the `top` largest as (name, us), and the sum of all. The
    compiled step is profiled outside a graph: a graph replays the same kernels, without the gaps
    between them, so a kernel's duration there may differ a little (the L2 and HBM as the kernel
    ahead left them)."""
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            call()
        torch.cuda.synchronize()
    per_kernel = {}
    for event in prof.key_averages():
        us = (event.self_device_time_total if hasattr(event, "self_device_time_total")
              else event.self_cuda_time_total)  # PyTorch before 2.4
        if us > 0:
            per_kernel[event.key] = per_kernel.get(event.key, 0.0) + us / steps
    ranked = sorted(per_kernel.items(), key=lambda item: -item[1])
    return ranked[:top], sum(per_kernel.values())


def run_decoder_layer(copy_tbs):
    w_qkv, w_o = weight(QKV, HIDDEN), weight(HIDDEN, HIDDEN)
    w_gate_up, w_down = weight(2 * FFN, HIDDEN), weight(HIDDEN, FFN)
    g1, g2 = ((torch.rand(HIDDEN, device="cuda") + 0.5).to(torch.bfloat16) for _ in range(2))
    cos, sin = rope_tables()
    weight_bytes = sum(t.numel() * t.element_size() for t in (w_qkv, w_o, w_gate_up, w_down))
    for batch in (int(b) for b in os.environ.get("PEER_BATCHES", "1,8,32").split(",")):
        x = torch.randn(batch, HIDDEN, dtype=torch.bfloat16, device="cuda")
        # One slot past the 4096 cached tokens: the new token's K and V go there every step.
        k_cache, v_cache = (torch.randn(batch, KV_HEADS, PAST + 1, HEAD_DIM, dtype=torch.bfloat16, device="cuda")
                            for _ in range(2))
        kv_bytes = 2 * batch * KV_HEADS * (PAST + 1) * HEAD_DIM * 2 + 2 * batch * HIDDEN * 2

        def step(x, k_cache, v_cache):
            qkv = F.linear(F.rms_norm(x, (HIDDEN,), g1, EPS), w_qkv)
            q, k, v = qkv.split([Q_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM], dim=-1)
            q = rope(q.view(batch, Q_HEADS, 1, HEAD_DIM), cos, sin)
            k = rope(k.view(batch, KV_HEADS, 1, HEAD_DIM), cos, sin)
            k_cache[:, :, PAST:] = k  # the append
            v_cache[:, :, PAST:] = v.view(batch, KV_HEADS, 1, HEAD_DIM)
            attn = F.scaled_dot_product_attention(q, k_cache, v_cache, enable_gqa=True)
            h = x + F.linear(attn.reshape(batch, HIDDEN), w_o)
            gate, up = F.linear(F.rms_norm(h, (HIDDEN,), g2, EPS), w_gate_up).chunk(2, dim=-1)
            return h + F.linear(F.silu(gate) * up, w_down)

        # A fresh, static compile per batch: `step` is one code object for every batch, so without
        # the reset dynamo would recompile it on the new batch size and, from the second size on,
        # mark the batch dimension dynamic (generic kernels); the H200 peer of 2026-11-28 read the
        # compiled layer 2.3x slower at batch 32 than an earlier run of this script.
        torch._dynamo.reset()
        compiled = torch.compile(step, dynamic=False)
        forms = [("eager", lambda: step(x, k_cache, v_cache)),
                 ("torch.compile", lambda: compiled(x, k_cache, v_cache)),
                 ("eager + CUDA graph", lambda: graphed(lambda: step(x, k_cache, v_cache))),
                 ("torch.compile + CUDA graph", lambda: graphed(lambda: compiled(x, k_cache, v_cache)))]
        for name, make in forms:
            label = f"b{batch} {name}"
            try:
                call = make() if "graph" in name else make
                us = median_us(call, batches=9, per_batch=10)
                gbs = (weight_bytes + kv_bytes) / (us * 1e-6) / 1e9
                report("decoder_layer", label, us=us, gbs=gbs, pct_copy=100 * gbs / (copy_tbs * 1e3),
                       tokens_per_s=batch / (us * 1e-6))
            except Exception as e:  # a PyTorch without enable_gqa, a compile or capture failure says why
                skipped("decoder_layer", label, e)
        # The compiled step's kernels, to set beside the chapter's op breakdown (op_us_*).
        try:
            ranked, total = kernel_times(lambda: compiled(x, k_cache, v_cache))
            report("decoder_layer_kernels", f"b{batch} torch.compile all kernels", us=total)
            for name, us in ranked:
                report("decoder_layer_kernels", f"b{batch} {name}", us=us)
        except Exception as e:
            skipped("decoder_layer_kernels", f"b{batch}", e)
        del x, k_cache, v_cache
        torch.cuda.empty_cache()


def main():
    peer_main(__doc__, {"decoder_layer": run_decoder_layer})


if __name__ == "__main__":
    sys.exit(main())
