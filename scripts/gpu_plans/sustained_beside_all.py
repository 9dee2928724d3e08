# A plan for scripts/gpu_jobs.py on a machine of four or more GPUs: rerecord_sustained.py's two
# queues (ch16's flash attention on GPU 0, the other sustained-mode examples on GPU 1) beside
# compare_all.py's one-GPU chapters on the remaining GPUs, the MoE and decoder-layer peers (issues
# 41 and 44) after those; then compare_all.py's host-bound and several-GPU stage with the GPUs idle.
#
#   python3 scripts/gpu_jobs.py scripts/gpu_plans/sustained_beside_all.py --budget 560 --out /tmp/jobs --pack $OUT/jobs.tar.gz
#
# Send it again on the warm machine (within the idle release) until summary.txt says every job ran:
# a four-GPU machine is lent only at times, and this is what one lease of it should do.
if gpus < 4:
    raise SystemExit(f"sustained_beside_all.py lays out four queues; this process sees {gpus} GPU(s): "
                     "run rerecord_sustained.py and compare_all.py one after the other instead")


sustained = other_plan("rerecord_sustained", 2)["STAGES"][0]
everything = other_plan("compare_all", gpus - 2)["STAGES"]
first = dict(sustained)
for queue, jobs in everything[0].items():
    first[str(int(queue) + 2)] = jobs
first["2"] = first["2"] + [peer("peer_moe_dispatch", "python3 scripts/peers/torch_moe_gating.py --only moe_dispatch")]
first["3"] = first["3"] + [peer("peer_decoder_layer", "python3 scripts/peers/torch_decoder_layer.py")]
STAGES = [first] + everything[1:]
