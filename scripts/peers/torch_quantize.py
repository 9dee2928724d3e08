#!/usr/bin/env python3
"""PyTorch peers for ch19's low-precision kernels, on ch19's shapes: what a user would call instead.

  - fused_quantize: row-wise FP8 E4M3 quantisation of an 8192x8192 BF16 matrix, one scale per row
    and one per 128 values of a row (ch19/fused_quantize's `scale` axis), with the chapter's rule
    (amax clamped to 1e-30, quant = 448 / amax in FP32, saturating cast, dequant = amax / 448);
    eager and torch.compile; TB/s counted as the chapter counts it (2 bytes read + 1 written a
    value, 4 a scale) and that as a percentage of the device's copy rate;
  - kv_quantization: grouped-query decode, 8 sequences, 32 query heads over 8 KV heads, head dim
    128, 32,768 cached keys (ch19/kv_quantization): SDPA (enable_gqa) over the BF16 cache, and
    the FP8 path a PyTorch user has: an E4M3 cache with a scale per (sequence, KV head), cast to
    BF16 and scaled on every call, then SDPA; TB/s on the bytes of the cache as stored;
  - fp8_gemm: D = A B at 4096^3 and 8192^3 (ch19/fp8_gemm) on the chapter's operands:
    uniform(-1, 1) with each 1 x 128 block of A and 128 x 128 block of B scaled by the power of
    two kernels/fp8_block_scaling.hpp's spread_exponent gives it (the same hash, here); torch.mm
    in BF16, and torch._scaled_mm (cuBLASLt) on E4M3 codes quantised beforehand (what the
    chapter times: the GEMM alone): per-tensor scales with use_fast_accum off (the default:
    cuBLASLt promotes partial sums to FP32) and on, and DeepSeek-style block scales (1 x 128 for
    A, 128 x 128 for B: cuBLASLt's block scaling, CUDA 12.9+, SM90 only; PyTorch infers the
    recipe from the scale tensors' shapes); TFLOP/s on 2 m n k, and each result's relative L2
    error against the FP32 product of the (widened) BF16 operands.
A feature this PyTorch or GPU lacks prints SKIPPED with the reason; the rest still run. Run it in
the same GPU session as `bench compare --chapter ch19`, so the two are comparable.

  python3 scripts/peers/torch_quantize.py [--json FILE] [--only fused_quantize,kv_quantization,fp8_gemm] [--burst-only]

Timing: CUDA events around a batch of launches after warm-up, the median of several batches
(torch_rowwise.median_us): a burst of ~0.1-0.2 s, near the boost clock; every row's `us`. The
8192^3 fp8_gemm rows, whose example point the harness times in sustained mode (at the power
limit), are also timed as the harness times it (torch_inference.timed, torch_rowwise.sustained_us:
a 1 s soak, then >= 1 s of ~20 ms batches back to back): `sustained_us`, `sustained_tflops` and
the SM clock over those samples; set ours beside those. About 2 s a row, 8 s in all; --burst-only
leaves them out.
"""
import sys

try:
    import torch
    import torch.nn.functional as F

    from torch_inference import peer_main, report, skipped, timed
    from torch_rowwise import median_us
except ImportError as missing:  # the GPU machine has PyTorch; say so anywhere else, and succeed
    print(f"SKIPPED: {missing}")
    sys.exit(0)

E4M3_MAX = 448.0


def quantize_groups(x, group):
    """x [rows, cols] BF16 -> (codes [rows, cols] E4M3, dequant scales [rows, cols / group] FP32)."""
    rows, cols = x.shape
    xg = x.view(rows, cols // group, group).float()
    amax = xg.abs().amax(dim=-1, keepdim=True).clamp(min=1e-30)
    codes = (xg * (E4M3_MAX / amax)).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return codes.view(rows, cols), (amax / E4M3_MAX).view(rows, cols // group)


def run_fused_quantize(copy_tbs):
    rows = cols = 8192
    x = torch.randn(rows, cols, dtype=torch.bfloat16, device="cuda")
    for scale, group in (("row", cols), ("block128", 128)):
        fn = lambda x, g=group: quantize_groups(x, g)
        nbytes = 3 * rows * cols + 4 * rows * (cols // group)
        for mode, op in (("eager", fn), ("compiled", torch.compile(fn))):
            label = f"{rows}x{cols} scale {scale} {mode}"
            try:
                us = median_us(lambda: op(x))
                tbs = nbytes / (us * 1e-6) / 1e12
                report("fused_quantize", label, us=us, tbs=tbs, pct_copy=100 * tbs / copy_tbs)
            except Exception as e:  # a compile failure names itself and the rest go on
                skipped("fused_quantize", label, e)


def run_kv_quantization(copy_tbs):
    batch, q_heads, kv_heads, keys, d = 8, 32, 8, 32768, 128
    q = torch.randn(batch, q_heads, 1, d, dtype=torch.bfloat16, device="cuda") * 2
    k, v = (torch.rand(batch, kv_heads, keys, d, device="cuda").mul_(2).sub_(1).to(torch.bfloat16) for _ in range(2))
    shape = f"b{batch} {q_heads}/{kv_heads} heads L{keys} d{d}"

    def per_head_fp8(t):  # once, as when the cache is written: a scale per (sequence, KV head)
        codes, scales = quantize_groups(t.view(batch * kv_heads, keys * d), keys * d)
        return codes.view(t.shape), scales.view(batch, kv_heads, 1, 1)

    try:
        us = median_us(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), batches=9, per_batch=10)
        tbs = 2 * k.numel() * 2 / (us * 1e-6) / 1e12
        report("kv_quantization", f"{shape} bf16 sdpa", us=us, tbs=tbs, pct_copy=100 * tbs / copy_tbs)
    except Exception as e:
        skipped("kv_quantization", f"{shape} bf16 sdpa", e)
    try:
        (k8, k_scale), (v8, v_scale) = per_head_fp8(k), per_head_fp8(v)
        del k, v
        torch.cuda.empty_cache()

        def fp8_decode():
            kd = (k8.to(torch.bfloat16) * k_scale).to(torch.bfloat16)
            vd = (v8.to(torch.bfloat16) * v_scale).to(torch.bfloat16)
            return F.scaled_dot_product_attention(q, kd, vd, enable_gqa=True)

        us = median_us(fp8_decode, batches=5, per_batch=5)
        tbs = 2 * k8.numel() / (us * 1e-6) / 1e12
        report("kv_quantization", f"{shape} fp8 cast then sdpa", us=us, tbs=tbs, pct_copy=100 * tbs / copy_tbs)
    except Exception as e:
        skipped("kv_quantization", f"{shape} fp8 cast then sdpa", e)


def _mul32(h, c):
    """h * c mod 2^32 for int64 tensors h < 2^32, without overflowing 64 bits."""
    return (h * (c & 0xFFFF) + (((h * (c >> 16)) & 0xFFFF) << 16)) & 0xFFFFFFFF


def spread_exponent(operand, row_block, k_block):
    """kernels/fp8_block_scaling.hpp's spread_exponent, elementwise on int64 tensors."""
    h = _mul32(row_block, 0x9E3779B1) ^ _mul32(k_block, 0x85EBCA77) ^ ((operand * 0xC2B2AE3D) & 0xFFFFFFFF)
    h ^= h >> 16
    h = _mul32(h, 0x7FEB352D)
    h ^= h >> 15
    h = _mul32(h, 0x846CA68B)
    h ^= h >> 16
    return -4 + (h % 8)


def widened(x, block_rows, operand):
    """x [rows, k] with block (row / block_rows, col / 128) scaled by 2^spread_exponent (exact)."""
    rows, k = x.shape
    rb = (torch.arange(rows, device=x.device) // block_rows).view(-1, 1)
    kb = (torch.arange(k, device=x.device) // 128).view(1, -1)
    return torch.ldexp(x.float(), spread_exponent(operand, rb, kb).int()).to(torch.bfloat16)


def quantize_blocks(x, block_rows):
    """x [rows, k] BF16 -> (codes E4M3, dequant [rows / block_rows, k / 128] FP32), the chapter's rule."""
    rows, k = x.shape
    xb = x.float().view(rows // block_rows, block_rows, k // 128, 128)
    amax = xb.abs().amax(dim=(1, 3), keepdim=True).clamp(min=1e-30)
    codes = (xb * (E4M3_MAX / amax)).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return codes.view(rows, k), (amax / E4M3_MAX).view(rows // block_rows, k // 128)


def run_fp8_gemm(copy_tbs):
    fp8 = getattr(torch, "float8_e4m3fn", None)
    for n in (4096, 8192):
        shape = f"{n}^3"
        sustained = n == 8192  # ch19/fp8_gemm's sustained point; 4096^3 is sampled cold
        a, b = (torch.rand(n, n, device="cuda").mul_(2).sub_(1).to(torch.bfloat16) for _ in range(2))  # b is [N][K]
        a, b = widened(a, 1, 0), widened(b, 128, 1)  # the chapter's operand tags: A 0, B 1
        flops = 2.0 * n * n * n
        reference = a.float() @ b.float().t()
        err = lambda d: ((d.float() - reference).norm() / reference.norm()).item()
        try:
            fields = timed(lambda: torch.mm(a, b.t()), flops, sustained)
            report("fp8_gemm", f"{shape} bf16 torch.mm", **fields, rel_l2_vs_fp32=err(torch.mm(a, b.t())))
        except Exception as e:
            skipped("fp8_gemm", f"{shape} bf16 torch.mm", e)
        if fp8 is None or not hasattr(torch, "_scaled_mm"):
            skipped("fp8_gemm", f"{shape} fp8", "this PyTorch has no float8_e4m3fn or _scaled_mm")
            continue
        (a8, sa), (b8, sb) = (quantize_groups(t.view(1, -1), t.numel()) for t in (a, b))  # per tensor
        a8, b8 = a8.view(n, n), b8.view(n, n)
        sa, sb = sa.reshape(()).float(), sb.reshape(()).float()
        for fast in (False, True):
            label = f"{shape} fp8 e4m3 per-tensor _scaled_mm use_fast_accum={fast}"
            try:
                fn = lambda: torch._scaled_mm(a8, b8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16,
                                              use_fast_accum=fast)
                report("fp8_gemm", label, **timed(fn, flops, sustained), rel_l2_vs_fp32=err(fn()))
            except Exception as e:  # no FP8 tensor cores (pre-sm_89)
                skipped("fp8_gemm", label, e)
        del a8, b8
        # Block scales, laid out as cuBLASLt's block scaling wants them (PyTorch's
        # test_scaled_mm_block_wise_numerics): A's [M, K/128] outer-dim-major (stride (1, M)),
        # B's 128 x 128 scales as [K/128, N/128] (the transpose of [N/128, K/128]: stride (1, K/128)).
        # K/128 is 32 or 64 here, already the multiple of 4 cuBLASLt pads that dimension to.
        label = f"{shape} fp8 e4m3 block 1x128/128x128 _scaled_mm"
        try:
            (a8, sa), (b8, sb) = quantize_blocks(a, 1), quantize_blocks(b, 128)
            sa = sa.t().contiguous().t()
            sb = sb.t()
            fn = lambda: torch._scaled_mm(a8, b8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
            report("fp8_gemm", label, **timed(fn, flops, sustained), rel_l2_vs_fp32=err(fn()))
            del a8, b8
        except Exception as e:  # PyTorch built with CUDA < 12.9, or not SM90: says which
            skipped("fp8_gemm", label, e)
        del a, b, reference
        torch.cuda.empty_cache()


def main():
    peer_main(__doc__, {"fused_quantize": run_fused_quantize, "kv_quantization": run_kv_quantization,
               "fp8_gemm": run_fp8_gemm})


if __name__ == "__main__":
    sys.exit(main())
