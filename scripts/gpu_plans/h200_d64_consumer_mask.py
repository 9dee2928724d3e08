# A plan for scripts/gpu_jobs.py, on branch ch16-consumer-mask: issue 46's d64 causal step
# `wgmma_pingpong_192_consumer_mask` (each consumer of the 192-row kernel masks only its own
# diagonal tile; ch16's README, "d64 causal beside non-causal") beside the optimized d64 rung
# (`wgmma_pingpong_192`), causal and non-causal at b4 s4096, in three processes, each case
# verified; then racecheck and synccheck on the new step. About 4 minutes on a fresh one-GPU H200.
#
#   python3 scripts/gpu_jobs.py scripts/gpu_plans/h200_d64_consumer_mask.py --budget 300 --out /tmp/jobs --pack $OUT/jobs.tar.gz
BUILD = "cmake --preset default > /dev/null && cmake --build --preset default --target ch16 bench"
AB = ("build/default/chapters/ch16/ch16 --benchmark_filter="
      "'^ch16/flash_attention/(optimized|wgmma_pingpong_192_consumer_mask)/b:4/s:4096/d:64/'")
SANITIZE = ("./bench sanitize --chapter ch16 --example flash_attention --axis b=4 --axis s=4096 "
            "--axis d=64 --axis causal=1 --variant wgmma_pingpong_192_consumer_mask --timeout 240 "
            "--tool ")
jobs = [shell("ab_1", AB, 40), shell("ab_2", AB, 40), shell("ab_3", AB, 40),
        shell("san_racecheck", SANITIZE + "racecheck", 60),
        shell("san_synccheck", SANITIZE + "synccheck", 40)]
STAGES = [{"all": [shell("build", BUILD, 90)]}, {"0": jobs}]
