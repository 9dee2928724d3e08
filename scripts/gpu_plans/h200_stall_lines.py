# A plan for scripts/gpu_jobs.py: the evidence issue 41's gather was read from, taken for the two
# open H200 targets, for the session that works on them next. Warp stall samples by SASS line
# (`bench profile ... -- --import-source yes`, summed by scripts/sass_stalls.py) of:
#   - issue 46: ch16's d64 kernel (`wgmma_pingpong_192`) causal beside non-causal at b4 s4096
#     (causal at 0.885 of non-causal's TFLOP/s, target 0.95; the causal walk executes only 0.2% more
#     tiles than its share, so the loss is in time per tile or per block);
#   - issue 44: ch20's megakernel at batch 1 (77.1% of the read ceiling, target 80%; its attention
#     phase reads the cache at a third of the HBM rate, README "Where a launch's time goes").
# One GPU; about 3 minutes after the build (47 s on a warm H200, 2026-11-29). The reports come back
# under $OUT/jobs/profiles, each with its `--print-source cuda,sass` export (*.cudasass.csv), which
# scripts/source_stalls.py reads off the GPU machine (ch16's and ch20's READMEs were read from them).
#
#   python3 scripts/gpu_jobs.py scripts/gpu_plans/h200_stall_lines.py --budget 400 --out /tmp/jobs --pack $OUT/jobs.tar.gz
BUILD = "cmake --preset default > /dev/null && cmake --build --preset default --target ch16 ch20 bench"
REPORTS = "/tmp/jobs/profiles"  # under --out, so --pack brings them back


def lines(tag, case, min_s=60):
    report = f"{REPORTS}/{tag}"
    return shell(tag, f"mkdir -p {REPORTS} && ./bench profile {case} -o {report} -- --import-source yes "
                      f"&& python3 scripts/ncu_pipes.py {report}.ncu-rep "
                      f"&& python3 scripts/sass_stalls.py {report}.ncu-rep --top 20 "
                      f"&& ncu --import {report}.ncu-rep --page source --print-source cuda,sass "
                      f"--csv > {report}.cudasass.csv", min_s)


jobs = [lines("d64_causal", "ch16/flash_attention/optimized/b:4/s:4096/d:64/causal:1"),
        lines("d64_noncausal", "ch16/flash_attention/optimized/b:4/s:4096/d:64/causal:0"),
        lines("megakernel_b1", "ch20/transformer_decode/megakernel/batch:1")]
STAGES = [{"all": [shell("build", BUILD, 200)]}, {"0": jobs}]
