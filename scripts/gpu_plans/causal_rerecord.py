# A plan for scripts/gpu_jobs.py: ch16's causal d128 points re-recorded after a change to their
# optimized side (`wgmma_chained_diagonal`, chapters/ch16/README.md: "Measured:
# `wgmma_chained_diagonal` on the H200"), each update followed by its rerun, the chained rungs under
# `bench sanitize` at both points, then the SDPA peer (its rows carry the sustained figure the
# README compares against). About 4 minutes on one H200 after the build.
#
#   python3 scripts/gpu_jobs.py scripts/gpu_plans/causal_rerecord.py --budget 400 --out /tmp/jobs --pack $OUT/jobs.tar.gz
ARGS = "--chapter ch16 --example flash_attention --axis d=128 --axis causal=1"
flash = [compare("upd_ch16_causal", ARGS + " --update-expectations", 100, expectations="causal"),
         compare("rr_ch16_causal", ARGS, 100, expectations="causal"),
         shell("sanitize_ch16_causal",
               "./bench sanitize " + ARGS + " --tool racecheck,memcheck,synccheck --timeout 120", 60),
         peer("peer_sdpa", "python3 scripts/peers/torch_inference.py --only sdpa", 70)]
STAGES = [{"0": flash}]
