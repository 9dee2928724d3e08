#!/usr/bin/env python3
"""PyTorch peer for ch04/allreduce: torch.distributed.all_reduce (NCCL backend), one process per GPU.

What a user would call instead of the chapter's ncclAllReduce: FP32 sums of 4 KiB to 1 GiB per
GPU (the chapter's sizes), on every GPU of the machine, with PyTorch's defaults and with NCCL_MIN_CTAS=NCCL_MAX_CTAS=32 and =64 (the
block counts ch04 has measured for its all-reduces, set here the only way PyTorch users can without
code: the environment; "PyTorch's best" is the fastest of the three at each size). busbw as nccl-tests and the chapter define it:
bytes per GPU / time x 2(N-1)/N. NVLink multicast stays off (NCCL_NVLS_ENABLE=0) in every process.
Run it in the same GPU session as `bench compare --chapter ch04`, so the two are comparable.

  python3 scripts/peers/torch_allreduce.py [--json FILE] [--gpus N]

--gpus N uses the first N GPUs (default: all of them), to set 2 beside 4 on one machine.

Timing: every rank's CUDA events around `reps` back-to-back all_reduce calls (50 up to 16 MiB, 10
above, as the chapter's sweep), after 5 warm-up calls and a barrier; the mean per call of the
slowest rank (`us`, busbw from it), as `ch04_mpi` reports, and rank 0's beside it (`us_rank0`),
what this script reported until 2026-11-27: a rank that starts its batch last waits less for the
others, so one rank's time flatters the collective by a few tenths of a percent. A machine
with fewer than 2 GPUs, or without PyTorch, prints SKIPPED with the reason.
"""
import argparse
import json
import os
import sys

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError as missing:  # the GPU machine has PyTorch; say so anywhere else, and succeed
    print(f"SKIPPED: {missing}")
    sys.exit(0)

SETTINGS = {
    "default": {},
    "ctas32": {"NCCL_MIN_CTAS": "32", "NCCL_MAX_CTAS": "32"},
    "ctas64": {"NCCL_MIN_CTAS": "64", "NCCL_MAX_CTAS": "64"},
}


def size_label(nbytes):
    if nbytes >= 1 << 30:
        return f"{nbytes >> 30}GiB"
    return f"{nbytes >> 20}MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10}KiB"


def worker(rank, world, setting, queue):
    os.environ.update(SETTINGS[setting])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    rows, nbytes = [], 4096
    while nbytes <= 1 << 30:
        x = torch.ones(nbytes // 4, device="cuda")
        reps = 50 if nbytes <= 16 << 20 else 10
        for _ in range(5):
            dist.all_reduce(x)
        dist.barrier()
        torch.cuda.synchronize()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            dist.all_reduce(x)
        stop.record()
        torch.cuda.synchronize()
        own_us = start.elapsed_time(stop) * 1e3 / reps
        slowest = torch.tensor([own_us], device="cuda", dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)  # outside the timed batch
        us = slowest.item()
        busbw = nbytes / (us * 1e-6) * 2 * (world - 1) / world * 1e-9
        rows.append(dict(setting=setting, size=size_label(nbytes), bytes=nbytes, us=us, us_rank0=own_us,
                         busbw_gbps=busbw))
        del x
        nbytes *= 4
    if rank == 0:
        queue.put(dict(rows=rows, nccl=".".join(map(str, torch.cuda.nccl.version()))))
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the rows to this file too")
    parser.add_argument("--gpus", type=int, default=0, help="use the first N GPUs (default: all)")
    args = parser.parse_args()
    world = torch.cuda.device_count()
    if args.gpus:
        if args.gpus > world:
            print(f"SKIPPED: --gpus {args.gpus}, this machine has {world}")
            return 0
        world = args.gpus
    if world < 2:
        print(f"SKIPPED: needs 2 or more GPUs, this machine has {world}")
        return 0
    os.environ.update(MASTER_ADDR="127.0.0.1", NCCL_NVLS_ENABLE="0")
    ctx = mp.get_context("spawn")
    rows, nccl = [], "?"
    for port, setting in enumerate(SETTINGS):
        os.environ["MASTER_PORT"] = str(29533 + port)
        queue = ctx.Queue()
        mp.spawn(worker, args=(world, setting, queue), nprocs=world, join=True)
        result = queue.get()
        rows += result["rows"]
        nccl = result["nccl"]
    dev = torch.cuda.get_device_name()
    print(f"# {world}x {dev}, torch {torch.__version__}, NCCL {nccl}: all_reduce FP32 busbw, GB/s")
    sizes = [r["size"] for r in rows if r["setting"] == "default"]
    print("| setting | " + " | ".join(sizes) + " |")
    print("| --- |" + " --- |" * len(sizes))
    for setting in SETTINGS:
        print(f"| {setting} | " + " | ".join(f"{r['busbw_gbps']:.4g}" for r in rows if r["setting"] == setting) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=dev, gpus=world, torch=torch.__version__, nccl=nccl, rows=rows), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
