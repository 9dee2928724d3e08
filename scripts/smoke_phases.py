#!/usr/bin/env python3
"""Where the chapter smoke tests' GPU time goes: the harness's phase times (verify, warmup,
escape_check, samples, final_check; the memoisation probe runs among the samples) summed per
chapter and listed for the slowest cases, from the files each smoke test writes under
<build>/smoke/<chapter>/ (--bench_samples_out).

  python3 scripts/smoke_phases.py build/default/smoke [--ctest-log LOG] [--top N]
  python3 scripts/smoke_phases.py --self-test      (the summary on built-in files: ctest, CI)

Phases do not include a case's workload construction (allocation, input fill, library tuning)
or the process's start: given ctest's log (`./bench test`'s output or LastTest.log), each
chapter's test time is printed beside its phases and the difference as "outside phases".
"""
import json
import os
import re
import sys
import tempfile

TEST_TIME = re.compile(r"Test\s+#\d+: chapter\.(\S+) \.+.*?([0-9.]+) sec")


def read_cases(smoke_dir):
    """{chapter: [(case name, {phase: seconds})]} from <smoke_dir>/<chapter>/*.json."""
    chapters = {}
    for chapter in sorted(os.listdir(smoke_dir)):
        folder = os.path.join(smoke_dir, chapter)
        if not os.path.isdir(folder):
            continue
        for file in sorted(os.listdir(folder)):
            if not file.endswith(".json"):
                continue
            with open(os.path.join(folder, file)) as f:
                case = json.load(f)
            chapters.setdefault(chapter, []).append((case.get("name", file), case.get("phase_seconds", {})))
    return chapters


def test_times(log_text):
    """{chapter: seconds} of the chapter.<name> tests in a ctest log."""
    return {m.group(1): float(m.group(2)) for m in TEST_TIME.finditer(log_text)}


def summary(chapters, times, top):
    lines = ["| chapter | cases | phases s | " + " | ".join(["verify", "samples", "final_check", "other phases"]) +
             " | test s | outside phases s |", "|---" * 9 + "|"]
    rows = []
    for chapter, cases in chapters.items():
        total = {}
        for _, phases in cases:
            for name, seconds in phases.items():
                total[name] = total.get(name, 0.0) + seconds
        named = [total.get(k, 0.0) for k in ("verify", "samples", "final_check")]
        other = sum(total.values()) - sum(named)
        test = times.get(chapter)
        rows.append((sum(total.values()), chapter, len(cases), named, other, test))
    for phases, chapter, count, named, other, test in sorted(rows, reverse=True):
        outside = f"{test - phases:.1f}" if test is not None else "-"
        test_text = f"{test:.1f}" if test is not None else "-"
        lines.append(f"| {chapter} | {count} | {phases:.1f} | " + " | ".join(f"{x:.1f}" for x in named) +
                     f" | {other:.1f} | {test_text} | {outside} |")
    slow = sorted(((sum(p.values()), name, p) for cases in chapters.values() for name, p in cases), reverse=True)
    lines.append("")
    lines.append(f"Slowest {top} cases (phase seconds):")
    for seconds, name, phases in slow[:top]:
        parts = ", ".join(f"{k} {v:.2f}" for k, v in sorted(phases.items(), key=lambda kv: -kv[1]))
        lines.append(f"  {seconds:7.2f}  {name}: {parts}")
    return "\n".join(lines)


def self_test():
    with tempfile.TemporaryDirectory() as root:
        def case(chapter, name, phases):
            os.makedirs(os.path.join(root, chapter), exist_ok=True)
            with open(os.path.join(root, chapter, name.replace("/", "_") + ".json"), "w") as f:
                json.dump({"name": name, "phase_seconds": phases}, f)
        case("ch16", "ch16/fa/optimized", {"verify": 2.0, "samples": 0.25, "final_check": 1.0, "warmup": 0.5})
        case("ch16", "ch16/fa/baseline", {"verify": 1.0, "samples": 0.25, "final_check": 0.5})
        case("ch07", "ch07/copy/optimized", {"verify": 0.1, "samples": 0.2, "final_check": 0.1})
        log = ("  3/9 Test #32: chapter.ch16 ..........   Passed   10.00 sec\n"
               "  4/9 Test #23: chapter.ch07 ..........   Passed    1.40 sec\n")
        text = summary(read_cases(root), test_times(log), top=2)
    expected = [
        "| ch16 | 2 | 5.5 | 3.0 | 0.5 | 1.5 | 0.5 | 10.0 | 4.5 |",  # largest first, other = warmup
        "| ch07 | 1 | 0.4 | 0.1 | 0.2 | 0.1 | 0.0 | 1.4 | 1.0 |",
        "     3.75  ch16/fa/optimized: verify 2.00, final_check 1.00, warmup 0.50, samples 0.25",
    ]
    missing = [line for line in expected if line not in text.splitlines()]
    order_ok = text.index("| ch16 |") < text.index("| ch07 |")
    if missing or not order_ok or "ch07/copy/optimized" in text.split("Slowest")[1]:
        print(text)
        print("self-test FAILED: missing", missing, "order ok" if order_ok else "wrong order")
        return 1
    print("self-test passed")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    args = argv[1:]
    if not args or args[0].startswith("-"):
        print(__doc__)
        return 2
    smoke_dir, log, top = args[0], None, 15
    rest = args[1:]
    while rest:
        if rest[0] == "--ctest-log" and len(rest) > 1:
            log, rest = rest[1], rest[2:]
        elif rest[0] == "--top" and len(rest) > 1:
            top, rest = int(rest[1]), rest[2:]
        else:
            print(f"smoke_phases.py: unknown argument '{rest[0]}'", file=sys.stderr)
            return 2
    if not os.path.isdir(smoke_dir):
        print(f"smoke_phases.py: {smoke_dir} is not a folder (run the chapter smoke tests first)", file=sys.stderr)
        return 2
    times = {}
    if log:
        with open(log, errors="replace") as f:
            times = test_times(f.read())
    print(summary(read_cases(smoke_dir), times, top))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
