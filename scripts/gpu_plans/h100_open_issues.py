# A plan for scripts/gpu_jobs.py, for the first session that is lent an H100 (one or more): the
# H100 halves of issues 41, 44 and 46, none of which has run on an H100 since 2026-11-28.
#   - ch15 moe_dispatch (issue 41): the H100 entry still records `cluster_permute`'s 8-CTA form;
#     re-recorded with `fused_permute`, its rerun, the `_grouped_mm` peer, the sanitizers on the
#     optimized rung;
#   - ch16 flash_attention (issue 46): every default point re-recorded (the causal d128 entries
#     still record `wgmma_pingpong`, not `wgmma_chained_diagonal` with its balanced plan; d64 has
#     had per-consumer masks since 16f96f7), its rerun, the SDPA peer, racecheck and synccheck on
#     the d64 kernels;
#   - ch20 transformer_decode (issue 44): every batch re-recorded (rungs 7c to 7f have never run on
#     an H100), its rerun, the layer's peer, the four sanitizers on rungs 7c to 7f.
# Each update is followed by its rerun against what it wrote. On a one-GPU machine the three
# queues run in turn (about 15 minutes after the build, going by the H200's timings: send the
# plan again on the warm machine for what a call's deadline dropped); with more GPUs they run
# side by side.
#
#   python3 scripts/gpu_jobs.py scripts/gpu_plans/h100_open_issues.py --budget 560 --out /tmp/jobs --pack $OUT/jobs.tar.gz
#
# The entries come back in $OUT/jobs/expectations/; the chapter READMEs take the reruns' cells.
BUILD = "cmake --preset default > /dev/null && cmake --build --preset default --target ch15 ch16 ch20 bench"
MOE = "--chapter ch15 --example moe_dispatch"
FLASH = "--chapter ch16 --example flash_attention"
DECODE = "--chapter ch20 --example transformer_decode --sweep"

moe = [compare("upd_ch15_moe", MOE + " --update-expectations --repetitions 3", 200, expectations="ch15"),
       compare("rr_ch15_moe", MOE, 80, expectations="ch15"),
       peer("peer_moe", "python3 scripts/peers/torch_moe_gating.py --only moe_dispatch", 40),
       shell("san_ch15_fused", f"./bench sanitize {MOE} --variant fused_permute "
                               "--tool racecheck,memcheck,synccheck,initcheck --timeout 120", 60)]
flash = [compare("upd_ch16_flash", FLASH + " --update-expectations", 260, expectations="ch16"),
         compare("rr_ch16_flash", FLASH, 260, expectations="ch16"),
         peer("peer_sdpa", "python3 scripts/peers/torch_inference.py --only sdpa", 70),
         shell("san_ch16_d64", f"./bench sanitize {FLASH} --axis b=4 --axis s=4096 --axis d=64 "
                               "--variant wgmma_pingpong_192,wgmma_pingpong_192_block_mask "
                               "--tool racecheck,synccheck --timeout 240", 60)]
decode = [compare("upd_ch20_decode", DECODE + " --update-expectations", 150, expectations="ch20"),
          compare("rr_ch20_decode", DECODE, 150, expectations="ch20"),
          peer("peer_decoder", "python3 scripts/peers/torch_decoder_layer.py", 90),
          shell("san_ch20_mega", "./bench sanitize --chapter ch20 --example transformer_decode "
                                 "--variant megakernel_attention_mma,megakernel_merge_at_once,"
                                 "megakernel_narrow_down,megakernel_chained "
                                 "--tool racecheck,memcheck,synccheck,initcheck --timeout 200", 60)]

if gpus >= 3:
    queues = {"0": flash, "1": decode, "2": moe}
elif gpus == 2:
    queues = {"0": flash, "1": moe + decode}
else:
    queues = {"0": moe + decode + flash}
STAGES = [{"all": [shell("build", BUILD, 240)]}, queues]
