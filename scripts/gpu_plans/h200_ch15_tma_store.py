# A plan for scripts/gpu_jobs.py: issue 41's TMA-store epilogue for the grouped GEMM (steps
# `tma_store` and `grouped_wgmma_tma_store` of ch15 moe_dispatch), A B A B against the rungs that
# store from registers, in two processes, then the PyTorch peer in the same session, the
# sanitizers on the new steps, and Nsight Compute of the gathering, TMA-fed and TMA-store GEMMs
# beside CUTLASS's grouped GEMM in torch._grouped_mm (h200_beside_library_profiles.py's ch15 half).
# One GPU; about 6 minutes on a warm machine whose build/default is built (`./bench test`).
#
#   python3 scripts/gpu_jobs.py scripts/gpu_plans/h200_ch15_tma_store.py --budget 560 --out /tmp/jobs --pack $OUT/jobs.tar.gz
BUILD = "cmake --preset default > /dev/null && cmake --build --preset default --target ch15 bench"
CASES = "grouped_wgmma|optimized|tma_store|grouped_wgmma_tma_store"
AB = f"build/default/chapters/ch15/ch15 --benchmark_filter='^ch15/moe_dispatch/({CASES})/'"
REPORTS = "/tmp/jobs/profiles"  # under --out, so --pack brings them back
NCU = "ncu --set full --clock-control none --cache-control all --launch-count 1 --force-overwrite"


def ours(tag, case, min_s):
    return shell(tag, f"mkdir -p {REPORTS} && ./bench profile {case} -o {REPORTS}/{tag}", min_s)


def sanitize(tag, variant, tool, min_s=60):
    return shell(tag, f"./bench sanitize --chapter ch15 --example moe_dispatch --variant {variant} "
                      f"--tool {tool} --timeout 120", min_s)


jobs = [
    shell("ab_1", AB, 90),
    shell("ab_2", AB, 90),
    peer("peer_moe", "python3 scripts/peers/torch_moe_gating.py --only moe_dispatch", 60),
    sanitize("san_tma_store_racecheck", "tma_store", "racecheck"),
    sanitize("san_tma_store_memcheck", "tma_store", "memcheck"),
    sanitize("san_tma_fed_racecheck", "grouped_wgmma_tma_store", "racecheck"),
    ours("ncu_tma_store", "ch15/moe_dispatch/tma_store/routing:uniform", 60),
    ours("ncu_gather", "ch15/moe_dispatch/optimized/routing:uniform", 60),
    ours("ncu_tma_fed", "ch15/moe_dispatch/grouped_wgmma/routing:uniform", 60),
    ours("ncu_tma_fed_tma_store", "ch15/moe_dispatch/grouped_wgmma_tma_store/routing:uniform", 60),
    shell("ncu_cutlass", f"mkdir -p {REPORTS} && {NCU} --kernel-name regex:device_kernel "
                         f"-o {REPORTS}/ncu_cutlass python3 scripts/peers/torch_moe_gating.py "
                         f"--only moe_dispatch", 90),
]
STAGES = [{"all": [shell("build", BUILD, 120)]}, {"0": jobs}]
