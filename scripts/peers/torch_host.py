#!/usr/bin/env python3
"""PyTorch peers for ch01, ch03 and ch05's host-side lessons: uploads, small GEMMs, step loops.

Times what a PyTorch user writes for the same work as the suite's examples, on their shapes:
  - h2d: a 256 MiB host-to-device upload from pageable memory (`x.to("cuda")`) and from pinned
    memory (`x.pin_memory().to("cuda", non_blocking=True)`, the pinning done once, untimed);
    host clock around the copy and a synchronize, as ch03/pinned_staging times it; GB/s;
  - gemm_batching: `count` FP32 64x64x64 products as a loop of torch.mm and as one torch.bmm
    (count 64 and 512, ch01/gemm_batching's default points); us per set;
  - sync_loop: ch01/sync_elimination's loop (32 steps: a 1 MiB batch up, x = 3/4 x + 1/4 batch on
    2^24 floats, the mean square logged) with `.item()` after every step from pageable batches,
    and with pinned batches, non_blocking uploads and the losses read once at the end; ms;
  - training_step: ch01/training_step's 4-layer MLP (Linear + tanh GELU, 4096 wide, batch 8192,
    mean squared error / 2, SGD) under BF16 autocast with FP32 parameters, eager and
    torch.compile; ms per step, samples/s and TFLOP/s at 6*B*d^2*layers; ch01/training_step is
    timed in sustained mode, so these rows are also timed sustained (below);
  - preprocess: ch05/gpu_preprocess's batch (256 decoded 224x224 RGB uint8 images in pinned
    memory) normalised to FP16 CHW on the CPU with torch ops then uploaded, and uploaded raw then
    normalised on the GPU; host clock, ms;
  - jpeg: ch05/jpeg_decode's batch (256 224x224 RGB images made as the example makes them, JPEG
    quality 90 without chroma subsampling, encoded with Pillow) decoded and normalised: one CPU
    thread decoding with torchvision.io.decode_jpeg (libjpeg-turbo) and with OpenCV's cv2.imdecode
    (opencv-python-headless; skipped without it), each then uploaded and normalised on the GPU,
    against torchvision's batched decode_jpeg(device="cuda") (nvJPEG); host clock, ms.
Run it in the same GPU session as `bench compare` of ch01, ch03 and ch05.

  python3 scripts/peers/torch_host.py [--json FILE] [--only h2d,gemm_batching,sync_loop,training_step,preprocess,jpeg] [--burst-only]

Timing: device work with CUDA events around a batch of launches after warm-up (median of several
batches, torch_rowwise.median_us: a burst, near the boost clock); host-bound work with the host
clock around work + synchronize. training_step's rows are also timed as the harness times its
sustained-mode example (torch_inference.timed, torch_rowwise.sustained_us: a 1 s soak, then >= 1 s
of ~20 ms batches back to back, at the power limit's clock): `sustained_ms`, `sustained_tflops` and
the SM clock over those samples; set ours beside those. Each timing starts from the same initial
parameters. About 2 s a row; --burst-only leaves them out. Each training_step row is followed by
its step's GPU timeline (gpu_timeline: span, busy and idle time between kernels, under
torch.profiler), the counterpart of `bench profile ch01/training_step/optimized --tool timeline`.
"""
import statistics
import sys
import time

try:
    import torch

    from torch_inference import peer_main, report, skipped, timed
    from torch_rowwise import median_us
except ImportError as missing:  # the GPU machine has PyTorch; say so anywhere else, and succeed
    print(f"SKIPPED: {missing}")
    sys.exit(0)


def host_median_ms(fn, warmup=3, samples=15):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def run_h2d():
    n = 256 << 20
    pageable = torch.randint(0, 255, (n,), dtype=torch.uint8)
    pinned = pageable.pin_memory()
    dst = torch.empty(n, dtype=torch.uint8, device="cuda")
    for label, fn in (("pageable", lambda: dst.copy_(pageable)),
                      ("pinned", lambda: dst.copy_(pinned, non_blocking=True))):
        ms = host_median_ms(fn)
        report("h2d", f"256 MiB {label}", ms=ms, gbps=n / (ms * 1e-3) / 1e9)


def run_gemm_batching():
    for count in (64, 512):
        a = torch.rand(count, 64, 64, device="cuda") * 2 - 1
        b = torch.rand(count, 64, 64, device="cuda") * 2 - 1
        c = torch.empty_like(a)

        def loop():
            for i in range(count):
                torch.mm(a[i], b[i], out=c[i])

        loop_us = median_us(loop, per_batch=5)
        bmm_us = median_us(lambda: torch.bmm(a, b, out=c))
        report("gemm_batching", f"count {count} torch.mm loop", us=loop_us)
        report("gemm_batching", f"count {count} torch.bmm", us=bmm_us, speedup=loop_us / bmm_us)


def run_sync_loop():
    steps, n, m = 32, 1 << 24, 1 << 18
    x0 = torch.rand(n, device="cuda") * 2 - 1
    batches = [torch.rand(m) for _ in range(steps)]
    pinned = [b.pin_memory() for b in batches]
    reps = n // m

    def step(x, batch):
        x.mul_(0.75).add_(batch.repeat(reps), alpha=0.25)
        return (x * x).mean()

    def sync_every_step():
        x, log = x0.clone(), []
        for b in batches:
            log.append(step(x, b.to("cuda")).item())

    def one_sync():
        x, losses = x0.clone(), []
        for b in pinned:
            losses.append(step(x, b.to("cuda", non_blocking=True)))
        torch.stack(losses).cpu()

    base = host_median_ms(sync_every_step)
    opt = host_median_ms(one_sync)
    report("sync_loop", "item() per step, pageable", ms=base)
    report("sync_loop", "pinned, non_blocking, one sync", ms=opt, speedup=base / opt)


def gpu_timeline(call, calls=5):
    """Where one call's GPU time goes between its kernels (ch01's `bench profile --tool timeline`
    gives ours): torch.profiler around each of `calls` single calls after warm-up, each call's
    kernels, copies and memsets as device intervals. Returns the medians over the calls of the
    span (first start to last end), busy (the intervals' union) and idle (span - busy) in us, the
    activity count, the largest idle gaps of the median call as "name after the gap: us", and its
    activities in start order as "name: us" (`kernels`: which library kernel, with the tile and
    cluster shapes CUTLASS-built kernels carry in their names, did the work)."""
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    seen = []
    for _ in range(calls):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            call()
            torch.cuda.synchronize()
        acts = sorted((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                      if e.device_type == torch.autograd.DeviceType.CUDA)
        if not acts:
            continue
        busy, gaps, reach = 0.0, [], acts[0][0]
        for start, end, name in acts:
            if start > reach:
                gaps.append((start - reach, name))
            busy += max(0.0, end - max(start, reach))
            reach = max(reach, end)
        seen.append((reach - acts[0][0], busy, len(acts), sorted(gaps, reverse=True)[:4],
                     [(name, end - start) for start, end, name in acts]))
    if not seen:
        return None
    seen.sort(key=lambda s: s[0])
    span, busy, count, gaps, listed = seen[len(seen) // 2]
    return dict(span_us=span, busy_us=busy, idle_us=span - busy, activities=count,
                largest_gaps="; ".join(f"{name[:40]}: {gap:.1f}" for gap, name in gaps),
                kernels="; ".join(f"{name[:1000]}: {us:.1f}" for name, us in listed))


def run_training_step():
    """ch01/training_step's model and step: 4 x (Linear, GELU tanh), MSE against a fixed target, SGD,
    FP32 parameters (the master weights) under BF16 autocast.

    The learning rate is 1e-6, not the example's 2 sqrt(width): the work of a step is the same (one
    multiply-add a parameter), but the sustained timing runs hundreds of steps in a row, and at the
    example's rate the parameters went non-finite within them, while ours start every sample from
    freshly filled ones. A board's power, and so its clock under the limiter, depends on the
    operands' bits: on a 2x H200 (2026-11-28) the diverged peer's samples ran at 1980 MHz against
    ours at 1555-1575. At 1e-6 the parameters stay near their initial values, as ours do."""
    batch, width, layers = 8192, 4096, 4
    model = torch.nn.Sequential(*[m for _ in range(layers)
                                  for m in (torch.nn.Linear(width, width), torch.nn.GELU(approximate="tanh"))]).cuda()
    bound = (3.0 / width) ** 0.5  # the example's initialisation: weight variance 1/width, biases in (-1, 1)
    with torch.no_grad():
        for layer in model[::2]:
            layer.weight.uniform_(-bound, bound)
            layer.bias.uniform_(-1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    x = torch.rand(batch, width, device="cuda") * 2 - 1
    target = torch.rand(batch, width, device="cuda") * 2 - 1
    state = {k: v.clone() for k, v in model.state_dict().items()}  # each timing starts from these

    def step(module):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.mse_loss(module(x).float(), target) / 2
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    flops = 6 * batch * width * width * layers
    eager_us = None
    for label, module in (("eager, BF16 autocast, SGD", model), ("torch.compile, BF16 autocast, SGD", None)):
        if module is None:
            try:
                module = torch.compile(model)
                step(module)  # compiles outside the timing
            except Exception as why:  # noqa: BLE001 - a peer that cannot compile here is reported, not fatal
                print(f"training_step: torch.compile skipped: {why}")
                continue
        times = timed(lambda: step(module), flops, sustained=True, restart=lambda: model.load_state_dict(state),
                      batches=9, per_batch=5)
        us, tflops = times.pop("us"), times.pop("tflops")
        if "sustained_us" in times:  # in the row's unit, ms
            times["sustained_ms"] = times.pop("sustained_us") * 1e-3
        # The step updates the parameters in place (ours writes new ones): several times a burst's steps
        # in a row could diverge, and a step on NaNs is not the same work.
        if not all(bool(p.isfinite().all()) for p in model.parameters()):
            times["note"] = "parameters not finite after timing"
        eager_us = eager_us or us
        report("training_step", label, ms=us * 1e-3, tflops=tflops,
               samples_per_s=batch / (us * 1e-6), speedup=eager_us / us, **times)
        model.load_state_dict(state)
        if (timeline := gpu_timeline(lambda: step(module))) is not None:
            report("training_step_timeline", label, **timeline)


def run_preprocess():
    raw = torch.randint(0, 256, (256, 224, 224, 3), dtype=torch.uint8).pin_memory()
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    mean_gpu, std_gpu = mean.cuda(), std.cuda()

    def on_cpu():
        x = ((raw.permute(0, 3, 1, 2).float() / 255 - mean) / std).half()
        x.pin_memory().to("cuda", non_blocking=True)

    def on_gpu():
        x = raw.to("cuda", non_blocking=True)
        ((x.permute(0, 3, 1, 2).float() / 255 - mean_gpu) / std_gpu).half().contiguous()

    cpu = host_median_ms(on_cpu, samples=9)
    gpu = host_median_ms(on_gpu)
    report("preprocess", "normalise on CPU, upload FP16", ms=cpu)
    report("preprocess", "upload uint8, normalise on GPU", ms=gpu, speedup=cpu / gpu)


def jpeg_batch(images=256, height=224, width=224):
    """ch05/jpeg_decode's test images (its test_pixel), encoded as the example encodes them."""
    import io

    import numpy as np
    from PIL import Image

    y, x, c = np.meshgrid(np.arange(height), np.arange(width), np.arange(3), indexing="ij")
    files = []
    for img in range(images):
        gradient = 40 + (x * (3 + c) + y * (5 - c) + img * 37) % 170
        hashed = ((img * 131 + y) * 8191 + x * 3 + c) * 2654435761  # < 2^63: no overflow
        texture = ((hashed >> 27) & 31) - 12
        out = io.BytesIO()
        Image.fromarray((gradient + texture).astype(np.uint8), "RGB").save(out, "JPEG", quality=90, subsampling=0)
        files.append(torch.frombuffer(bytearray(out.getvalue()), dtype=torch.uint8))
    return files


def run_jpeg():
    from torchvision.io import decode_jpeg

    files = jpeg_batch()
    mean = torch.tensor([0.485, 0.456, 0.406], device="cuda").view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225], device="cuda").view(1, 3, 1, 1)
    decoded = torch.empty((len(files), 224, 224, 3), dtype=torch.uint8).pin_memory()

    def normalise(chw_uint8):
        return ((chw_uint8.float() / 255 - mean) / std).half().contiguous()

    def cpu_torchvision():
        for i, f in enumerate(files):  # decode_jpeg gives CHW; the batch is kept HWC as a decoder leaves it
            decoded[i] = decode_jpeg(f).permute(1, 2, 0)
        normalise(decoded.to("cuda", non_blocking=True).permute(0, 3, 1, 2))

    def gpu_nvjpeg():
        normalise(torch.stack(decode_jpeg(files, device="cuda")))

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one decoding thread, as the example's baseline
    try:
        cpu = host_median_ms(cpu_torchvision, samples=7)
    finally:
        torch.set_num_threads(threads)
    report("jpeg", "torchvision decode_jpeg, 1 CPU thread", ms=cpu)
    try:
        import cv2
        import numpy as np

        cv2.setNumThreads(1)
        arrays = [f.numpy() for f in files]

        def cpu_opencv():
            for i, a in enumerate(arrays):
                decoded[i] = torch.from_numpy(cv2.cvtColor(cv2.imdecode(a, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB))
            normalise(decoded.to("cuda", non_blocking=True).permute(0, 3, 1, 2))

        report("jpeg", "OpenCV imdecode, 1 CPU thread", ms=host_median_ms(cpu_opencv, samples=7))
    except ImportError as missing:
        skipped("jpeg", "OpenCV imdecode, 1 CPU thread", missing)
    gpu = host_median_ms(gpu_nvjpeg)
    report("jpeg", "torchvision decode_jpeg(device=cuda) (nvJPEG)", ms=gpu, speedup=cpu / gpu)


def main():
    peer_main(__doc__, {"h2d": lambda copy: run_h2d(), "gemm_batching": lambda copy: run_gemm_batching(),
                        "sync_loop": lambda copy: run_sync_loop(), "training_step": lambda copy: run_training_step(),
                        "preprocess": lambda copy: run_preprocess(), "jpeg": lambda copy: run_jpeg()})


if __name__ == "__main__":
    sys.exit(main())
