# A plan for scripts/gpu_jobs.py: the examples whose device reference was written without a GPU
# (2026-11-28), each compared once against its entries (ch04's on a machine of several GPUs). Each device reference must agree with the
# CPU reference in both verification runs (else the case FAILS there, naming it), and with it the
# case's `checks:` line under the table (docs/validity.md row 2, short checks) should be gone:
# `grep ' checks: ' jobs/*.log` after the call lists any that remain.
#
#   python3 scripts/gpu_jobs.py scripts/gpu_plans/validate_device_refs.py --budget 560 --out /tmp/jobs --pack $OUT/jobs.tar.gz
#
# On one GPU the whole list is one queue (about 5 minutes on an H200 by the chapters' earlier
# times); on more, round-robin. ch16's decode_graphs and ch17's moe_gating take longest.
NEW = [("ch16", "decode_graphs"), ("ch09", "layer_norm,rms_norm,softmax,softmax_short_rows"),
       ("ch12", "conditional_graph"), ("ch17", "moe_gating"), ("ch19", "fused_quantize"),
       ("ch11", "copy_round_trip")]

queues = {str(g): [] for g in range(gpus)}
for i, (chapter, examples) in enumerate(NEW):
    queues[str(i % gpus)].append(compare(f"devref_{chapter}", f"--chapter {chapter} --example {examples}", 30))
# ch04's four (and overlap, whose reference moved into multi_gpu.cuh) need every GPU: alone, last;
# SKIPPED on one GPU.
STAGES = [queues, {"all": [compare("devref_ch04", "--chapter ch04", 60)]}]
