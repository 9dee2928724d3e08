# A plan for scripts/gpu_jobs.py: ch20's transformer_decode re-recorded on this GPU kind at every
# batch of its axis (the H200's entries are still those of tree 43df452, before the folded new key
# and the TMA-staged attention), the update followed by its rerun against what it wrote, then the
# PyTorch peer of the same layer (its graphed compiled step is the batch-8 and batch-32 target's
# denominator). Timed on 2026-11-29 on a warm one-GPU H200: 321 s (update 148 s, rerun 146 s, peer
# 23 s); send the plan again on the warm machine for what a deadline dropped.
#
#   python3 scripts/gpu_jobs.py scripts/gpu_plans/ch20_rerecord.py --budget 560 --out /tmp/jobs --pack $OUT/jobs.tar.gz
#
# The entries come back in $OUT/jobs/expectations/; the chapter README's tables take the rerun's
# cells (chapters/ch20/README.md, "Measured").
ARGS = "--chapter ch20 --example transformer_decode --sweep"
BUILD = "cmake --preset default > /dev/null && cmake --build --preset default --target ch20 bench"
ladder = [compare("upd_ch20", ARGS + " --update-expectations", 150, expectations="ch20"),
          compare("rr_ch20", ARGS, 150, expectations="ch20"),
          peer("peer_decoder", "python3 scripts/peers/torch_decoder_layer.py", 90)]
STAGES = [{"all": [shell("build_ch20", BUILD, 120)]}, {"0": ladder}]
