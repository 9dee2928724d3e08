# A plan for scripts/gpu_jobs.py: what the open issues still ask of a one-GPU H200 that is a check,
# not a kernel change (READMEs of ch05, ch15, ch16, ch20), for a session whose device time is short:
#   - ch05 gpu_preprocess beside its PyTorch peer in one session (issue 45; host-bound, run alone);
#   - ch15 moe_dispatch's optimized rung (cluster_permute's gather GEMM) under racecheck, never
#     judged: the whole example did not finish in 130 s (issue 41);
#   - ch16's two overlap rungs under memcheck and initcheck at the six default points (racecheck and
#     synccheck were clean on 2026-11-29; issue 46);
#   - ch20's rungs 5c and 6d under racecheck with every hazard printed (250 on 2026-11-29, 50 of
#     them unprinted and so unjudged; issue 44).
# Timed on 2026-11-29 on a warm one-GPU H200 that `./bench test` had built: 118 s, the three
# sanitizer jobs 44, 13 and 57 s (its ch05 jobs had run in h200_host_side.py and were skipped);
# send the plan again on the warm machine for what a deadline dropped.
#
#   python3 scripts/gpu_jobs.py scripts/gpu_plans/h200_open_checks.py --budget 540 --out /tmp/jobs --pack $OUT/jobs.tar.gz
BUILD = "cmake --preset default > /dev/null && cmake --build --preset default --target ch05 ch15 ch16 ch20 bench"
host = [compare("ch05_preprocess", "--chapter ch05 --example gpu_preprocess", 60),
        peer("peer_preprocess", "python3 scripts/peers/torch_host.py --only preprocess", 60)]
checks = [
    shell("san_ch15_moe", "./bench sanitize --chapter ch15 --example moe_dispatch --variant cluster_permute"
          " --tool racecheck --timeout 200", 60),
    shell("san_ch16_overlap", "./bench sanitize --chapter ch16 --example flash_attention"
          " --variant wgmma_overlap,wgmma_overlap_early_turn --tool memcheck,initcheck --timeout 150", 60),
    shell("san_ch20_mma", "./bench sanitize --chapter ch20 --example transformer_decode --axis batch=32"
          " --variant cuda_graph_attention_mma,streaming_mma_attention_mma --tool racecheck"
          " --print-limit 1000 --timeout 150", 60),
]
STAGES = [{"all": [shell("build", BUILD, 200)]}, {"all": host}, {"0": checks}]
