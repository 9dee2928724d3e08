# A plan for scripts/gpu_jobs.py: `bench compare --all`'s chapters spread over every GPU of the
# machine, one compare a chapter (the union is what --all scores), then, with the GPUs idle, the
# chapters of several GPUs on all of them and the host-bound chapters one at a time.
#
#   python3 scripts/gpu_jobs.py scripts/gpu_plans/compare_all.py --budget 560 --out /tmp/jobs --pack $OUT/jobs.tar.gz
#
# A call of the device tool ends at 600 s: send the same plan again on the warm machine and the
# chapters that finished are skipped. Queues are filled longest first by the seconds below (each
# chapter's default compare on GPU 3 of a 4x H200 beside three busy GPUs, 2026-11-28; unmeasured
# ones 40), so they end together.
SECONDS = {"ch16": 233, "ch10": 121, "ch19": 117, "ch09": 82, "ch15": 78, "ch12": 51, "ch20": 41,
           "ch06": 33, "ch07": 27, "ch02": 24, "ch18": 21, "ch17": 19, "ch11": 17, "ch13": 14,
           "ch08": 9, "ch14": 9}
ONE_GPU = ["ch02", "ch06", "ch07", "ch08", "ch09", "ch10", "ch11", "ch12", "ch13", "ch14", "ch15",
           "ch16", "ch17", "ch18", "ch19", "ch20"]
HOST_BOUND = ["ch01", "ch03", "ch05"]  # their baselines' (and some optimized sides') time is the host's
SEVERAL_GPUS = ["ch04"]                # SKIPPED on one GPU
# ch02's one example of several GPUs: SKIPPED in the one-GPU queue (it sees one GPU), run here
SEVERAL_GPUS_EXAMPLES = [("ch02", "memory_transfer_multigpu")]

queues = {str(g): [] for g in range(gpus)}
load = {g: 0 for g in queues}
for chapter in sorted(ONE_GPU, key=lambda c: -SECONDS.get(c, 40)):
    g = min(load, key=load.get)
    queues[g].append(compare(f"all_{chapter}", f"--chapter {chapter}", 20))
    load[g] += SECONDS.get(chapter, 40)
STAGES = [
    queues,
    # The several-GPU compares first: a machine of several GPUs is lent only at times.
    {"all": [compare(f"all_{c}", f"--chapter {c}", 40) for c in SEVERAL_GPUS]
     + ([compare(f"all_{c}_{e}", f"--chapter {c} --example {e}", 30) for c, e in SEVERAL_GPUS_EXAMPLES]
        if gpus > 1 else [])
     + [compare(f"all_{c}", f"--chapter {c}", 40) for c in HOST_BOUND]},
]
