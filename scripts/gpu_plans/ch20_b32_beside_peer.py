# A plan for scripts/gpu_jobs.py: ch20's batch 32 beside its PyTorch peer on one GPU, after a change
# to the attention (chapters/ch20/README.md: "Batch 32"): the chapter's every rung at batch 32, then
# the graphed compiled step at batch 32 only (PEER_BATCHES). About 1.5 minutes on one H200, and
# the build first where the machine is fresh (a minute with 16 cores; a no-op on a warm one).
#
#   python3 scripts/gpu_jobs.py scripts/gpu_plans/ch20_b32_beside_peer.py --budget 300 --out /tmp/jobs --pack $OUT/jobs.tar.gz
#
# No sanitizer here: `bench sanitize` at a point runs the verification size, which is batch 3 at
# every point of ch20 (decoder_layer.cuh), so the one-split attention of batch 32 is sanitized by
# its own tests (DecodeAttentionMma.*), not by the chapter.
ARGS = "--chapter ch20 --example transformer_decode --axis batch=32"
b32 = [compare("ch20_b32", ARGS, 60),
       peer("peer_decoder_b32", "PEER_BATCHES=32 python3 scripts/peers/torch_decoder_layer.py", 60)]
BUILD = "cmake --preset default > /dev/null && cmake --build --preset default --target ch20 bench"
STAGES = [{"all": [shell("build_ch20", BUILD, 120)]}, {"0": b32}]
