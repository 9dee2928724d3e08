#!/usr/bin/env python3
"""Why does a host-bound case's median move between processes more than within one? Run one case
in several fresh processes under each of a few conditions and set the spreads side by side.

  python3 scripts/process_spread.py BINARY CASE [--processes N] [--conditions C,C,...] [--json F]
  python3 scripts/process_spread.py --self-test   (on a stand-in binary: ctest, CI)

CASE is a full case name (`ch03/host_feeding/baseline`). A condition is
  plain      the process as `bench compare` starts it;
  cpu:K      every thread of the process bound to CPU K (sched_setaffinity before exec): if the
             medians then agree across processes but differ between CPUs, where the scheduler put
             the thread is what moved them;
  thp        GLIBC_TUNABLES=glibc.malloc.hugetlb=1: malloc's large blocks advised onto transparent
             huge pages (MADV_HUGEPAGE), so each process gets them, not only the lucky ones.
Each process reports its median and its p10 and p90 (the harness's counters), and the kernel's
count of its context switches and page faults (wait4's rusage). A condition's line gives the
spread of its processes' medians, (max - min) / min, beside the mean spread within one process,
(p90 - p10) / median.
Nothing of the machine is changed: no frequency, governor, THP or other system setting.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from bench_results import self_test_verdict


def read_text(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return "unreadable"


def machine_facts():
    model = "unknown"
    for line in read_text("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return {
        "cpus": os.cpu_count(),
        "allowed_cpus": len(os.sched_getaffinity(0)),
        "cpu_model": model,
        "thp_enabled": read_text("/sys/kernel/mm/transparent_hugepage/enabled"),
        "thp_defrag": read_text("/sys/kernel/mm/transparent_hugepage/defrag"),
        "loadavg": read_text("/proc/loadavg"),
    }


def setup_of(condition):
    """The environment and the CPU (or None) a condition runs its process with."""
    env = dict(os.environ)
    cpu = None
    if condition.startswith("cpu:"):
        cpu = int(condition[4:])
    elif condition == "thp":
        env["GLIBC_TUNABLES"] = "glibc.malloc.hugetlb=1"
    elif condition != "plain":
        raise SystemExit(f"unknown condition '{condition}' (plain, cpu:K or thp)")
    return env, cpu


def run_once(binary, case, condition):
    env, cpu = setup_of(condition)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out.json")
        argv = [binary, f"--benchmark_filter=^{case}(/|$)", f"--benchmark_out={out}",
                "--benchmark_out_format=json"]
        child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 preexec_fn=(lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None)
        stderr = child.stderr.read().decode(errors="replace")
        _, status, usage = os.wait4(child.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code != 0 or not os.path.exists(out):
            raise SystemExit(f"{case} under {condition} exited {code}:\n{stderr[-2000:]}")
        with open(out) as f:
            rows = [b for b in json.load(f)["benchmarks"] if b.get("name", "").startswith(case)]
    if not rows:
        raise SystemExit(f"{case}: no such case in {binary}")
    r = rows[0]
    return {"median_us": r["median_us"], "p10_us": r["p10_us"], "p90_us": r["p90_us"],
            "samples": r["samples"], "voluntary_switches": usage.ru_nvcsw,
            "involuntary_switches": usage.ru_nivcsw, "minor_faults": usage.ru_minflt,
            "major_faults": usage.ru_majflt, "user_s": usage.ru_utime, "system_s": usage.ru_stime}


def summarise(runs):
    medians = [r["median_us"] for r in runs]
    within = statistics.mean((r["p90_us"] - r["p10_us"]) / r["median_us"] for r in runs)
    return {"min_us": min(medians), "max_us": max(medians),
            "between_pct": 100 * (max(medians) - min(medians)) / min(medians),
            "within_pct": 100 * within}


# A stand-in chapter binary: its median is 100 ms + 10 ms x the CPU it runs on (first allowed),
# +50 ms when GLIBC_TUNABLES is set, so each condition's effect is known; exits 3 when its filter
# names the case "broken".
STAND_IN = r"""#!/usr/bin/env python3
import json, os, sys
args = dict(a.split("=", 1) for a in sys.argv[1:])
if "broken" in args["--benchmark_filter"]:
    print("planted failure", file=sys.stderr); sys.exit(3)
ms = 100 + 10 * min(os.sched_getaffinity(0)) + (50 if os.environ.get("GLIBC_TUNABLES") else 0)
row = {"name": "chXX/example/baseline/iterations:1/manual_time", "median_us": ms * 1e3,
       "p10_us": ms * 990, "p90_us": ms * 1010, "samples": 10}
json.dump({"benchmarks": [row]}, open(args["--benchmark_out"], "w"))
"""


def self_test():
    failures, shown = [], []
    with tempfile.TemporaryDirectory() as d:
        binary = os.path.join(d, "chXX")
        with open(binary, "w") as f:
            f.write(STAND_IN)
        os.chmod(binary, 0o755)
        case = "chXX/example/baseline"
        plain = [run_once(binary, case, "plain") for _ in range(2)]
        if any(abs(r["median_us"] - (100 + 10 * min(os.sched_getaffinity(0))) * 1e3) > 1 for r in plain):
            failures.append(f"plain: medians {[r['median_us'] for r in plain]}")
        if run_once(binary, case, "cpu:0")["median_us"] != 100e3:
            failures.append("cpu:0 did not bind the process to CPU 0")
        if run_once(binary, case, "thp")["median_us"] < 150e3:
            failures.append("thp did not set GLIBC_TUNABLES")
        s = summarise([{"median_us": 100.0, "p10_us": 95.0, "p90_us": 105.0},
                       {"median_us": 120.0, "p10_us": 114.0, "p90_us": 126.0}])
        if abs(s["between_pct"] - 20) > 1e-9 or abs(s["within_pct"] - 10) > 1e-9:
            failures.append(f"summary {s}")
        for condition, case_name, says in (("cpu:x", case, "invalid literal"),
                                           ("hugepages", case, "unknown condition"),
                                           ("plain", "chXX/broken/baseline", "planted failure")):
            try:
                run_once(binary, case_name, condition)
                failures.append(f"{condition} {case_name}: not refused")
            except (SystemExit, ValueError) as e:
                shown.append(str(e))
                if says not in str(e):
                    failures.append(f"{condition} {case_name}: refused without '{says}': {e}")
        # A misspelt condition is refused before any process runs (the first would fail here).
        early = subprocess.run([sys.executable, os.path.abspath(__file__), binary, "chXX/broken/baseline",
                                "--conditions", "plain,hugepages"], capture_output=True, text=True)
        shown.append(early.stdout + early.stderr)
        if early.returncode == 0 or "unknown condition" not in early.stderr or "planted" in early.stderr:
            failures.append(f"a misspelt condition after a good one: {early.stderr.strip()}")
    return self_test_verdict(failures, "\n".join(shown))


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("binary")
    p.add_argument("case")
    p.add_argument("--processes", type=int, default=4)
    p.add_argument("--conditions", default="plain,cpu:1,cpu:7,thp")
    p.add_argument("--json", help="write every process's figures here")
    a = p.parse_args()
    conditions = a.conditions.split(",")
    for condition in conditions:  # a misspelt last condition is refused before the first runs
        setup_of(condition)
    facts = machine_facts()
    print(" ".join(f"{k}={v}" for k, v in facts.items()), flush=True)
    report = {"machine": facts, "case": a.case, "conditions": {}}
    for condition in conditions:
        runs = []
        for _ in range(a.processes):
            runs.append(run_once(a.binary, a.case, condition))
            r = runs[-1]
            print(f"  {condition:>7} median {r['median_us'] / 1e3:9.3f} ms  p10-p90 "
                  f"{r['p10_us'] / 1e3:.3f}-{r['p90_us'] / 1e3:.3f}  samples {r['samples']:.0f}  "
                  f"switches {r['voluntary_switches']}/{r['involuntary_switches']} (vol/invol)  "
                  f"faults {r['minor_faults']}/{r['major_faults']}  user {r['user_s']:.2f} s",
                  flush=True)
        s = summarise(runs)
        report["conditions"][condition] = {"runs": runs, **s}
        print(f"{a.case} {condition}: medians {s['min_us'] / 1e3:.3f}-{s['max_us'] / 1e3:.3f} ms, "
              f"between processes {s['between_pct']:.1f}%, within one {s['within_pct']:.1f}%",
              flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
