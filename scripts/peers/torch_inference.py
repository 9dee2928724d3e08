#!/usr/bin/env python3
"""PyTorch peers for ch16's inference kernels: attention, decode attention, FP8 linear, decode graphs.

Times what a user would pick instead of ch16's examples, on ch16's shapes, and prints each in
the unit the chapter reports:
  - sdpa: F.scaled_dot_product_attention forward, BF16, b4 h32 s4096 and b1 h32 s8192, head
    dim 128 and 64, causal and not, per backend (default, flash, cudnn); TFLOP/s counted as
    4*b*h*s^2*d, half that for causal (the flops a causal kernel must do);
  - decode_sdpa: one query token per sequence over a dense KV cache (h32 d128, batch 32-64, KV
    up to 32k); TB/s on the K and V bytes read (2*b*h*L*d*2), against the device's copy;
  - fp8_linear: Y = X W^T + b at 8192 tokens, 8192 -> 8192: F.linear in BF16, and FP8 E4M3
    through torch._scaled_mm with W quantised once and X's amax, scale and cast timed every
    call (ch16/fp8_linear's optimized side), eager and torch.compile'd; TFLOP/s on 2*m*n*k;
    plus the FP8 result's relative L2 error against the BF16 one;
  - decode_step: ch16/decode_graphs' layer (hidden 2048 = 16 heads of 128, SwiGLU 5632, KV up
    to 1024 with per-sequence lengths in device memory) eager and captured in a CUDA graph, per
    batch bucket 1/8/32; us per step.
A feature this PyTorch or GPU lacks prints SKIPPED with the reason; the rest still run. Run it in
the same GPU session as `bench compare --chapter ch16`, so the two are comparable.

  python3 scripts/peers/torch_inference.py [--json FILE] [--only sdpa,decode_sdpa,fp8_linear,decode_step] [--burst-only]

Timing: CUDA events around a batch of launches after warm-up, the median of several batches
(torch_rowwise.median_us): a burst of ~0.1-0.2 s, near the boost clock; every row's `us`. The
rows whose example the harness times in sustained mode (sdpa: ch16/flash_attention; fp8_linear's
BF16 and FP8 GEMM rows: ch16/fp8_linear) are also timed as the harness times those
(torch_rowwise.sustained_us: a 1 s soak, then >= 1 s of ~20 ms batches with no gap between them):
`sustained_us`, `sustained_tflops` and the median SM clock over those samples (`sustained_sm_mhz`,
where pynvml can read it). Set ours beside `sustained_us`; `us` shows what the burst gained. That
adds about 2 s a row (about a minute for sdpa's 24 rows); --burst-only leaves it out.
"""
import argparse
import contextlib
import json
import math
import sys

try:
    import torch
    import torch.nn.functional as F

    from torch_rowwise import BATCH_S, SAMPLE_S, SOAK_S, copy_ceiling_tbs, median_us, sustained_us
except ImportError as missing:  # the GPU machine has PyTorch; say so anywhere else, and succeed
    print(f"SKIPPED: {missing}")
    sys.exit(0)

ROWS = []
SUSTAINED = True  # peer_main's --burst-only clears it


def report(kind, label, **fields):
    ROWS.append(dict(kind=kind, label=label, **fields))
    shown = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in fields.items())
    print(f"{kind:12s} {label:44s} {shown}", flush=True)


def timed(fn, flops=None, sustained=False, restart=None, **burst):
    """report()'s fields for fn: `us`, its burst median (median_us, `burst` its batches), and with
    `flops` the TFLOP/s. For the peer of an example the harness samples in sustained mode
    (`sustained`), also `sustained_us` (sustained_us), its TFLOP/s and the SM clock, unless
    --burst-only: a burst runs near the boost clock, ours at the power limit's, so only the
    sustained figure compares with ours. `restart`, if given, runs before each timing: fn that
    changes its own inputs (a training step) then starts both from the same state."""
    if restart:
        restart()
    us = median_us(fn, **burst)
    fields = dict(us=us)
    if flops:
        fields["tflops"] = flops / (us * 1e-6) / 1e12
    if sustained and SUSTAINED:
        if restart:
            restart()
        held = sustained_us(fn)
        fields["sustained_us"] = held.us
        if flops:
            fields["sustained_tflops"] = flops / (held.us * 1e-6) / 1e12
        if held.sm_mhz is not None:
            fields["sustained_sm_mhz"] = held.sm_mhz
    return fields


def skipped(kind, label, why):
    ROWS.append(dict(kind=kind, label=label, skipped=str(why)))
    print(f"{kind:12s} {label:44s} SKIPPED: {str(why).splitlines()[0][:160]}", flush=True)


def sdpa_backends():
    """(name, context manager factory) per SDPA backend this PyTorch names."""
    backends = [("default", None)]
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        for name in ("FLASH_ATTENTION", "CUDNN_ATTENTION"):
            if hasattr(SDPBackend, name):
                backends.append((name.split("_")[0].lower(), lambda b=getattr(SDPBackend, name): sdpa_kernel(b)))
    except ImportError as e:
        skipped("sdpa", "backend selection", e)
    return backends


def run_sdpa():
    for b, h, s in ((4, 32, 4096), (1, 32, 8192)):
        for d in (128, 64):
            q, k, v = (torch.randn(b, h, s, d, dtype=torch.bfloat16, device="cuda") for _ in range(3))
            for causal in (False, True):
                flops = 4 * b * h * s * s * d / (2 if causal else 1)
                for backend, context in sdpa_backends():
                    label = f"b{b} h{h} s{s} d{d} {'causal' if causal else 'full'} {backend}"
                    try:
                        fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                        with context() if context else contextlib.nullcontext():
                            fields = timed(fn, flops, sustained=True, batches=9, per_batch=10)
                        report("sdpa", label, **fields)
                    except Exception as e:  # a backend that cannot run this shape says why
                        skipped("sdpa", label, e)
            del q, k, v


def run_decode_sdpa(copy_tbs):
    h, d = 32, 128
    for b, length in ((32, 4096), (32, 32768), (64, 16384)):
        label = f"b{b} h{h} L{length} d{d}"
        try:
            q = torch.randn(b, h, 1, d, dtype=torch.bfloat16, device="cuda")
            k, v = (torch.randn(b, h, length, d, dtype=torch.bfloat16, device="cuda") for _ in range(2))
            us = median_us(lambda: F.scaled_dot_product_attention(q, k, v), batches=9, per_batch=10)
            tbs = 2 * k.numel() * k.element_size() / (us * 1e-6) / 1e12
            report("decode_sdpa", label, us=us, tbs=tbs, pct_copy=100 * tbs / copy_tbs)
            del q, k, v
        except Exception as e:  # out of memory on a smaller GPU, for one
            skipped("decode_sdpa", label, e)
        torch.cuda.empty_cache()


def run_fp8_linear():
    tokens, d_in, d_out = 8192, 8192, 8192
    flops = 2 * tokens * d_in * d_out
    x = torch.randn(tokens, d_in, dtype=torch.bfloat16, device="cuda")
    w = ((torch.rand(d_out, d_in, device="cuda") * 2 - 1) * math.sqrt(3 / d_in)).to(torch.bfloat16)
    bias = (torch.rand(d_out, device="cuda") - 0.5).to(torch.bfloat16)
    shape = f"{tokens} x {d_in} -> {d_out}"
    report("fp8_linear", f"{shape} bf16 F.linear", **timed(lambda: F.linear(x, w, bias), flops, sustained=True))
    reference = F.linear(x, w, bias).float()
    if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
        return skipped("fp8_linear", f"{shape} fp8", "this PyTorch has no float8_e4m3fn or _scaled_mm")
    fp8, fp8_max = torch.float8_e4m3fn, torch.finfo(torch.float8_e4m3fn).max

    def quantize(t):  # per-tensor current scaling: amax, scale, saturating cast
        scale = (t.abs().amax().float() / fp8_max).clamp(min=1e-30)
        return (t.float() / scale).clamp(-fp8_max, fp8_max).to(fp8), scale

    w_q, w_scale = quantize(w)  # once, as at model load

    def fp8_linear(x):
        x_q, x_scale = quantize(x)
        return torch._scaled_mm(x_q, w_q.t(), scale_a=x_scale, scale_b=w_scale, bias=bias, out_dtype=torch.bfloat16)

    modes = [("eager", fp8_linear), ("compiled", None)]
    for mode, fn in modes:
        label = f"{shape} fp8 e4m3 per-tensor, x quantised, {mode}"
        try:
            fn = fn or torch.compile(fp8_linear)
            fields = timed(lambda: fn(x), flops, sustained=True)
            err = ((fn(x).float() - reference).norm() / reference.norm()).item()
            report("fp8_linear", label, **fields, rel_l2_vs_bf16=err)
        except Exception as e:  # no FP8 tensor cores (pre-sm_89), or a compile failure
            skipped("fp8_linear", label, e)
    try:  # set beside a metric of ours, not a sustained sample: a burst, as that metric is taken
        quantize_us = median_us(lambda: quantize(x))
        report("fp8_linear", f"{shape} x quantisation alone, eager", us=quantize_us)
    except Exception as e:
        skipped("fp8_linear", "x quantisation alone", e)


def run_decode_step():
    hidden, heads, head_dim, ffn, max_kv, eps = 2048, 16, 128, 5632, 1024, 1e-5

    def weight(n, k):
        return ((torch.rand(n, k, device="cuda") * 2 - 1) * math.sqrt(3 / k)).to(torch.bfloat16)

    w_qkv, w_o, w_gate_up, w_down = weight(3 * hidden, hidden), weight(hidden, hidden), weight(2 * ffn, hidden), weight(hidden, ffn)
    g1, g2 = (torch.rand(hidden, device="cuda") + 0.5).to(torch.bfloat16), (torch.rand(hidden, device="cuda") + 0.5).to(torch.bfloat16)
    for batch in (1, 8, 32):
        x = torch.randn(batch, hidden, dtype=torch.bfloat16, device="cuda")
        # The cache holds one slot past max_kv - 1 cached tokens: the new token goes at its length.
        k_cache, v_cache = (torch.randn(batch, heads, max_kv, head_dim, dtype=torch.bfloat16, device="cuda") for _ in range(2))
        lengths = torch.randint(max_kv // 8, max_kv, (batch,), device="cuda")
        rows, positions = torch.arange(batch, device="cuda"), torch.arange(max_kv, device="cuda")

        def step(x):
            q, k, v = F.linear(F.rms_norm(x, (hidden,), g1, eps), w_qkv).view(batch, 3, heads, head_dim).unbind(1)
            k_cache[rows, :, lengths] = k  # the new token's K and V at each sequence's own length
            v_cache[rows, :, lengths] = v
            mask = (positions[None, :] <= lengths[:, None]).view(batch, 1, 1, max_kv)
            attn = F.scaled_dot_product_attention(q.unsqueeze(2), k_cache, v_cache, attn_mask=mask)
            h = x + F.linear(attn.reshape(batch, hidden), w_o)
            gate, up = F.linear(F.rms_norm(h, (hidden,), g2, eps), w_gate_up).chunk(2, dim=-1)
            return h + F.linear(F.silu(gate) * up, w_down)

        try:
            eager_us = median_us(lambda: step(x))
            report("decode_step", f"b{batch} eager", us=eager_us, tokens_per_s=batch / (eager_us * 1e-6))
            side = torch.cuda.Stream()  # capture wants warm-up on a side stream first
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    step(x)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                step(x)
            graph_us = median_us(graph.replay)
            report("decode_step", f"b{batch} cuda graph", us=graph_us, tokens_per_s=batch / (graph_us * 1e-6),
                   speedup=eager_us / graph_us)
        except Exception as e:
            skipped("decode_step", f"b{batch}", e)


def peer_main(doc, parts):
    """The command line every peer script shares: --only picks parts (name -> fn(copy_tbs)), --json
    writes the rows, --burst-only leaves out timed()'s sustained figures; no CUDA device prints
    SKIPPED; one part failing leaves the others' rows."""
    global SUSTAINED
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--json", help="write the rows to this file too")
    parser.add_argument("--only", default=",".join(parts), help="comma-separated parts")
    parser.add_argument("--burst-only", action="store_true",
                        help="skip the sustained timing of sustained-mode examples' peers (about 2 s a row)")
    args = parser.parse_args()
    SUSTAINED = not args.burst_only
    if not torch.cuda.is_available():
        print("SKIPPED: no CUDA device")
        return
    torch.manual_seed(1)
    dev = torch.cuda.get_device_name()
    copy = copy_ceiling_tbs()
    sustained = f"{SOAK_S:g} s soak, {SAMPLE_S:g} s of {BATCH_S * 1e3:g} ms batches" if SUSTAINED else "off (--burst-only)"
    print(f"# {dev}, torch {torch.__version__}: copy {copy:.2f} TB/s; sustained rows: {sustained}")
    for name in args.only.split(","):
        try:
            parts[name](copy)
        except Exception as e:
            skipped(name, "all", e)
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=dev, torch=torch.__version__, copy_tbs=copy, rows=ROWS,
                           sustained=dict(soak_s=SOAK_S, sample_s=SAMPLE_S, batch_s=BATCH_S) if SUSTAINED else None),
                      f, indent=1)


def main():
    peer_main(__doc__, {"sdpa": lambda copy: run_sdpa(), "decode_sdpa": run_decode_sdpa,
                        "fp8_linear": lambda copy: run_fp8_linear(), "decode_step": lambda copy: run_decode_step()})


if __name__ == "__main__":
    sys.exit(main())
