#!/usr/bin/env python3
"""The SASS evidence a chapter README owes, per kernel, from `cuobjdump -sass` of a binary.

For each kernel (demangled with c++filt where it exists) it counts the instructions that prove a
mechanism is really in the machine code: the tensor-core forms (HGMMA with its shape and whether A
comes from registers, HMMA), the copy engines (UTMALDG/UTMASTG/UBLKCP, LDGSTS, LDSM), the
barriers and register hand-over (SYNCS, USETMAXREG, BAR), local memory (LDL/STL: a spill or a
stack array, which the README must explain or remove), and the softmax's exponentials (MUFU.EX2)
with how many of them sit where a wgmma group is still outstanding ("EX2 under HGMMA": after an
HGMMA that closes a group, gsb0, and before the WARPGROUP.DEPBAR that waits for it), the
evidence that the exponentials overlap the tensor cores (ch16's ping-pong and overlap rungs). Run on the GPU machine, where cuobjdump
is; scripts/gpu_session.sh --sass "ch10 ch16" runs it on the session's build.

  scripts/sass_summary.py build/default/chapters/ch16/ch16 [--kernels REGEX] [--markdown] [--with-harness]
  scripts/sass_summary.py --self-test
"""
import argparse
import collections
import re
import shutil
import subprocess
import sys

# (column, pattern on the opcode with its modifiers): first match wins for an instruction.
COLUMNS = [
    ("HGMMA", re.compile(r"^HGMMA\.")),
    ("HMMA", re.compile(r"^HMMA\.")),
    ("UTMALDG", re.compile(r"^UTMALDG")),
    ("UTMASTG", re.compile(r"^UTMASTG")),
    ("UBLKCP", re.compile(r"^UBLKCP")),
    ("LDGSTS", re.compile(r"^LDGSTS")),
    ("LDSM", re.compile(r"^LDSM")),
    ("SYNCS", re.compile(r"^SYNCS")),
    ("USETMAXREG", re.compile(r"^USETMAXREG")),
    ("BAR", re.compile(r"^BAR\.")),
    ("LDL/STL", re.compile(r"^(LDL|STL)\b")),
    ("MUFU.EX2", re.compile(r"^MUFU\.EX2")),
]
# Counted beside COLUMNS, in program order (a linear scan: a loop's back edge is not followed, so
# a loop body sees the state its first entry does): MUFU.EX2 while wgmma groups are outstanding.
# A group closes at an HGMMA with gsb0; WARPGROUP.DEPBAR.LE gsb0, N leaves at most N of them.
UNDER = "EX2 under HGMMA"
DEPBAR = re.compile(r"^WARPGROUP\.DEPBAR\.LE\s+gsb0\s*,\s*(0x[0-9a-f]+|\d+)")
# Shown even when every kernel counts 0: "no spills" is evidence a README quotes.
ALWAYS_SHOWN = ("LDL/STL",)
# The harness's own kernels (fills, the L2 flush, the timer probes) are in every chapter binary;
# a chapter's table leaves them out unless --with-harness.
HARNESS = re.compile(r"^((void )?bench::|_ZN5bench)")  # demangled, or mangled where no c++filt
# Columns whose distinct full opcodes are listed too (HGMMA's shape and types, UTMALDG's
# dimensionality and any multicast modifier).
FORMS = ("HGMMA", "UTMALDG", "UTMASTG", "UBLKCP")
FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
# "/*0a40*/   @!P0 HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24, gsb0 ;" -> the opcode token.
INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)")


def parse(sass_text):
    """Kernel name -> Counter of columns, plus 'form <opcode>' counts for the FORMS columns."""
    kernels = collections.OrderedDict()
    current = None
    groups = 0  # wgmma groups outstanding at this point of the listing
    for line in sass_text.splitlines():
        m = FUNCTION.match(line)
        if m:
            current = kernels.setdefault(m.group(1), collections.Counter())
            groups = 0
            continue
        m = INSTRUCTION.match(line)
        if not m or current is None:
            continue
        opcode = m.group(1)
        operands = line.split(opcode, 1)[1]
        if opcode.startswith("HGMMA.") and re.search(r"\bgsb0\b", operands):
            groups += 1
        elif opcode == "WARPGROUP.DEPBAR.LE":
            d = DEPBAR.match("WARPGROUP.DEPBAR.LE" + operands.split(";")[0])
            groups = min(groups, int(d.group(1), 0)) if d else 0
        elif opcode.startswith("MUFU.EX2") and groups > 0:
            current[UNDER] += 1
        for column, pattern in COLUMNS:
            if pattern.match(opcode):
                current[column] += 1
                if column in FORMS:  # the whole opcode, so a README can quote the exact form
                    form = opcode
                    if column == "HGMMA":  # A from registers: the first source is R.., not gdesc
                        operands = line.split(opcode, 1)[1]
                        form += " A:regs" if re.match(r"\s*R\d+\s*,\s*R\d+", operands) else " A:smem"
                    current["form " + form] += 1
                break
    return kernels


def demangle(names):
    tool = shutil.which("c++filt") or shutil.which("cu++filt")
    if not tool or not names:
        return {n: n for n in names}
    out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True).stdout
    return dict(zip(names, out.splitlines())) if out.count("\n") >= len(names) - 1 else {n: n for n in names}


def table(kernels, names, markdown):
    shown = [c for c, _ in COLUMNS if c in ALWAYS_SHOWN or any(k[c] for k in kernels.values())]
    if "MUFU.EX2" in shown:
        shown.insert(shown.index("MUFU.EX2") + 1, UNDER)
    forms = sorted({key for k in kernels.values() for key in k if key.startswith("form ")})
    header = ["kernel"] + shown + [f[len("form "):] for f in forms]
    rows = [[names[n]] + [str(k[c]) for c in shown] + [str(k[f]) for f in forms] for n, k in kernels.items()]
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
        lines += ["| `" + r[0] + "` | " + " | ".join(r[1:]) + " |" for r in rows]
    else:
        lines = ["\t".join(header)] + ["\t".join(r) for r in rows]
    return "\n".join(lines)


SELF_TEST_SASS = """
\tcode for sm_90a
\t\tFunction : _Z6kernelILi128EEvv
\t.headerflags\t@"EF_CUDA_SM90"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                        /* 0x0000 */
        /*0010*/                   USETMAXREG.DEALLOC.CTAPOOL 0x18 ;             /* 0x0000 */
        /*0020*/              @!P0 UTMALDG.2D [UR8], [UR4] ;                     /* 0x0000 */
        /*0030*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R3 ; /* 0x0000 */
        /*0040*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT, gsb0 ; /* 0x0000 */
        /*0050*/                   HGMMA.64x64x16.F32.BF16 R88, R56, gdesc[UR8], R88, gsb0 ; /* 0x0000 */
        /*0060*/                   STL.64 [R1], R4 ;                             /* 0x0000 */
        /*0070*/                   BAR.SYNC.DEFER_BLOCKING 0x1, 0x100 ;          /* 0x0000 */
        /*0080*/                   MUFU.EX2 R5, R5 ;                             /* 0x0000 */
        /*0090*/                   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;               /* 0x0000 */
        /*00a0*/                   MUFU.EX2 R6, R6 ;                             /* 0x0000 */
        /*00b0*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;               /* 0x0000 */
        /*00c0*/                   MUFU.EX2 R7, R7 ;                             /* 0x0000 */
\t\tFunction : plain
        /*0000*/                   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;         /* 0x0000 */
        /*0010*/                   LDSM.16.M88.4 R8, [R2] ;                      /* 0x0000 */
"""


def self_test():
    k = parse(SELF_TEST_SASS)
    first = k["_Z6kernelILi128EEvv"]
    expected = {"USETMAXREG": 1, "UTMALDG": 1, "SYNCS": 1, "HGMMA": 2, "LDL/STL": 1, "BAR": 1,
                "form HGMMA.64x128x16.F32.BF16 A:smem": 1, "form HGMMA.64x64x16.F32.BF16 A:regs": 1,
                "form UTMALDG.2D": 1, "MUFU.EX2": 3, UNDER: 2}
    wrong = {c: (first[c], n) for c, n in expected.items() if first[c] != n}
    wrong.update({"plain " + c: (k["plain"][c], 1) for c in ("HMMA", "LDSM") if k["plain"][c] != 1})
    header = table({"plain": k["plain"]}, {"plain": "plain"}, markdown=False).splitlines()[0]
    if "LDL/STL" not in header.split("\t"):
        wrong["LDL/STL column shown at 0"] = (header, "LDL/STL")
    if UNDER in header.split("\t"):
        wrong[UNDER + " column shown without MUFU.EX2"] = (header, "absent")
    for name, harness in (("void bench::detail::(anonymous namespace)::fill_kernel<float>(float*)", True),
                          ("bench::detail::(anonymous namespace)::empty_kernel()", True),
                          ("void <unnamed>::wgmma_ws<64, true, true>(CUtensorMap_st, CUtensorMap_st)", False)):
        if bool(HARNESS.match(name)) != harness:
            wrong["harness " + name] = (not harness, harness)
    if wrong:
        print("self-test FAILED (column: got, expected):", wrong)
        return 1
    print("self-test passed")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("binaries", nargs="*")
    p.add_argument("--kernels", default="", help="only kernels whose demangled name matches this regex")
    p.add_argument("--markdown", action="store_true", help="a markdown table (for a README)")
    p.add_argument("--with-harness", action="store_true", help="keep the harness's kernels (bench::...)")
    p.add_argument("--self-test", action="store_true", help="check the parser on a built-in listing")
    a = p.parse_args()
    if a.self_test:
        return self_test()
    if not a.binaries:
        p.error("name a binary, or --self-test")
    if not shutil.which("cuobjdump"):
        print("cuobjdump not found (it ships with the CUDA toolkit on the GPU machine)", file=sys.stderr)
        return 2
    status = 0
    for binary in a.binaries:
        run = subprocess.run(["cuobjdump", "-sass", binary], capture_output=True, text=True)
        if run.returncode != 0:
            print(f"cuobjdump -sass {binary}: exit {run.returncode}: {run.stderr.strip()}", file=sys.stderr)
            status = 2
            continue
        kernels = parse(run.stdout)
        names = demangle(list(kernels))
        kernels = collections.OrderedDict(
            (n, k) for n, k in kernels.items()
            if (a.with_harness or not HARNESS.match(names[n])) and (not a.kernels or re.search(a.kernels, names[n])))
        print(f"## {binary}: {len(kernels)} kernels")
        print(table(kernels, names, a.markdown))
    return status


if __name__ == "__main__":
    sys.exit(main())
