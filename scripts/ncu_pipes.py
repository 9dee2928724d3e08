#!/usr/bin/env python3
"""Where a kernel's cycles go, from an Nsight Compute report taken with `--set full`: per kernel,
its duration and SM clock, issue-slot use, each pipe's utilisation (tensor, XU = MUFU, FMA, ALU,
...) and the warp stall reasons (per issued instruction), largest first.

  python3 scripts/ncu_pipes.py REPORT.ncu-rep [REPORT2.ncu-rep ...]
  python3 scripts/ncu_pipes.py --self-test      (the parser on a built-in export: ctest, CI)

It reads `ncu --import REPORT --page raw --csv` (ncu on the PATH), so it runs where ncu is: the
GPU machine. The metric names are matched by pattern, not listed, because they differ between
GPUs and ncu versions (Hopper's wgmma pipe is "gmma").
"""
import csv
import io
import re
import subprocess
import sys

PIPE = re.compile(r"^sm__(inst_executed_pipe_|pipe_)[a-z0-9_]+\.avg\.pct_of_peak_sustained_active$")
STALL = re.compile(r"^smsp__average_warps?_(?:latency_)?issue_stalled_([a-z_]+)_per_issue_active\.ratio$")
HEADLINE = ["gpu__time_duration.sum", "sm__cycles_elapsed.avg.per_second",
            "smsp__issue_active.avg.pct_of_peak_sustained_active",
            "sm__warps_active.avg.pct_of_peak_sustained_active"]


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def summarise_csv(raw, label):
    """The summary lines of one `--page raw --csv` export: a row of metric names, a row of units,
    then a row per kernel."""
    rows = list(csv.reader(io.StringIO(raw)))
    names, units, kernels = rows[0], rows[1], rows[2:]
    lines = []
    for row in kernels:
        value = dict(zip(names, row))
        unit = dict(zip(names, units))
        lines.append(f"== {label}: {value.get('Kernel Name', '?')[:100]}")
        for name in HEADLINE:
            if name in value:
                lines.append(f"  {name} = {value[name]} {unit[name]}")
        pipes = [(number(value[n]), n) for n in names if PIPE.match(n) and number(value[n])]
        for v, n in sorted(pipes, reverse=True)[:14]:
            lines.append(f"  pipe {n} = {v:.1f}%")
        stalls = [(number(value[n]), STALL.match(n).group(1)) for n in names if STALL.match(n)]
        stalls = [(v, n) for v, n in stalls if v]
        for v, n in sorted(stalls, reverse=True)[:10]:
            lines.append(f"  stall {n} = {v:.3f} per issue")
    return lines


def summarise(report):
    raw = subprocess.run(["ncu", "--import", report, "--page", "raw", "--csv"], capture_output=True,
                         text=True, check=True).stdout
    print("\n".join(summarise_csv(raw, report)))


# A two-kernel export in ncu's shape (names, units, one row per kernel; numbers may carry commas).
SAMPLE = (
    '"Kernel Name","gpu__time_duration.sum","sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",'
    '"sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active","sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed",'
    '"smsp__average_warps_issue_stalled_wait_per_issue_active.ratio","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"\n'
    '"","ms","%","%","%","",""\n'
    '"k1","1,293.2","45.4","46.8","15.6","1.398","0.520"\n'
    '"k2","1.07","56.7","58.6","19.4","0.200","0.900"\n')


def self_test():
    lines = summarise_csv(SAMPLE, "sample")
    expected_k1 = ["== sample: k1", "  gpu__time_duration.sum = 1,293.2 ms",
                   "  pipe sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active = 46.8%",
                   "  pipe sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active = 45.4%",
                   "  stall wait = 1.398 per issue", "  stall barrier = 0.520 per issue"]
    assert lines[:6] == expected_k1, lines[:6]  # pipes and stalls largest first; the elapsed-% FMA column is not a pipe row
    assert lines[6] == "== sample: k2" and lines[-1] == "  stall wait = 0.200 per issue", lines[6:]
    print("ncu_pipes self-test: ok")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if sys.argv[1] == "--self-test":
        self_test()
        sys.exit(0)
    for path in sys.argv[1:]:
        summarise(path)
