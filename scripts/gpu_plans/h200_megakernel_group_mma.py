# A plan for scripts/gpu_jobs.py: ch20's rung 7c (`megakernel_attention_mma`: the megakernel's
# attention phase per KV head on tensor cores, ch20/group_attention_mma.cuh) checked and timed
# beside rung 7 on one H200: the megakernel tests (both attention forms against the FP64 host
# layer), then rungs 7, 7c and 8 at batch 1, 2, 4 and 8 in two processes (their phase stamps
# included), racecheck and memcheck on rung 7c, then ch20's default points (batch 1 and 8)
# re-recorded with their rerun and the PyTorch peer. About 8 minutes on a fresh machine.
#
#   python3 scripts/gpu_jobs.py scripts/gpu_plans/h200_megakernel_group_mma.py --budget 450 --out /tmp/jobs --pack $OUT/jobs.tar.gz
BUILD = ("cmake --preset default > /dev/null && "
         "cmake --build --preset default --target ch20 bench gpu_tests")
TESTS = "build/default/tests/gpu/gpu_tests --gtest_filter='DecoderMegakernel.*'"
AB = ("build/default/chapters/ch20/ch20 --bench_sweep --benchmark_filter="
      "'^ch20/transformer_decode/(megakernel|megakernel_attention_mma|optimized)/batch:[1248]/'")
EXAMPLE = "--chapter ch20 --example transformer_decode"


def sanitize(tag, tool, min_s=60):
    return shell(tag, f"./bench sanitize {EXAMPLE} --variant megakernel_attention_mma --tool {tool} "
                      f"--timeout 200", min_s)


jobs = [shell("tests", TESTS, 40),
        shell("ab_1", AB, 60),
        shell("ab_2", AB, 60),
        sanitize("san_racecheck", "racecheck"),
        sanitize("san_memcheck", "memcheck"),
        compare("upd_ch20", EXAMPLE + " --update-expectations", 100, expectations="ch20"),
        compare("rr_ch20", EXAMPLE, 100, expectations="ch20"),
        peer("peer_decoder", "python3 scripts/peers/torch_decoder_layer.py", 30)]
STAGES = [{"all": [shell("build", BUILD, 240)]}, {"0": jobs}]
