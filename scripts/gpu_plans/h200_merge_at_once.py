# A plan for scripts/gpu_jobs.py: ch20's rung 7d (`megakernel_merge_at_once`: rung 7c with the
# group merged by the whole completing block, every load at once) checked and timed beside rungs 7
# and 7c on one H200: the megakernel tests, the sweep at batch 1, 2, 4 and 8 in two processes (phase
# stamps included), the four sanitizers on rung 7d, then ch20's default points (batch 1 and 8)
# re-recorded with their rerun and the PyTorch peer. About 9 minutes on a fresh machine.
#
#   python3 scripts/gpu_jobs.py scripts/gpu_plans/h200_merge_at_once.py --budget 560 --out /tmp/jobs --pack $OUT/jobs.tar.gz
BUILD = ("cmake --preset default > /dev/null && "
         "cmake --build --preset default --target ch20 bench gpu_tests")
TESTS = "build/default/tests/gpu/gpu_tests --gtest_filter='DecoderMegakernel.*'"
AB = ("build/default/chapters/ch20/ch20 --bench_sweep --benchmark_filter="
      "'^ch20/transformer_decode/(megakernel|megakernel_attention_mma|megakernel_merge_at_once)"
      "/batch:[1248]/'")
EXAMPLE = "--chapter ch20 --example transformer_decode"


def sanitize(tool):
    return shell("san_" + tool, f"./bench sanitize {EXAMPLE} --variant megakernel_merge_at_once "
                                f"--tool {tool} --timeout 100", 20)


jobs = [shell("tests", TESTS, 40), shell("ab_1", AB, 60), shell("ab_2", AB, 60),
        sanitize("racecheck"), sanitize("memcheck"), sanitize("synccheck"), sanitize("initcheck"),
        compare("upd_ch20", EXAMPLE + " --update-expectations", 100, expectations="ch20"),
        compare("rr_ch20", EXAMPLE, 100, expectations="ch20"),
        peer("peer_decoder", "python3 scripts/peers/torch_decoder_layer.py", 30)]
STAGES = [{"all": [shell("build", BUILD, 240)]}, {"0": jobs}]
