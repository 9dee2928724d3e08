# A plan for scripts/gpu_jobs.py: `bench compare --all`'s chapters spread over every GPU of the
# machine, one compare a chapter (the union is what --all scores), then, with the GPUs idle, the
# chapters of several GPUs on all of them and the host-bound chapters one at a time.
#
#   python3 scripts/gpu_jobs.py scripts/gpu_plans/compare_all.py --budget 560 --out /tmp/jobs --pack $OUT/jobs.tar.gz
#
# A call of the device tool ends at 600 s: send the same plan again on the warm machine and the
# chapters that finished are skipped. Queues are filled longest first by the seconds below (each
# chapter's default compare beside three busy GPUs of a 4x H200, the mean of two runs on
# 2026-11-28 evening; unmeasured ones 40), so they end together.
SECONDS = {"ch16": 252, "ch10": 89, "ch09": 84, "ch19": 76, "ch15": 57, "ch12": 54, "ch20": 54,
           "ch06": 37, "ch07": 30, "ch02": 26, "ch17": 21, "ch18": 21, "ch11": 18, "ch13": 18,
           "ch14": 10, "ch08": 9}
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
