#!/usr/bin/env python3
"""The A/B of sustained mode's soak: the fixed soak (`-- --bench_fixed_soak`) against the
adaptive one (the default), from results files saved by `bench compare --save-results`, each
side run more than once, interleaved, on one warm GPU (docs/architecture.md, step 6).

  python3 scripts/soak_ab.py --fixed F1.json F2.json --adaptive A1.json A2.json [--only TEXT]
  python3 scripts/soak_ab.py --self-test      (the checks on built-in files: ctest)

For every sustained case (those with a soak) it prints each run's median, the adaptive side's
over the fixed side's, and four signs of a soak that stopped before the board had settled:
  - ratio: adaptive median over fixed (median of each side's runs); `fixed spread` is how far
    the fixed runs' medians are apart, the noise a difference must stand out of;
  - early: the median of a run's first 10 samples over the median of all its samples, on each
    side (an early stop leaves the first samples faster: under 1 where the fixed side is not);
  - tail: the samples' median over the soak's last 5 windows (a board still heating after the
    soak samples slower than it soaked);
  - after: in the fixed runs, which soak to the cap and record where the rule would have
    stopped, how much the soak's last 5 windows rose over the 5 before that point.
It ends with the totals of the soak phase and of all phases a file, and a verdict: REJECT lines
for a result that says the adaptive soak changes the measurement, else `no sign`.
"""
import json
import os
import statistics
import sys
import tempfile

WINDOWS = 5  # the rule's windows (harness/src/soak.hpp, SoakRule::windows)
EARLY = 10   # samples counted as a run's first


def load(path):
    """{case name: bench_samples} of the sustained cases of one results file."""
    with open(path) as f:
        doc = json.load(f)
    cases = {}
    for row in doc.get("benchmarks", []):
        s = row.get("bench_samples")
        if s and s.get("mode") == "sustained" and s.get("samples"):
            cases[s["name"]] = s
    return cases


def median(values):
    return statistics.median(values) if values else float("nan")


def early(s):
    x = s["samples"]
    return median(x[:EARLY]) / median(x) if len(x) > EARLY else float("nan")


def tail(s):
    w = s.get("soak_windows_us", [])
    return median(s["samples"]) / median(w[-WINDOWS:]) if len(w) >= WINDOWS else float("nan")


def after(s):
    """Fixed runs: the rise of the soak's last windows over those where the rule would stop."""
    w, n = s.get("soak_windows_us", []), s.get("soak_settled_windows")
    if n is None or n < WINDOWS or len(w) < WINDOWS:
        return float("nan")
    return median(w[-WINDOWS:]) / median(w[n - WINDOWS:n]) - 1


def fmt(x, pattern="{:+.2%}"):
    return "-" if x != x else pattern.format(x)


def report(fixed, adaptive, only=""):
    names = sorted(set.intersection(*(set(r) for r in fixed + adaptive)))
    names = [n for n in names if only in n]
    lines, rows = [], []
    lines.append("| case | fixed us | adaptive us | ratio | fixed spread | soak s F / A (stop) | "
                 "early F / A | tail F / A | after |")
    lines.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in names:
        f = [median(r[name]["samples"]) for r in fixed]
        a = [median(r[name]["samples"]) for r in adaptive]
        ratio = median(a) / median(f)
        spread = max(f) / min(f) - 1
        soak_f = median([r[name]["phase_seconds"].get("soak", 0) for r in fixed])
        soak_a = median([r[name]["phase_seconds"].get("soak", 0) for r in adaptive])
        stops = ",".join(r[name].get("soak_stop", "?") for r in adaptive)
        early_f = median([early(r[name]) for r in fixed])
        early_a = median([early(r[name]) for r in adaptive])
        tail_f = median([tail(r[name]) for r in fixed])
        tail_a = median([tail(r[name]) for r in adaptive])
        rises = [after(r[name]) for r in fixed]
        rises = [x for x in rises if x == x]
        rise = max(rises) if rises else float("nan")
        apart = min(a) > max(f) or max(a) < min(f)  # every adaptive run on one side of every fixed
        rows.append(dict(name=name, ratio=ratio, spread=spread, apart=apart, early_f=early_f,
                         early_a=early_a, rise=rise))
        lines.append(
            f"| {name} | {' '.join(f'{x:.1f}' for x in f)} | {' '.join(f'{x:.1f}' for x in a)} | "
            f"{fmt(ratio - 1)} | {fmt(spread, '{:.2%}')} | {soak_f:.2f} / {soak_a:.2f} ({stops}) | "
            f"{fmt(early_f - 1)} / {fmt(early_a - 1)} | {fmt(tail_f - 1)} / {fmt(tail_a - 1)} | "
            f"{fmt(rise)} |")
    lines.append("")
    for label, runs in (("fixed", fixed), ("adaptive", adaptive)):
        for i, r in enumerate(runs):
            soak = sum(s["phase_seconds"].get("soak", 0) for s in r.values())
            phases = sum(sum(s["phase_seconds"].values()) for s in r.values())
            lines.append(f"{label} run {i + 1}: {len(r)} sustained cases, soak {soak:.1f} s, "
                         f"all their phases {phases:.1f} s")
    lines.append("")
    verdict = []
    if rows:
        shift = median([r["ratio"] for r in rows]) - 1
        if abs(shift) > 0.005:
            verdict.append(f"REJECT: the cases' median ratio is {shift:+.2%} (over 0.5% either way)")
        moved = [r["name"] for r in rows
                 if r["apart"] and abs(r["ratio"] - 1) > max(0.01, 2 * r["spread"])]
        if len(moved) >= 3:
            verdict.append(f"REJECT: {len(moved)} cases moved past 1% and twice the fixed runs' "
                           f"spread, every run on one side: {', '.join(moved)}")
        risen = [r["name"] for r in rows if r["rise"] == r["rise"] and r["rise"] > 0.01]
        if len(risen) > 2:
            verdict.append(f"REJECT: in {len(risen)} fixed soaks the board rose over 1% after the "
                           f"rule would have stopped: {', '.join(risen)}")
        drift = (median([r["early_a"] for r in rows if r["early_a"] == r["early_a"]]) -
                 median([r["early_f"] for r in rows if r["early_f"] == r["early_f"]]))
        if drift < -0.005:
            verdict.append(f"REJECT: the adaptive runs' first {EARLY} samples are {drift:+.2%} "
                           "faster, against the fixed runs' (a soak that stopped early)")
    lines.extend(verdict or ["no sign that the adaptive soak changes the measurement"])
    return "\n".join(lines), verdict


def self_test():
    def case(name, medians_us, soak_s, stop, windows, settled=None, first=None):
        samples = list(medians_us) * 30
        if first is not None:
            samples = [first] * EARLY + samples
        s = {"name": name, "mode": "sustained", "samples": samples, "soak_stop": stop,
             "phase_seconds": {"soak": soak_s, "samples": 1.0}, "soak_windows_us": windows}
        if settled is not None:
            s["soak_settled_windows"] = settled
        return {"name": name + "/real_time", "bench_samples": s}

    flat = [100.0] * 25
    rising = [95.0 + 0.2 * i for i in range(25)]  # +5% across the soak, past where it "settled"
    with tempfile.TemporaryDirectory() as root:
        def save(file, rows):
            path = os.path.join(root, file)
            with open(path, "w") as f:
                json.dump({"benchmarks": rows + [{"name": "ch16/hot_case", "bench_samples": {
                    "name": "ch16/hot_case", "mode": "hot", "samples": [1.0]}}]}, f)
            return load(path)
        good_f = [save(f"f{i}.json", [case(f"ch16/c{k}", [100.0 + 0.1 * i], 1.0, "fixed", flat, 5)
                                      for k in range(4)]) for i in range(2)]
        good_a = [save(f"a{i}.json", [case(f"ch16/c{k}", [100.05], 0.2, "settled", flat[:5], 5)
                                      for k in range(4)]) for i in range(2)]
        text, verdict = report(good_f, good_a)
        bad_f = [save(f"bf{i}.json", [case(f"ch16/c{k}", [100.0], 1.0, "fixed", rising, 5)
                                      for k in range(4)]) for i in range(2)]
        bad_a = [save(f"ba{i}.json", [case(f"ch16/c{k}", [98.0], 0.2, "settled", rising[:5], 5,
                                           first=96.0) for k in range(4)]) for i in range(2)]
        bad_text, bad_verdict = report(bad_f, bad_a)
    failures = []
    if verdict or "no sign" not in text or "ch16/hot_case" in text:
        failures.append("a clean A/B was rejected, or a hot case listed")
    if "fixed run 1: 4 sustained cases, soak 4.0 s" not in text:
        failures.append("the soak totals")
    for what in ("median ratio", "cases moved", "rose over 1%", "samples are"):
        if not any(what in v for v in bad_verdict):
            failures.append(f"no REJECT for {what}")
    if failures:
        print(text, bad_text, sep="\n\n")
        print("self-test FAILED:", "; ".join(failures))
        return 1
    print("self-test passed")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    fixed, adaptive, only, into = [], [], "", None
    for arg in argv[1:]:
        if arg in ("--fixed", "--adaptive", "--only"):
            into = arg
        elif into == "--fixed":
            fixed.append(load(arg))
        elif into == "--adaptive":
            adaptive.append(load(arg))
        elif into == "--only":
            only, into = arg, None
        else:
            into = None
    if not fixed or not adaptive:
        print(__doc__)
        return 2
    text, verdict = report(fixed, adaptive, only)
    print(text)
    return 1 if verdict else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
