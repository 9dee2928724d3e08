# A plan for scripts/gpu_jobs.py: is the 2 µs that ch20's gate_up phase (batch 1) has put on since
# tree 43df452 (51.4-51.6 µs then, 96.8% of 4717 GB/s; 53.3-54.5 µs on every board of 2026-11-29)
# the code or the board? Rung 7 (`megakernel`) of 43df452 and of this tree, and this tree's rung 7e,
# on one H200, A B A B in four processes, phase stamps included (`--bench_sweep`), every case
# verified. The old tree travels as an ignored folder; on the sending side:
#
#   mkdir -p .s32/old43 && git archive 43df452 | tar -x -C .s32/old43 && grep -q '^/.s32/' .git/info/exclude || echo /.s32/ >> .git/info/exclude
#   (device call with carry [".s32"]) BENCH_GIT_SHA=<sha> python3 scripts/gpu_jobs.py scripts/gpu_plans/h200_gate_up_then_now.py --budget 420 --out /tmp/jobs --pack $OUT/jobs.tar.gz
#
# About 6 minutes on a fresh machine (two ch20 builds).
BUILD_NOW = "cmake --preset default > /dev/null && cmake --build --preset default --target ch20 bench"
BUILD_THEN = ("cd .s32/old43 && cmake --preset default > /dev/null && "
              "cmake --build --preset default --target ch20")
THEN = (".s32/old43/build/default/chapters/ch20/ch20 --bench_sweep --benchmark_filter="
        "'^ch20/transformer_decode/megakernel/batch:1/'")
NOW = ("build/default/chapters/ch20/ch20 --bench_sweep --benchmark_filter="
       "'^ch20/transformer_decode/(megakernel|megakernel_narrow_down)/batch:1/'")
jobs = [shell("then_1", THEN, 20), shell("now_1", NOW, 20), shell("then_2", THEN, 20),
        shell("now_2", NOW, 20)]
STAGES = [{"all": [shell("build_now", BUILD_NOW, 150), shell("build_then", BUILD_THEN, 150)]},
          {"0": jobs}]
