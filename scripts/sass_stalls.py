#!/usr/bin/env python3
"""Where a kernel's warps wait, by SASS line: the warp stall samples of an Nsight Compute report
taken with source counters (`bench profile CASE -o R -- --import-source yes`, whose --set full
samples warp states), per kernel:
  - the share of samples in each kind of place: mbarrier waits (the try-wait loops, by barrier
    address: a full-stage wait and an empty-stage wait are different barriers), waits for the
    warpgroup's own wgmma (WARPGROUP.DEPBAR), wgmma issue, asynchronous copies, the rest;
  - the same split before and after the kernel's first register release (USETMAXREG.DEALLOC):
    in a warp-specialised kernel the code after it is usually the producer's;
  - the lines with the most samples, each with its largest stall reason and, for a branch into a
    wait loop, the wait it enters.
It is how ch15's gathering GEMM was read (its README, "Where the gather's time went").

  python3 scripts/sass_stalls.py REPORT.ncu-rep [--top N]   (runs ncu --import: the GPU machine)
  python3 scripts/sass_stalls.py EXPORT.csv [--top N]       (an `ncu --import R --page source
                                                            --print-source sass --csv` export)
  python3 scripts/sass_stalls.py --self-test                (on a built-in export: ctest, CI)

Samples land on the instruction a warp waits at: for an mbarrier wait, the branch into the
out-of-line try-wait loop, which is why branches are resolved to what they enter.
"""
import csv
import io
import re
import subprocess
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"
BARRIER_OPERAND = re.compile(r"\[([^\]]+)\]")


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def kernels_of(text):
    """(kernel name, header, rows) for each kernel section of the export: a "Kernel Name" row,
    then a header row starting with "Address", then a row per instruction."""
    out, name, header = [], None, None
    for row in csv.reader(io.StringIO(text)):
        if not row:
            continue
        if row[0] == "Kernel Name":
            name, header = row[1] if len(row) > 1 else "?", None
        elif row[0] == "Address":
            header = row
            out.append((name, header, []))
        elif header is not None and len(row) >= len(header) // 2:
            out[-1][2].append(dict(zip(header, row)))
    return out


def kind_of(source, entered):
    """The kind of place an instruction is, `entered` being what a branch at it enters."""
    wait = entered if entered and "SYNCS.PHASECHK" in entered else source
    if "SYNCS.PHASECHK" in wait:
        where = BARRIER_OPERAND.search(wait)
        return "mbarrier wait " + (where.group(1) if where else "?")
    if "WARPGROUP.DEPBAR" in source:
        return "own wgmma wait (WARPGROUP.DEPBAR)"
    if "GMMA" in source:
        return "wgmma issue"
    if any(op in source for op in ("LDGSTS", "UTMALDG", "UBLKCP", "UTMASTG", "UBLKRED")):
        return "asynchronous copy issue"
    return "other"


def summarise(name, rows, top):
    by_address = {r["Address"]: i for i, r in enumerate(rows)}
    sources = [r["Source"].strip() for r in rows]
    samples = [number(r.get(SAMPLES, "0")) for r in rows]
    total = sum(samples) or 1.0
    stall_columns = [k for k in rows[0] if k.startswith("stall_") and "Not Issued" not in k] if rows else []

    def entered(source):
        """What a branch enters: its target, past YIELD and NOP (None if not a branch)."""
        if "BRA" not in source:
            return None
        j = by_address.get(source.split()[-1])
        while j is not None and j < len(rows) and sources[j].startswith(("YIELD", "NOP")):
            j += 1
        return sources[j] if j is not None and j < len(rows) else None

    enters = [entered(source) for source in sources]
    kinds = {}
    for source, into, n in zip(sources, enters, samples):
        k = kind_of(source, into)
        kinds[k] = kinds.get(k, 0.0) + n
    lines = [f"== {name}: {total:.0f} samples"]
    for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {100 * v / total:5.1f}%  {k}")
    dealloc = next((i for i, source in enumerate(sources) if "USETMAXREG.DEALLOC" in source), None)
    if dealloc is not None:
        before = sum(samples[:dealloc])
        lines.append(f"  before the first register release: {100 * before / total:.1f}%; "
                     f"from it on (a warp-specialised kernel's producer code): "
                     f"{100 * (sum(samples) - before) / total:.1f}%")
    lines.append(f"  the {top} lines with the most samples:")
    for i in sorted(range(len(rows)), key=lambda i: -samples[i])[:top]:
        if samples[i] <= 0:
            break
        reason = max(stall_columns, key=lambda k: number(rows[i].get(k, "0")))[len("stall_"):] \
            if stall_columns else "?"
        into = f"  -> {enters[i]}" if enters[i] else ""
        lines.append(f"  {100 * samples[i] / total:5.1f}%  {reason:<18} {sources[i]}{into}")
    return lines


def report(text, top):
    out = []
    for name, _, rows in kernels_of(text):
        out += summarise(name, rows, top) if rows else [f"== {name}: no instructions"]
    return out


BUILT_IN = '''"Kernel Name","void k<1>(int)",
"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)","stall_long_sb","stall_wait","stall_barrier"
"0x10","USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xe8","1","0","0","1","0"
"0x20","@!P0  BRA 0x90","40","40","40","0","0"
"0x30","HGMMA.64x256x16.F32.BF16 R24, gdesc[UR4], R24","5","0","0","5","0"
"0x40","WARPGROUP.DEPBAR.LE gsb0, 0x1","20","20","0","0","20"
"0x50","USETMAXREG.DEALLOC.CTAPOOL 0x28","0","0","0","0","0"
"0x60","@!P1  BRA 0xb0","10","10","10","0","0"
"0x70","LDGSTS.E.BYPASS.128 [R20], desc[UR14][R26.64]","4","0","0","4","0"
"0x80","IMAD R35, R30, UR12, R35","20","20","0","20","0"
"0x90","YIELD","0","0","0","0","0"
"0xa0","SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R13+URZ+0x30000], R12","0","0","0","0","0"
"0xb0","SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR9+0x30020], R4","0","0","0","0","0"
"Kernel Name","void other()",
"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)","stall_long_sb","stall_wait","stall_barrier"
"0x10","FFMA R1, R2, R3, R4","3","3","0","3","0"
'''


def self_test():
    out = report(BUILT_IN, 3)
    text = "\n".join(out)
    expect = [
        "== void k<1>(int): 100 samples",
        "   40.0%  mbarrier wait R13+URZ+0x30000",  # the branch through YIELD into the full wait
        "   20.0%  own wgmma wait (WARPGROUP.DEPBAR)",
        "   10.0%  mbarrier wait UR9+0x30020",
        "    5.0%  wgmma issue",
        "    4.0%  asynchronous copy issue",
        "  before the first register release: 66.0%; from it on (a warp-specialised kernel's "
        "producer code): 34.0%",
        "   40.0%  long_sb            @!P0  BRA 0x90  -> SYNCS.PHASECHK.TRANS64.TRYWAIT P0, "
        "[R13+URZ+0x30000], R12",
        "== void other(): 3 samples",
    ]
    missing = [line for line in expect if line not in out]
    if missing or "   21.0%  other" not in out:
        print("sass_stalls self-test FAILED; missing:\n" + "\n".join(missing) + "\ngot:\n" + text)
        return 1
    print(text)
    print("sass_stalls self-test passed")
    return 0


def source_export(path, print_source):
    """The text of an `ncu --import R --page source --print-source PRINT_SOURCE --csv` export: the
    file itself where PATH is one (.csv), else ncu's output for report PATH (the GPU machine)."""
    if path.endswith(".csv"):
        return open(path, encoding="utf-8").read()
    return subprocess.run(["ncu", "--import", path, "--page", "source", "--print-source",
                           print_source, "--csv"], check=True, capture_output=True,
                          text=True).stdout


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    top = 12
    if "--top" in argv:
        at = argv.index("--top")
        top = int(argv[at + 1])
        argv = argv[:at] + argv[at + 2:]
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    print("\n".join(report(source_export(argv[0], "sass"), top)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
