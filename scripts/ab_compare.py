#!/usr/bin/env python3
"""The A/B of two harness configurations: the same cases run under configuration A and under
configuration B (a harness flag off and on, say), each side run more than once, interleaved
(A B B A) on one machine, every run saved with `bench compare --save-results FILE.json`.

  python3 scripts/ab_compare.py --a A1.json A2.json --b B1.json B2.json [--a-name deferred]
      [--b-name interleaved] [--only TEXT] [--variants optimized,baseline] [--markdown]
  python3 scripts/ab_compare.py --self-test      (the tables on built-in runs: ctest, CI)

Per case present on both sides (its name holds --only; its variant, the third part of the name,
is in --variants): each run's median (of its samples, in µs), B/A = the ratio of the sides'
medians (a side's median is the median of its runs' medians), each side's spread (the largest
run median over the smallest, minus 1: what the same configuration moves between runs), each
side's SM clock (each run's median of sm_mhz, then the median over the runs; the runs' range
beside it), and each run's compared_samples and escape_5pct. Then per side and run: the case
phases' seconds summed over the cases shown (soak, samples, deferred_checks, verify, the other
phases, total) and the count of each stop reason. Last, a verdict per variant: how many of its
cases moved by more than the larger of the two sides' spreads, and which way; a case inside
it did not stand out of the run-to-run noise. With one run a side the spread is 0 and every
difference counts: run each side at least twice.

A file that holds several repetitions of a case (repetition_index) pools them into that run:
their samples and clocks together, their phase seconds summed. --markdown prints the tables as
Markdown (the same columns).
"""
import argparse
import collections
import json
import os
import statistics
import sys

from bench_results import pooled_cases, self_test_verdict, table

PHASES = ("soak", "samples", "deferred_checks", "verify")


class Run:
    """One saved file's cases (bench_results.pooled_cases) under a label."""

    def __init__(self, label, doc):
        self.label = label
        self.cases = pooled_cases(doc)


def load(path):
    with open(path) as f:
        return Run(os.path.basename(path), json.load(f))


def variant(name):
    parts = name.split("/")
    return parts[2] if len(parts) > 2 else ""


def median(values):
    return statistics.median(values) if values else None


def spread(values):
    return max(values) / min(values) - 1 if len(values) > 1 and min(values) > 0 else 0.0


def case_row(name, side_a, side_b):
    """The numbers of one case: per side, the run medians, MHz medians, compared, escape."""
    row = dict(name=name)
    for key, runs in (("a", side_a), ("b", side_b)):
        present = [r.cases[name] for r in runs if name in r.cases and r.cases[name]["samples"]]
        meds = [median(c["samples"]) for c in present]
        mhz = [median(c["sm_mhz"]) for c in present if c["sm_mhz"]]
        row[key] = dict(runs=[median(r.cases[name]["samples"]) if name in r.cases and r.cases[name]["samples"]
                              else None for r in runs],
                        median=median(meds), spread=spread(meds), mhz=median(mhz), mhz_runs=mhz,
                        compared=[c["compared"] for c in present], escape=[c["escape"] for c in present])
    row["ratio"] = row["b"]["median"] / row["a"]["median"]
    row["noise"] = max(row["a"]["spread"], row["b"]["spread"])
    return row


def select(side_a, side_b, only, variants):
    names_a = {n for r in side_a for n in r.cases}
    names_b = {n for r in side_b for n in r.cases}
    ordered = list(collections.OrderedDict.fromkeys(n for r in side_a + side_b for n in r.cases))
    keep = [n for n in ordered if n in names_a and n in names_b and (not only or only in n)
            and (not variants or variant(n) in variants)]
    keep.sort(key=lambda n: (n.split("/")[:2], variants.index(variant(n)) if variants else 0, n))
    one_sided = [n for n in ordered if (n in names_a) != (n in names_b) and (not only or only in n)
                 and (not variants or variant(n) in variants)]
    return keep, one_sided


def fmt_us(x):
    return "-" if x is None else f"{x:.1f}"


def fmt_counts(lists, spec="g"):
    """compared_samples / escape_5pct per run: '94 93'; '-' where a run lacks the field."""
    return " ".join(format(v[0], spec) if v else "-" for v in lists) or "-"


def fmt_mhz(side):
    if side["mhz"] is None:
        return "-"
    lo, hi = min(side["mhz_runs"]), max(side["mhz_runs"])
    return f"{side['mhz']:.0f}" if len(side["mhz_runs"]) < 2 else f"{side['mhz']:.0f} ({lo:.0f}-{hi:.0f})"


def case_table(rows, a_name, b_name, markdown):
    prefixes = {"/".join(r["name"].split("/")[:2]) for r in rows}
    strip = len(next(iter(prefixes))) + 1 if len(prefixes) == 1 else 0
    header = ["case", f"{a_name} µs (runs)", f"{b_name} µs (runs)", "B/A", "spread A", "spread B",
              "MHz A", "MHz B", "cmp A", "cmp B", "esc5 A", "esc5 B"]
    body = []
    for r in rows:
        a, b = r["a"], r["b"]
        mark = ("\\*" if markdown else "*") if abs(r["ratio"] - 1) > r["noise"] else ""
        body.append([r["name"][strip:], " / ".join(fmt_us(x) for x in a["runs"]),
                     " / ".join(fmt_us(x) for x in b["runs"]), f"{r['ratio']:.4f}{mark}",
                     f"{a['spread'] * 100:.2f}%", f"{b['spread'] * 100:.2f}%", fmt_mhz(a), fmt_mhz(b),
                     fmt_counts(a["compared"]), fmt_counts(b["compared"]),
                     fmt_counts(a["escape"], ".2g"), fmt_counts(b["escape"], ".2g")])
    title = f"Cases of {next(iter(prefixes))}" if strip else "Cases"
    return ([f"{title}: A = {a_name}, B = {b_name}; * = B/A moved by more than the larger spread; "
             "MHz = median SM clock (runs' range); cmp = compared_samples, esc5 = escape_5pct, per run"] +
            table(header, body, markdown))


def phase_table(sides, names, markdown):
    header = ["side", "run", "cases"] + list(PHASES) + ["other", "total", "stop reasons"]
    body = []
    for side_name, runs in sides:
        for run in runs:
            total = collections.Counter()
            stops = collections.Counter()
            count = 0
            for name in names:
                case = run.cases.get(name)
                if case is None:
                    continue
                count += 1
                total.update(case["phases"])
                stops.update(case["stops"])
            named = [total.get(p, 0.0) for p in PHASES]
            whole = sum(total.values())
            body.append([side_name, run.label, str(count)] + [f"{x:.1f}" for x in named] +
                        [f"{whole - sum(named):.1f}", f"{whole:.1f}",
                         ", ".join(f"{k} {v}" for k, v in sorted(stops.items())) or "-"])
    return (["Phase seconds summed over those cases, per run"] +
            table(header, body, markdown, right=set(range(2, len(header) - 1))))


def verdicts(rows, a_name, b_name):
    by_variant = collections.OrderedDict()
    for r in rows:
        by_variant.setdefault(variant(r["name"]), []).append(r)
    lines = ["Verdict per variant (moved = |B/A - 1| above the larger of the two sides' spreads):"]
    for name, group in list(by_variant.items()) + ([("all", rows)] if len(by_variant) > 1 else []):
        faster = [r["ratio"] for r in group if r["ratio"] < 1 and 1 - r["ratio"] > r["noise"]]
        slower = [r["ratio"] for r in group if r["ratio"] > 1 and r["ratio"] - 1 > r["noise"]]
        still = len(group) - len(faster) - len(slower)

        def span(xs):
            if not xs:
                return ""
            return f" (B/A {xs[0]:.4f})" if len(xs) == 1 else f" (B/A {min(xs):.4f}-{max(xs):.4f})"
        lines.append(f"  {name}: {len(group)} cases: {len(faster)} faster under {b_name}{span(faster)}, "
                     f"{len(slower)} slower under {b_name}{span(slower)}, {still} within the spread")
    return lines


def report(side_a, side_b, a_name, b_name, only="", variants=(), markdown=False):
    variants = list(variants)
    names, one_sided = select(side_a, side_b, only, variants)
    if not names:
        return "No case is on both sides" + (f" (--only {only!r})" if only else "") + \
               (f" (--variants {','.join(variants)})" if variants else "") + "."
    rows = [case_row(n, side_a, side_b) for n in names]
    sides_text = "; ".join(f"{n} = {', '.join(r.label for r in runs)}" for n, runs in
                           ((a_name, side_a), (b_name, side_b)))
    out = [f"A/B: {sides_text}. Times are medians of each run's samples (µs); a side's median is "
           f"the median of its runs'; spread = max/min of a side's run medians - 1.", ""]
    out += case_table(rows, a_name, b_name, markdown) + [""]
    out += phase_table(((a_name, side_a), (b_name, side_b)), names, markdown) + [""]
    out += verdicts(rows, a_name, b_name)
    if min(len(side_a), len(side_b)) < 2:
        out.append("  (one run on a side: its spread is 0, so any difference counts as moved; run each side twice)")
    if one_sided:
        out += ["", f"{len(one_sided)} cases on one side only: " + ", ".join(one_sided[:8]) +
                (" ..." if len(one_sided) > 8 else "")]
    return "\n".join(out)


# Built-in runs for --self-test: two cases of ab_deferred1/2 and ab_interleaved1/2.json (ch16
# flash_attention, 2x H200, 2026-11-28), their first 10 samples and clocks rounded, plus a case
# only on side A; phase seconds rounded to ms.
def _entry(name, samples, mhz, phases, stop, compared, escape=0.0):
    return dict(name=name + "/iterations:1/manual_time", compared_samples=compared, escape_5pct=escape,
                repetition_index=0, bench_samples=dict(name=name, unit="us", mode="sustained", stop_reason=stop,
                                                       samples=samples, sm_mhz=mhz, phase_seconds=phases))


OPT = "ch16/flash_attention/optimized/b:4/s:4096/d:128/causal:0"
BASE = "ch16/flash_attention/baseline/b:4/s:4096/d:128/causal:1"
SELF_TEST_RUNS = {
    "A1": [_entry(OPT, [1926.3, 1681.6, 1846.5, 1866.4, 1838.2, 1774.5, 1869.5, 1807.0, 1861.9, 1843.2],
                  [1672, 1924, 1856, 1717, 1733, 1778, 1720, 1761, 1812, 1719],
                  dict(deferred_checks=4.57, samples=3.31, soak=1.02, verify=0.37, warmup=0.01), "timeout", 115.0,
                  3.4e-05),
           _entry(BASE, [6388.8, 6328.0, 6316.0, 6332.0, 6329.9, 6336.2, 6342.1, 6393.2, 6351.9, 6400.5],
                  [1796, 1929, 1960, 1954, 1954, 1960, 1954, 1884, 1901, 1878],
                  dict(deferred_checks=0.9, samples=1.51, soak=1.01, verify=0.18, warmup=0.03), "converged", 42.0),
           # not in the real files: a case that side B lacks
           _entry("ch16/flash_attention/wgmma_ws/b:4/s:4096/d:128/causal:0", [2000.0] * 10, [1800] * 10,
                  dict(soak=1.0, samples=1.0), "converged", 10.0)],
    "A2": [_entry(OPT, [1869.9, 1703.6, 1759.6, 1811.9, 1806.5, 1799.6, 1800.2, 1807.8, 1809.0, 1906.7],
                  [1656, 1877, 1945, 1776, 1777, 1781, 1777, 1778, 1747, 1690],
                  dict(deferred_checks=4.49, samples=3.27, soak=1.0, verify=0.36, warmup=0.01), "timeout", 113.0,
                  2.65e-05),
           _entry(BASE, [6521.0, 6332.6, 6325.0, 6392.1, 6322.1, 6314.9, 6316.1, 6330.5, 6355.3, 6330.9],
                  [1706, 1943, 1943, 1884, 1955, 1975, 1955, 1956, 1956, 1925],
                  dict(deferred_checks=0.94, samples=1.58, soak=1.02, verify=0.18, warmup=0.03), "converged", 44.0)],
    "B1": [_entry(OPT, [1846.9, 1696.0, 1680.3, 1676.0, 1676.2, 1681.0, 1684.3, 1679.8, 1676.3, 1676.9],
                  [1646, 1900, 1947, 1954, 1954, 1918, 1929, 1918, 1957, 1960],
                  dict(samples=3.35, soak=1.02, verify=0.34, warmup=0.01), "converged", 49.0),
           _entry(BASE, [6609.5, 6333.9, 6331.2, 6367.0, 6318.8, 6338.8, 6337.5, 6324.7, 6329.3, 6315.9],
                  [1625, 1954, 1960, 1912, 1954, 1944, 1929, 1962, 1960, 1955],
                  dict(samples=2.16, soak=1.02, verify=0.26, warmup=0.03), "converged", 39.0)],
    "B2": [_entry(OPT, [1949.5, 1733.7, 1688.4, 1683.9, 1684.5, 1693.2, 1713.8, 1683.9, 1746.1, 1694.1],
                  [1659, 1855, 1926, 1956, 1955, 1866, 1819, 1960, 1960, 1883],
                  dict(samples=3.36, soak=1.02, verify=0.52, warmup=0.01), "converged", 49.0),
           _entry(BASE, [6470.4, 6367.2, 6331.8, 6323.9, 6343.6, 6330.9, 6328.3, 6327.4, 6333.4, 6333.8],
                  [1704, 1872, 1960, 1954, 1912, 1941, 1960, 1960, 1941, 1960],
                  dict(samples=2.17, soak=1.02, verify=0.26, warmup=0.03), "converged", 39.0)],
}


def self_test():
    runs = {k: Run(k, {"benchmarks": v, "context": {}}) for k, v in SELF_TEST_RUNS.items()}
    a, b = [runs["A1"], runs["A2"]], [runs["B1"], runs["B2"]]
    failures = []

    def check(what, got, want, tol=1e-6):
        if got is None or abs(got - want) > tol:
            failures.append(f"{what}: got {got}, want {want}")
    opt, base = case_row(OPT, a, b), case_row(BASE, a, b)
    check("A1 opt median", opt["a"]["runs"][0], 1844.85)    # (1843.2 + 1846.5) / 2
    check("A2 opt median", opt["a"]["runs"][1], 1807.15)    # (1806.5 + 1807.8) / 2
    check("B1 opt median", opt["b"]["runs"][0], 1680.05)    # (1679.8 + 1680.3) / 2
    check("B2 opt median", opt["b"]["runs"][1], 1693.65)    # (1693.2 + 1694.1) / 2
    check("opt B/A", opt["ratio"], 1686.85 / 1826.0)
    check("opt A spread", opt["a"]["spread"], 1844.85 / 1807.15 - 1)
    check("opt B spread", opt["b"]["spread"], 1693.65 / 1680.05 - 1)
    check("opt A MHz", opt["a"]["mhz"], (1747 + 1777) / 2)
    check("opt B MHz", opt["b"]["mhz"], (1938 + 1904.5) / 2)
    check("base B/A", base["ratio"], ((6332.55 + 6332.6) / 2) / ((6339.15 + 6330.7) / 2))
    check("base A spread", base["a"]["spread"], 6339.15 / 6330.7 - 1)
    text = report(a, b, "deferred", "interleaved")
    md = report(a, b, "deferred", "interleaved", markdown=True)
    lines = text.splitlines()
    want_lines = [
        "optimized/b:4/s:4096/d:128/causal:0     1844.8 / 1807.2        1680.0 / 1693.7  0.9238*     2.09%     0.81%",
        "deferred     A1       2   2.0      4.8              5.5     0.6    0.0   12.9  converged 1, timeout 1",
        "interleaved  B2       2   2.0      5.5              0.0     0.8    0.0    8.4  converged 2",
        "  optimized: 1 cases: 1 faster under interleaved (B/A 0.9238), 0 slower under interleaved, "
        "0 within the spread",
        "  baseline: 1 cases: 0 faster under interleaved, 0 slower under interleaved, 1 within the spread",
    ]
    for want in want_lines:
        if not any(line.startswith(want) for line in lines):
            failures.append(f"line missing: {want!r}")
    if "wgmma_ws" not in text.split("on one side only")[-1]:
        failures.append("the case on side A only is not named")
    if "1762 (1747-1777)" not in text or "115 113" not in text or "3.4e-05 2.7e-05" not in text:
        failures.append("MHz range, compared_samples or escape_5pct columns wrong")
    if "|---" not in md or not any(l.startswith("| optimized/b:4") for l in md.splitlines()):
        failures.append("--markdown table malformed")
    only = report(a, b, "A", "B", only="causal:1")
    if "optimized" in only.split("Phase")[0] or "baseline/b:4" not in only:
        failures.append("--only did not filter")
    if "baseline/b:4" in report(a, b, "A", "B", variants=["optimized"]).split("Phase")[0]:
        failures.append("--variants did not filter")
    return self_test_verdict(failures, text)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", nargs="+", metavar="JSON", help="side A's runs (bench compare --save-results)")
    p.add_argument("--b", nargs="+", metavar="JSON", help="side B's runs")
    p.add_argument("--a-name", default="A")
    p.add_argument("--b-name", default="B")
    p.add_argument("--only", default="", help="keep the cases whose name contains TEXT")
    p.add_argument("--variants", default="", help="comma-separated variants to keep, in this order")
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--self-test", action="store_true")
    args = p.parse_args()
    if args.self_test:
        return self_test()
    if not args.a or not args.b:
        p.error("give --a and --b files, or --self-test")
    side_a, side_b = [load(f) for f in args.a], [load(f) for f in args.b]
    variants = [v for v in args.variants.split(",") if v]
    print(report(side_a, side_b, args.a_name, args.b_name, args.only, variants, args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
