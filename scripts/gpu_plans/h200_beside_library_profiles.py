# A plan for scripts/gpu_jobs.py: Nsight Compute of our kernel beside the library kernel it trails,
# in one session, for the H200 gap that a profile should explain before the next kernel change
# (issue 41's half, ch15's grouped GEMMs beside CUTLASS's, ran in h200_ch15_tma_store.py and
# h200_ch15_rerecord.py on 2026-11-29):
#   - issue 44 (chapters/ch20/README.md, "Batch 32"): rung 5c's tensor-core decode attention at
#     batch 32 (130 µs under ncu, 87% of 4717 GB/s) against cuDNN's `sm80_flash_fprop_wmma` kernel
#     in the PyTorch layer (123–126 µs, 90–93%): what the last 5–7% of DRAM rate is.
# Each report is `--set full` with clocks untouched and caches flushed (what `bench profile` asks of
# ncu); the peers' kernels are picked by name, the first launch. The reports come back in
# OUT/profiles/; read them with `ncu --import R --page details` or `scripts/ncu_pipes.py`.
# Ran once, on a one-GPU H200 (2026-11-29; written earlier that day with no device
# time left): 125 s on a fresh machine. Its reports are not read yet (chapters/ch20/README.md).
#
#   python3 scripts/gpu_jobs.py scripts/gpu_plans/h200_beside_library_profiles.py --budget 540 --out /tmp/jobs --pack $OUT/jobs.tar.gz
BUILD = "cmake --preset default > /dev/null && cmake --build --preset default --target ch20 bench"
REPORTS = "/tmp/jobs/profiles"  # under --out, so --pack brings them back
NCU = "ncu --set full --clock-control none --cache-control all --launch-count 1 --force-overwrite"


def ours(tag, case, min_s):
    return shell(tag, f"mkdir -p {REPORTS} && ./bench profile {case} -o {REPORTS}/{tag}", min_s)


def library(tag, kernel, command, min_s):
    return shell(tag, f"mkdir -p {REPORTS} && {NCU} --kernel-name regex:{kernel} -o {REPORTS}/{tag} {command}", min_s)


jobs = [
    ours("ch20_attention_b32", "ch20/transformer_decode/cuda_graph_attention_mma/batch:32", 60),
    library("ch20_cudnn_attention_b32", "flash_fprop",
            "env PEER_BATCHES=32 python3 scripts/peers/torch_decoder_layer.py", 90),
]
STAGES = [{"all": [shell("build_profiles", BUILD, 120)]}, {"0": jobs}]
