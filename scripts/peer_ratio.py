#!/usr/bin/env python3
"""Ours beside a PyTorch peer: the medians of an example's cases from `bench compare
--save-results R.json`, set beside the rows a peer script (scripts/peers/, --json FILE) wrote
for the same shapes, per point, with the fastest peer backend and the speed ratio.

  python3 scripts/peer_ratio.py --results R.json --peer peer_sdpa.json --map flash_attention
      [--variants wgmma_ws,fa2_mma_sync] [--markdown]
  python3 scripts/peer_ratio.py --self-test      (the tables on built-in files: ctest, CI)

Two tables, never mixed. Burst: the peer row's `us`, a median of short batches (~0.1-0.2 s of
calls, torch_rowwise.median_us) near the boost clock. Sustained: its `sustained_us`, timed the
way the harness's sustained mode times ours (a soak, then back-to-back batches at the power
limit's clock; torch_rowwise.sustained_us), where the peer file has it (peer scripts without
--burst-only, from 2026-11-28 on). Ours is the median of the case's samples in the mode the
harness ran it (printed); for a sustained-mode example the sustained table is the comparison,
the burst one shows what the peer gains at the boost clock. Each table gives every backend's
time, the best backend, and speed = best peer time / our time (>1: ours is faster) for the
optimized variant and for each step named with --variants.

A map (MAPS below) names the example, the peer rows' kind, how a case's point (the name after
the variant) becomes the peer label that each backend's row extends with " <backend>", and
the backends' order; adding an example is one entry.
"""
import argparse
import collections
import json
import os
import re
import statistics
import sys

from bench_results import pooled_cases, self_test_verdict, table

class PeerMap:
    """example: our cases' prefix; kind: the peer rows' kind; point: a regex on our point
    (b:4/s:4096/...; "" for an example without axes), its named groups, with extra(groups), fill
    `label`, the peer row's label less its backend, which is its last word unless `only` names the
    backends: then a row counts only if its label ends with one of them (a peer script's rows of a
    kind may time other work too, such as the quantisation alone); backends: their column order
    (others found follow)."""

    def __init__(self, example, kind, point, label, backends=(), extra=None, only=()):
        self.example, self.kind, self.point, self.label = example, kind, re.compile(point), label
        self.backends, self.extra, self.only = tuple(backends or only), extra or (lambda groups: {}), tuple(only)

    def split(self, label):
        """(label less backend, backend) of a peer row's label, or None when it is not a backend's."""
        if not self.only:
            return tuple(label.rsplit(" ", 1)) if " " in label else None
        for backend in self.only:
            if label.endswith(" " + backend):
                return label[:-len(backend) - 1], backend
        return None

    def peer_label(self, point):
        m = self.point.fullmatch(point)
        if not m:
            return None
        groups = m.groupdict()
        groups.update(self.extra(groups))
        return self.label.format(**groups)


MAPS = {
    # scripts/peers/torch_inference.py's sdpa rows: "b4 h32 s4096 d128 causal cudnn".
    "flash_attention": PeerMap(
        example="ch16/flash_attention", kind="sdpa",
        point=r"b:(?P<b>\d+)/s:(?P<s>\d+)/d:(?P<d>\d+)/causal:(?P<causal>[01])",
        label="b{b} h32 s{s} d{d} {mask}", backends=("default", "flash", "cudnn"),
        extra=lambda g: {"mask": "causal" if g["causal"] == "1" else "full"}),
    # torch_inference.py's fp8_linear rows: the FP8 ones (the BF16 F.linear row is the baseline's
    # peer, the quantisation-alone row a part), "8192 x 8192 -> 8192 fp8 e4m3 per-tensor, ...".
    "fp8_linear": PeerMap(
        example="ch16/fp8_linear", kind="fp8_linear", point=r"", label="8192 x 8192 -> 8192",
        only=("fp8 e4m3 per-tensor, x quantised, eager", "fp8 e4m3 per-tensor, x quantised, compiled")),
    # torch_decoding.py's block_sparse rows: "h32 s8192 d128 density 0.250 flex_attention (compiled)".
    "block_sparse_attention": PeerMap(
        example="ch18/block_sparse_attention", kind="block_sparse", point=r"",
        label="h32 s8192 d128 density 0.250", only=("flex_attention (compiled)", "sdpa dense bool mask")),
}


def ours(doc, example, variants):
    """{(variant, point): dict(us, mhz, mode, n)} of the example's cases, repetitions pooled."""
    out = {}
    for name, c in pooled_cases(doc).items():
        if not name.startswith(example + "/") or not c["samples"]:
            continue
        parts = name[len(example) + 1:].split("/", 1)
        if parts[0] in variants:
            out[(parts[0], parts[1] if len(parts) > 1 else "")] = dict(
                us=statistics.median(c["samples"]), mode=c["mode"], n=len(c["samples"]),
                mhz=statistics.median(c["sm_mhz"]) if c["sm_mhz"] else None)
    return out


def peer_rows(doc, pmap):
    """{label less backend: OrderedDict(backend: row)} of the peer file's rows of the map's kind."""
    out = collections.OrderedDict()
    for row in doc.get("rows", []):
        parts = pmap.split(row.get("label", "")) if row.get("kind") == pmap.kind else None
        if parts:
            out.setdefault(parts[0], collections.OrderedDict())[parts[1]] = row
    return out


def compare(results, peer, pmap, steps=()):
    """The rows of both tables: [dict(label, point, ours {variant: case}, burst {backend: us},
    sustained {backend: us}, sustained_mhz {backend: MHz})], and the points left unmatched."""
    variants = ["optimized"] + [v for v in steps if v != "optimized"]
    mine = ours(results, pmap.example, variants)
    rows_by_label = peer_rows(peer, pmap)
    points = list(collections.OrderedDict.fromkeys(p for _, p in mine))
    by_label = collections.OrderedDict()
    unmatched = []
    for point in points:
        label = pmap.peer_label(point)
        if label is None or label not in rows_by_label:
            unmatched.append(point)
        else:
            by_label[label] = point
    out = []
    for label in [l for l in rows_by_label if l in by_label]:   # the peer file's order
        point = by_label[label]
        backends = rows_by_label[label]
        row = dict(label=label, point=point, ours={v: mine.get((v, point)) for v in variants},
                   burst={}, sustained={}, sustained_mhz={})
        for backend, r in backends.items():
            if isinstance(r.get("us"), (int, float)):
                row["burst"][backend] = r["us"]
            if isinstance(r.get("sustained_us"), (int, float)):
                row["sustained"][backend] = r["sustained_us"]
                if r.get("sustained_sm_mhz") is not None:
                    row["sustained_mhz"][backend] = r["sustained_sm_mhz"]
        out.append(row)
    peer_only = [l for l in rows_by_label if l not in by_label]
    return variants, out, unmatched, peer_only


def best(times):
    return min(times.items(), key=lambda kv: kv[1]) if times else (None, None)


def speed(peer_us, case):
    return None if peer_us is None or case is None else peer_us / case["us"]


def render(variants, rows, pmap, key, markdown, backends_order):
    backends = list(backends_order) + sorted({b for r in rows for b in r[key]} - set(backends_order))
    backends = [b for b in backends if any(b in r[key] for r in rows)]
    header = (["point"] + [f"ours {v} µs" for v in variants] + [f"{b} µs" for b in backends] +
              ["best µs", "best"] + [f"{v} speed" for v in variants])
    if key == "sustained":
        header[1 + len(variants):1 + len(variants)] = ["ours MHz"]
        header[len(header) - len(variants):len(header) - len(variants)] = ["peer MHz"]
    body = []
    for r in rows:
        if not r[key]:
            continue
        name, time = best(r[key])
        cells = [r["label"]] + [f"{r['ours'][v]['us']:.1f}" if r["ours"][v] else "-" for v in variants]
        if key == "sustained":
            mhz = r["ours"][variants[0]] and r["ours"][variants[0]]["mhz"]
            cells.append(f"{mhz:.0f}" if mhz else "-")
        cells += [f"{r[key][b]:.1f}" if b in r[key] else "-" for b in backends]
        cells += [f"{time:.1f}", name]
        if key == "sustained":
            cells.append(f"{r['sustained_mhz'][name]:.0f}" if name in r["sustained_mhz"] else "-")
        cells += [f"{s:.2f}×" if s is not None else "-" for s in (speed(time, r["ours"][v]) for v in variants)]
        body.append(cells)
    return table(header, body, markdown) if body else []


def report(results, peer, pmap, steps=(), markdown=False, names=("results", "peer")):
    variants, rows, unmatched, peer_only = compare(results, peer, pmap, steps)
    if not rows:
        return f"No case of {pmap.example} matches a {pmap.kind} row of the peer file."
    modes = sorted({r["ours"][v]["mode"] for r in rows for v in variants if r["ours"][v]})
    ctx = results.get("context", {})
    ours_gpu, peer_gpu = ctx.get("gpu_name", "?"), peer.get("device", "?")
    out = [f"{pmap.example} ({names[0]}, {ours_gpu}, mode {'/'.join(modes)}) beside PyTorch {pmap.kind} "
           f"({names[1]}, {peer_gpu}, torch {peer.get('torch', '?')}). Ours: the median of the case's "
           f"samples; speed = best peer time / ours (>1: ours is faster)."]
    if ours_gpu != peer_gpu:
        out.append(f"WARNING: ours ran on {ours_gpu}, the peer on {peer_gpu}.")
    out += ["", "Burst: the peer's `us`, a ~0.1-0.2 s burst near the boost clock (not the clock ours "
                "ran at in sustained mode)"]
    out += render(variants, rows, pmap, "burst", markdown, pmap.backends)
    sustained = render(variants, rows, pmap, "sustained", markdown, pmap.backends)
    out += ["", "Sustained: the peer's `sustained_us`, timed as the harness's sustained mode (soak, then "
                "back-to-back batches at the power limit's clock); MHz = median SM clock"]
    out += sustained or ["  (the peer file has no sustained_us: it was written with --burst-only or "
                         "before the sustained timing; compare the burst table with that in mind)"]
    if unmatched:
        out += ["", "Our points with no peer row: " + ", ".join(unmatched)]
    if peer_only:
        out += ["", "Peer rows with none of our points: " + ", ".join(peer_only)]
    return "\n".join(out)


# Built-in files for --self-test: ab_deferred1.json's b4 s4096 d128 optimized and wgmma_ws cases
# (2x H200, 2026-11-28; samples 10-19 rounded) and peer_sdpa.json's rows for them (burst `us`,
# rounded) plus a d64 row; the sustained_us and sustained_sm_mhz values are invented for the
# test (that peer file has none).
def _case(variant, point, samples, mhz):
    name = f"ch16/flash_attention/{variant}/{point}"
    return dict(name=name + "/iterations:1/manual_time", repetition_index=0,
                bench_samples=dict(name=name, unit="us", mode="sustained", samples=samples, sm_mhz=mhz))


SELF_TEST_RESULTS = {"context": {"gpu_name": "NVIDIA H200"}, "benchmarks": [
    _case("optimized", "b:4/s:4096/d:128/causal:0",
          [1793.1, 1773.4, 1849.6, 1815.1, 1673.8, 1693.7, 1713.3, 1713.2, 1799.3, 1836.9],
          [1762, 1812, 1734, 1733, 1955, 1960, 1883, 1883, 1883, 1718]),
    _case("wgmma_ws", "b:4/s:4096/d:128/causal:0",
          [1961.8, 1924.3, 1970.6, 1958.0, 1983.6, 1949.1, 1962.0, 1963.2, 1904.0, 1812.3],
          [1796, 1838, 1809, 1823, 1794, 1808, 1855, 1804, 1834, 1962]),
    _case("optimized", "b:4/s:4096/d:128/causal:1",
          [1019.9, 1038.2, 1018.4, 1039.5, 1037.3, 1021.6, 1059.0, 1026.1, 998.9, 942.6],
          [1791, 1734, 1766, 1812, 1736, 1781, 1703, 1734, 1792, 1930]),
    _case("wgmma_ws", "b:4/s:4096/d:128/causal:1",
          [1049.0, 1077.2, 1005.5, 1002.9, 1006.8, 1006.4, 1095.0, 1069.4, 1104.7, 1089.4],
          [1838, 1884, 1942, 1963, 1937, 1944, 1941, 1808, 1857, 1761]),
    _case("optimized", "b:1/s:8192/d:128/causal:0", [1800.0] * 10, [1750] * 10),   # no peer row
]}
SELF_TEST_PEER = {"device": "NVIDIA H200", "torch": "2.11.0+cu130", "rows": [
    dict(kind="sdpa", label="b4 h32 s4096 d128 full default", us=1847.4, sustained_us=1990.0, sustained_sm_mhz=1760),
    dict(kind="sdpa", label="b4 h32 s4096 d128 full flash", us=3225.8, sustained_us=3500.0),
    dict(kind="sdpa", label="b4 h32 s4096 d128 full cudnn", us=1834.0, sustained_us=2010.0, sustained_sm_mhz=1755),
    dict(kind="sdpa", label="b4 h32 s4096 d128 causal default", us=920.1),
    dict(kind="sdpa", label="b4 h32 s4096 d128 causal flash", skipped="not built with flash"),
    dict(kind="sdpa", label="b4 h32 s4096 d128 causal cudnn", us=1001.8),
    dict(kind="sdpa", label="b4 h32 s4096 d64 full default", us=1199.1),
    dict(kind="decode_sdpa", label="b32 h32 kv4096 d128 default", us=50.0),
]}


def self_test():
    pmap = MAPS["flash_attention"]
    failures = []
    if pmap.peer_label("b:4/s:4096/d:128/causal:1") != "b4 h32 s4096 d128 causal":
        failures.append("map label: " + str(pmap.peer_label("b:4/s:4096/d:128/causal:1")))
    variants, rows, unmatched, peer_only = compare(SELF_TEST_RESULTS, SELF_TEST_PEER, pmap, ["wgmma_ws"])
    full, causal = rows

    def check(what, got, want):
        if got is None or abs(got - want) > 1e-6:
            failures.append(f"{what}: got {got}, want {want}")
    check("ours full", full["ours"]["optimized"]["us"], (1773.4 + 1793.1) / 2)
    check("ours causal", causal["ours"]["optimized"]["us"], (1021.6 + 1026.1) / 2)
    check("ws full", full["ours"]["wgmma_ws"]["us"], (1958.0 + 1961.8) / 2)
    check("ours full MHz", full["ours"]["optimized"]["mhz"], (1812 + 1883) / 2)
    if best(full["burst"]) != ("cudnn", 1834.0) or best(causal["burst"]) != ("default", 920.1):
        failures.append(f"best burst: {best(full['burst'])}, {best(causal['burst'])}")
    if best(full["sustained"]) != ("default", 1990.0) or causal["sustained"]:
        failures.append(f"best sustained: {best(full['sustained'])}, causal {causal['sustained']}")
    check("burst speed full", speed(1834.0, full["ours"]["optimized"]), 1834.0 / 1783.25)
    check("burst speed causal", speed(920.1, causal["ours"]["optimized"]), 920.1 / 1023.85)
    if unmatched != ["b:1/s:8192/d:128/causal:0"] or peer_only != ["b4 h32 s4096 d64 full"]:
        failures.append(f"unmatched {unmatched}, peer only {peer_only}")
    text = report(SELF_TEST_RESULTS, SELF_TEST_PEER, pmap, ["wgmma_ws"])
    burst, sustained = text.split("\nSustained:")
    want = [
        (burst, "b4 h32 s4096 d128 full               1783.2            1959.9      1847.4    3225.8    1834.0   "
                "1834.0    cudnn            1.03×           0.94×"),
        (burst, "b4 h32 s4096 d128 causal             1023.8            1059.2       920.1         -    1001.8    "
                "920.1  default            0.90×           0.87×"),
        (sustained, "b4 h32 s4096 d128 full             1783.2            1959.9      1848      1990.0    3500.0    "
                    "2010.0   1990.0  default      1760            1.12×           1.02×"),
    ]
    for part, line in want:
        if not any(l.startswith(line) for l in part.splitlines()):
            failures.append(f"line missing: {line!r}")
    if "causal" in sustained.split("Our points")[0]:
        failures.append("a row without sustained_us printed in the sustained table")
    if "decode" in text:
        failures.append("a row of another kind matched")
    md = report(SELF_TEST_RESULTS, SELF_TEST_PEER, pmap, markdown=True)
    if not any(l.startswith("| b4 h32 s4096 d128 full ") for l in md.splitlines()) or "---:|" not in md:
        failures.append("--markdown table malformed")
    # An example without axes, and a map that names its backends: the FP8 rows only (trimmed from the
    # 2x H200 lease of 2026-11-28: ours 964.0 µs against the compiled FP8 peer's sustained 1030).
    fp8 = {"context": {"gpu_name": "NVIDIA H200"}, "benchmarks": [dict(
        name="ch16/fp8_linear/optimized/iterations:1/manual_time", repetition_index=0,
        bench_samples=dict(name="ch16/fp8_linear/optimized", unit="us", mode="sustained",
                           samples=[963.0, 964.0, 965.0], sm_mhz=[1449] * 3))]}
    fp8_peer = {"device": "NVIDIA H200", "rows": [
        dict(kind="fp8_linear", label="8192 x 8192 -> 8192 bf16 F.linear", us=1596, sustained_us=1635),
        dict(kind="fp8_linear", label="8192 x 8192 -> 8192 fp8 e4m3 per-tensor, x quantised, eager", us=1538,
             sustained_us=1572),
        dict(kind="fp8_linear", label="8192 x 8192 -> 8192 fp8 e4m3 per-tensor, x quantised, compiled", us=1002,
             sustained_us=1030, sustained_sm_mhz=1410),
        dict(kind="fp8_linear", label="8192 x 8192 -> 8192 x quantisation alone, eager", us=723.8)]}
    _, fp8_rows, fp8_unmatched, fp8_only = compare(fp8, fp8_peer, MAPS["fp8_linear"])
    if len(fp8_rows) != 1 or fp8_unmatched or fp8_only:
        failures.append(f"fp8_linear rows {fp8_rows}, unmatched {fp8_unmatched}, peer only {fp8_only}")
    else:
        if best(fp8_rows[0]["sustained"]) != ("fp8 e4m3 per-tensor, x quantised, compiled", 1030):
            failures.append(f"fp8_linear best sustained {best(fp8_rows[0]['sustained'])}")
        if len(fp8_rows[0]["burst"]) != 2:
            failures.append(f"fp8_linear backends beyond the FP8 two: {sorted(fp8_rows[0]['burst'])}")
        check("fp8_linear sustained speed", speed(1030, fp8_rows[0]["ours"]["optimized"]), 1030 / 964.0)
    burst_only = report(SELF_TEST_RESULTS, dict(SELF_TEST_PEER, rows=[
        {k: v for k, v in r.items() if not k.startswith("sustained")} for r in SELF_TEST_PEER["rows"]]), pmap)
    if "has no sustained_us" not in burst_only:
        failures.append("a burst-only peer file not said")
    return self_test_verdict(failures, text)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", help="bench compare --save-results FILE.json")
    p.add_argument("--peer", help="a peer script's --json FILE")
    p.add_argument("--map", default="flash_attention", choices=sorted(MAPS))
    p.add_argument("--variants", default="", help="comma-separated steps shown beside optimized")
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--self-test", action="store_true")
    args = p.parse_args()
    if args.self_test:
        return self_test()
    if not args.results or not args.peer:
        p.error("give --results and --peer, or --self-test")
    with open(args.results) as f:
        results = json.load(f)
    with open(args.peer) as f:
        peer = json.load(f)
    steps = [v for v in args.variants.split(",") if v]
    print(report(results, peer, MAPS[args.map], steps, args.markdown,
                 (os.path.basename(args.results), os.path.basename(args.peer))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
