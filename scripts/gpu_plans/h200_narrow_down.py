# A plan for scripts/gpu_jobs.py: ch20's rung 7e (`megakernel_narrow_down`: rung 7d with the down
# projection in groups of 2 rows, 8 loads a row, so that 2048 of the grid's 2112 warps stream
# W_down instead of 1024) beside rung 7d on one H200: the sweep at batch 1 and 2 in two processes
# (phase stamps included, every case verified), then memcheck and racecheck on rung 7e. About 4
# minutes on a fresh machine.
#
#   BENCH_GIT_SHA=<sha> python3 scripts/gpu_jobs.py scripts/gpu_plans/h200_narrow_down.py --budget 240 --out /tmp/jobs --pack $OUT/jobs.tar.gz
BUILD = "cmake --preset default > /dev/null && cmake --build --preset default --target ch20 bench"
AB = ("build/default/chapters/ch20/ch20 --bench_sweep --benchmark_filter="
      "'^ch20/transformer_decode/(megakernel_merge_at_once|megakernel_narrow_down)/batch:[12]/'")
EXAMPLE = "--chapter ch20 --example transformer_decode"


def sanitize(tool):
    return shell("san_" + tool, f"./bench sanitize {EXAMPLE} --variant megakernel_narrow_down "
                                f"--tool {tool} --timeout 60", 15)


jobs = [shell("ab_1", AB, 20), shell("ab_2", AB, 20), sanitize("memcheck"), sanitize("racecheck")]
STAGES = [{"all": [shell("build", BUILD, 150)]}, {"0": jobs}]
