# A plan for scripts/gpu_jobs.py: every sustained-mode example re-recorded on this GPU kind, each
# update followed by its rerun against what it wrote, then the PyTorch peers of those examples
# (their rows carry a sustained figure too). Two queues: ch16's flash attention (about 190 s a
# run on an H200) on GPU 0, the rest on GPU 1 (GPU 0 takes both on a one-GPU machine).
#
#   python3 scripts/gpu_jobs.py scripts/gpu_plans/rerecord_sustained.py --budget 560 --out /tmp/jobs --pack $OUT/jobs.tar.gz
#
# On a 2x H200 (2026-11-28) the updates, reruns and peers took two calls of the device tool;
# send the plan again on the warm machine to finish what a deadline dropped. The entries come
# back in $OUT/jobs/expectations/.
SUSTAINED = [("ch16", "fp8_linear", ""), ("ch18", "block_sparse_attention", ""),
             ("ch09", "tensor_core_gemm", "--axis shape=8192"), ("ch09", "cublaslt_gemm_fp8", ""),
             ("ch10", "persistent_gemm", "--axis mnk=8192"), ("ch02", "cublas_math_mode", ""),
             ("ch19", "fp8_gemm", "--axis mnk=8192"), ("ch01", "training_step", "")]


def update_and_rerun(chapter, example, axes, copy, min_s):
    args = f"--chapter {chapter} --example {example} {axes}"
    return [compare(f"upd_{chapter}_{example}", args + " --update-expectations", min_s, expectations=copy),
            compare(f"rr_{chapter}_{example}", args, min_s, expectations=copy)]


flash = update_and_rerun("ch16", "flash_attention", "", "flash", 150) + [
    peer("peer_sdpa", "python3 scripts/peers/torch_inference.py --only sdpa", 70)]
rest = [job for c, e, a in SUSTAINED for job in update_and_rerun(c, e, a, "rest", 40)] + [
    peer("peer_training_step", "python3 scripts/peers/torch_host.py --only training_step"),
    peer("peer_fp8_linear", "python3 scripts/peers/torch_inference.py --only fp8_linear"),
    peer("peer_block_sparse", "python3 scripts/peers/torch_decoding.py --only block_sparse")]
STAGES = [{"0": flash, "1": rest}] if gpus > 1 else [{"0": flash + rest}]
