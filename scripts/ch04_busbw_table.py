#!/usr/bin/env python3
"""One markdown table of all-reduce busbw (GB/s) against message size, from one GPU session's outputs.

Columns, each where its file gives it (a dash where not):
  ours, one process   ch04/allreduce/optimized's busbw_gbps_<size> metrics (ncclAllReduce, 32 blocks)
  ours, MPI           ch04_mpi --sweep --json, its "nccl" rows (one process per GPU, 32 blocks)
  one-shot            ch04/allreduce_small/one_shot_peer's metrics (peer-memory kernel, sizes <= 1 MiB;
                      the same sweep at every kib point, so their median)
  one-shot, MPI       ch04_mpi --sweep --json, its "one_shot" rows (the same kernel, one process per
                      GPU over CUDA IPC, sizes <= 4 MiB)
  NCCL own blocks     ch04/allreduce_small/ncclAllReduce_own_ctas's metrics (sizes <= 1 MiB)
  NCCL 32, threads    ch04/allreduce_small/baseline's metrics (ncclAllReduce on 32 blocks, each GPU's
                      calls from a thread of its own; sizes <= 1 MiB)
  PyTorch default, 32 CTAs, 64 CTAs   scripts/peers/torch_allreduce.py --json
  ... , 64 blocks     the same from --results-64 / --mpi-64: runs with 64 blocks instead of 32
                      (NCCL_MIN_CTAS=NCCL_MAX_CTAS=64 for the one-process form, --ctas 64 for MPI)
  ours / PyTorch      the best of our columns over the best of PyTorch's settings
Every figure is busbw = bytes per GPU / time x 2(N-1)/N, each a batch of back-to-back calls.

  python3 scripts/ch04_busbw_table.py --results session/results_ch04_1.json \\
      --mpi session/mpi_sweep.json --torch session/peer_torch_allreduce.json
--results takes `bench compare --save-results` files or the chapter binary's Google Benchmark JSON;
where a case has several rows (repetitions, several files), the median is shown.
"""
import argparse
import json
import statistics
import sys

SIZES = [4096 * 4**k for k in range(10)]  # 4 KiB .. 1 GiB, as the chapter's sweep
CASES = {  # column -> case name prefix in the chapter's results
    "ours, one process": "ch04/allreduce/optimized",
    "one-shot": "ch04/allreduce_small/one_shot_peer",
    "NCCL own blocks": "ch04/allreduce_small/ncclAllReduce_own_ctas",
    "NCCL 32, threads": "ch04/allreduce_small/baseline",
}
OURS = ["ours, one process", "ours, one process, 64 blocks", "NCCL 32, threads", "ours, MPI", "ours, MPI, 64 blocks",
        "one-shot", "one-shot, MPI", "NCCL own blocks"]
MPI = {"ours, MPI": "nccl", "one-shot, MPI": "one_shot"}  # column -> ch04_mpi row's algorithm
TORCH = {"PyTorch default": "default", "PyTorch 32 CTAs": "ctas32", "PyTorch 64 CTAs": "ctas64"}


def label(nbytes):
    if nbytes >= 1 << 30:
        return f"{nbytes >> 30}GiB"
    return f"{nbytes >> 20}MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10}KiB"


def from_results(files):
    values = {column: {} for column in CASES}  # column -> size -> [GB/s]
    for name in files:
        with open(name) as f:
            rows = json.load(f).get("benchmarks", [])
        for row in rows:
            case = row.get("name", "")
            for column, prefix in CASES.items():
                if case != prefix and not case.startswith(prefix + "/"):
                    continue
                for size in SIZES:
                    value = row.get(f"busbw_gbps_{label(size)}")
                    if isinstance(value, (int, float)) and value > 0:
                        values[column].setdefault(size, []).append(value)
    return {c: {s: statistics.median(v) for s, v in sizes.items()} for c, sizes in values.items()}


def from_mpi(name):
    """column -> size -> GB/s; rows without "algorithm" (files from before the one-shot) are NCCL's."""
    with open(name) as f:
        data = json.load(f)
    out = {column: {} for column in MPI}
    for column, algorithm in MPI.items():
        for row in data["rows"]:
            if row.get("algorithm", "nccl") == algorithm and row.get("pass") and row["busbw_gbps"] > 0:
                out[column][row["bytes"]] = row["busbw_gbps"]
    return out


def from_torch(name):
    with open(name) as f:
        data = json.load(f)
    out = {column: {} for column in TORCH}
    for column, setting in TORCH.items():
        for row in data["rows"]:
            if row["setting"] == setting:
                out[column][row["bytes"]] = row["busbw_gbps"]
    return out, data


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", nargs="+", action="extend", default=[], help="bench compare --save-results file(s)")
    parser.add_argument("--mpi", help="ch04_mpi --json file")
    parser.add_argument("--results-64", nargs="+", action="extend", default=[], help="as --results, run on 64 blocks")
    parser.add_argument("--mpi-64", help="as --mpi, run with --ctas 64")
    parser.add_argument("--torch", help="scripts/peers/torch_allreduce.py --json file")
    args = parser.parse_args()
    columns = from_results(args.results)
    columns.update(from_mpi(args.mpi) if args.mpi else {column: {} for column in MPI})
    columns["ours, one process, 64 blocks"] = from_results(args.results_64)["ours, one process"]
    columns["ours, MPI, 64 blocks"] = from_mpi(args.mpi_64)["ours, MPI"] if args.mpi_64 else {}
    about = []
    if args.torch:
        torch_columns, data = from_torch(args.torch)
        columns.update(torch_columns)
        about.append(f"PyTorch: {data.get('gpus')}x {data.get('device')}, torch {data.get('torch')}, "
                     f"NCCL {data.get('nccl')}")
    else:
        columns.update({column: {} for column in TORCH})
    shown = [c for c in OURS + list(TORCH) if columns[c]]
    if not shown:
        print("ch04_busbw_table: no busbw figures in the files given", file=sys.stderr)
        return 1
    if any(columns[c] for c in TORCH) and any(columns[c] for c in OURS):
        shown.append("ours / PyTorch")
    for line in about:
        print(f"<!-- {line} -->")
    print("| size | " + " | ".join(shown) + " |")
    print("| --- |" + " ---: |" * len(shown))
    for size in SIZES:
        ours = [columns[c][size] for c in OURS if size in columns[c]]
        theirs = [columns[c][size] for c in TORCH if size in columns[c]]
        cells = []
        for c in shown:
            if c == "ours / PyTorch":
                cells.append(f"{max(ours) / max(theirs):.2f}" if ours and theirs else "—")
            else:
                cells.append(f"{columns[c][size]:.4g}" if size in columns[c] else "—")
        print(f"| {label(size)} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
