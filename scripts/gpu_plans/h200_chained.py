# A plan for scripts/gpu_jobs.py: ch20's rung 7f (`megakernel_chained`: rung 7e launched
# programmatically after the step ahead) checked and timed beside rungs 7d and 7e on one H200: the
# megakernel tests (two chained steps as two layers among them), the sweep at batch 1, 2 and 8 in
# two processes (phase stamps included), the four sanitizers on rung 7f and synccheck and initcheck
# on rung 7e, then ch20's default points (batch 1 and 8) re-recorded with their rerun and the
# PyTorch peer. About 7 minutes on a fresh machine.
#
#   BENCH_GIT_SHA=<sha> python3 scripts/gpu_jobs.py scripts/gpu_plans/h200_chained.py --budget 560 --out /tmp/jobs --pack $OUT/jobs.tar.gz
BUILD = ("cmake --preset default > /dev/null && "
         "cmake --build --preset default --target ch20 bench gpu_tests")
TESTS = "build/default/tests/gpu/gpu_tests --gtest_filter='DecoderMegakernel.*'"
AB = ("build/default/chapters/ch20/ch20 --bench_sweep --benchmark_filter="
      "'^ch20/transformer_decode/(megakernel_merge_at_once|megakernel_narrow_down|"
      "megakernel_chained)/batch:[128]/'")
EXAMPLE = "--chapter ch20 --example transformer_decode"


def sanitize(variant, tool):
    return shell(f"san_{variant}_{tool}", f"./bench sanitize {EXAMPLE} --variant {variant} "
                                          f"--tool {tool} --timeout 100", 20)


jobs = [shell("tests", TESTS, 40), shell("ab_1", AB, 40), shell("ab_2", AB, 40)]
jobs += [sanitize("megakernel_chained", t) for t in ("racecheck", "memcheck", "synccheck", "initcheck")]
jobs += [sanitize("megakernel_narrow_down", t) for t in ("synccheck", "initcheck")]
jobs += [compare("upd_ch20", EXAMPLE + " --update-expectations", 100, expectations="ch20"),
         compare("rr_ch20", EXAMPLE, 100, expectations="ch20"),
         peer("peer_decoder", "python3 scripts/peers/torch_decoder_layer.py", 30)]
STAGES = [{"all": [shell("build", BUILD, 240)]}, {"0": jobs}]
