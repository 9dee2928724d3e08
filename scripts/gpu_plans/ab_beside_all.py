# A plan for scripts/gpu_jobs.py on a machine of two or more GPUs: ab_sustained_window.py's A B B A
# of ch16's flash attention on GPUs 0 and 1, with compare_all.py's one-GPU chapters filled in
# around it on every GPU (longest first, onto the least loaded), then compare_all.py's host-bound
# and several-GPU stage with the GPUs idle. One lease gives issue 39 both of its measurements: the
# window's A/B and `bench compare --all` on this GPU kind.
#
#   python3 scripts/gpu_jobs.py scripts/gpu_plans/ab_beside_all.py --budget 560 --out /tmp/jobs --pack $OUT/jobs.tar.gz
#
# Send it again on the warm machine until summary.txt says every job ran. For --all's rerun, send
# compare_all.py with a fresh --state: its tags are this plan's, so the same state would skip them.
if gpus < 2:
    raise SystemExit(f"ab_beside_all.py puts the A/B on two GPUs; this process sees {gpus}: "
                     "run ab_sustained_window.py and compare_all.py one after the other instead")


AB_SECONDS = 250  # a rule run (~150 s on an H100) and a window run (~100 s) on each of GPUs 0 and 1
queues = {str(g): [] for g in range(gpus)}
queues.update(other_plan("ab_sustained_window", 2)["STAGES"][0])
load = {g: (AB_SECONDS if g in ("0", "1") else 0) for g in queues}
everything = other_plan("compare_all", gpus)  # its names and its all-GPUs stage
seconds = everything["SECONDS"]
for chapter in sorted(everything["ONE_GPU"], key=lambda c: -seconds.get(c, 40)):
    g = min(load, key=load.get)
    queues[g].append(compare(f"all_{chapter}", f"--chapter {chapter}", 20))
    load[g] += seconds.get(chapter, 40)
STAGES = [queues] + everything["STAGES"][1:]
