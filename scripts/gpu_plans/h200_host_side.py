# A plan for scripts/gpu_jobs.py: what issue 45 still asks of a one-GPU H200 on the host side
# (chapters/ch03 and ch05 READMEs, "Left to do"), every job host-bound and so run alone:
#   - ch05 jpeg_decode with its nvjpeg_batched_hardware step (the GPU's JPEG decode engines):
#     re-recorded (the entry gains the step's median), its rerun against what that wrote, the
#     new rung under the four sanitizers, and the PyTorch/OpenCV peers of the same batch;
#   - ch05 gpu_preprocess beside its PyTorch peer in one session;
#   - ch05 file_to_gpu, whose baseline now reports where its fastest and slowest calls spent
#     their time (eviction, reads, copies): what splits its samples when they cluster;
#   - what moves a one-thread host baseline between processes: ch03 host_feeding's and ch05
#     jpeg_decode's, each in fresh processes unbound, bound to one CPU, and with malloc's blocks
#     on transparent huge pages (scripts/process_spread.py).
# Timed on 2026-11-29 on a warm one-GPU H200 that `./bench test` had built: 310 s (the two spread
# jobs 78 and 65 s, the jpeg update 56 s).
#
#   python3 scripts/gpu_jobs.py scripts/gpu_plans/h200_host_side.py --budget 560 --out /tmp/jobs --pack $OUT/jobs.tar.gz
BUILD = "cmake --preset default > /dev/null && cmake --build --preset default --target ch03 ch05 bench"
JPEG = "--chapter ch05 --example jpeg_decode"
SPREAD = "python3 scripts/process_spread.py build/default/chapters/{ch}/{ch} {case} --processes {n}"
jobs = [
    compare("upd_jpeg", JPEG + " --update-expectations --repetitions 3", 90, expectations="ch05"),
    compare("rr_jpeg", JPEG, 40, expectations="ch05"),
    peer("peer_jpeg", "python3 scripts/peers/torch_host.py --only jpeg", 40),
    compare("ch05_preprocess", "--chapter ch05 --example gpu_preprocess", 40),
    peer("peer_preprocess", "python3 scripts/peers/torch_host.py --only preprocess", 40),
    compare("ch05_file", "--chapter ch05 --example file_to_gpu", 90),
    shell("spread_feeding", SPREAD.format(ch="ch03", case="ch03/host_feeding/baseline", n=4), 90),
    shell("spread_jpeg", SPREAD.format(ch="ch05", case="ch05/jpeg_decode/baseline", n=3)
          + " --conditions plain,cpu:3,thp", 60),
    shell("san_jpeg_hw", "./bench sanitize " + JPEG + " --variant nvjpeg_batched_hardware"
          " --tool memcheck,racecheck,synccheck,initcheck --timeout 120", 60),
]
STAGES = [{"all": [shell("build_host", BUILD, 60)]}, {"all": jobs}]
