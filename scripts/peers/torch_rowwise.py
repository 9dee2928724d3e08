#!/usr/bin/env python3
"""PyTorch peers for ch09's row-wise memory-bound kernels: softmax, LayerNorm and RMSNorm.

Times what a user would pick instead of our kernels, eager and torch.compile, on the shapes
ch09 times, and prints the bandwidth counted the way ch09 counts it (read the matrix once,
write it once: 2 + 2 bytes per BF16 element; the affine weights are negligible). Run it in the
same GPU session as `bench compare --chapter ch09` so the two are comparable.

  python3 scripts/peers/torch_rowwise.py [--json FILE] [--no-compile]

Timing: CUDA events around a batch of launches after warm-up, the median of several batches.
"""
import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F

SHAPES = [(16384, 8192), (262144, 1024)]


def median_us(fn, batches=15, per_batch=20):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(batches):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(per_batch):
            fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3 / per_batch)
    return statistics.median(times)


def copy_ceiling_tbs():
    """Device-to-device copy of 1 GiB: the same ceiling as `bench calibrate`'s HBM copy."""
    n = 1 << 29
    a = torch.empty(n, dtype=torch.bfloat16, device="cuda").uniform_()
    b = torch.empty_like(a)
    us = median_us(lambda: b.copy_(a), batches=9, per_batch=10)
    return 2 * a.numel() * a.element_size() / (us * 1e-6) / 1e12


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the rows to this file too")
    parser.add_argument("--no-compile", action="store_true", help="eager only")
    args = parser.parse_args()
    torch.manual_seed(1)
    dev = torch.cuda.get_device_name()
    copy = copy_ceiling_tbs()
    print(f"# {dev}, torch {torch.__version__}: copy {copy:.2f} TB/s")
    rows = []
    for r, c in SHAPES:
        x = torch.randn(r, c, dtype=torch.bfloat16, device="cuda")
        w = torch.randn(c, dtype=torch.bfloat16, device="cuda")
        b = torch.randn(c, dtype=torch.bfloat16, device="cuda")
        ops = {
            "softmax": lambda x: torch.softmax(x, dim=-1),
            "layer_norm": lambda x: F.layer_norm(x, (c,), w, b, 1e-5),
            "rms_norm": lambda x: F.rms_norm(x, (c,), w, 1e-5),
        }
        for name, op in ops.items():
            modes = [("eager", op)]
            if not args.no_compile:
                modes.append(("compiled", torch.compile(op)))
            for mode, fn in modes:
                try:
                    us = median_us(lambda: fn(x))
                except Exception as e:  # a compile failure names itself and the rest go on
                    print(f"{name} {r}x{c} {mode}: failed: {e}", file=sys.stderr)
                    continue
                tbs = 4 * r * c / (us * 1e-6) / 1e12
                rows.append(dict(op=name, rows=r, cols=c, mode=mode, us=us, tbs=tbs, pct_copy=100 * tbs / copy))
                print(f"{name:10s} {r:6d}x{c:<5d} {mode:8s} {us:9.1f} us {tbs:5.2f} TB/s ({100 * tbs / copy:4.0f}% of copy)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=dev, torch=torch.__version__, copy_tbs=copy, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
