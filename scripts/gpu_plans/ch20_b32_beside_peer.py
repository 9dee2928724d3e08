# A plan for scripts/gpu_jobs.py: ch20's batch 32 beside its PyTorch peer on one GPU, after a change
# to the attention (chapters/ch20/README.md: "Batch 32"): the chapter's every rung at batch 32, the
# graphed compiled step at batch 32 only (PEER_BATCHES), then racecheck over the chapter at that
# batch (the TMA kernel's one-split form has been racechecked in its tests only). About 3 minutes
# on one H200 after the build.
#
#   python3 scripts/gpu_jobs.py scripts/gpu_plans/ch20_b32_beside_peer.py --budget 300 --out /tmp/jobs --pack $OUT/jobs.tar.gz
ARGS = "--chapter ch20 --example transformer_decode --axis batch=32"
b32 = [compare("ch20_b32", ARGS, 60),
       peer("peer_decoder_b32", "PEER_BATCHES=32 python3 scripts/peers/torch_decoder_layer.py", 60),
       shell("racecheck_ch20_b32", "./bench sanitize " + ARGS + " --tool racecheck --timeout 120", 60)]
STAGES = [{"0": b32}]
