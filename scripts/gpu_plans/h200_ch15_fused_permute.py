# A plan for scripts/gpu_jobs.py: ch15 moe_dispatch's H200 entry re-recorded with `fused_permute`
# as the optimized rung (`index_once`'s held row offsets, the permutation in the GEMM's own
# launch), three repetitions, its rerun and the PyTorch peer in the same session; then `tma_store`
# / `index_once` / optimized in two more processes, the sanitizers on the two new rungs, ch20's
# megakernel rungs verified (their grid barrier and cooperative launch now in kernels/), and the
# optimized GEMM's stall profile by SASS line. One GPU; about 7 minutes on a fresh machine.
#
#   python3 scripts/gpu_jobs.py scripts/gpu_plans/h200_ch15_fused_permute.py --budget 560 --out /tmp/jobs --pack $OUT/jobs.tar.gz
BUILD = "cmake --preset default > /dev/null && cmake --build --preset default --target ch15 ch20 bench"
EXAMPLE = "--chapter ch15 --example moe_dispatch"
AB = ("build/default/chapters/ch15/ch15 "
      "--benchmark_filter='^ch15/moe_dispatch/(tma_store|index_once|optimized)/'")
CH20 = ("build/default/chapters/ch20/ch20 --bench_verify_only "
        "--benchmark_filter='^ch20/transformer_decode/(megakernel|megakernel_l2_ahead|optimized)/'")
REPORTS = "/tmp/jobs/profiles"  # under --out, so --pack brings them back


def sanitize(tag, variant, tool, min_s=45):
    return shell(tag, f"./bench sanitize {EXAMPLE} --variant {variant} --tool {tool} --timeout 120",
                 min_s)


PROFILE = (f"mkdir -p {REPORTS} && ./bench profile ch15/moe_dispatch/optimized/routing:uniform "
           f"-o {REPORTS}/fused_permute -- --import-source yes && python3 scripts/ncu_pipes.py "
           f"{REPORTS}/fused_permute.ncu-rep && ncu --import {REPORTS}/fused_permute.ncu-rep "
           f"--kernel-name regex:grouped_gemm --page source --print-source sass --csv "
           f"> {REPORTS}/fused_permute_sass.csv")

jobs = [
    compare("upd_ch15", f"{EXAMPLE} --update-expectations --repetitions 3", 200, expectations="ch15"),
    compare("rerun_ch15", EXAMPLE, 80, expectations="ch15"),
    peer("peer_moe", "python3 scripts/peers/torch_moe_gating.py --only moe_dispatch", 40),
    shell("ab_1", AB, 30),
    shell("ab_2", AB, 30),
    sanitize("san_fused_racecheck", "fused_permute", "racecheck"),
    sanitize("san_fused_memcheck", "fused_permute", "memcheck"),
    sanitize("san_fused_synccheck", "fused_permute", "synccheck"),
    sanitize("san_index_once_racecheck", "index_once", "racecheck"),
    shell("ch20_megakernel_verified", CH20, 30),
    shell("profile_fused_permute", PROFILE, 45),
]
STAGES = [{"all": [shell("build", BUILD, 200)]}, {"0": jobs}]
