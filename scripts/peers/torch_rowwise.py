#!/usr/bin/env python3
"""PyTorch peers for ch09's row-wise memory-bound kernels: softmax, LayerNorm and RMSNorm.

Times what a user would pick instead of our kernels, eager and torch.compile, on the shapes
ch09 times, and prints the bandwidth counted the way ch09 counts it (read the matrix once,
write it once: 2 + 2 bytes per BF16 element; the affine weights are negligible). Run it in the
same GPU session as `bench compare --chapter ch09` so the two are comparable.

  python3 scripts/peers/torch_rowwise.py [--json FILE] [--no-compile]

Timing: CUDA events around a batch of launches after warm-up, the median of several batches
(median_us: a burst of ~0.1-0.2 s, near the boost clock). ch09's row-wise examples are not in
sustained mode, so this script times bursts only; sustained_us, beside median_us, is the timer of
the peers of the harness's sustained-mode examples (torch_inference.py, torch_quantize.py,
torch_decoding.py, torch_host.py).
"""
import argparse
import json
import math
import re
import statistics
import sys
import time
from pathlib import Path
from typing import NamedTuple, Optional

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


def harness_sustained_constants():
    """(soak, sample, batch) seconds of the harness's sustained mode, read from the header that
    defines them (kSustainedSoakSeconds, kSustainedSampleSeconds, kSustainedBatchSeconds in
    harness/include/bench/bench.hpp), so a peer's sustained figure follows any change to ours."""
    values = {"kSustainedSoakSeconds": 1.0, "kSustainedSampleSeconds": 1.0, "kSustainedBatchSeconds": 20e-3}
    header = Path(__file__).resolve().parents[2] / "harness" / "include" / "bench" / "bench.hpp"
    try:
        text = header.read_text()
    except OSError:  # the script copied out of the repository: the header's values as of 2026-11-28
        return tuple(values.values())
    for name in values:
        found = re.search(rf"\b{name}\s*=\s*([0-9.eE+-]+)\s*;", text)
        if found:  # a constant renamed or computed: its old value rather than a failure
            values[name] = float(found.group(1))
    return tuple(values.values())


SOAK_S, SAMPLE_S, BATCH_S = harness_sustained_constants()


def sm_clock_mhz():
    """The GPU's SM clock now (torch.cuda.clock_rate, through pynvml), or None where it cannot be
    read (no pynvml, a ROCm build, an older PyTorch): the clock is a note, never a reason to fail."""
    try:
        return float(torch.cuda.clock_rate())
    except Exception:  # noqa: BLE001 - any failure only leaves the note out
        return None


class Sustained(NamedTuple):
    us: float                  # median per call over the sampled batches
    sm_mhz: Optional[float]    # median SM clock read while the samples ran, None if unreadable
    batches: int
    per_batch: int


def sustained_us(fn, soak_s=SOAK_S, batch_s=BATCH_S, sample_s=SAMPLE_S, min_batches=20, max_batches=1000):
    """fn's time as the harness's sustained mode takes it (harness/src/runner.cpp): at the power
    limit's steady clock, not a burst's boost clock. A burst (median_us) leaves the board cool
    enough to boost; 8192^3-class tensor-core work pulls the clock down within about a second of
    continuous running, so our sustained figures and a burst peer would not be at the same clock.

    Warm-up and one timed call size a batch to ~batch_s; back-to-back batches soak the board for
    soak_s; then batches bracketed by CUDA events, enough for sample_s of work (at least
    min_batches, at most max_batches), all enqueued before one synchronisation, so the GPU never
    waits on the host between them (as the harness defers its checks until sampling ends). Costs
    about soak_s + sample_s (2 s with the harness's constants) per call of this function, more
    where one fn call is longer than batch_s (min_batches calls then)."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(3):
        fn()
    stop.record()
    stop.synchronize()
    call_s = max(start.elapsed_time(stop) * 1e-3 / 3, 1e-9)
    per_batch = min(max(math.ceil(batch_s / call_s), 1), 1000)  # the harness's clamp on its batch
    batch_time_s = per_batch * call_s
    batches = min(max(math.ceil(sample_s / batch_time_s), min_batches), max_batches)
    # The first read initialises NVML (slow): here, not while the samples' queue is short.
    read_clock = sm_clock_mhz() is not None

    # The soak: one chunk stays queued while the host waits on the one before it, so the GPU
    # never idles between chunks (a host-clocked loop of enqueue + synchronize leaves a gap each time).
    soak_start, previous = time.perf_counter(), None
    while time.perf_counter() - soak_start < soak_s:
        for _ in range(per_batch):
            fn()
        done = torch.cuda.Event()
        done.record()
        if previous is not None:
            previous.synchronize()
        previous = done

    # The samples: batches + 1 events, batch i between events i and i + 1, the first enqueued
    # behind the soak's last chunk. The host runs ahead (blocking only when the launch queue is
    # full, which leaves the GPU busy), reading the SM clock while the GPU works.
    marks = [torch.cuda.Event(enable_timing=True) for _ in range(batches + 1)]
    clocks = []
    marks[0].record()
    for i in range(batches):
        for _ in range(per_batch):
            fn()
        marks[i + 1].record()
        if read_clock:
            clocks.append(sm_clock_mhz())
    while read_clock and not marks[-1].query():
        clocks.append(sm_clock_mhz())
        time.sleep(0.01)
    marks[-1].synchronize()
    times = [a.elapsed_time(b) * 1e3 / per_batch for a, b in zip(marks, marks[1:])]
    clocks = [c for c in clocks if c is not None]
    return Sustained(statistics.median(times), statistics.median(clocks) if clocks else None, batches, per_batch)


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
