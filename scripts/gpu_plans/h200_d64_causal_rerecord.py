# A plan for scripts/gpu_jobs.py: ch16's d64 causal point (b4 s4096) re-recorded on one H200 since
# the 192-row kernel masks per consumer (`wgmma_pingpong_192`; the block-level mask is the step
# `wgmma_pingpong_192_block_mask`), the update followed by its rerun, then PyTorch's SDPA backends
# on the same shapes. About 4 minutes on a warm machine that has built ch16.
#
#   python3 scripts/gpu_jobs.py scripts/gpu_plans/h200_d64_causal_rerecord.py --budget 400 --out /tmp/jobs --pack $OUT/jobs.tar.gz
POINT = ("--chapter ch16 --example flash_attention --axis b=4 --axis s=4096 --axis d=64 "
         "--axis causal=1")
BUILD = "cmake --preset default > /dev/null && cmake --build --preset default --target ch16 bench"
jobs = [compare("upd_ch16", POINT + " --update-expectations", 90, expectations="ch16"),
        compare("rr_ch16", POINT, 90, expectations="ch16"),
        peer("peer_sdpa", "python3 scripts/peers/torch_inference.py --only sdpa", 60)]
STAGES = [{"all": [shell("build_ch16", BUILD, 120)]}, {"0": jobs}]
