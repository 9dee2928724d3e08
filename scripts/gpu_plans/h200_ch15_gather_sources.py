# A plan for scripts/gpu_jobs.py: where ch15 moe_dispatch's gathering GEMM spends the 44.6-48.8 µs
# it takes over the same GEMM fed by TMA boxes (issue 41's gap on the H200, chapters/ch15/README.md
# "Where the gap is"). Two index-load changes lost 11-14% (README, "The grouped GEMMs beside
# CUTLASS's"), so before the next change: per-kernel stall reasons (scripts/ncu_pipes.py) and the
# SASS lines where warps stall, for the optimized rung (`tma_store`: gather + TMA store) beside
# `grouped_wgmma_tma_store` (whole-tile TMA + TMA store). One GPU; about 2 minutes on a warm
# machine. Written on 2026-11-29 with no device time left: the `--page source` export is untried.
#
#   python3 scripts/gpu_jobs.py scripts/gpu_plans/h200_ch15_gather_sources.py --budget 300 --out /tmp/jobs --pack $OUT/jobs.tar.gz
BUILD = "cmake --preset default > /dev/null && cmake --build --preset default --target ch15 bench"
REPORTS = "/tmp/jobs/profiles"


def profile(tag, rung):
    report = f"{REPORTS}/{tag}"
    return shell(tag, f"mkdir -p {REPORTS} && ./bench profile ch15/moe_dispatch/{rung}/routing:uniform "
                      f"-o {report} -- --import-source yes && python3 scripts/ncu_pipes.py {report}.ncu-rep "
                      f"&& ncu --import {report}.ncu-rep --kernel-name regex:grouped_gemm --page source "
                      f"--print-source sass --csv > {report}_sass.csv", 60)


jobs = [profile("gather_tma_store", "tma_store"), profile("tma_fed_tma_store", "grouped_wgmma_tma_store")]
STAGES = [{"all": [shell("build", BUILD, 120)]}, {"0": jobs}]
