"""What scripts/ab_compare.py and scripts/peer_ratio.py both read and print: the cases of a
`bench compare --save-results` file, repetitions pooled, and an aligned (or Markdown) table.
A module, not a script: each imports it from this folder."""
import collections

TO_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def pooled_cases(doc):
    """{case name: dict(samples [µs], sm_mhz, compared [per entry], escape [per entry], phases
    Counter of seconds, stops [stop_reason], mode)} in the file's order. Several entries of one
    case (repetition_index) pool into it: samples and clocks together, phase seconds summed."""
    cases = collections.OrderedDict()
    for entry in doc.get("benchmarks", []):
        bs = entry.get("bench_samples")
        if not isinstance(bs, dict) or "name" not in bs:
            continue
        scale = TO_US.get(bs.get("unit", "us"), 1.0)
        case = cases.setdefault(bs["name"], dict(samples=[], sm_mhz=[], compared=[], escape=[],
                                                 phases=collections.Counter(), stops=[],
                                                 mode=bs.get("mode", "?")))
        case["samples"] += [x * scale for x in bs.get("samples", [])]
        case["sm_mhz"] += list(bs.get("sm_mhz") or [])
        for key, field in (("compared", "compared_samples"), ("escape", "escape_5pct")):
            if entry.get(field) is not None:
                case[key].append(entry[field])
        for phase, seconds in (bs.get("phase_seconds") or {}).items():
            case["phases"][phase] += seconds
        if bs.get("stop_reason"):
            case["stops"].append(bs["stop_reason"])
    return cases


def table(header, rows, markdown, right=None):
    """Aligned columns; Markdown pipes with `markdown`. right: the columns aligned right (numbers),
    every one but the first unless given."""
    right = set(range(1, len(header))) if right is None else right
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]

    def line(cells):
        text = [str(c).rjust(w) if i in right else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths))]
        return "| " + " | ".join(text) + " |" if markdown else "  ".join(text).rstrip()
    if markdown:
        rule = "|" + "|".join(("-" * (w + 1) + ":") if i in right else ("-" * (w + 2))
                              for i, w in enumerate(widths)) + "|"
    else:
        rule = "  ".join("-" * w for w in widths)
    return [line(header), rule] + [line(r) for r in rows]


def self_test_verdict(failures, shown):
    """A self-test's end: the failures (with the output they were found in) and 1, or 0."""
    if failures:
        print(shown)
        print("self-test FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("self-test passed")
    return 0
