#!/usr/bin/env python3
"""Where a long kernel's warps spend their time, by stretch of code: the warp stall samples of an
Nsight Compute report taken with source counters (`bench profile CASE -o R -- --import-source yes`),
per SASS address, cut into segments wherever the code of chosen source lines begins. For a
persistent kernel that runs several phases (ch20's megakernel), cutting where each grid barrier's
arrive and wait begin gives each phase's and each barrier's share of the samples, which a summary by
kind of instruction (scripts/sass_stalls.py) cannot.

  python3 scripts/source_stalls.py REPORT.ncu-rep [--cut FILE:LINE ...] [--cut-after FILE:LINE ...]
                                                   [--top N]   (runs ncu --import: GPU machine)
  python3 scripts/source_stalls.py EXPORT.csv --cut ...   (an `ncu --import R --page source
                                                   --print-source cuda,sass --csv` export)
  python3 scripts/source_stalls.py --self-test     (on a built-in export: ctest, CI)

FILE is a source file's name (its last path component) and LINE a line of it. A segment starts at
the kernel's first address, at the first address of each run of instructions attributed to a
--cut line, and right after each run of a --cut-after line. A warp waiting at a barrier is sampled
on the instruction after it, so a barrier's wait belongs with the code that follows it: ch20's
megakernel is cut after its phase stamps (`--cut-after megakernel.cuh:LINE`, the stamp's `if`),
whose code sits at every phase's start and end, as the timed stamps bound phases and barriers. For each segment: its address range, its share of the samples and of the executed
warp instructions, and its top instructions by samples, each with the source lines it comes from.
In the export an inlined instruction is listed under every source line of its inlining chain; it is
counted once here. Its samples land where a warp waits, so a segment of a barrier also holds the
warps that finished their part of the phase before it and wait for their block.
"""
import argparse
import csv
import io
import sys

from sass_stalls import SAMPLES, number, source_export  # the same export, by SASS line

INSTRUCTIONS = "Instructions Executed"


def instructions_of(text):
    """{address: [samples, warp instructions, SASS text, [(file, line), ...]]} of the export's one
    kernel. Rows: "File Path", then a header row starting "Line No", then per source line a row
    with its number and text followed by a row per SASS instruction (empty first column, address
    third). A source line holding quotes can spill over extra columns: they are joined back."""
    out, where, header = {}, None, None
    for row in csv.reader(io.StringIO(text)):
        if not row:
            continue
        if row[0] == "Function Name":
            continue
        if row[0] == "File Path":
            where = (row[1].replace("\\", "/").split("/")[-1], None)
        elif row[0] == "Line No":
            header = row
            at_samples, at_instructions = row.index(SAMPLES), row.index(INSTRUCTIONS)
        elif header is not None and where is not None:
            if len(row) > len(header):
                extra = len(row) - len(header)
                row = [row[0], ",".join(row[1:2 + extra])] + row[2 + extra:]
            if row[0]:
                where = (where[0], int(row[0]))
                continue
            try:
                address = int(row[2], 16)
            except (ValueError, IndexError):
                continue
            entry = out.setdefault(address, [number(row[at_samples]),
                                             number(row[at_instructions]), row[3].strip(), []])
            if where not in entry[3]:
                entry[3].append(where)
    return out


def segments(instructions, cuts, cuts_after=frozenset()):
    """[(first address, last address, [addresses])]: a new segment where a run of a `cuts` line's
    instructions begins, and right after a run of a `cuts_after` line's ends."""
    out, previous_cut, previous_after = [], False, False
    for address in sorted(instructions):
        places = instructions[address][3]
        at_cut = any(place in cuts for place in places)
        at_after = any(place in cuts_after for place in places)
        if not out or (at_cut and not previous_cut) or (previous_after and not at_after):
            out.append([address, address, []])
        out[-1][1] = address
        out[-1][2].append(address)
        previous_cut, previous_after = at_cut, at_after
    return out


def report(text, cuts, top, cuts_after=frozenset()):
    instructions = instructions_of(text)
    if not instructions:
        return ["no SASS instructions in the export (was it --print-source cuda,sass?)"]
    total = sum(entry[0] for entry in instructions.values()) or 1.0
    executed = sum(entry[1] for entry in instructions.values()) or 1.0
    base = min(instructions)
    lines = [f"{int(total)} samples, {int(executed)} warp instructions; addresses from {base:#x}"]
    for first, last, addresses in segments(instructions, cuts, cuts_after):
        samples = sum(instructions[a][0] for a in addresses)
        count = sum(instructions[a][1] for a in addresses)
        lines.append(f"== +{first - base:#x} .. +{last - base:#x}: {100 * samples / total:5.1f}% "
                     f"of samples, {100 * count / executed:5.1f}% of instructions")
        for a in sorted(addresses, key=lambda a: -instructions[a][0])[:top]:
            if instructions[a][0] <= 0:
                break
            where = ", ".join(f"{f}:{n}" for f, n in instructions[a][3])
            lines.append(f"  {100 * instructions[a][0] / total:5.1f}%  +{a - base:#x}  "
                         f"{instructions[a][2]}  ({where})")
    return lines


BUILT_IN = '''"File Path","/src/kernel.cu"
"Function Name","void k(int)"
"Line No","Source","Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)","# Samples","Instructions Executed"
"10","  load();","-","-","50","0","0","200"
"","","0x100","LDG.E R2, desc[UR4][R4.64]","10","0","0","100"
"","","0x110","FADD R3, R2, R2","40","0","0","100"
"20","  arrive();","-","-","30","0","0","20"
"","","0x120","BAR.SYNC.DEFER_BLOCKING 0x0","30","0","0","10"
"","","0x130","RED.E.ADD.64 [R6.64], R8","0","0","0","10"
"30","  s = "a,b";","-","-","20","0","0","40"
"","","0x140","FMUL R3, R3, R3","20","0","0","40"
"File Path","/src/barrier.cuh"
"Function Name","void k(int)"
"Line No","Source","Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)","# Samples","Instructions Executed"
"44","  __syncthreads();","-","-","30","0","0","10"
"","","0x120","BAR.SYNC.DEFER_BLOCKING 0x0","30","0","0","10"
'''


def self_test():
    out = report(BUILT_IN, {("barrier.cuh", 44)}, 2)
    text = "\n".join(out)
    expect = [
        "100 samples, 260 warp instructions; addresses from 0x100",
        "== +0x0 .. +0x10:  50.0% of samples,  76.9% of instructions",
        "   40.0%  +0x10  FADD R3, R2, R2  (kernel.cu:10)",
        # the barrier's instruction, listed under two files, counted once, cut where it begins
        "== +0x20 .. +0x40:  50.0% of samples,  23.1% of instructions",
        "   30.0%  +0x20  BAR.SYNC.DEFER_BLOCKING 0x0  (kernel.cu:20, barrier.cuh:44)",
        "   20.0%  +0x40  FMUL R3, R3, R3  (kernel.cu:30)",  # the row whose quotes split it
    ]
    # Cut after line 10 instead: the same two segments.
    after = report(BUILT_IN, set(), 2, {("kernel.cu", 10)})
    missing = [line for line in expect if line not in out] + \
              [line for line in expect[1:] if line not in after]
    if missing or len([l for l in out if l.startswith("==")]) != 2:
        print("source_stalls self-test FAILED; missing:\n" + "\n".join(missing) + "\ngot:\n" + text)
        return 1
    print(text)
    print("source_stalls self-test passed")
    return 0


def place(text):
    """FILE:LINE as (file, line)."""
    name, _, line = text.rpartition(":")
    return name, int(line)


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", help="REPORT.ncu-rep, or a --print-source cuda,sass CSV export")
    parser.add_argument("--cut", type=place, action="append", default=[], metavar="FILE:LINE")
    parser.add_argument("--cut-after", type=place, action="append", default=[], metavar="FILE:LINE")
    parser.add_argument("--top", type=int, default=8)
    args = parser.parse_args(argv)
    text = source_export(args.report, "cuda,sass")
    print("\n".join(report(text, set(args.cut), args.top, set(args.cut_after))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
