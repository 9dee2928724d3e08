# A plan for scripts/gpu_jobs.py: ch15 moe_dispatch's H200 entry re-recorded with `tma_store` as
# the optimized rung (three repetitions), its rerun, and the PyTorch peer in the same session;
# then CUTLASS's grouped GEMM under Nsight Compute, and (when the reports of
# h200_ch15_tma_store.py are carried up under .s28/profiles) a summary of each. One GPU; about
# 8 minutes on a fresh machine.
#
#   python3 scripts/gpu_jobs.py scripts/gpu_plans/h200_ch15_rerecord.py --budget 560 --out /tmp/jobs --pack $OUT/jobs.tar.gz
BUILD = "cmake --preset default > /dev/null && cmake --build --preset default --target ch15 bench"
EXAMPLE = "--chapter ch15 --example moe_dispatch"
REPORTS = "/tmp/jobs/profiles"
NCU = "ncu --set full --clock-control none --cache-control all --launch-count 1 --force-overwrite"
SUMMARY = ("for r in .s28/profiles/*.ncu-rep; do echo \"== $r\"; ncu --import $r --page details "
           "--kernel-name regex:grouped_gemm; done")

jobs = [
    compare("upd_ch15", f"{EXAMPLE} --update-expectations --repetitions 3", 240, expectations="ch15"),
    compare("rerun_ch15", EXAMPLE, 90, expectations="ch15"),
    peer("peer_moe", "python3 scripts/peers/torch_moe_gating.py --only moe_dispatch", 40),
    shell("ncu_cutlass", f"mkdir -p {REPORTS} && {NCU} --kernel-name regex:device_kernel "
                         f"-o {REPORTS}/ncu_cutlass python3 scripts/peers/torch_moe_gating.py "
                         f"--only moe_dispatch && ncu --import {REPORTS}/ncu_cutlass.ncu-rep "
                         f"--page details", 60),
    shell("ncu_summaries", f"test -d .s28/profiles && {SUMMARY}", 20),
]
STAGES = [{"all": [shell("build", BUILD, 150)]}, {"0": jobs}]
