# A plan for scripts/gpu_jobs.py on a machine of four GPUs (two: the same without the soak A/B): issue 44's measurements beside issue
# 39's soak A/B (ab_sustained_soak.py, on GPUs 1 and 2, each running every arm):
#   GPU 0  ch20's sweep (every batch, rung 7b beside rung 7 at batch 1 and 2), then the decoder
#          layer's PyTorch peer right after it on the same GPU, eager, compiled, and each of those
#          captured into a CUDA graph;
#   GPU 3  ch12 conditional_graph (its host_bound label's first run, for --add-machine), the
#          megakernel's GPU tests, then `bench sanitize --chapter ch20` under synccheck and
#          initcheck (racecheck needs a call of its own: 463 s on an H100); their reports land in
#          build/default/reports/sanitize_<tool>/.
#
#   python3 scripts/gpu_jobs.py scripts/gpu_plans/ch20_beside_soak.py --budget 560 --out /tmp/jobs --pack $OUT/jobs.tar.gz
#
# Needs a full build first (the GPU tests): `./bench list >/dev/null && cmake --build build/default`.
if gpus < 2:
    raise SystemExit(f"ch20_beside_soak.py lays its jobs over two or four GPUs; this process sees {gpus}: "
                     "run the ch20 compare, its peer and ab_sustained_soak.py one after the other instead")

SANITIZE = "build/default/tools/bench sanitize --chapter ch20 --timeout 200 --reports-dir build/default/reports/sanitize_{tool} --tool {tool}"
ch20 = [compare("ch20_sweep", "--chapter ch20 --example transformer_decode --sweep", 180),
        peer("peer_decoder_layer", "python3 scripts/peers/torch_decoder_layer.py", 60)]
others = [compare("ch12_conditional_graph", "--chapter ch12 --example conditional_graph", 30),
          shell("gpu_tests_megakernel", "build/default/tests/gpu/gpu_tests --gtest_filter='DecoderMegakernel.*:DecodeAttentionMma.*'", 20),
          shell("sanitize_ch20_synccheck", SANITIZE.format(tool="synccheck"), 60),
          shell("sanitize_ch20_initcheck", SANITIZE.format(tool="initcheck"), 60)]
if gpus >= 4:
    soak = other_plan("ab_sustained_soak", 2)["STAGES"][0]
    queues = {"0": ch20, "1": soak["0"], "2": soak["1"], "3": others}
else:  # two GPUs: no room for the soak A/B, which wants two GPUs of its own
    queues = {"0": ch20, "1": others}
STAGES = [queues]
